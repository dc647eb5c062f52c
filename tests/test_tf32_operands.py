"""FP32 operands on tensor cores at the TF32 rate (archsim.perf.tf32_operands, applied in
archsim.perf.math_units, the one source of the math rate): golden values worked by hand from the
A100 whitepaper's 156 TFLOP/s and, on GPUs without TF32, the FP32 rate (V100, T4, MI210 datasheets),
invariants, the exported math_rate_per_sm agreeing with the priced rate, and the A100 fixture's FP32
CUTLASS GEMMs on the A100 and a T4."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.calibrate import measured_ops
from archsim.perf.kernel import math_rate_per_sm
from archsim.perf.math_units import math_units
from archsim.perf.terms import kernel_terms
from archsim.perf.tf32_operands import fp32_tensor_ops
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

TF32_GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_tn_align1>(Params)"
F16_GEMM = (
    "void cutlass::Kernel<cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8>"
)
XMMA_TF32 = "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw"


def _ops(names: list[str], dtypes: list[str], op_class: str = "gemm") -> pd.DataFrame:
    return pd.DataFrame({"name": names, "dtype": dtypes, "op_class": [op_class] * len(names)})


def _rates(ops: pd.DataFrame, preset: str) -> np.ndarray:
    return math_units(ops, load_hw(preset).gpu)[0]


def test_a100_fp32_cutlass_gemm_runs_at_156_tflops():
    # By hand: dgx-a100 has 2,048 FP16 tensor FLOP/clk/SM at 1,410 MHz on 108 SMs = 311.9 TFLOP/s;
    # TF32 is half: 1,024 x 1.41e9 x 108 = 155.9 TFLOP/s (A100 whitepaper: 156).
    gpu = load_hw("dgx-a100").gpu
    ops = _ops([TF32_GEMM, F16_GEMM, TF32_GEMM, XMMA_TF32], ["float32", "", "float16", ""])
    total = _rates(ops, "dgx-a100") * gpu.sms
    assert abs(total[0] - 155.9e12) / 155.9e12 < 0.005
    assert abs(total[1] - 311.9e12) / 311.9e12 < 0.005  # f16 in the name: the FP16 rate
    assert abs(total[2] - 311.9e12) / 311.9e12 < 0.005  # fp16 tensors: the FP16 rate
    assert abs(total[3] - 155.9e12) / 155.9e12 < 0.005  # "tf32" in the name: halved once only


VOLTA_F16_GEMM = "volta_s884gemm_fp16_128x128_ldg8_f2f_nn"
TENSILE_BF16 = "Cijk_Ailk_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT128x64x32_MI32x32x1_SN_LDSB0_AFC1"
TENSILE_F32 = "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_MI16x16x1"


def test_no_tf32_gpu_runs_fp32_operands_at_the_fp32_rate():
    # V100 has no TF32 (dgx1-v100 tf32 false) and its tensor cores multiply FP16 only (V100
    # whitepaper): an FP32-operand GEMM named as a tensor-core one runs as cuBLAS's volta_sgemm
    # would, at 80 SMs x 128 FLOP/clk x 1,530 MHz = 15.67 TFLOP/s; FP16 operands keep 80 x 1,024 x
    # 1,530 MHz = 125.3 TFLOP/s (V100 whitepaper: 125).
    names = [TF32_GEMM, TF32_GEMM, XMMA_TF32, TF32_GEMM, VOLTA_F16_GEMM, F16_GEMM]
    ops = _ops(names, ["", "float32", "", "float16", "", "float32"])
    gpu = load_hw("dgx1-v100").gpu
    rate, tensor = math_units(ops, gpu)
    total = rate * gpu.sms
    assert np.allclose(total[:3], 15.667e12, rtol=1e-3)
    assert np.allclose(total[3:], 125.34e12, rtol=1e-3)
    assert tensor.tolist() == [False, False, False, True, True, True]
    # T4 (Turing, no TF32): 40 x 128 x 1,590 MHz = 8.14 TFLOP/s, not the 65 TFLOP/s FP16 peak
    assert np.allclose(_rates(ops.iloc[:1], "t4") * 40, 8.141e12, rtol=1e-3)


def test_cdna2_fp32_operands_at_the_fp32_matrix_rate_half_names_at_full():
    # MI210 (CDNA2: FP32 MFMA, no reduced-precision FP32 format): FP32 operands run at the FP32
    # matrix rate, 104 CUs x 256 x 1,700 MHz = 45.3 TFLOP/s (MI210 datasheet: FP32 matrix 45.3);
    # Tensile's bf16 GEMM (BBS) at the bf16 matrix rate 104 x 1,024 x 1,700 MHz = 181 TFLOP/s.
    ops = _ops([TF32_GEMM, TENSILE_BF16, TENSILE_F32], ["", "", ""])
    total = _rates(ops, "mi210") * 104
    assert np.allclose(total, [45.26e12, 181.0e12, 45.26e12], rtol=1e-3)
    narrow = fp32_tensor_ops(ops["name"], ops["dtype"])
    assert narrow.tolist() == [True, False, True]


def test_names_with_a_narrower_type_are_not_fp32():
    names = pd.Series([TF32_GEMM, F16_GEMM, "ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8"])
    dtypes = pd.Series(["", "", "float32"])
    assert fp32_tensor_ops(names, dtypes).tolist() == [True, False, False]


@given(
    st.lists(
        st.tuples(
            st.sampled_from([TF32_GEMM, F16_GEMM, XMMA_TF32, "ampere_sgemm_128x64_nn"]),
            st.sampled_from(["float32", "float16", "bfloat16", ""]),
            st.sampled_from(["gemm", "conv", "elementwise"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["dgx-a100", "dgx-h100", "dgx1-v100", "t4", "mi210", "mi300x"]),
)
def test_tensor_rate_is_full_or_tf32_and_the_exported_rate_is_the_priced_one(rows, preset):
    ops = pd.DataFrame(rows, columns=["name", "dtype", "op_class"])
    gpu = load_hw(preset).gpu
    rate, tensor = math_units(ops, gpu)
    full = gpu.tensor_flops_per_clk_per_sm * gpu.clock_mhz * 1e6
    fp32 = fp32_tensor_ops(ops["name"], ops["dtype"])
    # On matrix units: the full rate, or half of it (TF32) on GPUs that have TF32; FP32 operands
    # never at the full rate there, narrower ones at the full rate unless named tf32.
    on = rate[tensor]
    assert np.all(np.isclose(on, full) | (gpu.tf32 & np.isclose(on, 0.5 * full)))
    if gpu.tf32:
        assert np.allclose(rate[tensor & fp32], 0.5 * full)
        # (an FP32-typed convolution runs TF32 whatever its name: math_units' cuDNN rule)
        named = ops["name"].str.contains("tf32").to_numpy() | (ops["op_class"] == "conv").to_numpy()
        assert np.allclose(rate[tensor & ~fp32 & ~named], full)
    else:  # no FP32 operand on a tensor core without TF32: the FP32 rate
        assert not np.any(tensor & fp32)
        assert np.allclose(rate[fp32], gpu.fp32_flops_per_clk_per_sm * gpu.clock_mhz * 1e6)
    # One source: the exported per-SM rate is the rate the kernel model prices.
    assert np.array_equal(math_rate_per_sm(ops, gpu), rate)
    math_s = np.asarray(kernel_terms(ops.assign(flops=1e12), gpu, frozenset(), preset)["math"])
    at_rate = 1e12 / (gpu.sms * rate)
    assert np.all(math_s >= at_rate * (1 - 1e-9))  # convolutions may pad channels (more FLOPs)
    plain = (ops["op_class"] != "conv").to_numpy()
    assert np.allclose(math_s[plain], at_rate[plain], rtol=1e-9)


def test_a100_fixture_fp32_gemms_no_faster_than_tf32_peak():
    """Every float32 CUTLASS tensor-op GEMM of a100_train_shapes has a math term at least its FLOPs at
    the TF32 peak (155.9 TFLOP/s); at the FP16 rate the model had priced them at twice that."""
    trace = ingest(kineto_fixture("a100_train_shapes.json.gz"))
    ops = measured_ops(trace.ops).reset_index(drop=True)
    gpu = load_hw("dgx-a100").gpu
    tf32 = ops["name"].str.contains("tensorop_s1688gemm") & (ops["dtype"] == "float32")
    tf32 &= ops["flops"] > 0
    assert tf32.sum() > 1000  # 1,600 such kernels in the fixture
    terms = kernel_terms(ops[tf32].reset_index(drop=True), gpu, frozenset(), "dgx-a100")
    peak_s = ops.loc[tf32, "flops"].to_numpy() / (gpu.sms * 1024 * gpu.clock_mhz * 1e6)
    assert np.all(np.asarray(terms["comp"]) >= peak_s * (1 - 1e-9))
    # and the measured kernels agree: none ran faster than the TF32 peak
    assert np.all(ops.loc[tf32, "dur_us"].to_numpy() * 1e-6 >= peak_s)
    # Predicted on a T4 (no TF32): no faster than their FLOPs at its FP32 peak, 40 x 128 x 1,590 MHz
    # = 8.14 TFLOP/s (T4 datasheet 8.1), an SGEMM's there; had been the 65 TFLOP/s FP16 one.
    t4 = load_hw("t4").gpu
    on_t4 = kernel_terms(ops[tf32].reset_index(drop=True), t4, frozenset(), "t4")
    fp32_s = ops.loc[tf32, "flops"].to_numpy() / (40 * 128 * 1590e6)
    assert np.all(np.asarray(on_t4["comp"]) >= fp32_s * (1 - 1e-9))
