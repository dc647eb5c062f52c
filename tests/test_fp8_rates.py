"""FP8 kernels at the FP8 matrix rate (archsim.perf.fp8, archsim.perf.math_units) with 1-byte operands:
golden rates worked by hand from the datasheets the presets cite, kernel-name dtype reads of real FP8
kernel names, the FLOP/byte formula of torch._scaled_mm, invariants (FP8 never slower than FP16 where a
part has FP8; the FP16 tensor rate where it has not), the port note, and bad input for the new field."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.hw import load_hw
from archsim.hw.presets import list_presets, presets_dir
from archsim.perf.bf16 import bf16_ops, emulated_bf16_note
from archsim.perf.blocks import element_bytes
from archsim.perf.fp8 import fp8_port_note
from archsim.perf.kernel import kernel_terms, predict_op_seconds
from archsim.perf.math_units import math_units
from archsim.trace.flops.registry import op_cost
from archsim.trace.kernel_dtype import kernel_name_dtype
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import error_line
from tests.gemm_support import mm_op

# Real FP8 kernel names: cuBLASLt's, as written in a public cuBLASLt heuristics file and a public
# H100 _scaled_mm benchmark table; CUTLASS 3's procedural name (a CUTLASS profiler filter in a public
# repository); hipBLASLt's Tensile and hand-tuned kernels in public MI300X profiles.
XMMA_E4M3 = (
    "sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_tn_n_tilesize128x128x128_cgasize1x2x1_stage4_gmmastage2_"
    "warpgroupsize1x1x1_tensor64x128x32"
)
XMMA_SCALED_MM = "sm90_xmma_gemm_e4m3f32_e4m3f32_f32_tn_n_tilesize128x128x128"
CUTLASS3X_E4M3 = (
    "cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_f32_void_f16_128x128x64_1x1x1_0_tnn_align16"
)
TENSILE_F8 = "Cijk_Alik_Bljk_F8BS_BH_Bias_HA_S_SAB_SAV_UserArgs_MT256x256x128_MI16x16x1"
TENSILE_F8F8 = "Cijk_Alik_Bljk_F8F8S_BH_UserArgs_MT256x256x256_MI16x16x1_SN_LDSB0"
CUSTOM_F8B8 = "Custom_Cijk_Alik_Bljk_F8B8BS_BH_UserArgs_MT256x256x128_MI16x16x1_shortname1"
F16_GEMM = (
    "void cutlass::Kernel<cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8>"
)
WITH_FP8 = ("dgx-h100", "dgx-h200", "dgx-b200", "l4", "rtx4090", "mi300x")


def _gemms(names: list[str], dtypes: list[str]) -> pd.DataFrame:
    return pd.DataFrame({"name": names, "dtype": dtypes, "op_class": ["gemm"] * len(names)})


def _peak(preset: str, ops: pd.DataFrame) -> np.ndarray:
    gpu = load_hw(preset).gpu
    return math_units(ops, gpu)[0] * gpu.sms


def test_h100_fp8_gemm_runs_at_1979_tflops_and_its_math_term_by_hand():
    # By hand: dgx-h100 FP8 7,568 FLOP/clk/SM x 132 SMs x 1,980 MHz = 1,977.97 TFLOP/s (H100 SXM
    # datasheet 1,979 dense); FP16 3,784 x 132 x 1.98e9 = 988.99 (datasheet 989).
    ops = _gemms(
        [CUTLASS3X_E4M3, XMMA_E4M3, "aten::_scaled_mm", F16_GEMM], ["", "", "float8_e4m3fn", ""]
    )
    peak = _peak("dgx-h100", ops)
    assert peak[:3] == pytest.approx([1977.97e12] * 3, rel=1e-5)
    assert peak[3] == pytest.approx(988.99e12, rel=1e-5)
    # An 8192^3 FP8 GEMM: 2 x 8192^3 = 1.0995e12 FLOPs / 1,977.97e12 = 0.5559 ms of math at peak.
    gpu = load_hw("dgx-h100").gpu
    math_s = kernel_terms(ops.iloc[:1].assign(flops=2.0 * 8192**3), gpu, frozenset(), "dgx-h100")
    assert float(np.asarray(math_s["math"])[0]) == pytest.approx(0.5559e-3, rel=1e-3)


def test_mi300x_tensile_fp8_gemms_run_at_2615_tflops():
    # By hand: mi300x FP8 4,096 FLOP/clk/CU x 304 CUs x 2,100 MHz = 2,614.9 TFLOP/s (MI300X datasheet
    # 2,614.9 dense); its bf16 Tensile GEMM 2,048 x 304 x 2.1e9 = 1,307.4 (datasheet 1,307.4).
    bf16 = "Cijk_Ailk_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT128x64x32_MI32x32x1_SN_LDSB0_AFC1"
    ops = _gemms([TENSILE_F8, TENSILE_F8F8, CUSTOM_F8B8, bf16], ["", "", "", ""])
    peak = _peak("mi300x", ops)
    assert peak[:3] == pytest.approx([2614.89e12] * 3, rel=1e-5)
    assert peak[3] == pytest.approx(1307.44e12, rel=1e-5)
    assert math_units(ops, load_hw("mi300x").gpu)[
        1
    ].all()  # all on matrix cores, none on FP32 pipes


def test_a100_prices_fp8_at_its_fp16_tensor_rate_and_says_so_once():
    # No FP8 on the A100 (A100 whitepaper): 2,048 x 108 x 1,410 MHz = 311.87 TFLOP/s, the FP16 rate.
    ops = _gemms(
        [CUTLASS3X_E4M3, TENSILE_F8, "aten::_scaled_mm", F16_GEMM], ["", "", "float8_e5m2", ""]
    )
    assert _peak("dgx-a100", ops) == pytest.approx([311.87e12] * 4, rel=1e-5)
    note = fp8_port_note(ops, load_hw("dgx-a100"))
    assert note is not None and note.startswith("3 of 4 ops are FP8 matrix ops")
    assert "A100-SXM4-40GB (dgx-a100)" in note and "FP16 tensor rate" in note
    assert fp8_port_note(ops, load_hw("dgx-h100")) is None
    # an FP8 cast kernel is not matrix work: no note for it alone
    cast = pd.DataFrame(
        {"name": ["cast<c10::Float8_e4m3fn>"], "dtype": [""], "op_class": ["elementwise"]}
    )
    assert fp8_port_note(cast, load_hw("dgx-a100")) is None


@pytest.mark.parametrize(
    ("name", "dtype"),
    [
        (XMMA_E4M3, "float8_e4m3fn"),
        (XMMA_SCALED_MM, "float8_e4m3fn"),
        (CUTLASS3X_E4M3, "float8_e4m3fn"),
        ("cutlass3x_sm90_tensorop_gemm_e5m2_e4m3_f32_void_bf16_128x128x64_1x1x1_0_tnn_align16", "float8_e5m2"),
        (TENSILE_F8, "float8_e4m3fn"),
        (TENSILE_F8F8, "float8_e4m3fn"),
        ("Cijk_Alik_Bljk_B8F8S_BH_MT128x128x64_MI16x16x1", "float8_e5m2"),
        (CUSTOM_F8B8, "float8_e4m3fn"),
        ("void at::native::unrolled_elementwise_kernel<at::native::direct_copy_kernel_cuda(at::"
         "TensorIteratorBase&)::{lambda(c10::Float8_e4m3fn)#1}, at::detail::Array<char*, 2>>",
         "float8_e4m3fn"),
        ("void scale_kernel<c10::Float8_e5m2fnuz>(int)", "float8_e5m2fnuz"),
        ("void quant<__nv_fp8_e4m3>(float const*)", "float8_e4m3fn"),
        ("void mx_scales<c10::Float8_e8m0fnu>(int)", None),  # a block scale, not an operand
    ],
)  # fmt: skip
def test_fp8_kernel_names_read_as_one_byte_types(name: str, dtype: str | None):
    assert kernel_name_dtype(name) == dtype
    if dtype is not None:
        assert element_bytes(pd.Series([dtype, f"torch.{dtype}"])).tolist() == [1.0, 1.0]


def test_scaled_mm_flops_and_one_byte_operands():
    # torch._scaled_mm(a[64, 128] e4m3, b[128, 256] e4m3, scale_a, scale_b): 2 x 64 x 128 x 256 =
    # 4,194,304 FLOPs; reads 64 x 128 + 128 x 256 = 40,960 B of FP8 and two 4-B scales = 40,968 B;
    # writes 64 x 256 = 16,384 elements at 1 B (a lower bound where out_dtype is wider).
    types = ["c10::Float8_e4m3fn", "c10::Float8_e4m3fn", "float", "float"]
    cost = op_cost("aten::_scaled_mm", [[64, 128], [128, 256], [], []], types)
    assert (cost.op_class, cost.flops, cost.bytes_read, cost.bytes_written) == (
        "gemm", 4_194_304.0, 40_968.0, 16_384.0
    )  # fmt: skip
    assert cost.dtype == "float8_e4m3fn"


@settings(max_examples=15, deadline=None)
@given(
    st.integers(1, 16384),
    st.integers(1, 16384),
    st.integers(1, 16384),
    st.sampled_from(sorted(list_presets())),
)
def test_fp8_never_slower_than_fp16_for_the_same_gemm(m: int, k: int, n: int, preset: str):
    hw = load_hw(preset)
    if hw.gpu is None:
        return
    ops = conform(
        pd.DataFrame([mm_op(m, k, n, "float8_e4m3fn"), mm_op(m, k, n, "float16")]), OPS_COLUMNS
    )
    fp8_s, fp16_s = predict_op_seconds(ops, hw)
    assert fp8_s <= fp16_s * (1 + 1e-12)
    rate, tensor = math_units(ops, hw.gpu)
    if (
        hw.gpu.fp8_flops_per_clk_per_sm > 0
    ):  # FP8 units: at least the FP16 tensor rate, 2x on presets
        assert rate[0] >= rate[1] and tensor[0]
        assert rate[0] == pytest.approx(2 * rate[1])
    else:  # none: the rate a port would run, the FP16 tensor rate (or FP32 pipes without tensor cores)
        assert rate[0] == pytest.approx(rate[1])


def test_an_fp8_kernel_naming_a_bf16_operand_is_fp8_not_emulated_bf16():
    # cuBLASLt's e4m3 x bf16 GEMM on a V100 (no BF16 math): no bf16 note, the FP8 port note, and
    # the FP16 tensor rate 80 x 1,024 x 1,530 MHz = 125.34 TFLOP/s (not the FP32 rate of bf16 there)
    ops = _gemms([XMMA_E4M3], [""])
    v100 = load_hw("dgx1-v100")
    assert not bf16_ops(ops).any() and emulated_bf16_note(ops, v100) is None
    assert fp8_port_note(ops, v100) is not None
    assert _peak("dgx1-v100", ops) == pytest.approx([125.34e12], rel=1e-4)


def test_presets_with_fp8_are_ada_hopper_blackwell_cdna3():
    with_fp8 = {
        p for p in list_presets() if (hw := load_hw(p)).gpu and hw.gpu.fp8_flops_per_clk_per_sm
    }
    assert with_fp8 == set(WITH_FP8)


def test_fp16_tensor_what_if_past_fp8_raises_fp8_with_it():
    # --set gpu.tensor_flops_per_clk_per_sm=10000 on an H100: FP8 never below FP16 (7,568 < 10,000)
    hw = load_hw("dgx-h100", overrides=["gpu.tensor_flops_per_clk_per_sm=10000"])
    ops = _gemms([CUTLASS3X_E4M3, F16_GEMM], ["", ""])
    rate = math_units(ops, hw.gpu)[0]
    assert rate[0] == pytest.approx(rate[1])


def _fp8_kineto(path) -> None:
    """A real CPU profile of three FP8 torch._scaled_mm GEMMs (512^3) and their bf16 ReLUs, its
    recorded GEMM shapes then set to 8192 (so the math, not the launch floor, sets the time)."""
    a = torch.randn(512, 512).to(torch.float8_e4m3fn)
    b = torch.randn(512, 512).to(torch.float8_e4m3fn).t()
    scale = torch.tensor(1.0)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
    ) as prof:
        for _ in range(3):
            torch.relu(torch._scaled_mm(a, b, scale, scale, out_dtype=torch.bfloat16))
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    for event in trace["traceEvents"]:
        dims = event.get("args", {}).get("Input Dims")
        if isinstance(dims, list):
            event["args"]["Input Dims"] = [
                [8192 if d == 512 else d for d in shape] if isinstance(shape, list) else shape
                for shape in dims
            ]
    path.write_text(json.dumps(trace))


def test_predict_fp8_trace_on_h100_with_and_without_fp8_units(tmp_path, capsys):
    trace = tmp_path / "fp8.json"
    _fp8_kineto(trace)
    capsys.readouterr()
    args = ["predict", str(trace), "--phase", "all", "--json"]

    def run(*extra: str) -> dict:
        assert main([*args, *extra]) == 0
        return json.loads(capsys.readouterr().out)

    h100 = run("--hw", "dgx-h100")
    assert h100["notes"] == []
    # the same H100 without FP8 units prices the GEMMs at FP16 and says so
    no_fp8 = run("--hw", "dgx-h100", "--set", "gpu.fp8_flops_per_clk_per_sm=0")
    [note] = no_fp8["notes"]
    assert note.startswith("3 of 6 ops are FP8 matrix ops") and "(dgx-h100)" in note
    # three 8192^3 GEMMs: at least 3 x 0.5559 ms at the FP8 peak; about twice as long at FP16
    assert 3 * 0.5559e-3 <= h100["gpu_seconds"] < 0.6 * no_fp8["gpu_seconds"]


@pytest.mark.parametrize(
    ("value", "says"),
    [(-1, "gpu.fp8_flops_per_clk_per_sm"), (1e9, "gpu.fp8_flops_per_clk_per_sm"), (True, "number")],
)
def test_bad_fp8_rate_in_a_preset_exits_2_in_one_line(tmp_path, capsys, trace_dir, value, says):
    config = yaml.safe_load((presets_dir() / "dgx-h100.yaml").read_text())
    config["gpu"]["fp8_flops_per_clk_per_sm"] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["predict", str(trace_dir), "--hw", str(path), "--phase", "all"]) == 2
    line = error_line(capsys)
    assert says in line and str(path) in line
