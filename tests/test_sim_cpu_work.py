"""CPU work from recorded traces and the models that use it without a GPU: thread CPU time over wall
time, the server's per-batch cost fitted by batch size, the params lock, and a replay ratio that only
throttles the learner. Small hand-made traces and service times, where the answer is worked out."""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd
import pytest

from archsim.errors import ArchsimError
from archsim.sim.config import SimConfig
from archsim.sim.recorded import inference_batch_cpu_s, server_overhead_capture_s
from archsim.sim.run import simulate_system
from archsim.sim.step_work import (
    phase_work_us,
    phases_work_us,
    step_work_us,
    typical_us,
    whole_steps,
)
from archsim.trace.format import Trace
from tests.test_sim_support import machine, service_times


def test_cpu_time_replaces_wall_time_row_by_row():
    rows = pd.DataFrame(
        {
            "dur_us": [100.0, 200.0],
            "cpu_us": [60.0, np.nan],
            "env_step_us": [50.0, 80.0],
            "env_step_cpu_us": [40.0, np.nan],  # the second row came from a trace without markers
            "act_us": [30.0, np.nan],
        }
    )
    assert phase_work_us(rows, "env_step").tolist() == [40.0, 80.0]
    assert phase_work_us(rows, "act").tolist()[0] == 30.0  # no act_cpu_us column: wall
    assert phases_work_us(rows, ["env_step", "act"]).tolist() == [70.0, 80.0]
    assert step_work_us(rows).tolist() == [60.0, 200.0]


def test_typical_work_is_the_mean_of_cpu_time_and_the_median_of_wall_time():
    values = pd.Series([5000.0, 5000.0, 8000.0, np.nan])
    assert typical_us(values, cpu_time=True) == 6000.0  # throughput: total work / steps
    assert typical_us(values, cpu_time=False) == 5000.0  # wall: robust to descheduling
    assert np.isnan(typical_us(pd.Series([np.nan]), cpu_time=True))


def test_steps_cut_by_the_end_of_recording_are_left_out():
    steps = pd.DataFrame({"cpu_us": [10.0, np.nan, 30.0], "dur_us": [11.0, 5.0, 31.0]})
    assert whole_steps(steps)["cpu_us"].tolist() == [10.0, 30.0]
    wall_only = steps.assign(cpu_us=np.nan)  # a trace without CPU time: nothing to tell by
    assert len(whole_steps(wall_only)) == 3


def recorded_trace(batches: list[tuple[int, float, float]], probe: list | None = None) -> Trace:
    """A SEED-style trace of inference batches (size, wall us, CPU us), each with one 1,000 us op;
    ``probe``: the learner's inference probe in meta."""
    steps = pd.DataFrame(
        {
            "step_id": np.arange(len(batches)),
            "role": "inference",
            "batch_size": [b for b, _, _ in batches],
            "dur_us": [w for _, w, _ in batches],
            "cpu_us": [c for _, _, c in batches],
        }
    )
    ops = pd.DataFrame(
        {
            "op_id": np.arange(len(batches)),
            "kind": "cpu",
            "phase": "inference_batch",
            "step_id": np.arange(len(batches)),
            "dur_us": 1000.0,
        }
    )
    meta = {}
    if probe is not None:
        learner = {"role": "learner", "index": 0, "inference_probe": probe}
        meta = {"capture": {"processes": [learner, {"role": "actor", "index": 0}]}}
    return Trace(meta=meta, ops=ops, steps=steps)


def test_server_overhead_is_cpu_time_outside_the_ops():
    # wall 9,000 us of which 3,000 us waiting for the lock: CPU 6,000, ops 1,000 -> 5,000 us
    trace = recorded_trace([(4, 9000.0, 6000.0)] * 3)
    assert server_overhead_capture_s(trace) == pytest.approx(5000e-6)


def test_batch_cost_is_fitted_by_size_not_scaled_per_observation():
    # means: 9,200 us at 2 (1 batch) and 9,450 us at 4 (3 batches). Weights sqrt(1), sqrt(3); two
    # points: the line goes through both, 125 us per observation + 8,950 us per batch.
    trace = recorded_trace([(2, 9900.0, 9200.0), *[(4, 9900.0, 9450.0)] * 3])
    whole, ops = inference_batch_cpu_s(trace, max_batch=8)
    assert whole[0] == 0.0
    assert whole[1:] * 1e6 == pytest.approx(8950.0 + 125.0 * np.arange(1, 9))
    # the ops took 1,000 us at both sizes: a fixed 1,000 us, never more than the whole batch
    assert ops[1:] * 1e6 == pytest.approx(np.full(8, 1000.0))


def test_batch_cost_is_the_mean_cpu_time_of_a_size():
    # CPU times 5,000, 5,000 and 8,000 us at size 4: the server spends 6,000 us per batch on average
    trace = recorded_trace([(4, 9000.0, 5000.0), (4, 9000.0, 5000.0), (4, 9000.0, 8000.0)])
    whole, _ = inference_batch_cpu_s(trace, max_batch=4)
    assert whole[4] * 1e6 == pytest.approx(6000.0)


PROBE = [  # (batch_size, cpu_us, act_cpu_us) as workloads/r2d2/seed/probe.py writes them
    {"batch_size": 1, "cpu_us": 3000.0, "act_cpu_us": 2500.0, "repeats": 10},
    {"batch_size": 2, "cpu_us": 3500.0, "act_cpu_us": 3000.0, "repeats": 10},
    {"batch_size": 4, "cpu_us": 4000.0, "act_cpu_us": 3400.0, "repeats": 10},
    {"batch_size": 8, "cpu_us": 5000.0, "act_cpu_us": 4400.0, "repeats": 10},
]


def test_the_probe_gives_the_shape_and_the_run_the_level():
    # The run's batches (size 4) cost 6,000 us of CPU, 2,000 above the probe at 4: every size is the
    # probe's curve + 2,000 (size 3 halfway between 3,500 and 4,000; past 8 along the last segment,
    # 250 us per observation). The ops: 1,000 us at 4, the probe's forward step 3,400: - 2,400.
    trace = recorded_trace([(4, 9000.0, 6000.0)] * 3, probe=list(reversed(PROBE)))
    whole, ops = inference_batch_cpu_s(trace, max_batch=10)
    expected = [0, 5000, 5500, 5750, 6000, 6250, 6500, 6750, 7000, 7250, 7500]
    assert whole * 1e6 == pytest.approx(expected)
    assert ops[[1, 2, 4, 8, 10]] * 1e6 == pytest.approx([100, 600, 1000, 2000, 2500])
    # without the probe the one recorded size decides alone: ops grow, the rest is fixed
    plain, _ = inference_batch_cpu_s(recorded_trace([(4, 9000.0, 6000.0)] * 3), max_batch=8)
    assert plain[8] * 1e6 == pytest.approx(5000.0 + 2000.0)


def test_a_probe_of_one_size_is_not_used():
    one = recorded_trace([(4, 9000.0, 6000.0)] * 3, probe=PROBE[:1])
    plain = recorded_trace([(4, 9000.0, 6000.0)] * 3)
    assert inference_batch_cpu_s(one, 8)[0] == pytest.approx(inference_batch_cpu_s(plain, 8)[0])


def test_batch_cost_with_one_recorded_size_scales_its_ops():
    # one size (4): the 1,000 us of ops grow with the batch, the other 5,000 us are per batch
    trace = recorded_trace([(4, 8000.0, 6000.0)] * 2)
    whole, ops = inference_batch_cpu_s(trace, max_batch=8)
    assert whole[1:] * 1e6 == pytest.approx(5000.0 + 250.0 * np.arange(1, 9))
    assert ops[1:] * 1e6 == pytest.approx(250.0 * np.arange(1, 9))


def test_batch_cost_that_falls_with_size_is_a_fixed_cost():
    # noise made size 4 cheaper than size 2: no growth, the count-weighted mean per batch
    trace = recorded_trace([(2, 9000.0, 9000.0), *[(4, 9000.0, 8000.0)] * 3])
    whole, _ = inference_batch_cpu_s(trace, max_batch=4)
    assert whole[1:] * 1e6 == pytest.approx(np.full(4, (9000.0 + 3 * 8000.0) / 4))


def cpu_only_times(learner_s=10e-3, learner_locked_s=10e-3, batch_s=1e-3, batch_locked_s=1e-3):
    times = service_times(
        actor_step_s=(1e-6,), inference_s=batch_s, learner_gpu_s=learner_s, on_gpu=False
    )
    return dataclasses.replace(
        times,
        learner_locked_cpu_s=learner_locked_s,
        inference_locked_s=np.full(len(times.inference_gpu_s), batch_locked_s),
    )


def test_the_params_lock_makes_inference_and_updates_take_turns():
    # Plenty of cores, actors that take no time: the server runs 1 ms batches back to back and the
    # learner 10 ms steps, all under the lock. Without the lock: 1,000 batches/s and 100 updates/s.
    # With it (FIFO), the two alternate: one 10 ms update, one 1 ms batch, so 1 / 11 ms each.
    config = SimConfig(actors=1, inference_batch=1, inference_timeout_us=0, sim_seconds=1.0)
    free = simulate_system(cpu_only_times(), machine(8), config, 32).metrics
    assert free["inference_batches_per_s"] == pytest.approx(1000, rel=0.01)
    assert free["learner_updates_per_s"] == pytest.approx(100, rel=0.01)
    locked = simulate_system(
        cpu_only_times(), machine(8), config.replace(param_lock="on"), 32
    ).metrics
    assert locked["inference_batches_per_s"] == pytest.approx(1 / 11e-3, rel=0.02)
    assert locked["learner_updates_per_s"] == pytest.approx(1 / 11e-3, rel=0.02)
    # 9 ms of the update free, 1 ms locked: a batch waits at most one 1 ms locked part, so batches
    # run at least every 2 ms; the update waits at most one batch for its replay sample (which also
    # takes the lock) and one for its locked part: 10 to 12 ms per update
    partly = simulate_system(
        cpu_only_times(learner_locked_s=1e-3), machine(8), config.replace(param_lock="on"), 32
    ).metrics
    assert partly["inference_batches_per_s"] >= 500 * 0.99
    assert 1 / 12e-3 * 0.99 <= partly["learner_updates_per_s"] <= 1 / 10e-3 * 1.01


def test_the_params_lock_needs_cpu_only_hardware_and_recorded_batches():
    config = SimConfig(actors=1, inference_batch=1, sim_seconds=0.1, param_lock="on")
    with pytest.raises(ArchsimError, match="--param-lock on: modelled only on hardware without"):
        simulate_system(service_times(), machine(8), config, 32)
    no_split = dataclasses.replace(cpu_only_times(), inference_locked_s=None)
    with pytest.raises(ArchsimError, match="recorded inference batches"):
        simulate_system(no_split, machine(8), config, 32)


@pytest.mark.parametrize("cpu_sched", ["pinned", "shared"])
def test_a_learner_only_replay_limit_never_holds_up_the_actors(cpu_sched):
    # A learner of 20 ms steps that could train 50 times a second; ratio 0.001 samples per insert
    # with batch 32: the budget is 0.001 x inserted / 32 updates. Limiting both sides ties the
    # actors to the learner; limiting the learner leaves the actors at their free-running rate.
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=20e-3, on_gpu=False)
    base = SimConfig(
        actors=4, inference_batch=1, inference_timeout_us=0, sim_seconds=0.5, cpu_sched=cpu_sched
    )
    free = simulate_system(times, machine(8), base, 32).metrics
    ratio = base.replace(replay_ratio=0.5)
    both = simulate_system(times, machine(8), ratio, 32).metrics
    learner_only = simulate_system(times, machine(8), ratio.replace(replay_limit="learner"), 32)
    learner_only = learner_only.metrics
    assert both["frames_per_s"] < 0.5 * free["frames_per_s"]  # tied to 50 x 32 / 0.5 inserts/s
    assert learner_only["frames_per_s"] == pytest.approx(free["frames_per_s"], rel=1e-9)
    inserted = learner_only["env_steps_per_s"] * 0.5
    slack = 4 * 32 / 0.5  # replay_slack_batches x batch, in samples
    assert learner_only["learner_updates_per_s"] * 32 <= 0.5 * inserted * 1.0 + slack
