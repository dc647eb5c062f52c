"""Physics invariants of the per-op GPU model (archsim.perf.kernel.body_seconds) over every GPU preset.

tests/test_physics.py checks the system's throughput; these check each op's predicted time, where a
defect cannot hide behind a bottleneck elsewhere: a knob that only adds or speeds up a resource never
makes any op slower, and every idealization of the breakdown only removes time.

Ops: the bundled traces' (always here) and, where ../shared/fixtures/kineto/ is beside the checkout,
real GPU traces' (traced grids, kernel names, CDNA3 kernels), one row per distinct op.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.hw.presets import list_presets
from archsim.perf.inductor_loops import looped_norm_rows
from archsim.perf.kernel import body_seconds
from archsim.perf.passes import row_passes
from archsim.perf.terms import IDEALIZATIONS
from archsim.trace import load
from tests.conftest import KINETO_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
TRACES = ("alexnet-b1-fp32", "alexnet-b32-fp16", "dqn-pong-cpu", "r2d2-seed-2x2-cpu")
FIXTURES = (
    "a100_alexnet_forward.json.gz", "h100_timesformer_inference.json.gz",
    "mi300x_normalization_bench.json.gz", "mi300x_sd35_inference.json.gz",
    "v100_resnet50_train_2021.json.gz",
)  # fmt: skip
GPU_PRESETS = tuple(p for p in list_presets() if load_hw(p).gpu is not None)
# Columns that place an op in the trace, not what it is (as tests/test_newer_gpu.py).
PLACEMENT = (
    "op_id", "profiler_step", "step_id", "pid", "tid", "correlation", "start_us", "dur_us",
    "launch_start_us", "launch_dur_us", "stream", "device", "launch_op", "phase",
)  # fmt: skip
EXAMPLES = settings(
    max_examples=10, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
REL = 1e-9  # float noise only: a model defect this catches was 3% to 50%


@functools.cache
def _ops() -> pd.DataFrame:
    from archsim.trace.ingest import ingest

    frames = [load(ROOT / "traces" / name).ops for name in TRACES]
    frames += [ingest(KINETO_FIXTURES / f).ops for f in FIXTURES if (KINETO_FIXTURES / f).exists()]
    ops = pd.concat(frames, ignore_index=True)
    what = ops[[c for c in ops.columns if c not in PLACEMENT]].astype(str)
    return ops[~what.duplicated()].reset_index(drop=True)


def _grown(preset: str, key: str, factor: float) -> str:
    section, field = key.split(".")
    value = getattr(getattr(load_hw(preset), section), field)
    return f"{key}={value * factor}"


def _slower(before: np.ndarray, after: np.ndarray) -> tuple[int, float, int]:
    """(ops slower after, worst ratio, its row)."""
    worse = after > before * (1 + REL) + 1e-15
    ratio = after / np.maximum(before, 1e-30)
    i = int(np.argmax(np.where(worse, ratio, 0.0)))
    return int(worse.sum()), float(ratio[i]), i


# (key, factor): the resource grows (factor > 1) or its latency or floor shrinks (factor < 1).
HELPS = (
    ("gpu.clock_mhz", 1.5), ("gpu.dram_bw_gbs", 2.0), ("gpu.dram_latency_ns", 0.5),
    ("gpu.dram_latency_ns", 0.8), ("gpu.l2_size_mb", 2.0), ("gpu.l2_bw_gbs", 2.0),
    ("gpu.fp32_flops_per_clk_per_sm", 2.0), ("gpu.fp16_flops_per_clk_per_sm", 2.0),
    ("gpu.tensor_flops_per_clk_per_sm", 2.0), ("gpu.kernel_min_us", 0.5),
    ("host_link.bw_gbs", 2.0), ("host_link.latency_us", 0.5), ("memory.host_dram_bw_gbs", 2.0),
)  # fmt: skip


@EXAMPLES
@given(preset=st.sampled_from(GPU_PRESETS), knob=st.sampled_from(HELPS))
def test_a_faster_or_larger_resource_never_makes_an_op_slower(preset, knob):
    key, factor = knob
    ops = _ops()
    before = body_seconds(ops, load_hw(preset))
    after = body_seconds(ops, load_hw(preset, [_grown(preset, key, factor)]))
    n, worst, i = _slower(before, after)
    assert n == 0, f"{preset} {key} x{factor}: {n} ops slower, {worst:.3f}x ({ops['name'].iloc[i]})"


def test_lower_dram_latency_never_slows_a_cdna3_kernel():
    """The fault this file found: on MI300X a compute-bound op got slower as the DRAM latency fell
    (AlexNet conv 2.37 -> 3.02 us at 434 -> 100 ns), because the fixed cost a CDNA3 kernel carries
    in series (the floor less two round trips, archsim.perf.dispatch_overhead) was re-derived from
    the what-if latency instead of the card's. The card's fixed cost stays: 2.0 - 2 x 0.434 us."""
    ops = _ops()
    before = body_seconds(ops, load_hw("mi300x"))
    for latency_ns in (300, 217, 100):
        hw = load_hw("mi300x", [f"gpu.dram_latency_ns={latency_ns}"])
        assert hw.gpu.card_latency_ns == load_hw("mi300x").gpu.dram_latency_ns
        n, worst, i = _slower(before, body_seconds(ops, hw))
        assert n == 0, f"{latency_ns} ns: {n} ops slower, {worst:.3f}x ({ops['name'].iloc[i]})"


def _rows_reread(ops: pd.DataFrame) -> np.ndarray:
    """Block-per-row kernels that read their row more than once (archsim.perf.passes)."""
    names = ops["name"].astype(str)
    looped, _ = looped_norm_rows(
        names, ops["input_dims"], ops["bytes_read"].to_numpy(dtype=float), ops["dtype"]
    )
    return np.maximum(row_passes(names), looped) > 1


@EXAMPLES
@given(preset=st.sampled_from(GPU_PRESETS), factor=st.sampled_from((1.1, 1.5, 2.0, 4.0)))
def test_more_sms_never_make_an_op_slower_but_thrashing_rereads(preset, factor):
    """More SMs never slow an op, except a kernel that re-reads its row after a block barrier: more
    SMs hold more rows at once, and once they outgrow the L2 the re-reads go to DRAM (physics, not a
    defect: a larger working set from more concurrent thread blocks thrashes the cache; Kayiran et
    al., "Neither More Nor Less: Optimizing Thread-level Parallelism for GPGPUs", PACT 2013; Rogers
    et al., "Cache-Conscious Wavefront Scheduling", MICRO 2012). Those are bounded instead: at most
    the re-reads' DRAM traffic again, P x the kernel's time for P passes (here P = 2 or 3)."""
    ops = _ops()
    hw = load_hw(preset)
    more = max(hw.gpu.sms + 1, int(hw.gpu.sms * factor))
    before = body_seconds(ops, hw)
    after = body_seconds(ops, load_hw(preset, [f"gpu.sms={more}"]))
    reread = _rows_reread(ops)
    n, worst, i = _slower(before[~reread], after[~reread])
    assert n == 0, f"{preset} sms {hw.gpu.sms} -> {more}: {n} ops slower, {worst:.3f}x"
    assert np.all(after[reread] <= 3 * before[reread] * (1 + REL))


@EXAMPLES
@given(preset=st.sampled_from(GPU_PRESETS))
def test_every_idealization_only_removes_time_from_every_op(preset):
    ops = _ops()
    hw = load_hw(preset)
    previous = body_seconds(ops, hw)
    assert np.all(np.isfinite(previous)) and np.all(previous >= 0)
    for n in range(1, len(IDEALIZATIONS) + 1):
        current = body_seconds(ops, hw, frozenset(IDEALIZATIONS[:n]))
        assert np.all(np.isfinite(current)) and np.all(current >= 0)
        count, worst, _ = _slower(previous, current)
        assert count == 0, f"{preset} +{IDEALIZATIONS[n - 1]}: {count} ops slower, {worst:.3f}x"
        previous = current
