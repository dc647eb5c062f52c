"""What every simulated component needs: the resolved service times and machine, and the shared
simulation objects. Kept apart from the components so each of them stays one small file.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import simpy

from archsim.errors import ArchsimError
from archsim.perf.cpu import ThreadLayout
from archsim.sim.config import SimConfig
from archsim.sim.metrics import PowerModel, Recorder
from archsim.sim.python_share import PythonShare

SAMPLE_CHUNK = (
    1024  # draws per refill of an actor's random stream (any value gives the same stream)
)


@dataclass(frozen=True)
class ServiceTimes:
    """Per-step work of the simulated system. CPU work is in seconds of one thread of the capture
    machine (the simulator divides by the target thread's speed); GPU work is in seconds on one target
    GPU when it runs alone; link times are one-way seconds on the target."""

    actor_step_cpu_s: np.ndarray  # samples: CPU work of one env step on the actor thread
    request_up_s: float  # one inference request (envs_per_actor observations), actor -> learner
    response_down_s: float  # actions back, learner -> actor
    server_cpu_s_per_obs: float  # learner-side CPU per observation: receive, replay insert
    inference_gpu_s: np.ndarray  # index = batch size in observations; host-to-device copy included
    inference_sm_fraction: np.ndarray  # index = batch size; time-weighted share of SMs in use
    learner_sample_cpu_s: float  # replay sampling and batch assembly before the step's launches
    learner_launch_cpu_s: float  # CPU launch overhead of the step's kernels (overlaps the GPU)
    learner_gpu_s: float  # one learner step on the GPU, batch copy included
    learner_sm_fraction: float
    publish_cpu_s: float  # learner CPU to publish parameters to the actors (local inference)
    # Server CPU per inference batch whatever its size (a SEED trace's recorded request handling and
    # the batch's kernel launches); 0 for traces that record no inference batches.
    server_cpu_s_per_batch: float = 0.0
    # True: a batch closes only when a server thread is free of earlier batches' CPU work, and keeps
    # filling until then (a SEED trace's server takes what is waiting when it comes back; see
    # workloads/r2d2/seed/learner_process.py). False: batches close on size or timeout alone.
    batch_when_server_free: bool = False
    # False on a machine without a GPU: inference batches run on the server thread and learner steps
    # on the learner thread, and the *_gpu_s figures are CPU seconds of the capture machine.
    on_gpu: bool = True
    # The share of each learner-process burst that is Python and holds the process's GIL
    # (archsim.sim.python_share); the default, all native, takes no GIL.
    python: PythonShare = PythonShare()
    # Without a GPU, with --param-lock on: the part of a learner step (after its replay sample, which
    # also holds the lock) done under the params lock, and of an inference batch of each size.
    learner_locked_cpu_s: float = 0.0
    inference_locked_s: np.ndarray | None = None
    # GPU DRAM bytes of an inference batch (index = batch size; None = 0) and of a learner step, for
    # the power model's DRAM term (archsim.perf.power)
    inference_dram_bytes: np.ndarray | None = None
    learner_dram_bytes: float = 0.0
    # Frames per env step of the trace's environment (archsim.trace.pacing; ALE frameskip 4 for the
    # bundled workloads, 1 when the trace does not say): frames_per_s = this x env_steps_per_s.
    frames_per_env_step: float = 1.0

    def _check_finite(self) -> None:
        """Every time and byte count derived from the trace is a finite number >= 0. A NaN means the
        trace had no usable step to take it from (e.g. its only learner step was cut by the end of
        recording): refused here in one line, because a NaN burst never finishes in the engine."""
        for item in dataclasses.fields(self):
            value = getattr(self, item.name)
            if value is None or isinstance(value, bool | str) or not _numeric(value):
                continue
            array = np.asarray(value, dtype=float)
            if np.all(np.isfinite(array)) and np.all(array >= 0):
                continue
            role = "learner" if item.name.startswith("learner") else "inference or actor"
            raise ArchsimError(
                f"trace: {item.name} is not a finite time or size >= 0 (the trace holds no whole "
                f"{role} step to take it from: a step cut by the end of recording has no CPU "
                "time); capture a longer run"
            )

    def check(self, config: SimConfig) -> None:
        if not 0 < self.frames_per_env_step < float("inf"):
            raise ArchsimError(
                "trace: frames_per_env_step must be a positive number, got "
                f"{self.frames_per_env_step}"
            )
        if len(self.actor_step_cpu_s) == 0:
            raise ArchsimError("trace: no actor steps to draw environment-step times from")
        if np.any(~np.isfinite(self.actor_step_cpu_s)) or np.any(self.actor_step_cpu_s < 0):
            raise ArchsimError("trace: actor step durations must be finite and >= 0")
        if config.inference == "central" and len(self.inference_gpu_s) <= config.inference_batch:
            raise ArchsimError(
                f"--inference-batch: no inference time for a batch of {config.inference_batch}"
            )
        self._check_finite()
        learner_step_s = self.learner_sample_cpu_s + self.learner_launch_cpu_s + self.learner_gpu_s
        if config.samples_per_insert is None and learner_step_s <= 0:
            raise ArchsimError(
                "trace: a learner step takes no time and no --replay-ratio limits it; the learner "
                "would run infinitely fast"
            )


@dataclass(frozen=True)
class Machine:
    """The parts of a HardwareConfig the engine uses, after knobs such as --cpu-threads."""

    hw_threads: int
    cores: int
    sockets: int
    cores_per_socket: int
    thread_speed_rel: float
    smt_yield: float
    power: PowerModel


class ActorStreams:
    """Per-actor random streams of env-step CPU work: draw ``k`` of actor ``a`` is the same whatever
    order the simulation asks in, so the fast and the plain path see identical work."""

    def __init__(self, samples: np.ndarray, actors: int, envs_per_actor: int, seed: int) -> None:
        self.samples = np.asarray(samples, dtype=float)
        self.envs = envs_per_actor
        seeds = np.random.SeedSequence(seed).spawn(actors)
        self.rngs = [np.random.Generator(np.random.PCG64(s)) for s in seeds]
        self.buffers: list[list[float]] = [[] for _ in range(actors)]
        self.pos = [0] * actors

    def chunk(self, actor: int) -> np.ndarray:
        """The next SAMPLE_CHUNK step works (each the sum of envs_per_actor env steps) of ``actor``."""
        idx = self.rngs[actor].integers(0, len(self.samples), size=SAMPLE_CHUNK * self.envs)
        return self.samples[idx].reshape(SAMPLE_CHUNK, self.envs).sum(axis=1)

    def next(self, actor: int) -> float:
        pos = self.pos[actor]
        buf = self.buffers[actor]
        if pos == len(buf):
            buf = self.buffers[actor] = self.chunk(actor).tolist()
            pos = 0
        self.pos[actor] = pos + 1
        return buf[pos]


@dataclass
class System:
    """The assembled run: shared by the actor, inference and learner processes."""

    env: simpy.Environment
    config: SimConfig
    times: ServiceTimes
    layout: ThreadLayout
    rec: Recorder
    threads: object  # SimpyThreads | LindleyThreads
    gpu: object  # SharedGpu
    replay: object  # RateLimitedReplay
    streams: ActorStreams
    learner_batch: int
    learner_thread: int
    server_threads: list[int]  # inference server threads; batch k is served by thread k % n
    actor_threads: np.ndarray
    params_lock: simpy.Resource | None = None  # --param-lock on, without a GPU
    gil: object = (
        None  # archsim.sim.gil.Gil of the learner process, when two of its threads take turns
    )


def locked(lock, work):
    """Run the generator ``work`` holding ``lock`` (a capacity-1 simpy Resource), if there is one."""
    if lock is None:
        yield from work
        return
    with lock.request() as turn:
        yield turn
        yield from work


def _numeric(value: object) -> bool:
    """A number or an array of numbers (not a nested dataclass such as PythonShare)."""
    if isinstance(value, int | float | np.number):
        return True
    return isinstance(value, np.ndarray | list | tuple) and np.asarray(value).dtype.kind in "iuf"
