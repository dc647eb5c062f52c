"""Assemble one run at t=0 (``build_run``): the recorder, the CPU executor of the engine
(simpy Resources, Lindley threads or the processor-sharing CPU), the GPU, the replay limiter, the
actors' streams, the params lock and GIL, the actors (processes, a fleet or a closed form) and the
learner process. archsim.sim.run advances and summarises it; archsim.sim.steady reads it at
checkpoints.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import simpy

from archsim.errors import ArchsimError
from archsim.perf.cpu import ThreadLayout
from archsim.sim.actors import (
    ActorFleet,
    closed_form_local,
    plain_central_actor,
    plain_local_actor,
)
from archsim.sim.batchers import FleetBatcher, PlainBatcher
from archsim.sim.config import SimConfig
from archsim.sim.cpu import LindleyThreads, SimpyThreads
from archsim.sim.fast_gil import choose_gil
from archsim.sim.gpu import SharedGpu
from archsim.sim.learner import learner_process
from archsim.sim.metrics import Recorder
from archsim.sim.params_lock import ParamsLock
from archsim.sim.replay import RateLimitedReplay
from archsim.sim.replay_server import attach_network
from archsim.sim.shared_cpu import SharedThreads
from archsim.sim.system import ActorStreams, Machine, ServiceTimes, System
from archsim.sim.timeline import Timeline
from archsim.sim.vector_shared import start_shared_fleet


@dataclass
class BuiltRun:
    """A run assembled and started at t=0, not yet advanced: ``env.run(until=...)`` moves it on;
    ``threads.flush()`` once at its end (archsim.sim.steady reads it at checkpoints before)."""

    env: simpy.Environment
    system: System
    threads: object  # LindleyThreads, SimpyThreads or SharedThreads
    rec: Recorder
    path: str
    fleet: ActorFleet | None  # the pinned central-inference fleet, when that path runs


def build_run(
    times: ServiceTimes,
    layout: ThreadLayout,
    machine: Machine,
    config: SimConfig,
    learner_batch: int,
    timeline: bool,
    series_bins: int,
    net_setup: tuple | None = None,
    closed_form: bool = True,
) -> BuiltRun:
    """The system of a run of ``config.sim_seconds`` (the recorder's window) at t=0. ``closed_form``
    False: local-inference actors run as processes even where ``closed_form_local`` would book the
    whole window at t=0 (a run read at checkpoints needs its steps counted as they end)."""
    n_learner = config.learner_threads
    shared = config.cpu_sched == "shared"
    # Pinned: software thread -> its hardware thread. Shared: every software thread is its own
    # (they all run on the whole CPU), numbered learner first, then actors.
    owners = np.arange(len(layout.placement)) if shared else layout.placement
    env = simpy.Environment()
    rec = Recorder(
        end=config.sim_seconds,
        hw_threads=layout.hw_threads,
        series_bins=series_bins,
        frames_per_env_step=times.frames_per_env_step,
    )
    if timeline:
        rec.timeline = Timeline()
    plain = config.engine == "simpy"
    if shared:
        threads = SharedThreads(
            env, layout.hw_threads, layout.cores, machine.thread_speed_rel, machine.smt_yield, rec
        )
    elif plain:
        threads = SimpyThreads(env, layout, rec)
    else:
        threads = LindleyThreads(env, layout, rec)
    slack = config.replay_slack_batches * max(
        learner_batch,
        (config.samples_per_insert or 0.0)
        * (config.inference_batch if config.inference == "central" else config.envs_per_actor),
    )
    system = System(
        env=env,
        config=config,
        times=times,
        layout=layout,
        rec=rec,
        threads=threads,
        gpu=SharedGpu(env, rec),
        replay=RateLimitedReplay(
            env,
            config.samples_per_insert,
            slack,
            rec,
            learner_only=config.replay_limit == "learner",
        ),
        streams=ActorStreams(
            times.actor_step_cpu_s, config.actors, config.envs_per_actor, config.seed
        ),
        learner_batch=learner_batch,
        learner_thread=int(owners[0]),
        # The learner's first thread runs the training loop; the others serve inference batches
        # in turn (all on the first one when the learner has a single thread).
        server_threads=[int(t) for t in owners[1:n_learner]] or [int(owners[0])],
        actor_threads=owners[n_learner:],
    )
    if config.param_lock == "on":
        if times.on_gpu:
            raise ArchsimError(
                "--param-lock on: modelled only on hardware without a GPU, where the locked "
                "forward pass and parameter update run on the CPU; on a GPU the lock would cover "
                "kernel launches, which the simulator does not split out"
            )
        if times.inference_locked_s is None:
            raise ArchsimError(
                "--param-lock on: the trace does not say which part of an inference batch holds "
                "the lock (it needs recorded inference batches, as SEED-style R2D2 traces have)"
            )
        system.params_lock = ParamsLock(env, len(system.server_threads), config.actors)
    if net_setup is not None:
        attach_network(system, machine.thread_speed_rel, net_setup)
    if times.python.any() and len({system.learner_thread, *system.server_threads}) > 1:
        # the learner process's threads take turns on its GIL (one thread alone never waits)
        system.gil = choose_gil(system, threads)  # fast where it is the same model
    fleet = None
    if shared and not plain and not timeline and config.inference == "central":
        engine = start_shared_fleet(system)  # actors without processes (archsim.sim.vector_shared)
    else:
        engine, fleet = _start_processes(system, plain or shared, timeline, closed_form)
        engine = "shared" if shared else engine
    if shared:
        # one burst at a time: a learner thread that also serves inference, and a server thread
        # (batches queued for it are served one after another, as on a pinned thread)
        threads.serialize(
            [system.learner_thread, *system.server_threads], each=system.server_threads
        )
    env.process(learner_process(system))
    return BuiltRun(env, system, threads, rec, engine, fleet)


def _start_processes(
    system: System, plain: bool, timeline: bool, closed_form: bool = True
) -> tuple[str, ActorFleet | None]:
    env, config = system.env, system.config
    if config.inference == "central":
        if plain:
            batcher = PlainBatcher(system)
            env.process(batcher.run())
            for actor in range(config.actors):
                env.process(plain_central_actor(system, actor, batcher))
            return "simpy", None
        fleet_batcher = FleetBatcher(system)
        fleet = ActorFleet(system, fleet_batcher)
        env.process(fleet_batcher.run())
        fleet.start()
        return "fast", fleet
    unpaced = config.samples_per_insert is None
    networked = getattr(system, "net", None) is not None
    own = closed_form and not plain and not timeline and _actors_own_threads(system)
    if own and unpaced and not networked:
        closed_form_local(system)
        return "closed_form", None
    for actor in range(config.actors):
        env.process(plain_local_actor(system, actor))
    return ("simpy" if plain else "fast"), None


def _actors_own_threads(system: System) -> bool:
    """True when no hardware thread hosts an actor together with any other software thread."""
    counts = np.bincount(system.layout.placement, minlength=system.layout.hw_threads)
    return bool(np.all(counts[system.actor_threads] == 1))
