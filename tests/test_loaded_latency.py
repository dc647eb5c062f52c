"""DRAM latency under load (archsim.perf.loaded_latency): curves from published stream tables worked
by hand, the Little's-law fixed point against its closed form, a kernel on the dgx-h100 preset, and
the physics invariants (hypothesis): latency monotone in load, bandwidth never above the cap or the
achievable rate, time never shorter with more bytes, never slower with more bytes in flight."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.efficiency import ACHIEVED
from archsim.perf.launch_terms import launch_terms as _terms
from archsim.perf.loaded_latency import (
    CURVES,
    TABLES,
    LatencyCurve,
    StreamTable,
    curve_from_table,
    dram_load,
    latency_curve,
    latency_multiplier,
    loaded_bandwidth,
)
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

H100 = load_hw("dgx-h100")
LEGACY = "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<float>>"


def _legacy_copy(read: float, blocks: int = 2112) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": LEGACY, "op_class": "copy", "dtype": "float32",
        "bytes_read": read, "bytes_written": read, "flops": 0.0,
        "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": 128, "block_y": 1,
        "block_z": 1, "registers_per_thread": 32, "shared_memory_bytes": 0,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _quadratic_bandwidth(curve: LatencyCurve, in_flight: float, l0_s: float, w_bps: float) -> float:
    """bw x m(bw / W) = C / L0 solved in closed form on the segment of the piecewise-linear m where
    it lies, one op at a time (independent of the module's vectorized solve); flat beyond the last
    knot."""
    u, m = np.asarray(curve.utilization), np.asarray(curve.multiplier)
    target = in_flight / l0_s
    knots = w_bps * u * m  # bw x m(bw / W) at each knot, increasing
    if target >= knots[-1]:
        return target / m[-1]
    k = int(np.searchsorted(knots, target, side="right")) - 1
    slope = (m[k + 1] - m[k]) / (u[k + 1] - u[k])
    a, b = slope / w_bps, m[k] - slope * u[k]
    if a == 0.0:  # a flat segment: bw x m_k = C / L0
        return target / b
    return (-b + np.sqrt(b * b + 4 * a * target)) / (2 * a)


def test_curve_from_a_small_table_worked_by_hand() -> None:
    # One SM, 100 GB/s datasheet, 500 ns pointer chase; 8 B per thread.
    #   100 thr:    800 B /  1 GB/s =  800 ns (u 0.01)   light: median 800 ns -> turnover 300 ns
    #   200 thr:  1,600 B /  2 GB/s =  800 ns (u 0.02)   light
    #   4000 thr: 32,000 B / 40 GB/s =  800 ns (u 0.40)  -> (800 - 300) / 500 = 1.0
    #   8000 thr: 64,000 B / 64 GB/s = 1000 ns (u 0.64)  -> 1.4
    #   16000 thr: 128,000 B / 80 GB/s = 1600 ns (u 0.80) -> 2.6
    #   32000 thr: 80 GB/s again: past the peak, dropped
    table = StreamTable("toy", 1, (100, 200, 4000, 8000, 16000, 32000),
                        (1, 2, 40, 64, 80, 80), 500.0, 100.0, "by hand")  # fmt: skip
    curve = curve_from_table(table)
    assert curve.utilization == pytest.approx((0.0, 0.01, 0.02, 0.40, 0.64, 0.80))
    assert curve.multiplier == pytest.approx((1.0, 1.0, 1.0, 1.0, 1.4, 2.6))
    assert latency_multiplier(curve, np.array([0.72, 0.95]))[0] == pytest.approx(2.0)
    assert latency_multiplier(curve, np.array([0.95]))[0] == pytest.approx(2.6)  # flat beyond


def test_hopper_curve_from_the_h100_pcie_table_worked_by_hand() -> None:
    # te42kyfo/gpu-benches cuda-stream/h100_pcie.txt: 114 SMs, two blocks per SM.
    # Light rows (under 200 GB/s): 7,296 thr x 8 B / 96 GB/s = 608.0 ns, 14,592 x 8 / 189 =
    # 617.65 ns: median 612.83 ns, less the 375-ns pointer chase: a 237.83-ns turnover.
    # Last row: 233,472 thr x 8 B / 1,942 GB/s = 961.78 ns -> (961.78 - 237.83) / 375 = 1.9305
    # at u = 1942 / 2000 = 0.971.
    curve = CURVES["hopper"]
    assert curve.utilization[-1] == pytest.approx(0.971)
    assert curve.multiplier[-1] == pytest.approx((961.7796 - 237.8254) / 375, rel=1e-5)
    assert curve.multiplier[-1] == pytest.approx(1.9305, abs=1e-4)


def test_fixed_point_of_a_linear_curve() -> None:
    # m(u) = 1 + u, L0 = 1 us, W = 1 TB/s: bw (1 + bw / W) = C / L0.
    # C = 0.75 MB: x + x^2 = 0.75 -> x = 0.5: 0.5 TB/s at 1.5 us.
    # C = 2 MB: x + x^2 = 2 -> x = 1: 1 TB/s (cap 0.5 TB/s: 0.5).
    curve = LatencyCurve((0.0, 1.0), (1.0, 2.0), "linear")
    bw = loaded_bandwidth(np.array([0.75e6, 2e6, 0.0]), 1e-6, 1e12, np.inf, curve)
    assert bw == pytest.approx([0.5e12, 1e12, 0.0], rel=1e-12)
    assert loaded_bandwidth(np.array([2e6]), 1e-6, 1e12, 0.5e12, curve)[0] == 0.5e12
    # no curve: Little's law at the unloaded latency, min(cap, C / L0)
    flat = loaded_bandwidth(np.array([0.75e6, 2e6]), 1e-6, 1e12, 1.5e12, None)
    assert flat == pytest.approx([0.75e12, 1.5e12])


def test_little_term_of_a_legacy_copy_on_h100() -> None:
    # elementwise_kernel<128, 4> (one element of each input operand per round trip, its store posted:
    # archsim.perf.in_flight), 1,920 blocks of 128 threads, up to 16 resident per SM: all 245,760
    # threads at once. R = 2 MB loaded (2 MB written, posted), 2 MB / 245,760 / 4 = 2.03 B per thread,
    # at least one 4-B element: C = 983,040 B in flight.
    # Loaded (the Hopper curve): bw x m(bw / 3350 GB/s) = 983,040 B / 343 ns = 2.866 TB/s gives
    # 2.1195 TB/s, 0.944 us for the 2 MB loaded, hidden under T_bw = 4 MB / (3350 GB/s x 0.82)
    # = 1.456 us. With the pipeline fill, L + max(L + T_bw, T_lat) (archsim.perf.pipeline_fill:
    # bandwidth-bound, both round trips add): 343 ns + max(343 ns + 1.456 us, 0.944 us) = 2.142 us.
    ops = _legacy_copy(2e6, blocks=1920)
    bw = _quadratic_bandwidth(CURVES["hopper"], 983_040.0, 343e-9, 3350e9)
    assert bw == pytest.approx(2.1195e12, rel=1e-4)
    expected = 343e-9 + max(343e-9 + 4e6 / (3350e9 * ACHIEVED["hopper"].dram), 2e6 / bw)
    assert expected == pytest.approx(2.1421e-6, rel=1e-4)
    terms = kernel_terms(ops, H100.gpu, frozenset(), H100.name)
    assert terms["lat"][0] == pytest.approx(expected, rel=1e-9)
    # the dram_latency idealization removes it, dram_bw leaves the unloaded latency (m = 1)
    assert kernel_terms(ops, H100.gpu, frozenset({"dram_latency"}), H100.name)["lat"][0] == 0.0
    # (unlimited bandwidth, so no utilization): latency-bound, 2 MB / 983,040 B = 2.03 rounds of
    # 343 ns, the first of them the first loads' round trip, then the last store's: (1 + 2.03) x
    # 343 ns = 1.041 us (the fill once counted the first trip twice: 1.384 us)
    unloaded = kernel_terms(ops, H100.gpu, frozenset({"dram_bw"}), H100.name)["lat"][0]
    assert unloaded == pytest.approx((1 + 2e6 / 983_040) * 343e-9, rel=1e-9)


def test_tables_are_consistent_and_generations_without_one_borrow() -> None:
    for gen, table in TABLES.items():
        assert len(table.threads_per_sm) == len(table.read_gbs), gen
        assert max(table.read_gbs) <= table.datasheet_gbs, gen
    # no table of their own: the nearest published generation's curve, never a flat one
    # (tests/test_curve_borrowing.py checks the whole rule)
    for gen, source in (("turing", "volta"), ("maxwell", "volta"), ("blackwell", "hopper")):
        assert latency_curve(gen) is CURVES[source]
        assert dram_load(900.0, gen, frozenset()).curve is CURVES[source]
    assert latency_curve("cdna") is CURVES["cdna2"]
    # Pascal: no GP100 table; the nearest measured generation's (Volta, HBM2 too), not a flat curve
    assert latency_curve("pascal") is CURVES["volta"]


@pytest.mark.parametrize("gen", sorted(CURVES))
def test_curves_start_unloaded_and_rise(gen: str) -> None:
    curve = CURVES[gen]
    u, m = np.asarray(curve.utilization), np.asarray(curve.multiplier)
    assert u[0] == 0.0 and m[0] == 1.0
    assert np.all(np.diff(u) > 0) and np.all(np.diff(m) >= 0) and u[-1] <= 1.0
    assert 1.5 < m[-1] < 5.0  # near saturation every measured GPU waits 1.5-5x the pointer chase


@settings(max_examples=60, deadline=None)
@given(
    gen=st.sampled_from(sorted(CURVES)),
    u=st.lists(st.floats(0.0, 1.5), min_size=2, max_size=8),
)
def test_latency_is_monotone_in_load(gen: str, u: list[float]) -> None:
    ordered = np.sort(np.asarray(u))
    m = latency_multiplier(CURVES[gen], ordered)
    assert np.all(np.diff(m) >= 0) and np.all(m >= 1.0)


@settings(max_examples=60, deadline=None)
@given(
    gen=st.sampled_from(sorted(CURVES)),
    in_flight=st.lists(st.floats(0.0, 5e7), min_size=2, max_size=6),
    l0_ns=st.floats(200.0, 700.0),
    w_gbs=st.floats(300.0, 8000.0),
    cap_share=st.floats(0.5, 1.0),
)
def test_fixed_point_bounds_monotonicity_and_closed_form(
    gen: str, in_flight: list[float], l0_ns: float, w_gbs: float, cap_share: float
) -> None:
    curve, l0, w = CURVES[gen], l0_ns * 1e-9, w_gbs * 1e9
    c = np.sort(np.asarray(in_flight))
    bw = loaded_bandwidth(c, l0, w, cap_share * w, curve)
    assert np.all(bw <= cap_share * w * (1 + 1e-12))  # never above the cap
    assert np.all(bw <= c / l0 * (1 + 1e-12))  # never faster than the unloaded latency allows
    assert np.all(np.diff(bw) >= -1e-6 * bw[1:])  # more in flight never slower
    closed = np.array([min(cap_share * w, _quadratic_bandwidth(curve, x, l0, w)) for x in c])
    # rel 1e-8: with under a byte in flight (c / (W L0) ~ 1e-13) the two ways of solving the
    # quadratic cancel differently, 1.7e-9 apart (gen 'ada', in flight [0, 0.4375] B, L0 688 ns,
    # W 5291 GB/s: 635,901.1459 vs 635,901.1469 B/s)
    assert bw == pytest.approx(closed, rel=1e-8, abs=1e-3)


@settings(max_examples=40, deadline=None)
@given(
    read=st.lists(st.floats(1e4, 5e9), min_size=2, max_size=5),
    blocks=st.integers(1, 20000),
)
def test_time_never_shorter_with_more_bytes_and_never_above_achievable(
    read: list[float], blocks: int
) -> None:
    reads = np.sort(np.asarray(read))
    ops = pd.concat([_legacy_copy(r, blocks) for r in reads], ignore_index=True)
    terms = kernel_terms(ops, H100.gpu, frozenset(), H100.name)
    body = np.maximum.reduce([terms["comp"], terms["bw"], terms["lat"], terms["mem"]])
    assert np.all(np.diff(body) >= -1e-12 * body[1:])
    achievable = H100.gpu.dram_bw_gbs * 1e9 * ACHIEVED["hopper"].dram
    assert np.all(2 * reads / body <= achievable * (1 + 1e-9))


@settings(max_examples=40, deadline=None)
@given(
    per_thread=st.lists(st.floats(1.0, 256.0), min_size=2, max_size=5),
    dram=st.floats(1e5, 1e9),
    blocks=st.integers(1, 5000),
)
def test_more_bytes_in_flight_never_slow_a_kernel_and_load_never_speeds_it(
    per_thread: list[float], dram: float, blocks: int
) -> None:
    gpu = H100.gpu
    load = dram_load(gpu.dram_bw_gbs, "hopper", frozenset())
    n = len(per_thread)
    ones = np.ones(n)
    args = (np.zeros(n), dram * ones, blocks * ones, 256 * ones, 32 * ones, 0 * ones,
            512 * ones, np.zeros(n, dtype=bool), 64 * ones, gpu, frozenset(), 1.0)  # fmt: skip
    bpt = np.sort(np.asarray(per_thread))
    loaded = _terms(*args, bpt, load)["lat"]
    assert np.all(np.diff(loaded) <= 1e-12 * loaded[:-1])
    assert np.all(loaded >= _terms(*args, bpt, None)["lat"] * (1 - 1e-12))
