"""Math side of the kernel model (archsim.perf.terms + archsim.perf.efficiency): wave quantization of
tiled GEMMs and the per-generation achieved fractions worked by hand on the MI300X and the A100;
fused attention at its own fraction; invariants: every fraction in (0, 1], a bigger GEMM is never
faster, more SMs are never slower."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.efficiency import ACHIEVED, achieved_fractions, generation
from archsim.perf.kernel import body_seconds, kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X_CU_FLOPS = 2048 * 2.1e9  # hwconfigs/mi300x.yaml: 2048 bf16 FLOP/clk/CU at 2100 MHz
TILE_M, TILE_N, DEPTH = 256, 224, 4096
TILE_FLOPS = 2.0 * TILE_M * TILE_N * DEPTH  # 469,762,048 FLOPs per 256 x 224 x 4096 tile


def make_ops(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def traced_bf16_gemm(blocks: int) -> dict:
    """A hipBLASLt bf16 GEMM as traced: ``blocks`` 256 x 224 tiles, 256 threads each, 4096 deep."""
    return {"kind": "kernel", "name": "Cijk_Alik_Bljk_BBS_BH_MT256x224x64_MI16x16x1", "op_class": "gemm",
            "dtype": "bfloat16", "flops": blocks * TILE_FLOPS, "bytes_read": 1e6 * blocks / 4,
            "bytes_written": 1e5 * blocks / 4, "grid_x": blocks, "grid_y": 1, "grid_z": 1,
            "block_x": 256, "block_y": 1, "block_z": 1, "launch_api": "hipLaunchKernel"}  # fmt: skip


@pytest.mark.parametrize(
    "blocks, waves",
    [
        # 304 tiles on 304 CUs: one full wave. T_comp = 1 tile / CU rate / 0.514 =
        # 469,762,048 / 4.3008e12 / 0.514 = 109.227 us / 0.514 = 212.50 us.
        (304, 1),
        # one tile more: the busiest CU runs 2 (ceil(305 / 304)), the GPU is 50% idle in the second
        # wave (NVIDIA, "Matrix Multiplication Background User's Guide", wave quantization):
        # 2 x 109.227 / 0.514 = 425.01 us for 0.3% more work.
        (305, 2),
        # 456 tiles = 1.5 waves: still 2 tiles on the busiest CU, 425.01 us.
        (456, 2),
    ],
)
def test_wave_quantization_of_a_traced_gemm_by_hand(blocks: int, waves: int) -> None:
    hw = load_hw("mi300x")
    assert generation(hw.gpu, hw.name) == "cdna3"
    terms = kernel_terms(make_ops([traced_bf16_gemm(blocks)]), hw.gpu, frozenset(), hw.name)
    tile_us = TILE_FLOPS / MI300X_CU_FLOPS * 1e6
    assert tile_us == pytest.approx(109.227, rel=1e-4)
    # T_math: perfect spread over 304 CUs at peak (datasheet 1307.4 TFLOP/s)
    assert terms["math"][0] * 1e6 == pytest.approx(blocks * tile_us / 304, rel=1e-9)
    # Bekman's MAMF: MI300X bf16 matmul 668.4 of 1300 TFLOP/s -> 0.514
    expected_us = {1: 212.50, 2: 425.01}[waves]
    assert terms["comp"][0] * 1e6 == pytest.approx(expected_us, rel=1e-4)
    assert terms["comp"][0] == pytest.approx(waves * tile_us * 1e-6 / 0.514, rel=1e-9)
    # the math term dominates these (DRAM, latency and L2 terms are each below 100 us)
    assert body_seconds(make_ops([traced_bf16_gemm(blocks)]), hw)[0] >= terms["comp"][0]


def test_gemm_fraction_follows_the_generation_by_hand() -> None:
    """A100: the same one-wave bf16 tile GEMM at 0.869 of peak (MAMF 271.2 of 312 TFLOP/s)."""
    hw = load_hw("dgx-a100")
    row = {**traced_bf16_gemm(108), "name": "ampere_bf16_s16816gemm_bf16_256x128_ldg8_nn"}
    row["flops"] = 108 * 2.0 * 256 * 128 * DEPTH
    terms = kernel_terms(make_ops([row]), hw.gpu, frozenset(), hw.name)
    # one 256 x 128 x 4096 tile per SM: 268,435,456 FLOPs / (2048 x 1.41e9 FLOP/s) = 92.963 us
    tile_us = 2.0 * 256 * 128 * DEPTH / (2048 * 1.41e9) * 1e6
    assert tile_us == pytest.approx(92.963, rel=1e-4)
    assert terms["comp"][0] * 1e6 == pytest.approx(tile_us / 0.869, rel=1e-9)  # 106.97 us


def test_fused_attention_runs_at_the_attention_fraction_by_hand() -> None:
    """The Triton flash-attention kernel of fixture mi300x_sd35_inference (2660 blocks of 256
    threads, 390.6 GFLOP): the busiest CU runs ceil(2660 / 304) = 9 blocks, 8 resident at once (2048
    threads / 256), enough to keep it busy (u = 1). T_comp = T_math x 304 x 9 / 2660 / 0.275 (0.275:
    Triton FA2 on an MI300X, 360 of 1307 TFLOP/s)."""
    hw = load_hw("mi300x")
    flops = 3.906e11
    row = {**traced_bf16_gemm(2660), "name": "attn_fwd", "op_class": "attention", "flops": flops}
    terms = kernel_terms(make_ops([row]), hw.gpu, frozenset(), hw.name)
    t_math = flops / (304 * MI300X_CU_FLOPS)  # 298.75 us
    assert terms["math"][0] * 1e6 == pytest.approx(298.75, rel=1e-4)
    assert terms["comp"][0] == pytest.approx(t_math * 304 * 9 / 2660 / 0.275, rel=1e-9)  # 1.1174 ms
    # the same kernel as a GEMM would run at the GEMM fraction: attention is the slower of the two
    gemm = kernel_terms(make_ops([{**row, "op_class": "gemm"}]), hw.gpu, frozenset(), hw.name)
    assert gemm["comp"][0] == pytest.approx(terms["comp"][0] * 0.275 / 0.514, rel=1e-9)


def test_every_achieved_fraction_is_at_most_one() -> None:
    for gen, row in ACHIEVED.items():
        for value in (row.dram, row.gemm, row.gemm_tensor, row.attention):
            assert 0 < value <= 1, (gen, row)
        tiled = np.array([True, True, True, False])
        tensor = np.array([False, True, True, False])
        attention = np.array([False, False, True, False])
        math_fraction, dram = achieved_fractions(tiled, tensor, gen, attention)
        assert np.all((math_fraction > 0) & (math_fraction <= 1)) and 0 < dram <= 1
        assert math_fraction[3] == 1.0  # element-wise math is never scaled


PRESETS = ("dgx-a100", "dgx-h100", "mi300x", "jetson-tx1", "dgx1-v100")


def cpu_gemm(m: int, n: int, k: int, dtype: str) -> dict:
    """A GEMM captured on a CPU: FLOPs and bytes from its shapes, no grid (the tile search applies)."""
    size = 2 if dtype == "float16" else 4
    return {"kind": "cpu", "name": "aten::mm", "op_class": "gemm", "dtype": dtype,
            "flops": 2.0 * m * n * k, "bytes_read": float((m * k + k * n) * size),
            "bytes_written": float(m * n * size)}  # fmt: skip


DIMS = st.integers(min_value=1, max_value=8192)


@settings(max_examples=60, deadline=None)
@given(m=DIMS, n=DIMS, k=DIMS, grow=st.sampled_from("mnk"), factor=st.integers(2, 8),
       preset=st.sampled_from(PRESETS), dtype=st.sampled_from(["float32", "float16"]))  # fmt: skip
def test_a_bigger_gemm_is_never_faster(m, n, k, grow, factor, preset, dtype) -> None:
    hw = load_hw(preset)
    bigger = {"m": m, "n": n, "k": k}
    bigger[grow] *= factor
    ops = make_ops([cpu_gemm(m, n, k, dtype), cpu_gemm(**bigger, dtype=dtype)])
    small_s, big_s = body_seconds(ops, hw)
    assert big_s >= small_s * (1 - 1e-9), (m, n, k, grow, factor)


@settings(max_examples=40, deadline=None)
@given(m=DIMS, n=DIMS, k=DIMS, preset=st.sampled_from(PRESETS),
       extra=st.integers(min_value=1, max_value=64))  # fmt: skip
def test_more_sms_are_never_slower(m, n, k, preset, extra) -> None:
    hw = load_hw(preset)
    more = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": hw.gpu.sms + extra})})
    ops = make_ops([cpu_gemm(m, n, k, "float16"), traced_bf16_gemm(max(1, (m * n) // 57344))])
    for few_s, many_s in zip(body_seconds(ops, hw), body_seconds(ops, more), strict=True):
        assert many_s <= few_s * (1 + 1e-9), (m, n, k, extra)


def test_wave_quantization_grows_in_steps() -> None:
    """Tiles 1..3 waves on the MI300X: T_comp is flat within a wave and steps at each wave edge."""
    hw = load_hw("mi300x")
    blocks = np.arange(1, 3 * 304 + 1)
    ops = make_ops([traced_bf16_gemm(int(b)) for b in blocks])
    comp = kernel_terms(ops, hw.gpu, frozenset(), hw.name)["comp"]
    waves = np.ceil(blocks / 304)
    assert np.allclose(comp, waves * TILE_FLOPS / MI300X_CU_FLOPS / 0.514, rtol=1e-9)
    assert np.all(np.diff(comp) >= -1e-12 * comp[1:])  # rounding only
    assert math.isclose(comp[304] / comp[303], 2.0, rel_tol=1e-9)


def test_layout_transform_moves_each_element_once_each_way() -> None:
    """cuDNN's nchwToNhwcKernel as traced in fixture v100_resnet50_train_2021 (4224 blocks of 256
    threads, fp32, no shapes of its own): 4,325,376 elements at 4 per thread, read once and written
    once: 4,325,376 x 2 x 4 B = 34,603,008 B. A kernel of unknown kind with the same grid counts an
    element-wise op's three operands: 51,904,512 B."""
    from archsim.perf.blocks import estimate_work_from_launch

    names = ["void nchwToNhwcKernel<float, float, float, true, false>", "some_helper_kernel"]
    ops = pd.DataFrame({"name": names, "dtype": ["float32"] * 2, "op_class": ["conv", "other"]})
    blocks, threads = np.full(2, 4224.0), np.full(2, 256.0)
    _, dram_bytes = estimate_work_from_launch(ops, blocks, threads)
    assert dram_bytes.tolist() == [34_603_008.0, 51_904_512.0]


def test_a_faster_clock_is_never_slower_for_a_searched_tile() -> None:
    """A grid-less fp32 (TF32) convolution on the H100 whose tile search ties at peak between split
    counts: the achieved fraction must apply before the search picks, or a 25% higher clock picked
    a split whose achieved math time exceeds the L2 bound (3.64 ms -> 4.13 ms)."""
    row = {"kind": "cpu", "op_class": "conv", "dtype": "float32", "flops": 991675655819.4276,
           "bytes_read": 796490164.0499908, "bytes_written": 4.0}  # fmt: skip
    ops = make_ops([row])
    base = load_hw("dgx-h100")
    faster = load_hw("dgx-h100", [f"gpu.clock_mhz={base.gpu.clock_mhz * 1.25}"])
    assert body_seconds(ops, faster)[0] <= body_seconds(ops, base)[0] * (1 + 1e-12)


def test_a_large_cpu_captured_gemm_may_run_the_256x128_tile() -> None:
    """An 8192^3 bf16 GEMM captured on a CPU, on the H100: with cuBLAS's 256 x 128 tensor-core tile
    each L2 byte feeds 2 x 256 x 128 / 384 / 2 B = 85.33 FLOPs (128 x 128: 64), so its L2 term is
    2 x 8192^3 / 85.33 / L2 bandwidth; the search keeps it when that beats the 128 x 128 tile's."""
    n = 8192
    hw = load_hw("dgx-h100")
    terms = kernel_terms(make_ops([cpu_gemm(n, n, n, "bfloat16")]), hw.gpu, frozenset(), hw.name)
    l2_bytes_per_s = hw.gpu.l2_bw_gbs * 1e9
    large_tile_l2_s = 2.0 * n**3 / (2 * 256 * 128 / 384 / 2) / l2_bytes_per_s
    square_tile_l2_s = 2.0 * n**3 / 64 / l2_bytes_per_s
    assert terms["mem"][0] == pytest.approx(large_tile_l2_s, rel=1e-9)
    assert body_seconds(make_ops([cpu_gemm(n, n, n, "bfloat16")]), hw)[0] < square_tile_l2_s
