"""The per-SM cap on bytes in flight (archsim.perf.sm_in_flight): a golden value worked by hand for a
kernel where the cap binds, the published figure it comes from, and invariants (more SMs never
slower, a higher cap never slower, no cap where no figure is published)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.sm_in_flight import (
    SM_IN_FLIGHT_BYTES,
    VOLTA_SM_IN_FLIGHT_BYTES,
    sm_cap_seconds,
    sm_in_flight_bytes,
    traced_loads,
)
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

V100 = load_hw("dgx1-v100")
VEC_COPY = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::AUnaryFunctor<float, float, "
    "float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 2ul> >(int, ...)"
)


def _op(blocks: int, threads: int, read: float, written: float) -> pd.DataFrame:
    row = {"kind": "kernel", "name": VEC_COPY, "op_class": "elementwise", "dtype": "float32",
           "flops": read / 4, "bytes_read": read, "bytes_written": written,
           "grid_x": float(blocks), "grid_y": 1.0, "grid_z": 1.0, "block_x": float(threads),
           "block_y": 1.0, "block_z": 1.0}  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_volta_figure_is_the_published_per_sm_bandwidth_times_the_pointer_chase() -> None:
    """gpu-benches README, cuda-stream on a V100-PCIe: sum16 with one 128-thread block per SM reads
    16.3 GB/s; the V100 pointer chase is 317 ns: 16.3e9 x 317e-9 = 5,167.1 B."""
    assert pytest.approx(5167.1, abs=0.05) == VOLTA_SM_IN_FLIGHT_BYTES
    assert sm_in_flight_bytes("volta") == VOLTA_SM_IN_FLIGHT_BYTES
    # no published figure: no cap (the MI300X included, whatever its MeanVariance kernel suggests)
    for gen in ("turing", "ampere", "ada", "hopper", "blackwell", "cdna2", "cdna3", "default"):
        assert sm_in_flight_bytes(gen) == np.inf


def test_golden_one_block_kernel_on_v100_is_capped() -> None:
    """One 1,024-thread block streams 1 MB in and 1 MB out on a V100. A vectorized element-wise
    thread loads its whole share (archsim.perf.in_flight): 1e6 / 1,024 = 977 B each, 1 MB at once,
    one round trip by Little's law at L0 = 317 ns. The SM keeps 5,167.1 B loading, so the loads take
    R x L0 / C_sm = 1e6 x 317e-9 / 5,167.1 = 61.350 us; with the pipeline fill's first round trip
    (archsim.perf.pipeline_fill: L0 + max(L0 + T_bw, T_lat)) the term is 0.317 + 61.350 us."""
    ops = _op(1, 1024, 1e6, 1e6)
    cap = sm_cap_seconds(np.array([1e6]), np.array([1.0]), V100.gpu, "volta")
    assert cap[0] == pytest.approx(1e6 * 317e-9 / 5167.1, rel=1e-5)
    assert cap[0] * 1e6 == pytest.approx(61.350, abs=1e-3)
    lat = kernel_terms(ops, V100.gpu, frozenset(), V100.name)["lat"][0]
    assert lat * 1e6 == pytest.approx(0.317 + 61.350, abs=2e-3)
    saved = dict(SM_IN_FLIGHT_BYTES)
    SM_IN_FLIGHT_BYTES.clear()
    try:  # without the cap the same kernel is priced far faster: the cap is what binds
        uncapped = kernel_terms(ops, V100.gpu, frozenset(), V100.name)["lat"][0]
    finally:
        SM_IN_FLIGHT_BYTES.update(saved)
    assert uncapped < lat / 5


def test_cap_never_binds_with_every_sm_busy_on_v100() -> None:
    """80 SMs x 5,167.1 B / 317 ns = 1.30 TB/s, above the V100's 900 GB/s: a full-GPU kernel keeps
    the stream-table pricing of archsim.perf.loaded_latency."""
    assert V100.gpu.dram_bw_gbs * 1e9 < 80 * VOLTA_SM_IN_FLIGHT_BYTES / 317e-9
    big = _op(8000, 256, 1e9, 1e9)
    lat = kernel_terms(big, V100.gpu, frozenset(), V100.name)["lat"][0]
    cap = sm_cap_seconds(np.array([1e9]), np.array([8000.0]), V100.gpu, "volta")[0]
    assert lat > cap


def test_no_cap_on_stores_of_unknown_split_or_idealized_latency() -> None:
    assert traced_loads(
        np.array([0.0, 10.0]), np.array([0.0, 5.0]), np.array([7.0, 10.0])
    ).tolist() == [0.0, 10.0]
    loads, blocks = np.array([1e6]), np.array([1.0])
    assert sm_cap_seconds(loads, blocks, V100.gpu, "volta", frozenset({"dram_latency"}))[0] == 0.0
    assert sm_cap_seconds(loads, blocks, V100.gpu, "hopper")[0] == 0.0
    spread = sm_cap_seconds(loads, blocks, V100.gpu, "volta", frozenset({"sm_utilization"}))[0]
    assert spread == pytest.approx(sm_cap_seconds(loads, np.array([80.0]), V100.gpu, "volta")[0])


@settings(max_examples=60, deadline=None)
@given(
    loads=st.floats(0, 1e10),
    blocks=st.integers(1, 1 << 16),
    more=st.integers(0, 1 << 10),
    cap=st.floats(64, 1e6),
    factor=st.floats(1, 100),
)
def test_more_sms_and_a_higher_cap_are_never_slower(loads, blocks, more, cap, factor) -> None:
    gpu = V100.gpu
    base = sm_cap_seconds(
        np.array([loads]), np.array([float(blocks)]), gpu, "volta", per_sm_bytes=cap
    )
    wider = sm_cap_seconds(np.array([loads]), np.array([float(blocks + more)]), gpu, "volta",
                           per_sm_bytes=cap)  # fmt: skip
    bigger = sm_cap_seconds(np.array([loads]), np.array([float(blocks)]), gpu, "volta",
                            per_sm_bytes=cap * factor)  # fmt: skip
    more_sms = sm_cap_seconds(np.array([loads]), np.array([float(blocks)]),
                              gpu.model_copy(update={"sms": gpu.sms * 2}), "volta",
                              per_sm_bytes=cap)  # fmt: skip
    assert wider[0] <= base[0] * (1 + 1e-12)
    assert bigger[0] <= base[0] * (1 + 1e-12)
    assert more_sms[0] <= base[0] * (1 + 1e-12)
    assert base[0] >= 0


@settings(max_examples=25, deadline=None)
@given(
    blocks=st.integers(1, 200),
    threads=st.sampled_from([128, 256, 512, 1024]),
    read=st.floats(1e4, 1e8),
)
def test_kernel_on_more_sms_never_slower(blocks, threads, read) -> None:
    """The whole kernel term: the same V100 op on a V100 with twice the SMs is never slower."""
    ops = _op(blocks, threads, read, read)
    wide = V100.gpu.model_copy(update={"sms": V100.gpu.sms * 2})
    narrow_t = kernel_terms(ops, V100.gpu, frozenset(), V100.name)["lat"][0]
    wide_t = kernel_terms(ops, wide, frozenset(), V100.name)["lat"][0]
    assert wide_t <= narrow_t * (1 + 1e-9)
