"""Pipeline fill (archsim.perf.pipeline_fill): two DRAM round trips add to a kernel's transfer. A
golden MI300X element-wise kernel worked by hand; the fill is exactly 2 L on bandwidth-bound kernels,
never negative, never more than 2 L, and gone under the ``dram_latency`` idealization."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import archsim.perf.pipeline_fill as pipeline_fill
from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds, kernel_terms
from archsim.perf.pipeline_fill import FILL_ROUND_TRIPS, fill_seconds, latency_with_fill
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")


def _add(n: int, blocks: int, threads: int = 128) -> pd.DataFrame:
    """A traced fp32 a + b over n elements: reads 8n B, writes 4n B."""
    row = {"kind": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, add>",
           "op_class": "elementwise", "dtype": "float32", "flops": float(n),
           "bytes_read": 8.0 * n, "bytes_written": 4.0 * n, "grid_x": float(blocks),
           "grid_y": 1.0, "grid_z": 1.0, "block_x": float(threads), "block_y": 1.0,
           "block_z": 1.0}  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_golden_mid_size_add_on_mi300x() -> None:
    # 2^20 fp32 elements, 2048 blocks of 128 threads: D = 12 x 2^20 = 12,582,912 B.
    # T_bw = D / (5300 GB/s x 0.754) = 3.1487 us (gpu-benches MI300X stream fraction). All 2048
    # blocks are resident (16 per CU x 304 CUs), far more than the 1.73 MB that 3996 GB/s x 434 ns
    # needs in flight, so the Little's-law term is D / 5300 GB/s = 2.374 us, under T_bw.
    # With the fill: 2 x 434 ns + 3.1487 us = 4.0167 us, and CDNA3's fixed cost in series
    # (archsim.perf.dispatch_overhead: 2.0 - 3 x 0.434 = 0.698 us): 4.7147 us.
    ops = _add(2**20, 2048)
    transfer = 12_582_912 / (5300e9 * 0.754)
    assert transfer * 1e6 == pytest.approx(3.1487, rel=1e-4)
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), MI300X.name)
    assert terms["bw"][0] == pytest.approx(transfer, rel=1e-9)
    assert terms["lat"][0] == pytest.approx(2 * 434e-9 + transfer, rel=1e-9)
    assert body_seconds(ops, MI300X)[0] * 1e6 == pytest.approx(4.7147, rel=1e-4)


def test_fill_function_by_hand() -> None:
    gpu = MI300X.gpu
    assert FILL_ROUND_TRIPS == 2
    assert fill_seconds(gpu) == pytest.approx(868e-9)
    assert fill_seconds(gpu, frozenset({"dram_latency"})) == 0.0
    lat = np.array([1e-6, 3e-6, 0.0])
    bw = np.array([2e-6, 1e-6, 0.0])
    out = latency_with_fill(lat, bw, np.array([1.0, 1.0, 0.0]), gpu)
    # the slower steady-state time plus 868 ns; an op moving no DRAM bytes keeps its term
    assert out == pytest.approx([2.868e-6, 3.868e-6, 0.0])
    same = latency_with_fill(lat, bw, np.ones(3), gpu, frozenset({"dram_latency"}))
    assert same == pytest.approx(lat)


@settings(max_examples=40, deadline=None)
@given(
    log2_n=st.integers(min_value=6, max_value=28),
    blocks=st.integers(min_value=1, max_value=100_000),
    preset=st.sampled_from(["mi300x", "dgx1-v100", "dgx-a100", "dgx-h100", "mi210"]),
)
def test_fill_is_between_zero_and_two_round_trips(log2_n, blocks, preset) -> None:
    """Physics: the fill never makes a kernel faster, adds at most its two round trips, and the
    breakdown's dram_latency idealization removes it."""
    hw = load_hw(preset)
    ops = _add(2**log2_n, blocks)
    with_fill = body_seconds(ops, hw)[0]
    saved = pipeline_fill.FILL_ROUND_TRIPS
    try:
        pipeline_fill.FILL_ROUND_TRIPS = 0
        without = body_seconds(ops, hw)[0]
    finally:
        pipeline_fill.FILL_ROUND_TRIPS = saved
    assert without <= with_fill <= without + 2 * hw.gpu.dram_latency_ns * 1e-9 * (1 + 1e-9)
    idealized = kernel_terms(ops, hw.gpu, frozenset({"dram_latency"}), hw.name)["lat"][0]
    assert idealized == 0.0
