"""Every fast path computes the reference model (issue 17): the GIL's own event loop on pinned and on
time-shared CPUs against archsim.sim.gil on the same bursts, and whole systems on the fast paths
(``--engine fast``: Lindley threads, actor fleets on pinned and time-shared CPUs, the fast GILs)
against the plain simpy path, with hypothesis over small random systems: both CPU schedulers,
actors, threads, SMT, envs per actor, central and local inference, pacing ratio or none, the
learner-only limiter, GIL shares, the params lock, a server that batches when free, and nodes with
a remote replay (pinned, local inference: what the network model covers).

Tolerance: 1e-9 relative for the GIL alone; for whole systems 1e-6 relative or what one event moved
across the window's end makes of a metric (_one_event). The paths add the same
durations in a different order (a burst's slices summed at once, a virtual clock advanced at other
instants), so they agree up to float rounding, except where events fall at one instant: the model
leaves that order open, both engines' orders are valid, and one completion may land on the other
side of the window's end. The time-shared run queue's arrival count for a lone GIL stretch that
straddles the window's end (archsim.sim.shared_gil) differs and is not compared here.
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
import simpy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.cpu import place_threads
from archsim.perf.power import cpu_per_core_w
from archsim.sim.config import SimConfig
from archsim.sim.cpu import LindleyThreads
from archsim.sim.fast_gil import FastGil
from archsim.sim.gil import HANDOFF_S, Gil
from archsim.sim.metrics import Recorder
from archsim.sim.python_share import BurstPython, PythonShare
from archsim.sim.replay_traffic import ReplayTraffic
from archsim.sim.run import simulate_system
from archsim.sim.shared_cpu import SharedThreads
from archsim.sim.shared_gil import SharedFastGil
from tests.test_sim_support import machine, service_times

COMPARED = (
    "frames_per_s",
    "learner_updates_per_s",
    "cpu_util",
    "cpu_core_util_max",
    "cpu_core_util_mean",
    "gpu_util",
    "gpu_sm_util",
    "inference_batch_mean",
    "actor_wait_s_per_step",
    "energy_j",
)
REL = 1e-6

# Distinct durations never tie (see tests/test_sim_fastpath.py): each gets an offset of sqrt(prime) ns.
PRIMES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41, 43, 47, 53, 59, 61)


def _untied(values_us: list[float], first: int = 0) -> list[float]:
    return [(us + PRIMES[first + i] ** 0.5 * 1e-3) * 1e-6 for i, us in enumerate(values_us)]


# -- the GIL alone ------------------------------------------------------------------------------------

bursts_strategy = st.lists(
    st.tuples(
        st.floats(0.0, 3e-3),  # start
        st.integers(0, 2),  # thread
        st.floats(5e-5, 8e-3),  # work
        st.sampled_from([0.0, 0.3, 0.7, 1.0]),  # Python share
        st.integers(0, 6),  # native ops
    ),
    min_size=1,
    max_size=6,
)


def _untie_bursts(bursts):
    return [
        (s + PRIMES[i] ** 0.5 * 1e-9, t, w + PRIMES[-1 - i] ** 0.5 * 1e-9, share, rel)
        for i, (s, t, w, share, rel) in enumerate(bursts)
    ]


def run_bursts(make_cpu, make_gil, bursts):
    """Finish time of each burst (start s, thread, work s, share, releases), the GIL, the recorder."""
    env = simpy.Environment()
    rec = Recorder(end=4e-3, hw_threads=3)
    cpu = make_cpu(env, rec)
    gil = make_gil(env, cpu)
    finish = [0.0] * len(bursts)

    def burst(i, start, thread, work, share, releases):
        yield env.timeout(start)
        yield from gil.run(thread, work, BurstPython(share, releases))
        finish[i] = env.now

    for i, spec in enumerate(bursts):
        env.process(burst(i, *spec))
    env.run()
    cpu.flush()
    return finish, gil, rec


def _pinned(env, rec):
    layout = place_threads(3, 0, 3, 3, 1, 3, 1.0, 1.0)  # three threads, each on its own core
    return LindleyThreads(env, layout, rec)


def _shared(cores):
    return lambda env, rec: SharedThreads(env, 3, cores, 1.0, 0.6, rec)


def _same_run(reference, fast):
    (ref_finish, ref_gil, ref_rec), (fast_finish, fast_gil, fast_rec) = reference, fast
    assert fast_finish == pytest.approx(ref_finish, rel=1e-9, abs=1e-15)
    assert fast_gil.handoffs == ref_gil.handoffs
    assert fast_gil.wait_s == pytest.approx(ref_gil.wait_s, rel=1e-9, abs=1e-15)
    assert fast_rec.cpu_busy_s == pytest.approx(ref_rec.cpu_busy_s, rel=1e-9, abs=1e-15)


@settings(max_examples=150, deadline=None)
@given(bursts_strategy)
def test_fast_gil_on_pinned_threads_is_the_reference(bursts):
    bursts = _untie_bursts(bursts)
    reference = run_bursts(_pinned, Gil, bursts)
    fast = run_bursts(_pinned, FastGil, bursts)
    _same_run(reference, fast)
    # every part is one run-queue arrival on both, none waits (each thread owns its core)
    ref_queue, fast_queue = reference[2].queue("cpu_run"), fast[2].queue("cpu_run")
    assert fast_queue.arrivals == ref_queue.arrivals
    assert fast_queue.wait_sum == pytest.approx(ref_queue.wait_sum, abs=1e-12)


@settings(max_examples=150, deadline=None)
@given(bursts_strategy, st.integers(1, 3))
def test_fast_gil_on_time_shared_cpu_is_the_reference(bursts, cores):
    bursts = _untie_bursts(bursts)
    reference = run_bursts(_shared(cores), Gil, bursts)
    fast = run_bursts(_shared(cores), SharedFastGil, bursts)
    _same_run(reference, fast)


def test_two_threads_by_hand_on_the_fast_gils():
    # tests/test_sim_gil.py's golden case: two threads, 10 ms of pure Python each from t=0, 2 cores:
    # A 0-5 ms, B 5+h..10+h, A 10+2h..15+2h, B 15+3h..20+3h; the same on both fast GILs.
    h = HANDOFF_S
    bursts = [(0.0, 0, 10e-3, 1.0, 0), (0.0, 1, 10e-3, 1.0, 0)]
    for cpu, gil in ((_pinned, FastGil), (_shared(2), SharedFastGil)):
        finish, fast, _ = run_bursts(cpu, gil, bursts)
        assert finish == pytest.approx([15e-3 + 2 * h, 20e-3 + 3 * h], rel=1e-9)
        assert fast.handoffs == 3


def test_a_lone_burst_is_one_event_on_the_fast_gils():
    # 40 slices of one lone burst: the reference takes several events per slice, the fast GILs a few
    # for the whole burst (the pinned one its own timer, the shared one one burst on the CPU).
    bursts = [(0.0, 0, 40e-3, 0.5, 39)]
    for cpu, gil in ((_pinned, FastGil), (_shared(2), SharedFastGil)):
        reference = run_bursts(cpu, Gil, bursts)
        fast = run_bursts(cpu, gil, bursts)
        _same_run(reference, fast)
        env_events = _events(cpu, gil, bursts)
        assert env_events < 10 < _events(cpu, Gil, bursts) / 10


def _events(make_cpu, make_gil, bursts) -> int:
    from archsim.sim.run import _events_processed

    env = simpy.Environment()
    rec = Recorder(end=1.0, hw_threads=3)
    gil = make_gil(env, make_cpu(env, rec))

    def burst(start, thread, work, share, releases):
        yield env.timeout(start)
        yield from gil.run(thread, work, BurstPython(share, releases))

    for spec in bursts:
        env.process(burst(*spec))
    env.run()
    return _events_processed(env)


# -- whole systems ----------------------------------------------------------------------------------


def _python(draw) -> PythonShare:
    def part():
        return BurstPython(draw(st.sampled_from([0.0, 0.4, 1.0])), draw(st.integers(0, 4)))

    return PythonShare(
        replay_sample=part(),
        train=part(),
        update=part(),
        inference=part(),
        server_per_obs=draw(st.sampled_from([0.0, 0.5])),
        server_per_batch=draw(st.sampled_from([0.0, 1.0])),
    )


@st.composite
def systems(draw, with_lock: bool = False):
    sched = draw(st.sampled_from(["pinned", "shared"]))
    # with_lock: CPU-only, central inference (what the params lock models), the lock drawn on or off
    inference = "central" if with_lock else draw(st.sampled_from(["central", "local"]))
    networked = sched == "pinned" and inference == "local" and draw(st.booleans())
    actors = draw(st.integers(2 if networked else 1, 8))
    envs = draw(st.integers(1, 2))
    per_request = draw(st.integers(1, actors))
    on_gpu = not with_lock and draw(st.booleans())
    learner_threads = draw(st.sampled_from([None, 2, 3]))
    cores = draw(st.integers(3, 6))
    threads = cores * draw(st.integers(1, 2))
    # The params lock makes ties by construction (a hand-off at the instant a burst ends; a batch's
    # free and locked parts of equal length, so server threads ask for the lock at one instant).
    # Hypothesis found three draws that differed by more than one event (_one_event), each traced
    # to a same-instant order the engines took differently and now take alike: the fleet batcher
    # resumed one event early as the server came free at the lock's hand-off
    # (test_params_lock_handed_on_as_a_server_comes_free_agrees; two earlier draws, 2 actors of
    # one step time on 3 pinned threads and of 80.0 and 81.0 us steps on 6, agree since), and
    # simultaneous lock requests went in each engine's own event order (frames/s 12,150 fast vs
    # 12,850 reference; archsim.sim.params_lock orders them:
    # test_params_lock_requests_at_one_instant_agree).
    lock = not on_gpu and inference == "central" and with_lock and draw(st.booleans())
    cfg = SimConfig(
        actors=actors,
        envs_per_actor=envs,
        inference=inference,
        inference_batch=per_request * envs,
        # A zero batching timeout closes a batch at the instant a request arrives, and actors that
        # start together with the same drawn step time arrive at the same instant: whether the
        # second joins the first's batch is the same-instant order the model leaves open (found by
        # hypothesis: 2 actors' requests at one instant, batches of 1+1 on the fleet and 2 on the
        # reference, one learner update apart in 0.02 s). Positive timeouts only.
        inference_timeout_us=draw(st.floats(0.001, 400)),
        replay_ratio=draw(st.one_of(st.none(), st.floats(1.0, 16.0))),
        replay_limit=draw(st.sampled_from(["both", "learner"])),
        learner_cpu_threads=learner_threads,
        sim_seconds=0.02,
        seed=draw(st.integers(0, 2**16)),
        smt_model=draw(st.sampled_from(["busy", "static"])),
        cpu_sched=sched,
        param_lock="on" if lock else "off",
        nodes=2 if networked and draw(st.booleans()) else 1,
        replay_placement=draw(st.sampled_from(["server", "learner"])) if networked else "learner",
    )
    bounds = [(0, 40), (0, 40), (0, 30), (10, 500), (100, 2000), (0, 300), (0, 300)]
    up, down, server, infer, learner, learner_cpu, launch = _untied(
        [draw(st.floats(lo, hi)) for lo, hi in bounds]
    )
    steps = _untied([draw(st.floats(80, 600)) for _ in range(draw(st.integers(1, 4)))], first=7)
    times = service_times(
        actor_step_s=tuple(steps),
        up_s=up,
        down_s=down,
        server_s=server,
        inference_s=infer,
        inference_frac=draw(st.floats(0.05, 1.0)),
        learner_gpu_s=learner,
        learner_frac=draw(st.floats(0.05, 1.0)),
        learner_cpu_s=learner_cpu,
        launch_s=launch,
        max_batch=cfg.inference_batch,
        on_gpu=on_gpu,
    )
    times = dataclasses.replace(
        times,
        python=_python(draw),
        batch_when_server_free=draw(st.booleans()),
        learner_locked_cpu_s=learner * 0.3 if lock else 0.0,
        inference_locked_s=np.full(cfg.inference_batch + 1, infer * 0.5) if lock else None,
    )
    mach = machine(threads, cores=cores, smt_yield=draw(st.floats(0.3, 1.0)))
    return cfg, times, mach


def _network_args(cfg: SimConfig) -> dict:
    if cfg.nodes == 1 and cfg.replay_placement == "learner":
        return {}
    net = load_hw("dgx1-v100", ["network.nic_bw_gbs=5"]).network
    obs = 84 * 84 * 4  # one ALE observation
    traffic = ReplayTraffic(
        insert_bytes_per_item=obs,
        insert_items=1,
        sample_request_bytes=16,
        sample_bytes_per_item=obs,
        priority_bytes_per_item=12,
        insert_server_s_per_item=10e-6,
        sample_server_s=20e-6,
        priority_server_s=5e-6,
    )
    return {"network": net, "traffic": traffic}


def _one_event(cfg: SimConfig, times, mach, plain: dict) -> dict[str, float]:
    """What one event moved across the window's end does to each compared metric (absolute).

    The model leaves the order of events at one instant open, and random systems hit such ties
    (actors that start together with the same drawn step time; the params lock handed off at the
    instant a burst ends; a lock hand-off and an actor's step on the time-shared CPU). Both engines'
    orders are valid; a different order at a tie can move one completion across the window's end,
    so the model resolves a count only to one event of that kind in the window, and a utilization
    to that event's busy time over the window. One event: an actor step (``envs_per_actor`` env
    steps), a learner update, an inference batch, each with its CPU and GPU time."""
    t = cfg.sim_seconds
    batch = cfg.inference_batch
    infer_s = float(np.max(times.inference_gpu_s))
    # CPU busy time of the longest event of each kind; a sibling SMT thread runs at smt_yield
    step_cpu_s = float(np.max(times.actor_step_cpu_s)) * cfg.envs_per_actor
    if cfg.inference == "local" and not times.on_gpu:
        step_cpu_s += infer_s
    update_cpu_s = (
        times.learner_sample_cpu_s
        + times.learner_launch_cpu_s
        + times.publish_cpu_s
        + (0.0 if times.on_gpu else times.learner_gpu_s)
    )
    batch_cpu_s = times.server_cpu_s_per_obs * batch + (0.0 if times.on_gpu else infer_s)
    cpu_s = max(step_cpu_s, update_cpu_s, batch_cpu_s) / mach.smt_yield
    gpu_s = max(times.learner_gpu_s, infer_s) if times.on_gpu else 0.0
    cores = mach.cores
    power = mach.power
    energy_j = (
        cpu_per_core_w(
            power.cpu_idle_w,
            power.cpu_max_w,
            power.cores_per_socket or cores,
            power.threads_per_core,
        )
        * cpu_s
        + (power.gpu_max_w - power.gpu_idle_w) * gpu_s
    )
    # an average moves by one event's share: one batch more or fewer and one batch's observations
    batches = plain["inference_batches_per_s"] * t
    steps = plain["env_steps_per_s"] * t
    longest_s = max(cpu_s, gpu_s, times.request_up_s + times.response_down_s)
    actors_per_batch = max(batch // cfg.envs_per_actor, 1)
    wait = plain["actor_wait_s_per_step"]
    return {
        "frames_per_s": times.frames_per_env_step * cfg.envs_per_actor / t,
        "learner_updates_per_s": 1 / t,
        "cpu_util": cpu_s / (mach.hw_threads * t),
        "cpu_core_util_max": cpu_s / t,
        "cpu_core_util_mean": cpu_s / (cores * t),
        "gpu_util": gpu_s / t,
        "gpu_sm_util": gpu_s / t,
        "inference_batch_mean": 2 * batch / max(batches - 1, 1),
        "actor_wait_s_per_step": (actors_per_batch * longest_s + wait * cfg.envs_per_actor)
        / max(steps - cfg.envs_per_actor, 1),
        "energy_j": energy_j,
    }


# Random systems on every run (not derandomized): a metric agrees when it is within REL or within
# what one event moved across the window's end makes of it (_one_event); a difference larger than
# that is a real divergence between the engines. Half the draws are CPU-only central-inference
# systems with the params lock drawn on or off (systems(with_lock=True)).
@settings(
    max_examples=250,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.one_of(systems(), systems(with_lock=True)))
def test_fast_paths_agree_with_the_reference(system):
    fast_and_reference_agree(*system)


def fast_and_reference_agree(cfg, times, mach) -> None:
    """Run one system on the fast engine and the simpy reference; they agree within _agree's bound."""
    extra = _network_args(cfg)
    fast = simulate_system(times, mach, cfg.replace(engine="fast"), 32, **extra)
    plain = simulate_system(times, mach, cfg.replace(engine="simpy"), 32, **extra)
    _agree(cfg, times, mach, fast, plain)


def _agree(cfg, times, mach, fast, plain) -> None:
    assert plain.engine in ("simpy", "shared")
    tie = _one_event(cfg, times, mach, plain.metrics)
    for name in COMPARED:
        f, p = fast.metrics[name], plain.metrics[name]
        within_rel = f == pytest.approx(p, rel=REL, abs=1e-9)
        assert within_rel or abs(f - p) <= tie[name] * (1 + 1e-9), (name, f, p, tie[name])


def test_time_shared_central_run_takes_the_fleet_with_fewer_events():
    # 32 actors, a GIL between the training loop and the server: the fleet and the fast GIL.
    steps = np.random.default_rng(1).normal(230e-6, 20e-6, size=50)
    times = service_times(
        actor_step_s=steps, server_s=20.3e-6, inference_s=100.3e-6, learner_cpu_s=150.7e-6
    )
    times = dataclasses.replace(
        times,
        python=PythonShare(replay_sample=BurstPython(1.0, 3), server_per_obs=0.5),
    )
    cfg = SimConfig(actors=32, inference_batch=16, sim_seconds=0.05, cpu_sched="shared")
    fast = simulate_system(times, machine(8), cfg.replace(engine="fast"), 32)
    plain = simulate_system(times, machine(8), cfg.replace(engine="simpy"), 32)
    assert fast.engine == "shared_fast" and plain.engine == "shared"
    for name in COMPARED:
        assert fast.metrics[name] == pytest.approx(plain.metrics[name], rel=REL, abs=1e-9), name
    assert fast.events * 3 < plain.events
