"""What every simulated component needs: the resolved service times and machine, and the shared
simulation objects. Kept apart from the components so each of them stays one small file.
"""

from __future__ import annotations

import copy
import dataclasses
import threading
from dataclasses import dataclass

import numpy as np
import simpy
from numpy.random.bit_generator import ISeedSequence

from archsim.errors import ArchsimError
from archsim.perf.cpu import ThreadLayout
from archsim.sim.config import SimConfig
from archsim.sim.metrics import PowerModel, Recorder
from archsim.sim.pcg_streams import PrimedDraws
from archsim.sim.python_share import PythonShare

# An actor's stream is refilled in chunks that start at FIRST_CHUNK step works and double up to
# SAMPLE_CHUNK. Any sizes give the same stream (chunked Generator.integers draws continue one
# sequence: tests/test_sim_streams.py); small first chunks matter with many actors: a paced 2 s run
# of 4,096 DQN actors takes ~3 steps per actor (benchmarks/sim_speed.py), where a first chunk of
# 1,024 spent most of the run drawing and listing values never used.
FIRST_CHUNK = 16
SAMPLE_CHUNK = 1024
# Step works kept per thread for the next run of the same streams (the SMT calibration passes and
# the run, archsim.sim.run; sweep points that differ only in other knobs): ~32 MB as Python floats,
# less than the 4,096 x 1,024 values one pass of 4,096 actors held with fixed chunks of 1,024.
KEEP_VALUES = 2**20


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


class _KeptStreams:
    """The first values of each actor's stream, drawn once and read by every run of the same
    streams (same samples, envs per actor and seed; actor ``a``'s stream does not depend on the
    number of actors). ``rngs[a]`` sits just after ``values[a]``."""

    def __init__(self, samples: np.ndarray, envs: int, seed: int) -> None:
        self.samples = samples.copy()  # compared, not trusted by identity: arrays are mutable
        self.envs = envs
        self.seed = seed
        self.rngs: list[np.random.Generator | None] = []
        self.values: list[list[float]] = []
        self.words = np.zeros((0, 4), dtype=np.uint64)  # each actor's PCG64 seed words
        self.held = 0  # values kept over all actors
        # actors whose first values came from one vectorized draw: (the draw, the actor's row),
        # from which its generator is made when it needs more (archsim.sim.pcg_streams)
        self.primed: dict[int, tuple[PrimedDraws, int]] = {}

    def fits(self, samples: np.ndarray, envs: int, seed: int) -> bool:
        return self.envs == envs and self.seed == seed and np.array_equal(self.samples, samples)

    def reserve(self, actors: int) -> None:
        have = len(self.values)
        if have < actors:
            self.rngs.extend([None] * (actors - have))
            self.values.extend([] for _ in range(actors - have))
            more = seed_words(self.seed, np.arange(have, actors, dtype=np.uint32))
            self.words = np.concatenate([self.words, more])

    def rng(self, actor: int) -> np.random.Generator:
        """Actor ``actor``'s generator, made when first needed: PCG64 seeded as by child
        ``actor`` of SeedSequence(seed).spawn(...), from its words computed for all actors at
        once: making a SeedSequence and a PCG64 from it per actor took 28 ms for 4,096 actors,
        PCG64 from the words 3 ms (numpy 2.4, this 2-core machine)."""
        rng = self.rngs[actor]
        if rng is None:
            bits = np.random.PCG64(_SeedWords(self.words[actor]))
            primed = self.primed.pop(actor, None)
            if primed is not None:  # past the values prime drew
                bits.state = primed[0].state(primed[1])
            rng = self.rngs[actor] = np.random.Generator(bits)
        return rng

    def prime(self, actors: int, steps: int, keep_values: int) -> None:
        """Every actor below ``actors`` that has drawn nothing gets its first ``steps`` step works,
        the values its first refill would draw, from one draw for all of them
        (archsim.sim.pcg_streams: ~2 ms for 4,096 actors instead of ~23 ms one by one), when
        the kept prefix has room for them all."""
        n = len(self.samples)
        fresh = [a for a in range(actors) if not self.values[a] and self.rngs[a] is None]
        if not fresh or not 2 <= n < 2**32 or self.held + steps * len(fresh) > keep_values:
            return
        draws = PrimedDraws(self.words[fresh], n, steps * self.envs)
        picked = self.samples[draws.values]  # (actors, steps x envs)
        if self.envs > 1:  # each step's envs summed as ActorStreams._draw sums them
            picked = picked.reshape(len(fresh) * steps, self.envs).sum(axis=1)
            picked = picked.reshape(len(fresh), steps)
        for row, (actor, values, ok) in enumerate(
            zip(fresh, picked.tolist(), draws.ok.tolist(), strict=True)
        ):
            if ok:  # else (a Lemire redraw, below n / 2**32 a draw) numpy draws it
                self.values[actor].extend(values)
                self.primed[actor] = (draws, row)
                self.held += steps


# numpy's SeedSequence (numpy/random/bit_generator.pyx, after M. O'Neill's seed_seq alternative,
# https://www.pcg-random.org/posts/developing-a-seed_seq-alternative.html): its hash constants.
_INIT_A, _MULT_A, _INIT_B, _MULT_B = 0x43B0D7E5, 0x931E8875, 0x8B51F9DD, 0x58F38DED
_MIX_MULT_L, _MIX_MULT_R, _XSHIFT, _MASK32 = 0xCA01F9DD, 0x4973F715, 16, 0xFFFFFFFF
_POOL = 4  # SeedSequence's default pool size, in 32-bit words


def seed_words(seed: int, actors: np.ndarray) -> np.ndarray:
    """``SeedSequence(seed, spawn_key=(a,)).generate_state(4, np.uint64)`` for each ``a`` in
    ``actors`` (uint32), as rows, computed in uint32 arithmetic over all of them at once (numpy's
    algorithm, checked word for word against it in tests/test_sim_streams.py)."""
    n = len(actors)
    run = []  # the seed as little-endian 32-bit words ([0] for 0), zero-padded to the pool
    rest = seed
    while True:
        run.append(rest & _MASK32)
        rest >>= 32
        if not rest:
            break
    run += [0] * (_POOL - len(run))
    entropy = [np.full(n, word, dtype=np.uint32) for word in run] + [actors.astype(np.uint32)]
    hash_const = _INIT_A

    def hashmix(value: np.ndarray) -> np.ndarray:
        nonlocal hash_const
        value = value ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_A) & _MASK32
        value = value * np.uint32(hash_const)
        return value ^ (value >> np.uint32(_XSHIFT))

    def mix(x: np.ndarray, y: np.ndarray) -> np.ndarray:
        result = np.uint32(_MIX_MULT_L) * x - np.uint32(_MIX_MULT_R) * y
        return result ^ (result >> np.uint32(_XSHIFT))

    pool = [hashmix(entropy[i]) for i in range(_POOL)]
    for src in range(_POOL):
        for dst in range(_POOL):
            if src != dst:
                pool[dst] = mix(pool[dst], hashmix(pool[src]))
    for src in range(_POOL, len(entropy)):
        for dst in range(_POOL):
            pool[dst] = mix(pool[dst], hashmix(entropy[src]))
    state = np.empty((n, 2 * _POOL), dtype=np.uint32)  # generate_state: 8 words from the pool
    hash_const = _INIT_B
    for i in range(2 * _POOL):
        value = pool[i % _POOL] ^ np.uint32(hash_const)
        hash_const = (hash_const * _MULT_B) & _MASK32
        value = value * np.uint32(hash_const)
        state[:, i] = value ^ (value >> np.uint32(_XSHIFT))
    return state.astype("<u4").view("<u8").astype(np.uint64)


class _SeedWords(ISeedSequence):
    """A seed sequence that hands PCG64 the words ``seed_words`` computed for one actor."""

    def __init__(self, words: np.ndarray) -> None:
        self.words = words

    def generate_state(self, n_words: int, dtype=np.uint32) -> np.ndarray:
        if n_words != 4 or np.dtype(dtype) != np.uint64:
            raise ValueError("_SeedWords holds the 4 uint64 words PCG64 asks for, nothing else")
        return self.words


_kept = threading.local()  # one _KeptStreams per thread: runs on other threads never race on it


def _kept_streams(samples: np.ndarray, actors: int, envs: int, seed: int) -> _KeptStreams:
    kept = getattr(_kept, "streams", None)
    if kept is None or not kept.fits(samples, envs, seed):
        kept = _kept.streams = _KeptStreams(samples, envs, seed)
    kept.reserve(actors)
    return kept


class ActorStreams:
    """Per-actor random streams of env-step CPU work: draw ``k`` of actor ``a`` is the same whatever
    order the simulation asks in, so the fast and the plain path see identical work. Actor ``a``'s
    step works are, in order, the sums of ``envs_per_actor`` consecutive draws from ``samples`` with
    indices from ``Generator(PCG64(SeedSequence(seed).spawn(actors)[a])).integers(0, len(samples))``.

    The hot loops read ``buffers[a][pos[a]]`` and call ``refill`` when ``pos[a]`` reaches the
    buffer's end. Values are read first from the kept prefix shared with earlier runs of the same
    streams (``_KeptStreams``, which this run extends while it holds fewer than ``keep_values``),
    then from a private copy of the actor's generator."""

    def __init__(
        self,
        samples: np.ndarray,
        actors: int,
        envs_per_actor: int,
        seed: int,
        keep_values: int = KEEP_VALUES,
    ) -> None:
        self.samples = np.asarray(samples, dtype=float)
        self.envs = envs_per_actor
        self.keep_values = keep_values
        self.kept = _kept_streams(self.samples, actors, envs_per_actor, seed)
        self.kept.prime(actors, FIRST_CHUNK, keep_values)
        # every actor starts on its kept prefix (an empty list until a run draws)
        self.buffers: list[list[float]] = self.kept.values[:actors]
        self.pos = [0] * actors
        self.private: list[np.random.Generator | None] = [None] * actors
        self.drawn = [0] * actors  # values drawn so far (used once an actor reads privately)

    def _draw(self, rng: np.random.Generator, steps: int) -> list[float]:
        idx = rng.integers(0, len(self.samples), size=steps * self.envs)
        if self.envs == 1:  # a sum of one value is that value
            return self.samples[idx].tolist()
        return self.samples[idx].reshape(steps, self.envs).sum(axis=1).tolist()

    def refill(self, actor: int) -> tuple[list[float], int]:
        """(buffer, position) of ``actor``'s next value, once ``pos[actor]`` reached its buffer's
        end. While ``private[actor]`` is None the buffer is the actor's kept prefix."""
        rng = self.private[actor]
        if rng is None:
            kept, pos = self.kept, self.pos[actor]
            prefix = kept.values[actor]  # read up to its end (an earlier run's draws too)
            room = self.keep_values - kept.held
            if room > 0:  # extend the kept prefix in place: later runs read it too
                steps = min(_chunk_after(pos), room)
                prefix.extend(self._draw(kept.rng(actor), steps))
                kept.held += steps
                return prefix, pos
            # a copy at the same point of the stream: the kept generator stays at the prefix end
            rng = self.private[actor] = copy.deepcopy(kept.rng(actor))
            self.drawn[actor] = pos
        values = self._draw(rng, _chunk_after(self.drawn[actor]))
        self.drawn[actor] += len(values)
        self.buffers[actor] = values
        return values, 0

    def next(self, actor: int) -> float:
        pos = self.pos[actor]
        buf = self.buffers[actor]
        if pos == len(buf):
            buf, pos = self.refill(actor)
        self.pos[actor] = pos + 1
        return buf[pos]

    def take(self, actor: int, steps: int) -> np.ndarray:
        """``actor``'s next ``steps`` step works as an array."""
        out = []
        while len(out) < steps:
            pos = self.pos[actor]
            buf = self.buffers[actor]
            if pos == len(buf):
                buf, pos = self.refill(actor)
            part = buf[pos : pos + steps - len(out)]
            out.extend(part)
            self.pos[actor] = pos + len(part)
        return np.array(out)


def _chunk_after(drawn: int) -> int:
    """Step works to draw for an actor that has drawn ``drawn``: doubling, FIRST_CHUNK to SAMPLE_CHUNK."""
    return min(SAMPLE_CHUNK, max(FIRST_CHUNK, drawn))


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
    params_lock: simpy.Resource | None = None  # --param-lock on, without a GPU (ParamsLock)
    gil: object = (
        None  # archsim.sim.gil.Gil of the learner process, when two of its threads take turns
    )


def _numeric(value: object) -> bool:
    """A number or an array of numbers (not a nested dataclass such as PythonShare)."""
    if isinstance(value, int | float | np.number):
        return True
    return isinstance(value, np.ndarray | list | tuple) and np.asarray(value).dtype.kind in "iuf"
