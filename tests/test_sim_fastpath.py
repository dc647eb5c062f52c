"""The fast path (Lindley threads, batch-at-a-time actors, closed-form local actors) computes the
same model as the plain simpy path: a hypothesis property test over small random systems."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.sim.config import SimConfig
from archsim.sim.run import simulate_system
from tests.test_sim_support import machine, service_times

COMPARED = (
    "frames_per_s",
    "learner_updates_per_s",
    "cpu_util",
    "gpu_util",
    "gpu_sm_util",
    "inference_batch_mean",
    "actor_wait_s_per_step",
    "energy_j",
)


# The model leaves the order of simultaneous events open (two requests for one hardware thread at
# the same instant), and the two paths break such ties differently. Real durations never tie; the
# round numbers hypothesis likes do (80 us + 10 us + 10 us = 100 us). So every drawn duration gets its
# own offset of sqrt(prime) ns: square roots of distinct primes are linearly independent over the
# rationals, so no two different sums of durations can be equal.
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)


def _untied(values_us: list[float]) -> list[float]:
    return [(us + PRIMES[i] ** 0.5 * 1e-3) * 1e-6 for i, us in enumerate(values_us)]


@st.composite
def systems(draw):
    inference = draw(st.sampled_from(["central", "local"]))
    actors = draw(st.integers(1, 10))
    envs = draw(st.integers(1, 2))
    per_request = draw(st.integers(1, actors))
    steps_us = draw(st.lists(st.floats(80, 600), min_size=1, max_size=4))
    cores = draw(st.integers(2, 6))
    threads = cores * draw(st.integers(1, 2))
    ratio = draw(st.one_of(st.none(), st.floats(1.0, 16.0)))
    cfg = SimConfig(
        actors=actors,
        envs_per_actor=envs,
        inference=inference,
        inference_batch=per_request * envs,
        inference_timeout_us=draw(st.floats(0, 400)),
        replay_ratio=ratio,
        sim_seconds=0.02,
        seed=draw(st.integers(0, 2**16)),
        smt_model=draw(st.sampled_from(["busy", "static"])),
    )
    bounds = [(0, 40), (0, 40), (0, 30), (10, 500), (100, 2000), (0, 300), (0, 300)]
    up, down, server, inference, learner, learner_cpu, launch = _untied(
        [draw(st.floats(lo, hi)) for lo, hi in bounds]
    )
    times = service_times(
        actor_step_s=tuple(_untied_steps(steps_us)),
        up_s=up,
        down_s=down,
        server_s=server,
        inference_s=inference,
        inference_frac=draw(st.floats(0.05, 1.0)),
        learner_gpu_s=learner,
        learner_frac=draw(st.floats(0.05, 1.0)),
        learner_cpu_s=learner_cpu,
        launch_s=launch,
        max_batch=cfg.inference_batch,
        on_gpu=draw(st.booleans()),
    )
    return cfg, times, machine(threads, cores=cores, smt_yield=draw(st.floats(0.3, 1.0)))


def _untied_steps(steps_us: list[float]) -> list[float]:
    # Offsets from primes not used by the other durations.
    return [(us + PRIMES[7 + i] ** 0.5 * 1e-3) * 1e-6 for i, us in enumerate(steps_us)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(systems())
def test_fast_path_agrees_with_plain_simpy(system):
    cfg, times, mach = system
    fast = simulate_system(times, mach, cfg.replace(engine="fast"), 32)
    plain = simulate_system(times, mach, cfg.replace(engine="simpy"), 32)
    assert plain.engine == "simpy" and fast.engine in ("fast", "closed_form")
    for name in COMPARED:
        # Equal up to float rounding: the paths add the same times in a different order.
        assert fast.metrics[name] == pytest.approx(plain.metrics[name], rel=1e-6, abs=1e-9), name


def test_fast_path_runs_fewer_events():
    # Env-step times as a trace gives them: a spread around 230 us (REFERENCE.md), no ties.
    steps = np.random.default_rng(1).normal(230e-6, 20e-6, size=50)
    times = service_times(actor_step_s=steps, inference_s=100.3e-6, inference_frac=0.3)
    cfg = SimConfig(actors=32, inference_batch=16, sim_seconds=0.05)
    fast = simulate_system(times, machine(16), cfg.replace(engine="fast"), 32)
    plain = simulate_system(times, machine(16), cfg.replace(engine="simpy"), 32)
    assert fast.metrics["frames_per_s"] == pytest.approx(plain.metrics["frames_per_s"], rel=1e-6)
    assert fast.events * 5 < plain.events
