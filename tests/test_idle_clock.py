"""A kernel that starts on a GPU idle for 10 ms or more runs its cycle-bound time at the GPU's
published idle clock (archsim.perf.idle_clock): golden values worked by hand, invariants, a fixture.

Hand-worked on the mi300x preset (2100 MHz, 2.0-us kernel floor; idle clock 739 MHz from the
gpu-benches clock probe): a one-workgroup kernel after a 20-ms gap takes 2.0 x 2100 / 739 =
5.6834 us; the same kernel 5 us after the previous one ends, or first in the trace, 2.0 us.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.idle_clock import (
    IDLE_WINDOW_US,
    at_idle_clock,
    idle_clock_factor,
    idle_clock_mhz,
    idle_gaps_us,
)
from archsim.perf.kernel import body_seconds, predict_op_seconds
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture

MI300X = load_hw("mi300x")
MI210 = load_hw("mi210")
H100 = load_hw("dgx-h100")
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"


def timeline(starts_us: list[float], durs_us: list[float], **extra) -> pd.DataFrame:
    """One-workgroup fill kernels of 4 B at the given start times (one device)."""
    rows = [
        {"kind": "kernel", "name": FILL, "device": 0, "start_us": s, "dur_us": d,
         "dtype": "float32", "bytes_written": 4.0, "grid_x": 1, "grid_y": 1, "grid_z": 1,
         "block_x": 64, "block_y": 1, "block_z": 1, **extra}
        for s, d in zip(starts_us, durs_us, strict=True)
    ]  # fmt: skip
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def test_published_idle_clocks() -> None:
    assert idle_clock_mhz(MI300X.gpu, MI300X.name) == 739.0  # gpu-benches mi300x.txt, first sample
    assert idle_clock_mhz(MI210.gpu, MI210.name) == 800.0  # gpu-benches mi210.txt
    assert idle_clock_mhz(load_hw("mi250x").gpu, "mi250x") == 800.0  # same CDNA2 die
    assert idle_clock_mhz(H100.gpu, H100.name) is None  # h100_pcie.txt: 1755 MHz at every sample
    assert IDLE_WINDOW_US == 10_000.0


def test_gaps_golden() -> None:
    # ends at 3, 20,003 + 4 = 20,007, and 20,012: gaps NaN (first), 20,000 us, 5 us
    ops = timeline([0.0, 20_003.0, 20_012.0], [3.0, 4.0, 2.0])
    gaps = idle_gaps_us(ops)
    assert np.isnan(gaps[0])
    assert gaps[1:] == pytest.approx([20_000.0, 5.0])
    # an op that overlaps a longer earlier one (another stream) waited on no idle device: gap < 0
    overlap = timeline([0.0, 10.0, 50_000.0], [100.0, 5.0, 1.0])
    assert idle_gaps_us(overlap)[1:] == pytest.approx([-90.0, 49_900.0])
    # devices are separate timelines; CPU ops and ops without a start are not device ops
    two = timeline([0.0, 15_000.0], [1.0, 1.0])
    two.loc[1, "device"] = 1
    assert np.isnan(idle_gaps_us(two)).all()


def test_floor_after_an_idle_gap_golden_on_mi300x() -> None:
    ops = timeline([0.0, 20_003.0, 20_012.0], [3.0, 4.0, 2.0])
    seconds = body_seconds(ops, MI300X)
    assert MI300X.gpu.kernel_min_us == 2.0 and MI300X.gpu.clock_mhz == 2100
    assert seconds * 1e6 == pytest.approx([2.0, 2.0 * 2100 / 739, 2.0])  # 5.6834 us
    # CDNA2 (mi210, 3.7-us floor at 1700 MHz, idle 800): 3.7 x 1700 / 800 = 7.8625 us
    assert body_seconds(ops, MI210)[1] * 1e6 == pytest.approx(3.7 * 1700 / 800)
    # NVIDIA: no published drop, so the same kernel costs the same after any gap
    h100 = body_seconds(ops, H100)
    assert h100 == pytest.approx(np.full(3, H100.gpu.kernel_min_us * 1e-6))


def test_dram_bandwidth_is_not_slowed() -> None:
    terms = {"comp": np.array([1.0]), "bw": np.array([10.0]), "lat": np.array([10.5]),
             "mem": np.array([2.0]), "math": np.array([0.5])}  # fmt: skip
    slow = at_idle_clock(terms, np.array([2.0]))
    # comp, mem, math x 2; bw kept; lat = 10.5 + (2 - 1) x (10.5 - 10) = 11.0
    assert slow["comp"] == pytest.approx([2.0]) and slow["mem"] == pytest.approx([4.0])
    assert slow["bw"] == pytest.approx([10.0]) and slow["lat"] == pytest.approx([11.0])
    # a 1-GB stream kernel after a long gap is DRAM-bound: only its round trips and its fixed cost
    # slow down (the two fill round trips of a bandwidth-bound kernel, archsim.perf.pipeline_fill,
    # and CDNA3's fixed cost in series, archsim.perf.dispatch_overhead, the floor less the model's
    # one-workgroup body 2 L: (2 x 434 + 2000 - 2 x 434) ns x (2100 / 739 - 1) = 3.68 us of
    # ~252 us), not its 2.84x-slower-clock time
    big = timeline([0.0, 50_000.0], [1.0, 1.0], bytes_read=5e8, bytes_written=5e8)
    big.loc[:, ["grid_x", "block_x"]] = [65_536, 256]
    seconds = body_seconds(big, MI300X)
    assert seconds[1] - seconds[0] == pytest.approx((2100 / 739 - 1) * 2000e-9, rel=1e-6)
    assert seconds[1] - seconds[0] < 0.02 * seconds[0]


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 5e4), min_size=1, max_size=6),
    sizes=st.lists(st.floats(0.0, 1e8), min_size=7, max_size=7),
    preset=st.sampled_from(["mi300x", "mi210", "dgx-h100"]),
)
def test_never_faster_than_a_busy_gpu(gaps, sizes, preset) -> None:
    hw = load_hw(preset)
    starts, t = [], 0.0
    for gap in [0.0, *gaps]:
        starts.append(t)
        t += 5.0 + gap
    ops = timeline(starts, [5.0] * len(starts))
    ops["bytes_read"] = sizes[: len(starts)]
    busy = ops.drop(columns=["start_us"]).assign(start_us=np.nan)
    idle = body_seconds(ops, hw)
    assert np.all(idle >= body_seconds(busy, hw) * (1 - 1e-12))
    factor = idle_clock_factor(ops, hw.gpu, hw.name)
    assert np.all(factor >= 1.0) and np.all(idle <= body_seconds(busy, hw) * factor.max() + 1e-15)


def test_predict_onto_another_gpu_uses_the_targets_idle_clock() -> None:
    # measured on an MI300X: 5 us after a 20-ms gap; onto an H100 (no idle clock) the ratio
    # H100 model / MI300X model takes the idle slowdown out: 5 x 3.0 / (2.0 x 2100 / 739)
    ops = timeline([0.0, 20_003.0], [3.0, 5.0])
    onto_h100 = predict_op_seconds(ops, H100, source=MI300X, include_launch=False)
    floor = H100.gpu.kernel_min_us
    assert onto_h100[1] * 1e6 == pytest.approx(5.0 * floor / (2.0 * 2100 / 739))
    same = predict_op_seconds(ops, MI300X, source=MI300X, include_launch=False)
    assert same * 1e6 == pytest.approx([3.0, 5.0])  # onto itself: the measured times


def test_normalization_bench_kernels_after_long_gaps() -> None:
    """The MI300X bench's one-workgroup fills and copies that follow >= 10 ms of idle GPU take
    3.9-4.5 us (2.0-us floor): the model now says 5.68, from published figures only."""
    from archsim.perf.calibrate import measured_ops
    from archsim.trace.ingest import ingest

    path = kineto_fixture("mi300x_normalization_bench.json.gz")
    ops = measured_ops(ingest(path).ops).reset_index(drop=True)
    gaps = idle_gaps_us(ops)
    late = np.nan_to_num(gaps, nan=0.0) >= IDLE_WINDOW_US
    assert late.sum() == 9  # of 173 device ops
    factor = idle_clock_factor(ops, MI300X.gpu, MI300X.name)
    assert factor[late] == pytest.approx(np.full(9, 2100 / 739))
    assert np.all(factor[~late] == 1.0)
    model = body_seconds(ops, MI300X)
    busy = body_seconds(ops.assign(start_us=np.nan), MI300X)
    measured = ops["dur_us"].to_numpy(dtype=float) * 1e-6
    # closer to what the trace measured on those kernels than the busy-GPU model
    assert np.abs(model - measured)[late].sum() < np.abs(busy - measured)[late].sum()
    assert np.array_equal(model[~late], busy[~late])
