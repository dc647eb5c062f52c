"""Issue 12's presets (t4, l4, rtx4090, dgx-h200, dgx-b200, dgx1-p100, mi210, mi250x, mi300x,
jetson-agx-orin): a GEMM and an element-wise kernel worked by hand from each datasheet, the breakdown's
invariants on each, and impossible rates refused in one line."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.analysis.breakdown import breakdown, sequence_seconds
from archsim.cli import main
from archsim.hw import load_hw
from archsim.hw.presets import presets_dir
from archsim.perf.kernel import body_seconds, kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import error_line

NEW_PRESETS = (
    "t4", "l4", "rtx4090", "dgx-h200", "dgx-b200", "dgx1-p100", "mi210", "mi250x", "mi300x",
    "jetson-agx-orin",
)  # fmt: skip

# A 4096^3 fp16 GEMM: F = 2 * 4096^3 = 1.374e11 FLOPs, D = 3 * 4096^2 * 2 B = 100.7 MB (A, B read, C
# written). Its kernel is named with a 128x128 tile, so each L2 byte feeds 2*128*128/(128+128) / 2 B
# = 64 FLOPs: L2 traffic max(D, F / 64) = 2.147 GB. 8 blocks per SM of 256 threads: no tail.
GEMM_FLOPS = 2 * 4096**3
GEMM_READ_BYTES = 2 * 4096 * 4096 * 2
GEMM_WRITTEN_BYTES = 4096 * 4096 * 2
GEMM_L2_BYTES = GEMM_FLOPS / 64
# An fp32 a + b over n = 2^26 elements: reads 8n B, writes 4n B = 805.3 MB; n FLOPs.
ADD_N = 2**26

# Per preset, from the datasheets (each preset's YAML cites them): the matrix-unit peak the fp16 GEMM
# runs at (FP16 vector rate where there is none), DRAM bandwidth, L2 bandwidth; then, worked by hand
# in ms, the GEMM's math time at that peak, its roofline (largest of math, DRAM and L2 at datasheet
# rates), and the add's DRAM time (12n B / DRAM bandwidth).
GOLDEN = {
    # 40 SMs * 1024 * 1590 MHz = 65.1 TFLOP/s: 1.374e11 / 65.13e12 = 2.110 ms (L2: 2.147e9 / 1119e9
    # = 1.919 ms); add: 805.3e6 / 320e9 = 2.517 ms
    "t4": (40 * 1024 * 1590e6, 320e9, 1119e9, 2.1103, 2.1103, 2.5166),
    # 58 * 1024 * 2040 MHz = 121.2 T: 1.134 ms (L2 1.031 ms); add / 300 GB/s = 2.684 ms
    "l4": (58 * 1024 * 2040e6, 300e9, 2083e9, 1.1344, 1.1344, 2.6844),
    # GeForce: FP16 tensor with FP32 accumulate 128 * 512 * 2520 MHz = 165.2 T: 0.832 ms; / 1008 GB/s
    "rtx4090": (128 * 512 * 2520e6, 1008e9, 5677e9, 0.8322, 0.8322, 0.79892),
    # 989 T: math 0.139 ms, but L2 2.147e9 / 9780e9 = 0.2196 ms binds; add / 4800 GB/s = 0.168 ms
    "dgx-h200": (132 * 3784 * 1980e6, 4800e9, 9780e9, 0.13897, 0.21958, 0.16777),
    # 2.25 P: math 0.061 ms; L2 2.147e9 / 10954e9 = 0.196 ms binds; add / 8000 GB/s = 0.101 ms
    "dgx-b200": (148 * 7682 * 1979e6, 8000e9, 10954e9, 0.061084, 0.19605, 0.10066),
    # no tensor cores, and an fp16 GEMM that is not a native-FP16 HGEMM computes in FP32 (PyTorch's
    # cublasGemmEx, CUDA_R_32F; archsim.perf.terms): 56 * 128 * 1480 MHz = 10.6 T: 12.955 ms;
    # add / 732 GB/s = 1.100 ms
    "dgx1-p100": (56 * 128 * 1480e6, 732e9, 1459e9, 12.955, 12.955, 1.1001),
    # MFMA FP16 104 CUs * 1024 * 1700 MHz = 181 T: 0.759 ms; add / 1638.4 GB/s = 0.492 ms
    "mi210": (104 * 1024 * 1700e6, 1638.4e9, 6963e9, 0.75915, 0.75915, 0.49152),
    # one GCD: 110 * 1024 * 1700 MHz = 191.5 T: 0.718 ms; add / 1638.4 GB/s = 0.492 ms
    "mi250x": (110 * 1024 * 1700e6, 1638.4e9, 6963e9, 0.71774, 0.71774, 0.49152),
    # 304 * 2048 * 2100 MHz = 1307 T: 0.105 ms (L2 0.062 ms); add / 5300 GB/s = 0.152 ms
    "mi300x": (304 * 2048 * 2100e6, 5300e9, 34406e9, 0.10512, 0.10512, 0.15194),
    # 16 * 2048 * 1300 MHz = 42.6 T: math 3.226 ms; L2 2.147e9 / 366e9 = 5.867 ms binds; add / 204.8 GB/s
    "jetson-agx-orin": (16 * 2048 * 1300e6, 204.8e9, 366e9, 3.2264, 5.8674, 3.9322),
}
# Achieved time is the roofline at datasheet rates divided by achieved fractions of peak from
# published measurements (archsim.perf.efficiency); none is below 0.5, so the model's time lies
# within [roofline, 2 x roofline].
ACHIEVED_FLOOR = 0.5


def _kernels(sms: int) -> pd.DataFrame:
    """The GEMM and the add as traced kernels with their work recorded."""
    return pd.DataFrame(
        {
            "kind": ["kernel", "kernel"],
            "name": ["gemm_fp16_128x128_nn", "vectorized_elementwise_kernel<4, add>"],
            "op_class": ["gemm", "elementwise"],
            "dtype": ["float16", "float32"],
            "flops": [float(GEMM_FLOPS), float(ADD_N)],
            "bytes_read": [float(GEMM_READ_BYTES), 8.0 * ADD_N],
            "bytes_written": [float(GEMM_WRITTEN_BYTES), 4.0 * ADD_N],
            "grid_x": [8.0 * sms, 65536.0],
            "grid_y": [1.0, 1.0],
            "grid_z": [1.0, 1.0],
            "block_x": [256.0, 256.0],
            "block_y": [1.0, 1.0],
            "block_z": [1.0, 1.0],
        }
    )


def test_golden_table_covers_every_new_preset() -> None:
    assert set(GOLDEN) == set(NEW_PRESETS)


@pytest.mark.parametrize("preset", NEW_PRESETS)
def test_gemm_and_add_worked_by_hand(preset: str) -> None:
    peak_flops, dram_bs, l2_bs, math_ms, gemm_roof_ms, add_ms = GOLDEN[preset]
    hw = load_hw(preset)
    ops = _kernels(hw.gpu.sms)
    dram_bytes = GEMM_READ_BYTES + GEMM_WRITTEN_BYTES
    bounds = (GEMM_FLOPS / peak_flops, dram_bytes / dram_bs, max(dram_bytes, GEMM_L2_BYTES) / l2_bs)
    assert GEMM_FLOPS / peak_flops * 1e3 == pytest.approx(math_ms, rel=1e-4)  # the hand arithmetic
    assert max(bounds) * 1e3 == pytest.approx(gemm_roof_ms, rel=1e-4)
    # the preset's peak, as the model uses it: the GEMM's math term at the datasheet rate
    terms = kernel_terms(ops, hw.gpu)
    assert terms["math"][0] * 1e3 == pytest.approx(math_ms, rel=1e-4)
    assert terms["mem"][0] * 1e3 == pytest.approx(max(dram_bytes, GEMM_L2_BYTES) / l2_bs * 1e3)
    # physics: nothing beats the datasheet roofline; achieved fractions keep it within 2x
    gemm_s, add_s = body_seconds(ops, hw)
    for got_s, roof_ms in ((gemm_s, gemm_roof_ms), (add_s, add_ms)):
        assert roof_ms * (1 - 1e-4) <= got_s * 1e3 <= roof_ms / ACHIEVED_FLOOR * (1 + 1e-4)


@pytest.mark.parametrize("preset", NEW_PRESETS)
def test_peaks_are_ordered_and_fit_the_power(preset: str) -> None:
    """Physics: matrix units never slower than the vector pipes, fp16 never slower than fp32 on the
    vector pipes, idle below the limit, one GPU's DRAM no faster than its L2."""
    hw = load_hw(preset)
    gpu = hw.gpu
    assert gpu.fp16_flops_per_clk_per_sm >= gpu.fp32_flops_per_clk_per_sm
    if gpu.tensor_flops_per_clk_per_sm:
        assert gpu.tensor_flops_per_clk_per_sm >= gpu.fp16_flops_per_clk_per_sm
    assert gpu.idle_power_w < gpu.max_power_w and hw.cpu.idle_power_w < hw.cpu.max_power_w
    assert gpu.dram_bw_gbs < gpu.l2_bw_gbs


@settings(max_examples=25, deadline=None)
@given(
    flops=st.lists(st.floats(0, 1e11), min_size=1, max_size=5),
    nbytes=st.lists(st.floats(1, 1e9), min_size=1, max_size=5),
    preset=st.sampled_from(NEW_PRESETS),
)
def test_breakdown_invariants_on_new_presets(flops, nbytes, preset) -> None:
    """Each idealization step never adds time and the shares sum to one (the breakdown's contract)."""
    rows = [
        {"kind": "cpu", "op_class": c, "dtype": d, "phase": "train_forward", "flops": f,
         "bytes_read": b, "bytes_written": b / 2}
        for f, b, c, d in zip(flops, nbytes, ["gemm", "elementwise", "conv", "reduction", "gemm"],
                              ["float32", "float16", "float16", "float32", "bfloat16"], strict=False)
    ]  # fmt: skip
    ops = conform(pd.DataFrame(rows), OPS_COLUMNS)
    hw = load_hw(preset)
    totals = sequence_seconds(ops, hw)
    pairs = zip(totals, totals[1:], strict=False)
    assert all(later <= earlier * (1 + 1e-12) for earlier, later in pairs)
    table = breakdown(ops, hw, "train")
    assert table.share.sum() == pytest.approx(1.0, abs=1e-3)


@pytest.mark.parametrize("preset", NEW_PRESETS)
def test_more_sms_never_slower(preset: str) -> None:
    hw_few = load_hw(preset, ["gpu.sms=2"])
    hw_all = load_hw(preset)
    ops = _kernels(2).drop(columns=["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"])
    assert (body_seconds(ops, hw_all) <= body_seconds(ops, hw_few) * (1 + 1e-12)).all()


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("fp32_flops_per_clk_per_sm", 0),
        ("fp16_flops_per_clk_per_sm", -256),
        ("tensor_flops_per_clk_per_sm", -1),
        ("dram_bw_gbs", 0),
        ("clock_mhz", -1700),
    ],
)
def test_impossible_rates_in_a_preset_exit_2_in_one_line(
    tmp_path, capsys, trace_dir, field: str, value: float
) -> None:
    config = yaml.safe_load((presets_dir() / "mi300x.yaml").read_text())
    config["gpu"][field] = value
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["predict", str(trace_dir), "--hw", str(path), "--phase", "all"]) == 2
    line = error_line(capsys)
    assert f"gpu.{field}" in line and str(path) in line
