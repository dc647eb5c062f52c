"""CDNA2 (MI210, MI250X GCD) kernels worked by hand: MFMA GEMMs recognized by their ROCm kernel names
when the trace has no dtype (fp16/bf16 at the matrix rate, fp32 at the FP32 matrix rate), and
element-wise kernels at the published stream fraction and pointer-chase latency of the presets."""

from __future__ import annotations

import pandas as pd
import pytest

from archsim.hw import load_hw
from archsim.perf.efficiency import ACHIEVED
from archsim.perf.kernel import body_seconds, kernel_terms

CDNA2_PRESETS = ("mi210", "mi250x")
GEMM_FLOPS = 2.0 * 4096**3  # a 4096^3 GEMM: 1.374e11 FLOPs
# Kernel names as ROCm traces record them (fixtures mi210_gpu_only, mi250_mlp_train): Tensile's
# data-type code follows the operand indices (BBS: bf16 in, S compute; SB: single, beta), MI..: MFMA.
BF16_TENSILE = "Cijk_Ailk_Bjlk_BBS_BH_Bias_HAS_SAV_UserArgs_MT128x64x32_MI32x32x1_SN_LDSB0"
FP32_TENSILE = "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0"
BF16_MIOPEN = "igemm_fwd_gtcx2_nhwc_bf16_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2"
FP32_MIOPEN = "igemm_fwd_gtcx_nchw_fp32_bx0_ex1_bt128x128x32_wt32x32x8_ws1x1_wr2x2"

# Worked by hand, per preset: CUs, and the GEMM's time at the bf16 MFMA peak (1024 FLOPs per CU per
# clock, MI210/MI250X datasheets) and at the FP32 matrix peak (256), all at 1700 MHz, in ms:
# mi210: 1.374e11 / (104 x 1024 x 1.7e9 = 181.0 T) = 0.75915 ms; / (104 x 256 x 1.7e9) = 3.0366 ms
# mi250x (one GCD): / (110 x 1024 x 1.7e9 = 191.5 T) = 0.71774 ms; / (110 x 256 x 1.7e9) = 2.8710 ms
GEMM_GOLDEN = {"mi210": (104, 0.75915, 3.0366), "mi250x": (110, 0.71774, 2.8710)}
# In series with the math of a traced tiled kernel (archsim.perf.gemm_latency.prologue_seconds): the
# fixed cost T_min - L plus one DRAM round trip per round of resident workgroups. Both presets: T_min
# 3.7 us, L 390 ns. ROCm traces record no registers, so the tile's fp32 accumulators floor them
# (archsim.perf.tile_padding.accumulator_registers): MT128x64 / 256 threads = 32, bt128x128 64,
# MT64x16 4 per thread; at most 64 x 256 = 16,384 of a CU's 131,072, so 8 fit, as the 2048-thread
# limit allows. 8 workgroups on the busiest CU, 8 resident: ceil(8 / 8) = 1 round, so
# (3.7 - 0.39) + 1 x 0.39 = 3.7 us. No epilogue term: no launching op's dims, so the grid is not
# confirmed as the tile count. (CDNA2 has one L2: no fixed cost outside the terms.)
LATENCY_MS = 390e-6
PROLOGUE_MS = (3.7e-3 - LATENCY_MS) + 1 * LATENCY_MS


def _gemm(name: str, sms: int) -> pd.DataFrame:
    """One traced GEMM kernel with its FLOPs but no dtype (a GPU-only trace: no launching op), 8
    workgroups of 256 threads per CU (no tail), bytes small enough that math binds."""
    return pd.DataFrame(
        {
            "kind": ["kernel"],
            "name": [name],
            "op_class": ["gemm"],
            "dtype": [""],
            "flops": [GEMM_FLOPS],
            "bytes_read": [2.0 * 4096 * 4096 * 2],
            "bytes_written": [4096.0 * 4096 * 2],
            "grid_x": [8.0 * sms],
            "grid_y": [1.0],
            "grid_z": [1.0],
            "block_x": [256.0],
            "block_y": [1.0],
            "block_z": [1.0],
        }
    )


@pytest.mark.parametrize("preset", CDNA2_PRESETS)
@pytest.mark.parametrize(
    ("name", "matrix_half"),
    [(BF16_TENSILE, True), (BF16_MIOPEN, True), (FP32_TENSILE, False), (FP32_MIOPEN, False)],
)
def test_mfma_gemm_by_kernel_name_worked_by_hand(preset: str, name: str, matrix_half: bool) -> None:
    sms, half_ms, fp32_ms = GEMM_GOLDEN[preset]
    hw = load_hw(preset)
    assert hw.gpu.sms == sms
    terms = kernel_terms(_gemm(name, sms), hw.gpu)
    math_ms = half_ms if matrix_half else fp32_ms
    assert terms["math"][0] * 1e3 == pytest.approx(math_ms, rel=1e-4)
    # achieved: the MAMF bf16 fraction (0.767) on MFMA, rocblas-bench's sgemm fraction (0.84) on fp32
    fraction = ACHIEVED["cdna2"].gemm_tensor if matrix_half else ACHIEVED["cdna2"].gemm
    assert fraction == (0.767 if matrix_half else 0.84)
    assert terms["comp"][0] * 1e3 == pytest.approx(math_ms / fraction, rel=1e-4)
    assert (hw.gpu.kernel_min_us, hw.gpu.dram_latency_ns) == (3.7, 390.0)
    assert terms["serial"][0] * 1e3 == pytest.approx(PROLOGUE_MS, rel=1e-9)
    # mi210 bf16: 0.75915 / 0.767 + 0.0037 = 0.99347 ms; fp32: 3.0366 / 0.84 + 0.0037 = 3.61870 ms
    assert body_seconds(_gemm(name, sms), hw)[0] * 1e3 == pytest.approx(
        math_ms / fraction + PROLOGUE_MS, rel=1e-4
    )


def test_bf16_mfma_never_slower_than_fp32_matrix() -> None:
    """Physics: the same GEMM named as a bf16 MFMA kernel is 4x the fp32 one's rate, never slower:
    the math parts' ratio is exactly 4 x 0.767 / 0.84 = 3.6524; the prologue's 3.7 us (the same for
    both: one round, see PROLOGUE_MS) is in series with each, so the whole kernels' ratio is
    (3.0366 / 0.84 + 0.0037) / (0.75915 / 0.767 + 0.0037) = 3.6425 on mi210."""
    hw = load_hw("mi210")
    half_ops, single_ops = _gemm(BF16_TENSILE, 104), _gemm(FP32_TENSILE, 104)
    half = body_seconds(half_ops, hw)[0]
    single = body_seconds(single_ops, hw)[0]
    assert half < single
    half_comp = kernel_terms(half_ops, hw.gpu)["comp"][0]
    single_comp = kernel_terms(single_ops, hw.gpu)["comp"][0]
    assert single_comp / half_comp == pytest.approx(4 * 0.767 / 0.84, rel=1e-12)
    t_math_half_ms = GEMM_FLOPS / (104 * 1024 * 1.7e9) * 1e3  # 0.75915 ms at the bf16 MFMA peak
    whole = (4 * t_math_half_ms / 0.84 + PROLOGUE_MS) / (t_math_half_ms / 0.767 + PROLOGUE_MS)
    assert single / half == pytest.approx(whole, rel=1e-9)


def _add(n: int, blocks: int, threads: int) -> pd.DataFrame:
    """An fp32 a + b over n elements as a traced element-wise kernel: reads 8n B, writes 4n B."""
    return pd.DataFrame(
        {
            "kind": ["kernel"],
            "name": ["void at::native::vectorized_elementwise_kernel<4, add>"],
            "op_class": ["elementwise"],
            "dtype": ["float32"],
            "flops": [float(n)],
            "bytes_read": [8.0 * n],
            "bytes_written": [4.0 * n],
            "grid_x": [float(blocks)],
            "grid_y": [1.0],
            "grid_z": [1.0],
            "block_x": [float(threads)],
            "block_y": [1.0],
            "block_z": [1.0],
        }
    )


@pytest.mark.parametrize("preset", CDNA2_PRESETS)
def test_large_add_at_the_stream_fraction(preset: str) -> None:
    """2^26 elements, 805.3 MB: DRAM-bound at 0.82 x 1638.4 GB/s = 1343.5 GB/s (BabelStream MI250X
    GCD; gpu-benches MI210 read/scale 1345/1358 GB/s): 805306368 / 1.343488e12 = 0.59942 ms, plus
    the pipeline fill of two 390-ns round trips (archsim.perf.pipeline_fill): 0.60020 ms."""
    n = 2**26
    hw = load_hw(preset)
    assert body_seconds(_add(n, n // 512, 128), hw)[0] * 1e3 == pytest.approx(0.60020, rel=1e-4)


@pytest.mark.parametrize("preset", CDNA2_PRESETS)
def test_one_workgroup_add_latency_and_floor(preset: str) -> None:
    """256 elements in one workgroup of 128 threads: 3072 B. A vectorized element-wise thread loads
    all its elements before it computes (archsim.perf.in_flight): 2 elements x 12 B = 24 B per
    thread, all 3072 B in flight at once, so Little's law gives 3072 / (3072 B / 390 ns) = 390 ns
    (one HBM round trip at the gpu-benches pointer-chase latency). With the pipeline fill
    (archsim.perf.pipeline_fill, L + max(L + T_bw, T_lat)) that one round trip is the first load's,
    not one more: the loads are back at 390 ns, or 2.287 ns later at the bandwidth bound (T_bw =
    3072 B / (1638.4 GB/s x 0.82)), and the stores are acknowledged one round trip after: 390 +
    max(392.287, 390) = 782.287 ns (1170 when the fill counted the first trip twice); the 3.7-us
    floor binds."""
    hw = load_hw(preset)
    assert hw.gpu.dram_latency_ns == 390
    ops = _add(256, 1, 128)
    t_bw_ns = 3072 / (1638.4 * 0.82)
    assert kernel_terms(ops, hw.gpu)["lat"][0] * 1e9 == pytest.approx(780.0 + t_bw_ns, rel=1e-6)
    assert body_seconds(ops, hw)[0] * 1e6 == pytest.approx(hw.gpu.kernel_min_us)
