"""``--engine steady`` (archsim.sim.steady, issue 17): a long run extrapolated from one run read at
checkpoints.

Checked: the extrapolation of a recorder worked by hand (counts, busy time, queues with Little's law),
a recorder's snapshot by hand, a checkpoint read as the run of its length (random systems), a run
shorter than the first checkpoint and one whose checkpoints reach its length are the exact engine's
to the last bit, and on random small systems (the generator of tests/test_engine_agreement.py: both
CPU schedulers, central and local inference, pacing or none, GIL shares, the params lock, nodes with
a remote replay) the headline metrics agree with a full-length fast run within STATED_REL. Measured
by ``python benchmarks/steady_accuracy.py --random-systems 300`` (hypothesis seed 17, 2 s; the
largest relative error of the four headline metrics per system): median 0.21%, 90th percentile
0.77%, 99th 1.57%, largest 1.91% with checkpoints growing by 1.5 after the first disagreement
(0.19%, 0.61%, 1.47%, 2.18% doubling throughout); hypothesis seed 18: 0.30%, 1.33%, 4.21%, 8.25%
(doubling: 0.29%, 1.26%, 4.87%, 14.06%) (docs/SIMULATOR.md "The steady engine"). STATED_REL is
above the largest error of seed 17 and of the 30 systems drawn here, not a bound on every draw
(seed 18's largest is above it), nor a guarantee for systems unlike these.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from archsim.sim.metrics import Recorder
from archsim.sim.python_share import BurstPython, PythonShare
from archsim.sim.run import build_run, prepare_layout, simulate_system
from archsim.sim.steady import STEADY_REL_TOL, extrapolate, relative_change, snapshot
from tests.test_engine_agreement import _network_args, systems
from tests.test_sim_support import machine, service_times

HEADLINE = ("env_steps_per_s", "learner_updates_per_s", "cpu_util", "gpu_util")
STATED_REL = 0.08  # above the largest error of 300 random systems, seed 17 (1.91%; an earlier draw
# gave 3.80%, and seed 18's largest is 8.25%): see the module docstring
LONG_S = 2.0  # a run ~100x the systems' learner step and env step


def _recorder(end: float, steps: int, busy: list[float], queue: tuple) -> Recorder:
    rec = Recorder(end=end, hw_threads=len(busy))
    rec.env_steps, rec.learner_updates = steps, steps // 4
    rec.cpu_busy_s = np.array(busy)
    rec.gpu_any_busy_s = 0.5 * end
    q = rec.queue("inference")
    q.area, q.arrivals, q.wait_sum, q.n, q.arrival_sum, q.last_t = queue
    return rec


def test_extrapolation_by_hand():
    # Two windows, 1 s and 2 s: 1,400 and 2,400 steps (a 400-step transient, then 1,000/s);
    # thread 0 busy 0.9 then 1.7 s (0.8 s/s), thread 1 0.1 then 0.3 (0.2 s/s).
    # Queue: area 0.3 -> 0.5, 100 -> 200 arrivals, waits 0.2 -> 0.4 s, one item queued since t-0.01.
    short = _recorder(1.0, 1400, [0.9, 0.1], (0.3, 100, 0.2, 1, 0.99, 1.0))
    long = _recorder(2.0, 2400, [1.7, 0.3], (0.5, 200, 0.4, 1, 1.99, 2.0))
    out = extrapolate(short, long, 10.0)
    # 8 s more at the second second's rates: 2,400 + 8 x 1,000 steps, busy + 8 x (0.8, 0.2)
    assert out.end == 10.0
    assert out.env_steps == pytest.approx(10_400)
    assert out.learner_updates == pytest.approx(600 + 8 * 250)
    assert out.cpu_busy_s == pytest.approx([1.7 + 6.4, 0.3 + 1.6])
    assert out.gpu_any_busy_s == pytest.approx(5.0)
    summary = out.queues["inference"].summary()
    # area 0.5 + 8 x 0.2; arrivals 200 + 8 x 100; the queued item's residual wait stays 0.01 s
    assert summary["inference_queue_mean"] == pytest.approx(2.1 / 10.0)
    assert summary["inference_arrivals_per_s"] == pytest.approx(100.0)
    assert summary["inference_wait_mean_us"] == pytest.approx(1e6 * (0.4 + 1.6 + 0.01) / 1000)
    # the inputs are untouched
    assert long.env_steps == 2400 and long.cpu_busy_s.tolist() == [1.7, 0.3]
    # one checkpoint read (the next over the run-time bound): the rate of the run from t=0
    from_start = extrapolate(Recorder(end=0.0, hw_threads=2), long, 10.0)
    assert from_start.env_steps == pytest.approx(2400 * 5)
    assert from_start.queues["inference"].summary()["inference_arrivals_per_s"] == pytest.approx(
        100
    )


def test_a_snapshot_by_hand_leaves_the_live_recorder_alone():
    # A queue of a 10 s window: one item from 1 s to 3 s, one from 2 s still queued. Read at 2.5 s:
    # length integral 1 x 1 + 2 x 0.5 = 2, two arrivals, none left, both still queued (residual
    # waits 1.5 + 0.5 s).
    rec = Recorder(end=10.0, hw_threads=2)
    rec.env_steps = 7
    rec.cpu_busy_s[:] = (1.0, 2.0)
    q = rec.queue("inference")
    q.enter(1.0)
    q.enter(2.0)
    snap = rec.snapshot(2.5)
    assert snap.end == 2.5 and snap.env_steps == 7
    summary = snap.queues["inference"].summary()
    assert summary["inference_queue_mean"] == pytest.approx(2.0 / 2.5)
    assert summary["inference_arrivals_per_s"] == pytest.approx(2 / 2.5)
    assert summary["inference_wait_mean_us"] == pytest.approx(1e6 * 2.0 / 2)
    snap.cpu_busy_s[0] = 5.0  # a copy
    q.leave(3.0, 1.0)  # the live queue goes on as if never read
    assert rec.cpu_busy_s.tolist() == [1.0, 2.0] and rec.end == 10.0
    assert (q.area, q.last_t, q.wait_sum) == (3.0, 3.0, 2.0)


def test_relative_change_over_the_settling_rates():
    # env steps 2% apart, learner updates both 0, GPU 1% apart
    a = np.array([100.0, 0.0, 0.50])
    b = np.array([98.0, 0.0, 0.505])
    assert relative_change(a, b) == pytest.approx(0.02)


def test_a_run_shorter_than_the_first_window_is_the_fast_run():
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=1e-3)
    from archsim.sim.config import SimConfig

    cfg = SimConfig(actors=4, inference="local", sim_seconds=0.001, replay_ratio=None)
    fast = simulate_system(times, machine(8), cfg, 32)
    steady = simulate_system(times, machine(8), cfg.replace(engine="steady"), 32)
    assert steady.metrics == fast.metrics
    assert steady.engine == f"steady+{fast.engine}"
    assert "exact" in steady.notes[-1]


# Derandomized: the same 30 systems every run (the error distribution above is over 300 random ones;
# a random draw past 8% would fail CI for a documented approximation, not a regression).
@settings(
    max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(systems())
def test_steady_agrees_with_a_full_length_run(system):
    cfg, times, mach = system
    cfg = cfg.replace(sim_seconds=LONG_S)
    extra = _network_args(cfg)
    fast = simulate_system(times, mach, cfg.replace(engine="fast"), 32, **extra)
    steady = simulate_system(times, mach, cfg.replace(engine="steady"), 32, **extra)
    for name in HEADLINE:
        assert steady.metrics[name] == pytest.approx(
            fast.metrics[name], rel=STATED_REL, abs=1e-9
        ), (name, steady.notes[-1])
    assert STEADY_REL_TOL < STATED_REL


def _learner_burst_s(times, layout) -> float:
    """The longest CPU burst the learner process runs (replay sample, launches, a CPU-only step or
    inference batch, a parameter publish, an inference batch's server work), at the slowest speed."""
    works = [
        times.learner_sample_cpu_s,
        times.learner_launch_cpu_s,
        times.publish_cpu_s,
        times.server_cpu_s_per_batch
        + times.server_cpu_s_per_obs * (len(times.inference_gpu_s) - 1),
    ]
    if not times.on_gpu:
        works += [times.learner_gpu_s, float(np.max(times.inference_gpu_s))]
    return max(works) / float(np.min(layout.speed))


@settings(
    max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow], derandomize=True
)
@given(systems())
def test_a_checkpoint_reads_as_the_run_of_its_length(system):
    # One run of 0.2 s read at 0.05 s against a run of 0.05 s (same layout, same seed): the counts,
    # GPU integrals and waits are the same; CPU busy time may lack what the fast GIL has not played
    # yet at the checkpoint (archsim.sim.steady "Error"): at most one learner-process burst a thread.
    cfg, times, mach = system
    extra = _network_args(cfg)
    at_s = 0.05
    layout, net_setup = prepare_layout(
        times, mach, cfg.replace(sim_seconds=at_s), 32, calibrate=False, **extra
    )

    def built(seconds: float):
        config = cfg.replace(sim_seconds=seconds)
        run = build_run(times, layout, mach, config, 32, False, 0, net_setup, closed_form=False)
        run.env.run(until=at_s)
        return run

    polling = tuple(net_setup[2]) if net_setup is not None else ()
    snap = snapshot(built(0.2), at_s, polling)
    exact = built(at_s)
    exact.threads.flush()
    ref = exact.rec
    assert snap.end == ref.end == at_s
    for name in ("env_steps", "learner_updates", "inference_batches", "inference_obs"):
        assert getattr(snap, name) == getattr(ref, name), name
    for name in ("actor_wait_s", "gpu_any_busy_s", "gpu_sm_busy_s", "gpu_dram_bytes"):
        assert getattr(snap, name) == pytest.approx(getattr(ref, name), rel=1e-9, abs=1e-12)
    missing = ref.cpu_busy_s - snap.cpu_busy_s
    assert missing.min() >= -1e-12
    assert missing.max() <= _learner_burst_s(times, layout) + 1e-12
    for name in ("inference", "gpu_learner"):
        if name in ref.queues:
            got, want = snap.queues[name].summary(), ref.queues[name].summary()
            assert got == pytest.approx(want, rel=1e-9, abs=1e-12)


@pytest.mark.parametrize("sched", ["pinned", "shared"])
def test_a_run_whose_checkpoints_reach_its_length_is_the_exact_run(sched):
    # Central inference (the actor fleets), a GIL between the learner and a server thread: asked
    # twice the first checkpoint, the run is read once on the way and ends as the exact run.
    from archsim.sim.config import SimConfig
    from archsim.sim.steady import first_window_s

    times = service_times(
        actor_step_s=(250e-6, 310e-6),
        learner_gpu_s=1e-3,
        learner_cpu_s=150e-6,
        inference_s=200e-6,
        server_s=20e-6,
    )
    half = BurstPython(0.5, 2)  # half of each burst is Python, released twice
    times = dataclasses.replace(times, python=PythonShare(replay_sample=half, server_per_obs=0.5))
    cfg = SimConfig(actors=6, inference_batch=4, learner_cpu_threads=2, cpu_sched=sched)
    first = first_window_s(times, machine(8), cfg, 32)
    cfg = cfg.replace(sim_seconds=2 * first)
    exact = simulate_system(times, machine(8), cfg, 32)
    steady = simulate_system(times, machine(8), cfg.replace(engine="steady"), 32)
    assert steady.steady.windows_s == (first, 2 * first)
    assert steady.metrics == exact.metrics  # bit for bit
    assert steady.engine == f"steady+{exact.engine}"
    assert "exact" in steady.notes[-1]


def test_checkpoints_double_until_stretches_disagree_then_grow_by_the_settling_factor():
    # traces/dqn-pong-cpu, 4,096 paced DQN actors on time-shared CPUs: the start-up transient
    # (~0.3 s: the rate limiter's slack filled by 4,096 first steps) makes the early stretches
    # disagree; after the first disagreement the checkpoints grow by SETTLING_GROWTH, not 2.
    from pathlib import Path

    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.run import simulate
    from archsim.sim.steady import SETTLING_GROWTH
    from archsim.trace import load

    trace_dir = Path(__file__).resolve().parents[1] / "traces" / "dqn-pong-cpu"
    config = SimConfig(actors=4096, sim_seconds=60.0, cpu_sched="shared", engine="steady")
    result = simulate(load(trace_dir), load_hw("dgx1-v100"), config)
    windows = result.steady.windows_s
    ratios = [later / earlier for earlier, later in zip(windows, windows[1:], strict=False)]
    doubling = next(i for i, r in enumerate(ratios) if r != pytest.approx(2.0))
    assert doubling >= 2  # two stretches were compared before the first smaller step
    assert ratios[doubling:] == pytest.approx([SETTLING_GROWTH] * (len(ratios) - doubling))
    assert result.steady.converged and windows[-1] < 60.0
    assert "settled" in result.notes[-1]
