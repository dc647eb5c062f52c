"""CPU model (docs/SIMULATOR.md "CPU: SMT, placement, GIL"): pure functions that place software
threads on hardware threads and say how fast each hardware thread runs.

Why pinning: the simulator assigns every software thread to one hardware thread, as thread-affinity
actor pools (Sample Factory, EnvPool) do: the learner's threads (training loop, inference server) get
the first hardware threads, and the actors are spread round-robin over the threads of the other
cores, idle cores before SMT siblings (as Linux's scheduler places runnable threads). The SMT
siblings of the learner's cores stay free while any other core exists (a pinned learner keeps its
cores), so adding hardware threads never slows the learner or its inference server. So the learner
side takes threads away from the actors, which is one of the two things that place the knee of an
actor sweep (docs/SIMULATOR.md). That is the default placement; ``actor_threads`` spreads the actors over
fewer threads, which archsim.sim.placement picks when time-sharing threads runs faster (actors that
share a thread hide inference latency, as SEED RL's do). A hardware thread serves its software
threads first-come first-served, which is a FIFO queue (Lindley recursion). Linux numbers the first hardware thread of every core before any second sibling, so
thread ``t`` lives on core ``t % cores``: the first ``cores`` software threads get a core each and
SMT only starts when more are placed.

SMT: a hardware thread whose core sibling also hosts a software thread runs at the hardware's
``smt_yield`` while the sibling is busy and at full speed while it idles. The simulator uses each
thread's expected speed, ``1 - (1 - smt_yield) * u``, with ``u`` the sibling's busy fraction
(measured in short calibration runs, :func:`smt_speeds`); ``u = 1`` (both always busy, the EnvPool
measurement ``smt_yield`` comes from) gives ``smt_yield`` itself.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class ThreadLayout:
    """Hardware threads in use and where each software thread runs."""

    hw_threads: int  # hardware threads in use
    cores: int  # cores that hold them
    sockets: int
    cores_per_socket: int
    speed: np.ndarray  # per hardware thread, relative to the capture machine's thread
    placement: np.ndarray  # software thread index -> hardware thread
    shared: np.ndarray  # per hardware thread: its core's other thread also hosts software
    note: str = ""  # for the user: why the actors use fewer threads than the default (or "")

    def core_of(self, thread: int) -> int:
        return thread % self.cores

    def socket_of_thread(self) -> np.ndarray:
        """Socket of every hardware thread (cores are numbered socket by socket)."""
        cores = np.arange(self.hw_threads) % self.cores
        return np.minimum(cores // self.cores_per_socket, self.sockets - 1)


def place_threads(
    n_reserved: int,
    n_actors: int,
    hw_threads: int,
    cores: int,
    sockets: int,
    cores_per_socket: int,
    thread_speed_rel: float,
    smt_yield: float,
    actor_threads: int | None = None,
) -> ThreadLayout:
    """Pin ``n_reserved`` learner threads, then ``n_actors`` actors (placement lists the learner's
    threads first), onto ``hw_threads``, and derive each hardware thread's speed. ``actor_threads``
    (None: the default below) spreads the actors over that many threads of
    :func:`actor_thread_order` instead (archsim.sim.placement chooses it)."""
    if hw_threads < 1:
        raise ValueError("hw_threads must be >= 1")
    cores = min(cores, hw_threads)
    reserved = np.arange(n_reserved) % hw_threads
    order, default = actor_thread_order(n_reserved, hw_threads, cores)
    used = default if actor_threads is None else max(1, min(actor_threads, len(order)))
    order = np.array(order[:used], dtype=int)
    actors = order[np.arange(n_actors) % len(order)]
    placement = np.concatenate([reserved, actors]).astype(int)
    occupied = np.zeros(hw_threads, dtype=bool)
    occupied[placement] = True
    core = np.arange(hw_threads) % cores
    busy_threads_per_core = np.bincount(core[occupied], minlength=cores)
    shared = busy_threads_per_core[core] >= 2
    speed = np.where(shared, thread_speed_rel * smt_yield, thread_speed_rel)
    return ThreadLayout(
        hw_threads=hw_threads,
        cores=cores,
        sockets=sockets,
        cores_per_socket=cores_per_socket,
        speed=speed.astype(float),
        placement=placement,
        shared=shared,
    )


def place_threads_on(
    cpu,
    n_reserved: int,
    n_actors: int,
    hw_threads: int | None = None,
    actor_threads: int | None = None,
) -> ThreadLayout:
    """:func:`place_threads` on a CPU config (anything with ``hw_threads``, ``cores``, ``sockets``,
    ``cores_per_socket``, ``thread_speed_rel`` and ``smt_yield``), so callers do not repeat its
    figures; ``hw_threads`` overrides the config's (a run that uses fewer threads)."""
    return place_threads(
        n_reserved=n_reserved,
        n_actors=n_actors,
        hw_threads=cpu.hw_threads if hw_threads is None else hw_threads,
        cores=cpu.cores,
        sockets=cpu.sockets,
        cores_per_socket=cpu.cores_per_socket,
        thread_speed_rel=cpu.thread_speed_rel,
        smt_yield=cpu.smt_yield,
        actor_threads=actor_threads,
    )


def actor_thread_order(n_reserved: int, hw_threads: int, cores: int) -> tuple[list[int], int]:
    """The hardware threads actors may use, in the order they take them, and how many the default
    placement uses: threads of cores the learner does not use (numbered first threads of every core,
    then second siblings, so idle cores fill before any SMT sibling), then the SMT siblings of the
    learner's cores, then the learner's own threads: its inference server threads before its
    training loop's (thread 0, the learner's critical path). The default keeps the learner's cores
    to itself, as a deployment that pins it does: its siblings take actors only when no other core
    is left, its own threads only when nothing else is."""
    cores = min(cores, hw_threads)
    reserved = (np.arange(n_reserved) % hw_threads).tolist()
    learner = list(dict.fromkeys(reserved[1:] + reserved[:1]))  # servers, then the training loop
    learner_cores = {t % cores for t in learner}
    own_cores = [t for t in range(n_reserved, hw_threads) if t % cores not in learner_cores]
    siblings = [t for t in range(n_reserved, hw_threads) if t % cores in learner_cores]
    default = len(own_cores) or len(siblings) or len(learner)
    return own_cores + siblings + learner, default


def smt_speeds(
    layout: ThreadLayout, busy_fraction: np.ndarray, thread_speed_rel: float, smt_yield: float
) -> ThreadLayout:
    """``layout`` with each SMT-shared thread at its expected speed given its sibling's busy
    fraction: ``thread_speed_rel * (1 - (1 - smt_yield) * u_sibling)``."""
    threads = np.arange(layout.hw_threads)
    core = threads % layout.cores
    # Busy fraction of the other threads of the same core (at most one more with 2-way SMT).
    per_core = np.bincount(core, weights=busy_fraction, minlength=layout.cores)
    sibling = np.clip(per_core[core] - busy_fraction, 0.0, 1.0)
    speed = np.where(
        layout.shared, thread_speed_rel * (1.0 - (1.0 - smt_yield) * sibling), thread_speed_rel
    )
    return dataclasses.replace(layout, speed=speed.astype(float))


def scale_cpu_seconds(capture_seconds: np.ndarray | float, thread_speed: float) -> np.ndarray:
    """Time of CPU work measured on the capture machine when run on a thread of relative speed."""
    return np.asarray(capture_seconds, dtype=float) / thread_speed
