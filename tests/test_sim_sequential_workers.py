"""``--loop sequential`` of a program whose environments step in vector-env worker processes
(archsim.sim.vector_workers): the loop waits per iteration for the slowest of its N workers, whose
step times are drawn from the trace's worker steps pooled over the workers."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.sim.config import LOOP_TRACE, SimConfig
from archsim.sim.machine import derive_machine
from archsim.sim.run import simulate
from archsim.sim.sequential import derive_loop_times, loop_metrics, resolve_loop
from archsim.sim.vector_workers import (
    expected_max_of_draws,
    loop_meta,
    split_workers,
    without_worker_profiler_cost,
)
from archsim.trace.format import Trace
from archsim.trace.info import loop_of_steps

PARENT, WORKER_A, WORKER_B = 100, 201, 202
A_US, B_US = 1000.0, 3000.0  # each worker's constant env step (CPU time)
P_US, P_ENV_US = (
    500.0,
    200.0,
)  # the parent's CPU per iteration, of which send/receive around the step
T_US = 20_000.0  # one training step's CPU
K = 4  # a training step every K iterations


def _trace(iterations: int = 16) -> Trace:
    """The loop of a 2-env AsyncVectorEnv program: the parent's vector steps (batch 2) and a
    training step every K of them, each worker's env steps on its own pid."""
    rows = []
    for i in range(iterations):
        rows.append(
            {"role": "actor", "actor": 0, "pid": PARENT, "tid": PARENT, "batch_size": 2,
             "dur_us": 4000.0, "cpu_us": P_US, "gap_cpu_us": 0.0, "env_step_us": 3500.0,
             "env_step_cpu_us": P_ENV_US}
        )  # fmt: skip
        for actor, pid, us in ((1, WORKER_A, A_US), (2, WORKER_B, B_US)):
            rows.append(
                {"role": "actor", "actor": actor, "pid": pid, "tid": pid, "batch_size": 1,
                 "dur_us": us, "cpu_us": us, "gap_cpu_us": 0.0, "env_step_us": us,
                 "env_step_cpu_us": us}
            )  # fmt: skip
        if i % K == 0:
            rows.append(
                {"role": "learner", "actor": -1, "pid": PARENT, "tid": PARENT, "batch_size": 32,
                 "dur_us": T_US, "cpu_us": T_US, "gap_cpu_us": 0.0, "train_forward_us": T_US,
                 "train_forward_cpu_us": T_US}
            )  # fmt: skip
    return Trace(meta={}, ops=pd.DataFrame(), steps=pd.DataFrame(rows))


def _cpu_hw(hw_threads_per_core: int = 1, cores: int = 8, **speeds):
    """A CPU-only target at the capture thread's speed (every kind of work), ``speeds`` changed."""
    hw = load_hw("dgx1-v100")
    cpu = hw.cpu.model_copy(
        update={
            "sockets": 1,
            "cores_per_socket": cores,
            "threads_per_core": hw_threads_per_core,
            "thread_speed_rel": 1.0,
            "emulator_speed_rel": None,
            "interpreter_speed_rel": None,
            "simd_speed_rel": None,
            **speeds,
        }
    )
    return hw.model_copy(update={"cpu": cpu, "gpu": None})


def _rate(hw) -> float:
    times = derive_loop_times(_trace(), hw, SimConfig(loop="sequential"), 32)
    machine = derive_machine(hw, SimConfig())
    return loop_metrics(times, machine, 1.0, 32, 1.0)["env_steps_per_s"]


def test_the_trace_is_one_loop_with_env_workers_and_runs_sequential_by_default():
    single, why = loop_of_steps(_trace().steps)
    assert single and "2 worker process(es)" in why
    assert resolve_loop(_trace(), SimConfig(loop=LOOP_TRACE)).loop == "sequential"


def test_workers_that_act_are_a_distributed_system():
    steps = _trace().steps
    steps.loc[steps["pid"] == WORKER_A, "act_us"] = 100.0
    single, why = loop_of_steps(steps)
    assert not single and "3 processes" in why


def test_two_workers_by_hand():
    """Pooled draws: half are a = 1 ms, half b = 3 ms, so the slower of 2 draws is b with
    probability 3/4: (a + 3b) / 4 = 2.5 ms. Per iteration: 2.5 + p 0.5 + t 20 / k 4 = 8 ms, for
    2 env steps: 250 env steps/s (one worker per core)."""
    expected_env_s = (A_US + 3 * B_US) / 4 * 1e-6
    times = derive_loop_times(_trace(), _cpu_hw(), SimConfig(loop="sequential"), 32)
    assert times.env_workers == 2
    assert times.worker_env_s == pytest.approx(expected_env_s)
    assert times.iteration_s == pytest.approx(expected_env_s + P_US * 1e-6 + T_US * 1e-6 / K)
    assert _rate(_cpu_hw()) == pytest.approx(2 / 8e-3)


def test_more_workers_than_hardware_threads_time_share():
    """One hardware thread: both workers' steps run on it in turn, a + b = 4 ms on average (the
    seeded sample of 4,096 pooled pairs), so 2 / (4 + 0.5 + 5) ms."""
    times = derive_loop_times(_trace(), _cpu_hw(cores=1), SimConfig(loop="sequential"), 32)
    assert times.worker_env_s == pytest.approx((A_US + B_US) * 1e-6, rel=0.03)
    assert _rate(_cpu_hw(cores=1)) == pytest.approx(2 / 9.5e-3, rel=0.03)


def test_an_infinitely_fast_env_worker_leaves_the_parents_loop():
    """Emulator work infinitely fast: the workers' steps take no time and the rate is the parent's
    own loop (its send/receive is interpreter work, so it stays): 2 / (0.5 + 5) ms."""
    fast = _cpu_hw(emulator_speed_rel=1e12)
    assert _rate(fast) == pytest.approx(2 / (P_US * 1e-6 + T_US * 1e-6 / K), rel=1e-6)
    assert _rate(fast) > _rate(_cpu_hw())


def test_worker_threads_are_busy_in_the_metrics():
    hw = _cpu_hw()
    times = derive_loop_times(_trace(), hw, SimConfig(loop="sequential"), 32)
    m = loop_metrics(times, derive_machine(hw, SimConfig()), 1.0, 32, 1.0)
    busy_s = P_US * 1e-6 + T_US * 1e-6 / K + (A_US + B_US) * 1e-6  # parent + both workers
    assert m["cpu_util"] == pytest.approx(busy_s / times.iteration_s / 8)


def test_simulate_runs_the_trace_as_its_loop_by_default():
    """Through ``simulate`` with the trace's own loop: the hand-worked 250 env steps/s."""
    result = simulate(_trace(), _cpu_hw(), SimConfig(loop=LOOP_TRACE))
    assert result.engine == "sequential"
    assert result.metrics["env_steps_per_s"] == pytest.approx(250.0)


def test_each_worker_loses_its_own_profiler_cost():
    """Worker B's unprofiled steps took half its profiled CPU (meta.capture.processes, as
    child_capture writes it): its draws are 1.5 ms, so the slower of 2 pooled draws is 1.5 ms with
    probability 3/4 and 1 ms otherwise: 1.375 ms; worker A's figures (above its profiled mean:
    noise) are not applied."""
    trace = _trace()
    unprofiled = {"steps": 100, "mean_us": B_US / 2, "median_us": B_US / 2}
    trace.meta["capture"] = {
        "processes": [
            {"role": "actor", "pid": WORKER_B, "unprofiled_cpu_us": {"actor": {"step": unprofiled,
             "env_step": unprofiled}}},
            {"role": "actor", "pid": WORKER_A, "unprofiled_cpu_us": {"actor": {"step": {
             "steps": 100, "mean_us": 2 * A_US}}}},
        ]
    }  # fmt: skip
    workers = without_worker_profiler_cost(split_workers(trace.steps)[1], trace.meta)
    assert workers.loc[workers["pid"] == WORKER_B, "cpu_us"].tolist() == [B_US / 2] * 16
    assert workers.loc[workers["pid"] == WORKER_A, "cpu_us"].tolist() == [A_US] * 16
    result = simulate(trace, _cpu_hw(), SimConfig(loop=LOOP_TRACE))
    iteration_s = (A_US + 3 * B_US / 2) / 4 * 1e-6 + P_US * 1e-6 + T_US * 1e-6 / K
    assert result.metrics["env_steps_per_s"] == pytest.approx(2 / iteration_s)


def test_the_loops_own_unprofiled_figures_are_the_pool_less_the_workers():
    """capture run pools the unprofiled actor figures of the parent (10 steps at 400 us) and its 2
    workers (20 at 1000 us, 10 at 3000 us): (10 x 400 + 20 x 1000 + 10 x 3000) / 40 = 1350 us. The
    parent's own is the pool less the workers' again: 400 us over 10 steps."""
    pooled = {"steps": 40, "mean_us": 1350.0, "median_us": 900.0}
    meta = {
        "capture": {
            "unprofiled_cpu_us": {"actor": {"step": pooled}, "learner": {"step": {"steps": 5}}},
            "processes": [
                {"role": "learner", "pid": PARENT},
                {"role": "actor", "pid": WORKER_A,
                 "unprofiled_cpu_us": {"actor": {"step": {"steps": 20, "mean_us": A_US}}}},
                {"role": "actor", "pid": WORKER_B,
                 "unprofiled_cpu_us": {"actor": {"step": {"steps": 10, "mean_us": B_US}}}},
            ],
        }
    }  # fmt: skip
    own = loop_meta(meta)["capture"]["unprofiled_cpu_us"]
    assert own["actor"] == {"step": {"steps": 10, "mean_us": pytest.approx(400.0)}}
    assert own["learner"] == {"step": {"steps": 5}}
    assert meta["capture"]["unprofiled_cpu_us"]["actor"]["step"] is pooled  # not changed


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.floats(1e-6, 1.0), min_size=1, max_size=40),
    st.integers(1, 16),
)
def test_expected_max_lies_between_the_mean_and_the_largest_draw(draws, n):
    draws = np.array(draws)
    value = expected_max_of_draws(draws, n)
    assert draws.mean() * (1 - 1e-9) <= value <= draws.max() * (1 + 1e-9)
    assert expected_max_of_draws(draws, n + 1) >= value * (1 - 1e-9)
    assert expected_max_of_draws(draws, 1) == pytest.approx(draws.mean())
