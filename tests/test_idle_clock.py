"""A kernel costs the same whatever the idle time before it (archsim.perf.idle_clock): the gap
reader worked by hand, the model's independence of the gaps (golden, invariant, across GPUs), and
the real fixture whose measurements refute an idle-clock slowdown.

Hand-worked on the mi300x preset (2.0-us kernel floor): a one-workgroup fill takes 2.0 us first in
the trace, after a 20-ms gap, and 5 us after the previous kernel ends.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.idle_clock import IDLE_WINDOW_US, idle_gaps_us
from archsim.perf.kernel import body_seconds, predict_op_seconds
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture

MI300X = load_hw("mi300x")
MI210 = load_hw("mi210")
H100 = load_hw("dgx-h100")
FILL = "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>>"
# gpu-benches' MI300X probe: 739 MHz 10 ms after a short kernel, against the preset's 2,100 MHz
PROBE_IDLE_MHZ = 739.0


def timeline(starts_us: list[float], durs_us: list[float], **extra) -> pd.DataFrame:
    """One-workgroup fill kernels of 4 B at the given start times (one device)."""
    rows = [
        {"kind": "kernel", "name": FILL, "device": 0, "start_us": s, "dur_us": d,
         "dtype": "float32", "bytes_written": 4.0, "grid_x": 1, "grid_y": 1, "grid_z": 1,
         "block_x": 64, "block_y": 1, "block_z": 1, **extra}
        for s, d in zip(starts_us, durs_us, strict=True)
    ]  # fmt: skip
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def test_probe_window() -> None:
    assert IDLE_WINDOW_US == 10_000.0  # gpu-clock.cuh: usleep(10000) before reading the clock


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


def test_a_fill_after_an_idle_gap_costs_the_floor() -> None:
    ops = timeline([0.0, 20_003.0, 20_012.0], [3.0, 4.0, 2.0])
    assert MI300X.gpu.kernel_min_us == 2.0
    assert body_seconds(ops, MI300X) * 1e6 == pytest.approx([2.0, 2.0, 2.0])
    assert body_seconds(ops, MI210) * 1e6 == pytest.approx([3.7, 3.7, 3.7])  # CDNA2 floor
    assert body_seconds(ops, H100) == pytest.approx(np.full(3, H100.gpu.kernel_min_us * 1e-6))


@settings(max_examples=40, deadline=None)
@given(
    gaps=st.lists(st.floats(0.0, 5e4), min_size=1, max_size=6),
    sizes=st.lists(st.floats(0.0, 1e8), min_size=7, max_size=7),
    preset=st.sampled_from(["mi300x", "mi210", "dgx-h100"]),
)
def test_price_does_not_depend_on_the_gaps(gaps, sizes, preset) -> None:
    hw = load_hw(preset)
    starts, t = [], 0.0
    for gap in [0.0, *gaps]:
        starts.append(t)
        t += 5.0 + gap
    ops = timeline(starts, [5.0] * len(starts))
    ops["bytes_read"] = sizes[: len(starts)]
    no_timeline = ops.assign(start_us=np.nan)
    assert np.array_equal(body_seconds(ops, hw), body_seconds(no_timeline, hw))


def test_predict_onto_another_gpu_after_a_gap() -> None:
    # measured on an MI300X: 5 us after a 20-ms gap; onto an H100 the ratio of floors scales it
    ops = timeline([0.0, 20_003.0], [3.0, 5.0])
    onto_h100 = predict_op_seconds(ops, H100, source=MI300X, include_launch=False)
    assert onto_h100[1] * 1e6 == pytest.approx(5.0 * H100.gpu.kernel_min_us / 2.0)
    same = predict_op_seconds(ops, MI300X, source=MI300X, include_launch=False)
    assert same * 1e6 == pytest.approx([3.0, 5.0])  # onto itself: the measured times


def test_normalization_bench_refutes_an_idle_clock() -> None:
    """The MI300X bench's kernels after >= 10 ms idle: priced as on a busy GPU, because the trace
    shows they did not run at the probe's 739 MHz (archsim.perf.idle_clock's docstring)."""
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.efficiency import generation
    from archsim.perf.issue_rate_amd import cdna_issue_seconds
    from archsim.perf.occupancy import blocks_per_sm
    from archsim.perf.terms import launch_shape
    from archsim.trace.ingest import ingest

    ops = measured_ops(ingest(kineto_fixture("mi300x_normalization_bench.json.gz")).ops)
    ops = ops.reset_index(drop=True)
    late = np.nan_to_num(idle_gaps_us(ops), nan=0.0) >= IDLE_WINDOW_US
    assert late.sum() == 9  # of 173 device ops
    assert np.array_equal(
        body_seconds(ops, MI300X), body_seconds(ops.assign(start_us=np.nan), MI300X)
    )
    # the batch-norm statistics kernel after 332 ms idle: its counted instructions alone need
    # 11,424 SIMD issue cycles, more than 739 MHz gives in its measured 11.38 us
    names = ops["name"].astype(str)
    stats = np.flatnonzero(
        late & names.str.contains("batch_norm_collect_statistics_kernel").to_numpy()
    )
    assert len(stats) == 1
    blocks, threads, regs, smem = launch_shape(ops)
    launch = (blocks, threads, blocks_per_sm(threads, regs, smem, MI300X.gpu))
    issue_s = cdna_issue_seconds(ops, launch, MI300X.gpu, generation(MI300X.gpu, MI300X.name),
                                 frozenset())[stats[0]]  # fmt: skip
    issue_cycles = issue_s * MI300X.gpu.clock_mhz * 1e6
    assert issue_cycles == pytest.approx(11_424)
    min_clock_mhz = issue_cycles / ops["dur_us"][stats[0]]  # issue alone, the clock at least
    assert min_clock_mhz == pytest.approx(1_004, abs=1) and min_clock_mhz > PROBE_IDLE_MHZ
    # every kernel after such a gap but MIOpen's cold first MeanVariance (7.7x) takes less than
    # 2,100 / 739 = 2.84x the median of the same kernel (name, grid, shapes) later on
    key = names + "|" + ops["grid_x"].astype(str) + "|" + ops["input_dims"].astype(str)
    for i in np.flatnonzero(late):
        later = ops["dur_us"][(key == key[i]).to_numpy() & (np.arange(len(ops)) > i)]
        ratio = ops["dur_us"][i] / later.median()
        cold = names[i] == "MIOpenBatchNormFwdTrainSpatialMeanVariance"
        assert (ratio > 5.0) if cold else (ratio < MI300X.gpu.clock_mhz / PROBE_IDLE_MHZ)
