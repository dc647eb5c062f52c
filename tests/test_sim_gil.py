"""The GIL of the learner process (issue 11, item 2): golden turn-taking worked by hand, the Python
part of two threads never runs faster than one after the other, the per-phase Python share of the
bundled R2D2 trace, and the system-level effect (the GIL never raises throughput)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.sim.config import SimConfig
from archsim.sim.gil import HANDOFF_S, SWITCH_INTERVAL_S, Gil, slices
from archsim.sim.metrics import Recorder
from archsim.sim.python_share import BurstPython, PythonShare, derive_python_share, with_server
from archsim.sim.run import simulate_system
from archsim.sim.shared_cpu import SharedThreads
from archsim.sim.workload import derive_machine, derive_service_times
from archsim.trace.format import load
from tests.test_sim_support import tiny_trace

R2D2_TRACE = Path(__file__).resolve().parents[1] / "traces" / "r2d2-seed-2x2-cpu"


def run_on_gil(bursts, cores=2, handoff_s=HANDOFF_S):
    """Bursts (start s, thread, work s, share, releases) of one process on a time-shared CPU with
    ``cores`` cores; returns each burst's finish time and the GIL."""
    env = simpy.Environment()
    cpu = SharedThreads(env, cores, cores, 1.0, 1.0, Recorder(end=1e6, hw_threads=cores))
    gil = Gil(env, cpu, handoff_s)
    finish = [0.0] * len(bursts)

    def burst(i, start, thread, work, share, releases):
        yield env.timeout(start)
        yield from gil.run(thread, work, BurstPython(share, releases))
        finish[i] = env.now

    for i, spec in enumerate(bursts):
        env.process(burst(i, *spec))
    env.run()
    return finish, gil


def test_two_python_threads_take_turns_by_the_switch_interval():
    # Two threads, 10 ms of pure Python each, from t=0, 2 cores. Each burst is 2 slices of 5 ms (the
    # switch interval). A takes the free GIL: 0-5 ms. B waited: hand-off h, 5+h .. 10+h. A waited:
    # 10+2h .. 15+2h. B: 15+3h .. 20+3h.
    h = HANDOFF_S
    finish, gil = run_on_gil([(0.0, 0, 10e-3, 1.0, 0), (0.0, 1, 10e-3, 1.0, 0)])
    assert finish == pytest.approx([15e-3 + 2 * h, 20e-3 + 3 * h], rel=1e-9)
    assert gil.handoffs == 3


def test_a_thread_asks_for_the_gil_for_one_burst_at_a_time():
    # Thread 0 has two 1 ms Python bursts queued at t=0 (two batches for one server thread), thread 1
    # one. A (thread 0) takes the free GIL: 0-1 ms. B waits for thread 0 to finish A, so C (thread 1,
    # asked at 0) is next: 1+h .. 2+h. B asks at 1 ms and gets it after C: 2+2h .. 3+2h.
    h = HANDOFF_S
    finish, gil = run_on_gil(
        [(0.0, 0, 1e-3, 1.0, 0), (0.0, 0, 1e-3, 1.0, 0), (0.0, 1, 1e-3, 1.0, 0)]
    )
    assert finish == pytest.approx([1e-3, 3e-3 + 2 * h, 2e-3 + h], rel=1e-9)
    assert gil.handoffs == 2


def test_native_work_runs_beside_the_other_threads_python():
    # A: 4 ms all native; B: 4 ms all Python: neither waits, both end at 4 ms on 2 cores.
    finish, gil = run_on_gil([(0.0, 0, 4e-3, 0.0, 0), (0.0, 1, 4e-3, 1.0, 0)])
    assert finish == pytest.approx([4e-3, 4e-3])
    assert gil.handoffs == 0
    # A burst half Python with one native op: slice 1 = 1 ms Python then 1 ms native, twice. B, all
    # Python (1 slice of 2 ms), asks at 0 and waits for A's first Python slice: runs 1+h .. 3+h,
    # while A's native 1-2 ms runs; A's second Python slice waits for B: 3+2h .. 4+2h, native to 5+2h.
    h = HANDOFF_S
    finish, _ = run_on_gil([(0.0, 0, 4e-3, 0.5, 1), (0.0, 1, 2e-3, 1.0, 0)])
    assert finish == pytest.approx([5e-3 + 2 * h, 3e-3 + h], rel=1e-9)


def test_slices_follow_native_ops_and_the_switch_interval():
    assert slices(1e-3, releases=0) == 1
    assert slices(1e-3, releases=9) == 10  # a torch op drops the GIL: 9 ops, 10 Python gaps
    assert slices(3 * SWITCH_INTERVAL_S, releases=0) == 3  # never held past the switch interval
    assert slices(1.0, releases=10_000) == 64  # MAX_SLICES bounds the events per burst


@settings(max_examples=60, deadline=None)
@given(
    work=st.lists(st.floats(1e-4, 20e-3), min_size=2, max_size=2),
    share=st.lists(st.floats(0.0, 1.0), min_size=2, max_size=2),
    releases=st.lists(st.integers(0, 20), min_size=2, max_size=2),
    start_b=st.floats(0.0, 5e-3),
    cores=st.integers(1, 3),
)
def test_python_parts_never_overlap(work, share, releases, start_b, cores):
    # Each thread needs Python time P_i: together they never finish before P_A + P_B of GIL time
    # after the first start, and no burst ends before its own work could be done alone.
    bursts = [
        (0.0, 0, work[0], share[0], releases[0]),
        (start_b, 1, work[1], share[1], releases[1]),
    ]
    finish, _ = run_on_gil(bursts, cores=cores)
    python = work[0] * share[0] + work[1] * share[1]
    assert max(finish) >= python * (1 - 1e-9)
    assert finish[0] >= work[0] * (1 - 1e-9)
    assert finish[1] - start_b >= work[1] * (1 - 1e-9)


def test_no_python_share_means_no_gil_effect():
    finish, gil = run_on_gil([(0.0, 0, 3e-3, 0.0, 5), (0.0, 1, 3e-3, 0.0, 5)])
    assert finish == pytest.approx([3e-3, 3e-3])
    assert gil.handoffs == 0 and gil.wait_s == 0.0


needs_r2d2 = pytest.mark.skipif(
    not R2D2_TRACE.exists(), reason="the bundled R2D2 trace traces/r2d2-seed-2x2-cpu is absent"
)


def test_python_shares_of_a_tiny_trace_by_hand():
    # tests/test_sim_support.tiny_trace: actor act phases of 60 us holding 5 ops of 10 us; learner
    # steps of forward 1,000 us (1 op of 10 us), backward 2,000 us (1 op; native as a whole) and
    # optimizer 500 us (1 op of 10 us); replay sampling of 300 us with no ops.
    python = derive_python_share(tiny_trace())
    assert python.inference.share == pytest.approx(1 - 50 / 60)  # no inference role: actors' act
    assert python.inference.releases == 5
    # forward + backward + optimizer: 3,500 us, of which 10 + 2,000 + 10 native
    assert python.train.share == pytest.approx(1 - 2020 / 3500)
    assert python.train.releases == 2  # the backward pass is one call: not a release point
    assert python.update.share == pytest.approx(1 - 10 / 500)
    assert python.replay_sample.share == 1.0 and python.replay_sample.releases == 0
    # the server: its Python seconds over its CPU seconds, per observation and per batch
    served = with_server(python, 20e-6, 5e-6, 1e-3, 1e-3)
    assert (served.server_per_obs, served.server_per_batch) == (0.25, 1.0)
    burst = served.server_burst(per_batch_s=1e-3, per_obs_s=20e-6, n_obs=10, requests=5)
    assert burst.share == pytest.approx((1e-3 + 10 * 5e-6) / (1e-3 + 10 * 20e-6))
    assert burst.releases == 5  # one socket read per request drops the GIL


@needs_r2d2
def test_r2d2_trace_python_shares_are_fractions():
    python = derive_python_share(load(R2D2_TRACE))
    for part in (python.replay_sample, python.train, python.update, python.inference):
        assert 0.0 <= part.share <= 1.0
    assert python.replay_sample.share == 1.0  # the trace records no native op while sampling
    assert 0.0 < python.inference.share < 1.0 and python.inference.releases > 0
    assert python.train.share < 1.0  # the backward pass is native


@needs_r2d2
@pytest.mark.parametrize(
    ("sched", "cores"),
    # pinned: on 4 cores the learner and server threads own theirs. (Where an actor is pinned to the
    # same hardware thread, the slices let its FIFO run the actor's steps between them, as an OS would,
    # while a burst without a GIL holds that non-preemptive thread whole: not a like-for-like pair.)
    [("shared", 2), ("shared", 4), ("pinned", 4)],
)
def test_the_gil_never_raises_r2d2_throughput(sched, cores):
    trace = load(R2D2_TRACE)
    hw = load_hw(
        "local", [f"cpu.cores_per_socket={cores}", "cpu.sockets=1", "cpu.threads_per_core=1"]
    )
    cfg = SimConfig(
        actors=2,
        envs_per_actor=2,
        inference_batch=4,
        cpu_sched=sched,
        replay_limit="learner",
        param_lock="on",
        sim_seconds=2.0,
    )
    times = derive_service_times(trace, hw, cfg, 2)
    mach = derive_machine(hw, cfg)
    with_gil = simulate_system(times, mach, cfg, 2).metrics
    no_gil = dataclasses.replace(times, python=PythonShare())
    without = simulate_system(no_gil, mach, cfg, 2).metrics
    assert with_gil["env_steps_per_s"] <= without["env_steps_per_s"] * (1 + 1e-9)
    assert with_gil["env_steps_per_s"] < without["env_steps_per_s"]  # it does bind
