"""Per-core CPU utilization (issue 15): ``cpu_core_util_max`` / ``cpu_core_util_mean`` of the
distributed loop, from the busy time the engines record per hardware thread, with the sequential
loop's definition (archsim.sim.metrics.core_utilization)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim.config import SimConfig
from archsim.sim.metrics import core_utilization
from archsim.sim.run import simulate_system
from tests.test_sim_support import machine, service_times


def test_core_utilization_by_hand():
    # 4 hardware threads on 2 cores: threads 0 and 2 on core 0, 1 and 3 on core 1 (t % cores).
    busy = np.array([0.3, 0.2, 0.4, 0.1])  # seconds in a 1 s window
    assert core_utilization(busy, 2, 1.0) == pytest.approx([0.7, 0.3])
    # two siblings busy 0.8 s each: the core had work at most the whole window
    assert core_utilization(np.array([0.8, 0.0, 0.8, 0.0]), 2, 1.0) == pytest.approx([1.0, 0.0])
    # one thread per core: each core is its thread
    assert core_utilization(np.array([0.5, 0.25]), 2, 2.0) == pytest.approx([0.25, 0.125])


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 8),
    st.integers(1, 2),
    st.lists(st.floats(0.0, 1.0), min_size=16, max_size=16),
)
def test_a_core_is_at_least_its_busiest_thread_and_at_most_the_whole_window(cores, tpc, fracs):
    threads = cores * tpc
    busy = np.array(fracs[:threads]) * 2.0  # in a 2 s window
    per_core = core_utilization(busy, cores, 2.0)
    assert per_core.shape == (cores,)
    assert np.all(per_core >= 0.0) and np.all(per_core <= 1.0)
    for core in range(cores):
        own = busy[np.arange(threads) % cores == core] / 2.0
        assert per_core[core] >= own.max() - 1e-12
        assert per_core[core] <= own.sum() + 1e-12


def _run(threads: int, cores: int):
    # Local inference, unpaced: two actors step 250 us of CPU work back to back (busy the whole
    # window); the learner thread samples for 0.25 ms of CPU, then waits 1 ms for its GPU step, so
    # it is busy 0.25 / 1.25 = 0.2 of the time.
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=1e-3, learner_cpu_s=0.25e-3)
    config = SimConfig(actors=2, inference="local", replay_ratio=None, sim_seconds=0.2)
    return simulate_system(times, machine(threads, cores=cores), config, 32).metrics


def test_two_pinned_actors_on_four_cores_by_hand():
    m = _run(4, 4)
    learner = m["learner_updates_per_s"] * 0.25e-3
    assert learner == pytest.approx(0.2, rel=0.02)
    # cores: learner 0.2, actor 1.0, actor 1.0, idle 0 -> max 1.0, mean 2.2 / 4 = 0.55
    assert m["cpu_core_util_max"] == pytest.approx(1.0, rel=0.01)
    assert m["cpu_core_util_mean"] == pytest.approx((learner + 2.0) / 4, rel=0.01)
    # one thread per core: the mean over cores is cpu_util
    assert m["cpu_core_util_mean"] == pytest.approx(m["cpu_util"])


def test_two_actors_on_the_smt_siblings_of_one_core_by_hand():
    # 4 threads on 2 cores: the learner keeps core 0 (thread 0); the actors go to threads 1 and 3,
    # both on core 1 (archsim.perf.cpu.place_threads), busy the whole window each: core 1 is 1.0,
    # not 2.0, and core 0 is the learner's 0.2 -> mean 0.6, while cpu_util stays (0.2 + 2) / 4.
    m = _run(4, 2)
    learner = m["learner_updates_per_s"] * 0.25e-3
    assert m["cpu_core_util_max"] == pytest.approx(1.0, rel=0.01)
    assert m["cpu_core_util_mean"] == pytest.approx((learner + 1.0) / 2, rel=0.01)
    assert m["cpu_util"] == pytest.approx((learner + 2.0) / 4, rel=0.01)
