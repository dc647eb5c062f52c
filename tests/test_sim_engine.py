"""The simulator against closed forms worked out by hand (issue 4, "Show")."""

from __future__ import annotations

import math

import numpy as np
import pytest
import simpy

from archsim.errors import ArchsimError
from archsim.sim.config import SimConfig
from archsim.sim.gpu import INFERENCE, LEARNER, SharedGpu
from archsim.sim.metrics import Recorder
from archsim.sim.run import simulate_system
from tests.test_sim_support import machine, service_times

# A window that ends half a step after the 400th step of 250 us, so no step ends on the boundary.
WINDOW_S = 0.1 + 125e-6
STEPS_IN_WINDOW = 400


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_throughput_linear_in_actors_up_to_the_threads_then_flat(engine):
    # 8 hardware threads, 2 reserved for the learner (training loop + inference server): 6 for actors.
    # Infinitely fast GPU, zero-latency link, batch 1: an actor alone steps every 250 us exactly, so
    # in the window it finishes 400 steps; k actors sharing a thread still finish
    # 400 steps between them (the thread is never idle).
    times = service_times(actor_step_s=(250e-6,), inference_s=0.0)
    fps = {}
    for actors in (1, 2, 4, 6, 8, 12, 24):
        cfg = SimConfig(
            actors=actors,
            inference_batch=1,
            inference_timeout_us=0,
            sim_seconds=WINDOW_S,
            engine=engine,
        )
        fps[actors] = simulate_system(times, machine(8), cfg, 32).metrics["env_steps_per_s"]
    per_actor = STEPS_IN_WINDOW / WINDOW_S
    for actors in (1, 2, 4, 6):
        assert fps[actors] == pytest.approx(actors * per_actor, rel=1e-12)
    for actors in (8, 12, 24):
        assert fps[actors] == pytest.approx(6 * per_actor, rel=1e-12)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_one_actor_central_steps_at_one_over_the_round_trip(engine):
    # One actor, one env: period = env step 230 us + up 15 us + server 5 us + batch wait 0 (a batch
    # of one closes at once) + inference 80 us + down 10 us = 340 us. SM shares 0.2 + 0.3 <= 1, so the
    # learner's kernels run beside inference without slowing it.
    times = service_times(
        actor_step_s=(230e-6,),
        up_s=15e-6,
        down_s=10e-6,
        server_s=5e-6,
        inference_s=80e-6,
        inference_frac=0.2,
        learner_frac=0.3,
        max_batch=1,
    )
    cfg = SimConfig(actors=1, inference_batch=1, sim_seconds=0.05, engine=engine)
    m = simulate_system(times, machine(4), cfg, 32).metrics
    period = 230e-6 + 15e-6 + 5e-6 + 80e-6 + 10e-6
    # Steps end at 230 us + k * period, k = 0, 1, ...: those inside 50 ms.
    steps = math.floor((0.05 - 230e-6) / period) + 1
    assert m["env_steps_per_s"] == pytest.approx(steps / 0.05, rel=1e-12)
    assert m["actor_wait_s_per_step"] == pytest.approx(period - 230e-6, rel=1e-6)


def test_batch_waits_for_the_timeout_when_it_cannot_fill():
    # Two actors, batch of 4 (2 actors x 2 envs), timeout 100 us: both requests arrive together at
    # 250 us (same step time), fill the batch at once -> no wait. With envs_per_actor=1 and batch 2
    # the batch also fills at once; so use batch 2 with one actor 100 us slower: the fast one waits.
    times = service_times(actor_step_s=(250e-6,), max_batch=2)
    cfg = SimConfig(
        actors=2, inference_batch=2, inference_timeout_us=100, sim_seconds=0.01, engine="simpy"
    )
    m = simulate_system(times, machine(4), cfg, 32).metrics
    # Identical actors: both requests arrive at the same instant and ride one batch of 2.
    assert m["inference_batch_mean"] == 2.0
    assert m["actor_wait_s_per_step"] == pytest.approx(0.0, abs=1e-12)


def test_timeout_closes_a_partial_batch():
    # Batch of 4 from 4 actors but the 4-thread machine has only 2 threads for actors: actors 0 and 2
    # share one thread, 1 and 3 the other, so requests come in pairs 250 us apart and a batch never
    # fills before the 100 us timeout: every batch holds 2 and every request waits exactly 100 us.
    times = service_times(actor_step_s=(250e-6,), max_batch=4)
    for engine in ("fast", "simpy"):
        cfg = SimConfig(
            actors=4, inference_batch=4, inference_timeout_us=100, sim_seconds=0.01, engine=engine
        )
        m = simulate_system(times, machine(4), cfg, 32).metrics
        assert m["inference_batch_mean"] == pytest.approx(2.0)
        assert m["inference_wait_mean_us"] == pytest.approx(100.0, rel=1e-6)


def test_smt_yield_slows_a_thread_by_its_siblings_busy_time():
    # Local inference, smt_yield 0.5, the learner (1 thread in local mode) on thread 0 = core 0 and
    # using no CPU (its step is all GPU); a 250 us env step.
    # - 1 core x 2 threads: no other core, so the actor takes the learner core's sibling (thread 1).
    #   That sibling is never busy: under the "busy" model the actor runs at full speed, 400 steps in
    #   the window; under "static" at 0.5, 200 steps.
    # - 2 cores x 2 threads, 3 actors: they take core 1's two threads (1 and 3; actors 0 and 2 share
    #   thread 1) and leave the learner core's sibling (thread 2) free. Both threads of core 1 are
    #   always busy, each at 0.5: 200 steps each, in either model.
    times = service_times(actor_step_s=(250e-6,))
    cfg = SimConfig(actors=1, inference="local", sim_seconds=0.1 + 250e-6)
    one_core = machine(2, cores=1, smt_yield=0.5)
    busy = simulate_system(times, one_core, cfg, 32).metrics
    static = simulate_system(times, one_core, cfg.replace(smt_model="static"), 32).metrics
    assert busy["env_steps_per_s"] == pytest.approx(400 / cfg.sim_seconds)
    assert static["env_steps_per_s"] == pytest.approx(200 / cfg.sim_seconds)
    two_cores = machine(4, cores=2, smt_yield=0.5)
    for model in ("busy", "static"):
        m = simulate_system(times, two_cores, cfg.replace(actors=3, smt_model=model), 32).metrics
        assert m["env_steps_per_s"] == pytest.approx((200 + 200) / cfg.sim_seconds)


def test_gpu_streams_share_sms_by_processor_sharing():
    # Job A (1 ms, all SMs) at t=0 and job B (1 ms, all SMs) at 0.5 ms: A runs alone for 0.5 ms, then
    # both at half rate; A's last 0.5 ms takes 1 ms -> A ends at 1.5 ms; B has done 0.5 ms by then and
    # finishes alone at 2.0 ms. Two jobs of half the SMs each run side by side at full speed.
    env = simpy.Environment()
    gpu = SharedGpu(env, Recorder(end=1.0, hw_threads=1))
    ends = {}

    def job(name, stream, start, work, frac):
        yield env.timeout(start)
        yield gpu.submit(stream, work, frac, name)
        ends[name] = env.now

    env.process(job("a", INFERENCE, 0.0, 1e-3, 1.0))
    env.process(job("b", LEARNER, 0.5e-3, 1e-3, 1.0))
    env.process(job("c", INFERENCE, 3e-3, 1e-3, 0.5))
    env.process(job("d", LEARNER, 3e-3, 1e-3, 0.5))
    env.run()
    assert ends["a"] == pytest.approx(1.5e-3)
    assert ends["b"] == pytest.approx(2.0e-3)
    assert ends["c"] == pytest.approx(4.0e-3)
    assert ends["d"] == pytest.approx(4.0e-3)


def test_littles_law_holds_on_every_queue():
    # A congested run (rate limiter on, threads shared, batches queueing on the GPU) through the
    # plain simpy path, where queue lengths are integrated independently of the waits.
    times = service_times(
        actor_step_s=(200e-6, 260e-6, 330e-6),
        up_s=12e-6,
        down_s=12e-6,
        server_s=20e-6,
        inference_s=300e-6,
        inference_frac=0.6,
        learner_gpu_s=900e-6,
        learner_frac=0.7,
        learner_cpu_s=150e-6,
        launch_s=100e-6,
    )
    cfg = SimConfig(actors=24, inference_batch=8, replay_ratio=4, sim_seconds=0.05, engine="simpy")
    m = simulate_system(times, machine(8), cfg, 32).metrics
    names = [k[: -len("_queue_mean")] for k in m if k.endswith("_queue_mean")]
    assert {"inference", "cpu_run", "gpu_inference", "gpu_learner"} <= set(names)
    busy = 0
    for q in names:
        rate, wait_s = m[f"{q}_arrivals_per_s"], m[f"{q}_wait_mean_us"] * 1e-6
        assert m[f"{q}_queue_mean"] == pytest.approx(rate * wait_s, rel=1e-9, abs=1e-12), q
        busy += m[f"{q}_queue_mean"] > 0
    assert busy >= 3  # the check is not vacuous: queues did form


@pytest.mark.parametrize("cpu_sched", ["pinned", "shared"])
def test_energy_is_the_integral_of_power(cpu_sched):
    # shared: 6 actors and 2 learner threads time-share 4 threads, so CPU power varies bin by bin
    times = service_times(
        actor_step_s=(200e-6, 300e-6), inference_s=100e-6, inference_frac=0.4, max_batch=8
    )
    threads = 8 if cpu_sched == "pinned" else 4
    cfg = SimConfig(actors=6, inference_batch=4, sim_seconds=0.03, cpu_sched=cpu_sched)
    result = simulate_system(times, machine(threads), cfg, 32, series_bins=40)
    starts, power_w = result.power_series
    width = cfg.sim_seconds / 40
    assert np.diff(starts) == pytest.approx(np.full(39, width))
    assert result.metrics["energy_j"] == pytest.approx(float(np.sum(power_w) * width), rel=1e-9)
    assert result.metrics["frames_per_joule"] == pytest.approx(
        result.metrics["frames_per_s"] * cfg.sim_seconds / result.metrics["energy_j"]
    )


def test_same_seed_same_results_and_seed_matters():
    times = service_times(actor_step_s=(180e-6, 230e-6, 310e-6, 400e-6), inference_s=50e-6)
    cfg = SimConfig(actors=10, inference_batch=4, sim_seconds=0.02, seed=7)
    first = simulate_system(times, machine(8), cfg, 32).metrics
    again = simulate_system(times, machine(8), cfg, 32).metrics
    other = simulate_system(times, machine(8), cfg.replace(seed=8), 32).metrics
    assert first == again
    assert first["frames_per_s"] != other["frames_per_s"]


def test_rate_limiter_ties_actors_to_the_learner():
    # Local inference, ratio 8 samples per transition, batch 32: one update per 4 transitions. The
    # learner step takes 1 ms on the GPU -> at most 1,000 updates/s -> 4,000 transitions/s, while
    # 6 unthrottled actors could make 6 / 250 us = 24,000. The limiter keeps |8 x inserted - sampled|
    # within its slack of 4 batches = 128 samples, plus the batch in flight (32) and the steps each of
    # the 6 actors has finished but not yet been allowed to insert (8 samples each).
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=1e-3)
    cfg = SimConfig(actors=6, inference="local", replay_ratio=8, sim_seconds=0.2)
    m = simulate_system(times, machine(8), cfg, 32).metrics
    assert m["learner_updates_per_s"] == pytest.approx(1000, rel=0.01)
    steps = m["env_steps_per_s"] * cfg.sim_seconds
    samples = 32 * m["learner_updates_per_s"] * cfg.sim_seconds
    assert abs(8 * steps - samples) <= 4 * 32 + 32 + 8 * 6
    assert m["replay_insert_wait_mean_us"] > 0  # the actors were the ones held back


@pytest.mark.parametrize(
    "knobs, flag",
    [
        (dict(actors=0), "--actors"),
        (dict(actors=-3), "--actors"),
        (dict(actors=4, inference_batch=8), "--inference-batch"),
        (dict(inference="remote"), "--inference"),
        (dict(sim_seconds=0), "--sim-seconds"),
        (dict(sim_seconds=float("inf")), "--sim-seconds"),  # the run would never end
        (dict(replay_ratio=-1.0), "--replay-ratio"),
        (dict(cpu_sched="fair"), "--cpu-sched"),
        (dict(replay_limit="actors"), "--replay-limit"),
        (dict(param_lock="yes"), "--param-lock"),
    ],
)
def test_bad_knobs_are_clear_errors(knobs, flag):
    with pytest.raises(ArchsimError, match=flag):
        SimConfig(**knobs)


@pytest.mark.parametrize("engine", ["fast", "simpy"])
def test_inference_server_threads_take_batches_in_turn(engine):
    # Server-bound: 50 us of server CPU per observation, batch 1. One server thread serves at most
    # 1 / 50 us = 20,000 requests/s; two take turns and serve 40,000/s. The 8 actors alone could
    # make 8 / (100 us step + 50 us server) = 53,000 requests/s, so the server is the limit.
    times = service_times(actor_step_s=(100e-6,), server_s=50e-6, max_batch=1)
    rates = {}
    for learner_threads in (2, 3):
        cfg = SimConfig(
            actors=8,
            inference_batch=1,
            learner_cpu_threads=learner_threads,
            sim_seconds=0.05,
            engine=engine,
        )
        rates[learner_threads] = simulate_system(times, machine(12), cfg, 32).metrics[
            "env_steps_per_s"
        ]
    assert rates[2] == pytest.approx(20_000, rel=0.01)
    assert rates[3] == pytest.approx(40_000, rel=0.01)
