"""``--cpu-sched shared``: processor sharing of all hardware threads (archsim.sim.shared_cpu).

Golden cases worked by hand, a hypothesis comparison with an exact event-by-event reference, work
conservation, one-burst-at-a-time software threads, and the system-level facts that follow: with no
more software threads than cores, sharing and pinning agree; one busy core's slow learner step no
longer holds up an actor's short env step.
"""

from __future__ import annotations

import numpy as np
import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim.config import SimConfig
from archsim.sim.metrics import Recorder
from archsim.sim.run import simulate_system
from archsim.sim.shared_cpu import SharedThreads, shared_capacity
from tests.test_sim_support import machine, service_times


def run_bursts(bursts, hw_threads=1, cores=1, speed=1.0, smt_yield=1.0, end=1e6, serialize=()):
    """Simulate (arrival s, work s, software thread) bursts; return each one's finish time."""
    env = simpy.Environment()
    rec = Recorder(end=end, hw_threads=hw_threads)
    cpu = SharedThreads(env, hw_threads, cores, speed, smt_yield, rec)
    cpu.serialize(list(serialize))
    finish = [None] * len(bursts)

    def burst(i, arrive, work, thread):
        yield env.timeout(arrive)
        yield from cpu.execute(thread, work, "work")
        finish[i] = env.now

    for i, (arrive, work, thread) in enumerate(bursts):
        env.process(burst(i, arrive, work, thread))
    env.run()
    cpu.flush()
    return finish, rec


def test_two_bursts_on_one_thread_share_it():
    # work 1 and 2 from t=0: both at rate 1/2 until the first is done at t=2; the second has 1 left,
    # alone at rate 1: done at t=3
    finish, rec = run_bursts([(0.0, 1.0, 0), (0.0, 2.0, 1)])
    assert finish == pytest.approx([2.0, 3.0])
    assert rec.cpu_busy_s.sum() == pytest.approx(3.0)  # work conserving


def test_a_short_burst_is_not_held_up_by_a_long_one():
    # A (work 2) alone from 0 to 1 does 1; then A and B (work 1) share: B's 1 takes until t=3, when
    # A's remaining 1 is also done. FIFO would finish B at 3 too, but only after A: here A and B
    # end together, and a 1 ms burst behind a 90 ms one takes 2 ms, not 91.
    finish, _ = run_bursts([(0.0, 2.0, 0), (1.0, 1.0, 1)])
    assert finish == pytest.approx([3.0, 3.0])
    finish, _ = run_bursts([(0.0, 0.090, 0), (0.0, 0.001, 1)])
    assert finish[1] == pytest.approx(0.002)


def test_smt_siblings_run_at_the_yield():
    # 1 core with 2 hardware threads, yield 0.6: two bursts run at 0.6 each (capacity 1.2)
    assert shared_capacity(2, hw_threads=2, cores=1, speed=1.0, smt_yield=0.6) == pytest.approx(1.2)
    finish, _ = run_bursts([(0.0, 1.2, 0), (0.0, 1.2, 1)], hw_threads=2, cores=1, smt_yield=0.6)
    assert finish == pytest.approx([2.0, 2.0])
    # idle cores first: 2 bursts on 2 cores of 4 threads run at full speed
    finish, _ = run_bursts([(0.0, 1.0, 0), (0.0, 1.0, 1)], hw_threads=4, cores=2, smt_yield=0.6)
    assert finish == pytest.approx([1.0, 1.0])


def test_one_software_thread_runs_one_burst_at_a_time():
    # thread 0 hosts two roles (a one-thread learner that also serves inference): its two bursts
    # run one after the other, each alone on the spare core
    finish, _ = run_bursts([(0.0, 1.0, 0), (0.0, 1.0, 0)], hw_threads=2, cores=2, serialize=[0, 0])
    assert sorted(finish) == pytest.approx([1.0, 2.0])


def reference_finish_times(bursts, hw_threads, cores, speed, smt_yield):
    """Exact processor sharing by stepping from event to event (arrivals and completions)."""
    order = sorted(range(len(bursts)), key=lambda i: bursts[i][0])
    left = {}
    finish = [None] * len(bursts)
    t, k = 0.0, 0
    while k < len(order) or left:
        n = len(left)
        rate = shared_capacity(n, hw_threads, cores, speed, smt_yield) / n if n else 0.0
        next_arrival = bursts[order[k]][0] if k < len(order) else np.inf
        next_done = t + min(left.values()) / rate if left else np.inf
        step_to = min(next_arrival, next_done)
        for i in left:
            left[i] -= (step_to - t) * rate
        t = step_to
        for i in [i for i, w in left.items() if w <= 1e-12]:
            finish[i] = t
            del left[i]
        while k < len(order) and bursts[order[k]][0] <= t:
            left[order[k]] = bursts[order[k]][1]
            k += 1
    return finish


@settings(max_examples=60, deadline=None)
@given(
    bursts=st.lists(
        st.tuples(
            st.floats(0.0, 5.0, allow_nan=False),
            st.floats(0.01, 3.0, allow_nan=False),
        ),
        min_size=1,
        max_size=12,
    ),
    hw_threads=st.integers(1, 4),
    smt=st.booleans(),
    smt_yield=st.floats(0.5, 1.0),
    speed=st.floats(0.5, 2.0),
)
def test_matches_an_exact_reference(bursts, hw_threads, smt, smt_yield, speed):
    cores = max(1, hw_threads // 2) if smt else hw_threads
    bursts3 = [(a, w, i) for i, (a, w) in enumerate(bursts)]
    finish, rec = run_bursts(bursts3, hw_threads, cores, speed, smt_yield)
    expected = reference_finish_times(bursts, hw_threads, cores, speed, smt_yield)
    assert finish == pytest.approx(expected, rel=1e-9, abs=1e-9)
    if not smt or smt_yield == 1.0:  # every busy thread at full speed: busy time = work / speed
        assert rec.cpu_busy_s.sum() == pytest.approx(sum(w for _, w in bursts) / speed)


def test_shared_equals_pinned_when_every_thread_has_its_own_core():
    # 4 actors + learner + server on 8 cores without SMT: no burst ever shares, so time-sharing and
    # pinning are the same system
    times = service_times(
        actor_step_s=(230e-6, 260e-6, 310e-6),
        up_s=15e-6,
        server_s=5e-6,
        inference_s=80e-6,
        learner_cpu_s=200e-6,
    )
    base = SimConfig(actors=4, inference_batch=2, sim_seconds=0.5, engine="simpy")
    pinned = simulate_system(times, machine(8), base, learner_batch=32).metrics
    shared = simulate_system(times, machine(8), base.replace(cpu_sched="shared"), 32).metrics
    for key in ("frames_per_s", "learner_updates_per_s", "inference_batch_mean", "cpu_util"):
        assert shared[key] == pytest.approx(pinned[key], rel=1e-6), key


def test_throughput_never_falls_with_more_hardware_threads():
    times = service_times(
        actor_step_s=(230e-6, 260e-6, 310e-6), server_s=20e-6, learner_cpu_s=500e-6
    )
    rates = []
    for threads in (1, 2, 4, 8):
        config = SimConfig(actors=6, inference_batch=3, sim_seconds=0.5, cpu_sched="shared")
        rates.append(simulate_system(times, machine(threads), config, learner_batch=32).metrics)
    frames = [m["frames_per_s"] for m in rates]
    assert frames == sorted(frames) and frames[-1] > frames[0]
    assert all(0.0 <= m["cpu_util"] <= 1.0 for m in rates)


def test_a_server_thread_serves_its_queued_bursts_one_after_another():
    # Two 1 s bursts handed to software thread 1 at t=0 on 2 idle cores. Named in ``each``, the
    # thread runs them in turn (finish at 1 and 2 s), as a pinned server thread would; a thread
    # not named would run both at once, each on a core (both done at 1 s).
    for each, expected in (([1], [1.0, 2.0]), ([], [1.0, 1.0])):
        env = simpy.Environment()
        cpu = SharedThreads(env, 2, 2, 1.0, 1.0, Recorder(end=10.0, hw_threads=2))
        cpu.serialize([], each=each)
        finish = []

        def burst(cpu=cpu, env=env, finish=finish):
            yield from cpu.execute(1, 1.0, "work")
            finish.append(env.now)

        env.process(burst())
        env.process(burst())
        env.run()
        assert sorted(finish) == pytest.approx(expected)
