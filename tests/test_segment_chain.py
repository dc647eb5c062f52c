"""Dependent offset loads of FBGEMM's warp-per-segment kernels (archsim.perf.segment_chain)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.segment_chain import chain_trips, segment_chain_seconds

BOUNDS = "void bounds_check_indices_kernel<long, false>(at::GenericPackedTensorAccessor<long>)"
PERMUTE = "void fbgemm_gpu::permute_2D_data_kernel<false, int, int, decltype(nullptr)>(int, int)"
OLD_PERMUTE = "void fbgemm_gpu::permute_indices_weights_kernel<false, int, float>(int, int)"


def a100():
    return load_hw("dgx-a100").gpu


def test_trips_by_name() -> None:
    names = pd.Series([BOUNDS, PERMUTE, OLD_PERMUTE, "permute_2D_lengths_kernel<int>", "", None])
    assert chain_trips(names).tolist() == [1, 2, 2, 0, 0, 0]


def test_golden_by_hand() -> None:
    gpu = a100()  # 108 SMs, DRAM latency 408 ns, kernel floor 3 us (serial overhead 2.592 us)
    assert (gpu.sms, gpu.dram_latency_ns, gpu.kernel_min_us) == (108, 408.0, 3.0)
    # nodevice_sampled_train's bounds check: 294,912 blocks, 4 resident an SM: ceil(294,912 / 432)
    # = 683 waves x 1 trip x 408 ns = 278.664 us, + 2.592 us = 281.256 us.
    got = segment_chain_seconds(pd.Series([BOUNDS]), np.array([294_912.0]), np.array([4.0]), gpu)
    assert np.isclose(got[0], 281.256e-6)
    # a permute of 88,960 1024-thread blocks, 2 an SM: ceil(88,960 / 216) = 412 waves x 2 x 408 ns
    # = 336.192 us, + 2.592 = 338.784 us.
    got = segment_chain_seconds(pd.Series([PERMUTE]), np.array([88_960.0]), np.array([2.0]), gpu)
    assert np.isclose(got[0], 338.784e-6)


def test_not_applied() -> None:
    gpu = a100()
    names = pd.Series(["at::native::vectorized_elementwise_kernel<4>", BOUNDS])
    got = segment_chain_seconds(names, np.array([1e6, np.nan]), np.array([4.0, 4.0]), gpu)
    assert got.tolist() == [0.0, 0.0]  # other kernels, and a grid not recorded
    ideal = segment_chain_seconds(
        pd.Series([BOUNDS]), np.array([1e6]), np.array([4.0]), gpu, frozenset({"dram_latency"})
    )
    assert np.isclose(ideal[0], gpu.kernel_min_us * 1e-6)  # no round trips: the kernel floor


@given(
    blocks=st.integers(1, 10**7),
    more=st.integers(0, 10**6),
    resident=st.integers(1, 32),
    faster=st.floats(0.1, 1.0),
)
def test_invariants(blocks: int, more: int, resident: int, faster: float) -> None:
    gpu = a100()
    names = pd.Series([PERMUTE, PERMUTE, BOUNDS])
    t = segment_chain_seconds(
        names, np.array([blocks, blocks + more, blocks], dtype=float), np.full(3, resident), gpu
    )
    assert t[1] >= t[0]  # more segments never finish sooner
    assert t[0] >= t[2]  # two dependent trips never take less than one
    assert t[2] >= gpu.kernel_min_us * 1e-6 - 1e-12  # at least the kernel floor
    quick = gpu.model_copy(update={"dram_latency_ns": gpu.dram_latency_ns * faster})
    t_quick = segment_chain_seconds(
        names, np.array([blocks, blocks + more, blocks], dtype=float), np.full(3, resident), quick
    )
    assert (t_quick <= t + 1e-15).all()  # a shorter DRAM latency is never slower


def test_prewindow_fixture_below_measured() -> None:
    """a100_80gb_train_prewindow's bounds checks and permutes (35 launches, 16-304 us): each floor
    is below its measured time, and above the 3-us kernel floor for the 49,152-block checks."""
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.occupancy import blocks_per_sm
    from archsim.perf.source import source_hw_for_trace
    from archsim.perf.terms import launch_shape
    from archsim.trace.ingest import ingest
    from tests.conftest import kineto_fixture

    trace = ingest(kineto_fixture("a100_80gb_train_prewindow.json.gz"))
    gpu = source_hw_for_trace(trace).gpu
    ops = measured_ops(trace.ops).reset_index(drop=True)
    blocks, threads, registers, shared = launch_shape(ops)
    resident = blocks_per_sm(threads, registers, shared, gpu)
    floor = segment_chain_seconds(ops["name"], blocks, resident, gpu)
    named = chain_trips(ops["name"]) > 0
    assert named.sum() == 35
    assert (floor[named] * 1e6 <= ops["dur_us"].to_numpy()[named]).all()
    big = named & (blocks == 49_152)
    assert big.sum() == 5 and (floor[big] > gpu.kernel_min_us * 1e-6 * 10).all()
