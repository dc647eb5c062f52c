"""Pipeline fill (archsim.perf.pipeline_fill): L + max(L + T_bw, T_lat), the first load's round trip
in series with a bandwidth-bound transfer (the first of a latency-bound one's rounds) and the last
store's acknowledgement after both. Goldens worked by hand: a bandwidth-bound MI300X element-wise
kernel (2 L + T_bw) and a latency-bound RTX 2080 Ti concatenation copy (L + T_lat: its first round
trip counted once); the fill is between L and 2 L over the steady-state terms, gone under the
``dram_latency`` idealization; more bytes never faster, more bytes in flight, more bandwidth and
lower latency never slower."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import archsim.perf.terms as terms_module
from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds, kernel_terms
from archsim.perf.pipeline_fill import (
    FILL_ROUND_TRIPS,
    fill_seconds,
    latency_with_fill,
    minimal_kernel_seconds,
)
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
RTX2080TI = load_hw("rtx2080ti")  # Turing: no published stream table, the flat 317-ns chase
CAT = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
    "namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1>"
)


def _add(n: int, blocks: int, threads: int = 128) -> pd.DataFrame:
    """A traced fp32 a + b over n elements: reads 8n B, writes 4n B."""
    row = {"kind": "kernel", "name": "void at::native::vectorized_elementwise_kernel<4, add>",
           "op_class": "elementwise", "dtype": "float32", "flops": float(n),
           "bytes_read": 8.0 * n, "bytes_written": 4.0 * n, "grid_x": float(blocks),
           "grid_y": 1.0, "grid_z": 1.0, "block_x": float(threads), "block_y": 1.0,
           "block_z": 1.0}  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _cat(n: int, blocks: int, threads: int = 256) -> pd.DataFrame:
    """A traced torch.cat copy of n 4-B elements: reads 4n B, writes 4n B, one element loaded per
    thread per round trip (archsim.perf.in_flight: CatArrayBatchedCopy's grid-stride loop)."""
    row = {"kind": "kernel", "name": CAT, "op_class": "copy", "dtype": "float32", "flops": 0.0,
           "bytes_read": 4.0 * n, "bytes_written": 4.0 * n, "grid_x": float(blocks),
           "grid_y": 1.0, "grid_z": 1.0, "block_x": float(threads), "block_y": 1.0,
           "block_z": 1.0}  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_golden_mid_size_add_on_mi300x() -> None:
    # 2^20 fp32 elements, 2048 blocks of 128 threads: D = 12 x 2^20 = 12,582,912 B.
    # T_bw = D / (5300 GB/s x 0.754) = 3.1487 us (gpu-benches MI300X stream fraction). All 2048
    # blocks are resident (16 per CU x 304 CUs), far more than the 1.73 MB that 3996 GB/s x 434 ns
    # needs in flight, so the Little's-law term is D / 5300 GB/s = 2.374 us, under T_bw.
    # Bandwidth-bound, so the first load's round trip precedes the stream and the last store's
    # follows it: 434 ns + max(434 ns + 3.1487 us, 2.374 us) = 4.0167 us (the same as the earlier
    # 2 L + max form: only latency-bound kernels move), and CDNA3's fixed cost in series
    # (archsim.perf.dispatch_overhead: 2.0 - 2 x 0.434 = 1.132 us, the floor less the model's own
    # one-workgroup body): 5.1487 us (4.7147 with the earlier 3 L body and 0.698 us).
    ops = _add(2**20, 2048)
    transfer = 12_582_912 / (5300e9 * 0.754)
    assert transfer * 1e6 == pytest.approx(3.1487, rel=1e-4)
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), MI300X.name)
    assert terms["bw"][0] == pytest.approx(transfer, rel=1e-9)
    assert terms["lat"][0] == pytest.approx(2 * 434e-9 + transfer, rel=1e-9)
    assert body_seconds(ops, MI300X)[0] * 1e6 == pytest.approx(5.1487, rel=1e-4)


def test_golden_latency_bound_cat_on_rtx2080ti() -> None:
    # 2^18 fp32 elements by one block of 256 threads, one 4-B load in flight per thread: C = 1 KB of
    # loads (2 KB of traffic with the posted stores beside them), R = 1 MiB, D = 2 MiB. Little's law
    # at the flat 317-ns chase: R / C = 1,024 rounds, T_lat = 1,024 x 317 ns = 324.608 us, far above
    # T_bw = 2 MiB / (616 GB/s x e_dram) = 4.934 us. The first round's trip is the first of those
    # 1,024; the last store's acknowledgement follows: 317 ns + 324.608 us = 324.925 us (the earlier
    # 2 L + T_lat counted the first trip twice: 325.242 us). Above the 2.0-us floor, so the body.
    ops = _cat(2**18, 1)
    terms = kernel_terms(ops, RTX2080TI.gpu, frozenset(), RTX2080TI.name)
    assert terms["bw"][0] * 1e6 == pytest.approx(4.934, rel=1e-3)
    assert terms["lat"][0] * 1e6 == pytest.approx(317e-3 + 1024 * 317e-3, rel=1e-9)
    assert body_seconds(ops, RTX2080TI)[0] * 1e6 == pytest.approx(324.925, rel=1e-9)
    # 2^12 elements: 16 rounds, 16 x 317 ns + 317 ns = 5.389 us
    small = kernel_terms(_cat(2**12, 1), RTX2080TI.gpu, frozenset(), RTX2080TI.name)
    assert small["lat"][0] * 1e6 == pytest.approx(17 * 317e-3, rel=1e-9)


def test_fill_function_by_hand() -> None:
    gpu = MI300X.gpu  # L = 434 ns
    assert FILL_ROUND_TRIPS == 2
    assert fill_seconds(gpu) == pytest.approx(868e-9)
    assert fill_seconds(gpu, loads=False) == pytest.approx(434e-9)
    assert fill_seconds(gpu, frozenset({"dram_latency"})) == 0.0
    # the one-workgroup kernel: loads back at L, stores acknowledged at 2 L
    assert minimal_kernel_seconds(434e-9) == pytest.approx(868e-9)
    lat = np.array([1e-6, 3e-6, 1.2e-6, 0.0])
    bw = np.array([2e-6, 1e-6, 1e-6, 0.0])
    out = latency_with_fill(lat, bw, np.array([1.0, 1.0, 1.0, 0.0]), gpu)
    # bandwidth-bound: 0.434 + max(0.434 + 2, 1) = 2.868 us; latency-bound: 0.434 + max(1.434, 3)
    # = 3.434 us (one trip, not two, over T_lat); between: 0.434 + max(1.434, 1.2) = 1.868 us; an op
    # moving no DRAM bytes keeps its term
    assert out == pytest.approx([2.868e-6, 3.434e-6, 1.868e-6, 0.0])
    # ops that load nothing wait only for their stores' acknowledgement: 0.434 + max(T_bw, T_lat)
    stores_only = latency_with_fill(np.zeros(2), np.array([1e-6, 0.0]), np.ones(2), gpu,
                                    read_bytes=np.zeros(2))  # fmt: skip
    assert stores_only == pytest.approx([1.434e-6, 0.434e-6])
    same = latency_with_fill(lat, bw, np.ones(4), gpu, frozenset({"dram_latency"}))
    assert same == pytest.approx(lat)


@settings(max_examples=200, deadline=None)
@given(
    lat_us=st.floats(0.0, 1e4),
    bw_us=st.floats(0.0, 1e4),
    latency_ns=st.floats(1.0, 2000.0),
    more=st.floats(1.0, 10.0),
    loads=st.booleans(),
)
def test_fill_monotone(lat_us, bw_us, latency_ns, more, loads) -> None:
    """Physics on the pure form: slower steady-state terms (more bytes, fewer bytes in flight, less
    bandwidth) and a longer round trip never make the kernel faster; the fill adds at least its
    last store's round trip and at most its two."""
    gpu = MI300X.gpu.model_copy(update={"dram_latency_ns": latency_ns})
    slower = MI300X.gpu.model_copy(update={"dram_latency_ns": latency_ns * more})
    one, reads = np.ones(1), np.array([1.0 if loads else 0.0])
    lat, bw = np.array([lat_us * 1e-6]), np.array([bw_us * 1e-6])
    base = latency_with_fill(lat, bw, one, gpu, read_bytes=reads)[0]
    tol = 1e-12 + 1e-12 * base
    assert latency_with_fill(lat * more, bw, one, gpu, read_bytes=reads)[0] >= base - tol
    assert latency_with_fill(lat, bw * more, one, gpu, read_bytes=reads)[0] >= base - tol
    assert latency_with_fill(lat, bw, one, slower, read_bytes=reads)[0] >= base - tol
    steady = max(lat[0], bw[0])
    trips = 2 if loads else 1
    assert steady + latency_ns * 1e-9 - tol <= base <= steady + trips * latency_ns * 1e-9 + tol


def _without_fill(ops: pd.DataFrame, hw) -> float:
    """The model with the steady-state terms alone, max(T_lat, T_bw) in place of the fill."""
    saved = terms_module.latency_with_fill
    terms_module.latency_with_fill = lambda lat, bw, *args, **kwargs: np.maximum(lat, bw)
    try:
        return body_seconds(ops, hw)[0]
    finally:
        terms_module.latency_with_fill = saved


@settings(max_examples=40, deadline=None)
@given(
    log2_n=st.integers(min_value=6, max_value=28),
    blocks=st.integers(min_value=1, max_value=100_000),
    preset=st.sampled_from(["mi300x", "dgx1-v100", "dgx-a100", "dgx-h100", "mi210", "rtx2080ti"]),
    cat=st.booleans(),
)
def test_fill_is_between_zero_and_two_round_trips(log2_n, blocks, preset, cat) -> None:
    """Physics: the fill never makes a kernel faster, adds at most its two round trips, and the
    breakdown's dram_latency idealization removes it."""
    hw = load_hw(preset)
    ops = _cat(2**log2_n, min(blocks, 2**log2_n)) if cat else _add(2**log2_n, blocks)
    with_fill = body_seconds(ops, hw)[0]
    without = _without_fill(ops, hw)
    assert without <= with_fill <= without + 2 * hw.gpu.dram_latency_ns * 1e-9 * (1 + 1e-9)
    idealized = kernel_terms(ops, hw.gpu, frozenset({"dram_latency"}), hw.name)["lat"][0]
    assert idealized == 0.0


@settings(max_examples=25, deadline=None)  # the suite's time budget
@given(
    log2_n=st.integers(min_value=6, max_value=26),
    blocks=st.integers(min_value=1, max_value=4096),
    more=st.floats(1.0, 8.0),
    preset=st.sampled_from(["mi300x", "dgx1-v100", "dgx-h100", "mi210", "rtx2080ti"]),
    cat=st.booleans(),
)
def test_kernel_invariants(log2_n, blocks, more, preset, cat) -> None:
    """More bytes never faster; more bytes in flight (more threads), more bandwidth and a lower
    latency never slower: the whole kernel model, fill included, on kernels either side of the
    latency-bound line (one-element-per-trip copies and whole-share element-wise kernels)."""
    hw = load_hw(preset)
    make = _cat if cat else _add
    n = 2**log2_n
    base = body_seconds(make(n, blocks), hw)[0]
    tol = 1e-9 * base
    assert body_seconds(make(int(n * more), blocks), hw)[0] >= base - tol
    # twice the threads per block: twice the bytes in flight, the same bytes
    assert body_seconds(make(n, blocks, 512), hw)[0] <= base + tol
    faster = hw.model_copy(deep=True)
    faster.gpu.dram_bw_gbs = hw.gpu.dram_bw_gbs * more
    assert body_seconds(make(n, blocks), faster)[0] <= base + tol
    quicker = hw.model_copy(deep=True)
    quicker.gpu.dram_latency_ns = hw.gpu.dram_latency_ns / more
    assert body_seconds(make(n, blocks), quicker)[0] <= base + tol
