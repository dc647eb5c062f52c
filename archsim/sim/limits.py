"""Ranges of the simulator's numeric knobs, and the bound on one run's simulated work.

Every knob is checked against its range before any work (``check_knob_ranges``, from SimConfig), so
an absurd value is one line and exit 2 instead of a MemoryError, a traceback, or a run of days.
Ranges come from hardware and published RL systems (far enough past them to leave room for what-ifs)
or from memory and time measured on this simulator; docs/LIMITS.md has the table.

Memory: the largest state a run holds is per actor (a random stream and a buffer of 1,024 drawn step
times) and per inference batch size (the inference service time of every batch size up to the
largest). Measured peak RSS (``/usr/bin/time -v``, ``archsim simulate traces/dqn-pong-cpu --hw
dgx1-v100 --sim-seconds 1``): 0.20 GB at 256 actors, 0.88 GB at 16,384 actors on every path (fast,
simpy, local inference, shared CPU), 0.89 GB at 16,384 actors on 32 x 512 x 8 = 131,072 hardware
threads; 0.41 GB with --inference-batch 2048 (22 s to derive the 2,048 batch sizes on a busy 2-core
machine). So every run within these ranges stays under 1 GB.

Time: ``check_simulated_work`` bounds the simulator CPU a run can take (an upper bound of its
simulated actor and learner steps x the measured CPU per step) to MAX_RUN_CPU_S.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from archsim.errors import ArchsimError


@dataclass(frozen=True)
class Range:
    """Closed range [low, high] of one knob (``low_open``: the low end is excluded), and why."""

    low: float
    high: float
    why: str
    low_open: bool = False
    high_text: str | None = None  # how the docs write the high end, where digits would not do

    def holds(self, value: float) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        return above and value <= self.high

    def text(self) -> str:
        low = "> " if self.low_open else ""
        high = self.high_text or format_number(self.high)
        return f"{low}{format_number(self.low)}..{high}"


def format_number(value: float) -> str:
    """A number as a user wrote it: 16,384; 0.5; an integer too long to read is cut short."""
    if isinstance(value, int) and len(str(abs(value))) > 18:
        return f"{str(value)[:6]}...({len(str(abs(value)))} digits)"
    if isinstance(value, float) and abs(value) >= 1e15:
        return f"{value:g}"
    return f"{int(value):,}" if float(value).is_integer() else f"{value:g}"


# The most simulated actors. R2D2 and Agent57 ran 256 actors, Ape-X 360 (Kapturowski et al. 2019;
# Horgan et al. 2018): 16,384 is 45x the largest of them. Memory: 0.88 GB peak RSS at 16,384 actors
# (module docstring), about 42 KB per actor once every actor has stepped.
MAX_ACTORS = 16_384
# Hardware threads of the largest config the hardware ranges allow (archsim.hw.limits): 32 sockets
# x 512 cores x 8 threads.
MAX_HW_THREADS = 32 * 512 * 8

KNOB_RANGES: dict[str, Range] = {
    "actors": Range(1, MAX_ACTORS, "45x the 360 actors of Ape-X; 0.88 GB peak RSS at the top"),
    # EnvPool and SEED RL step a batch of environments per actor thread; each actor step sums
    # envs_per_actor draws (a temporary of 1,024 x envs_per_actor floats: 8 MB at the top).
    "envs_per_actor": Range(1, 1024, "8 MB of step-time draws per actor refill at the top"),
    # The engine derives the inference time of every batch size up to the largest: measured 22 s
    # and 0.41 GB at 2,048 (busy 2-core machine); R2D2's batch is 64 (Kapturowski et al. 2019).
    "inference_batch": Range(1, 2048, "32x R2D2's 64; deriving 2,048 sizes took 22 s, 0.41 GB"),
    # SEED RL's batching timeout is milliseconds; one second is longer than any batch should wait.
    "inference_timeout_us": Range(0, 1e6, "a batch waiting over 1 s is no batching policy"),
    # DQN trains batches of 32 (Mnih et al. 2015), R2D2 64, Ape-X 512 (Horgan et al. 2018); 2^20
    # Atari 4-frame stacks of 84 x 84 x 4 B = 28,224 B are 29.6 GB, more than a V100 or an
    # A100-40GB holds for one step.
    "learner_batch": Range(1, 2**20, "32,768x DQN's 32; 29.6 GB of frame stacks at the top"),
    # DQN samples a batch of 32 every 4 env steps = 8 per transition (Mnih et al. 2015): 1,024 is
    # 128x that.
    "replay_ratio": Range(0, 1024, "128x DQN's 8 samples per inserted transition", low_open=True),
    "replay_slack_batches": Range(1, 1e6, "a million batches of slack is no rate limit"),
    "cpu_threads": Range(1, MAX_HW_THREADS, "the most hardware threads a hardware config has"),
    "learner_cpu_threads": Range(1, MAX_HW_THREADS, "the most hardware threads of a config"),
    # NVIDIA GB200 NVL72: 72 GPUs in one NVLink domain, the largest single system sold.
    "gpus": Range(1, 72, "GB200 NVL72, 72 GPUs in one NVLink domain"),
    # Actor nodes (archsim.sim.nodes): Ape-X ran 360 actors (Horgan et al. 2018); 1,024 nodes of a
    # 80-thread DGX-1 are 81,920 hardware threads in one layout.
    "nodes": Range(1, 1024, "2.8x Ape-X's 360 actors, each on its own node"),
    # A million learner steps is hours of training at the ~600 updates/s of the DQN preset runs,
    # longer than a simulated run (MAX_SIM_SECONDS).
    "publish_every": Range(1, 1e6, "longer than any simulated run at hundreds of updates/s"),
    # One simulated hour; the simulated-work bound below usually binds first.
    "sim_seconds": Range(0, 3600, "one simulated hour; the work bound may bind first", True),
    # numpy's SeedSequence takes any non-negative integer; 64 bits keep the CSV column one word.
    "seed": Range(0, 2**64 - 1, "a 64-bit unsigned integer", high_text="2^64-1"),
}
MAX_SIM_SECONDS = KNOB_RANGES["sim_seconds"].high
# Environments of one run (actors x envs_per_actor). Set when each actor's first refill drew
# 1,024 x envs_per_actor env-step times (16,384 actors of 1,024 envs then took 136 s of CPU before
# any simulated step); the first refill is now FIRST_CHUNK (16) x envs_per_actor, growing
# (archsim.sim.system), and those draws no longer bind. Measured (2026-11-24, busy 2-core VM):
# ActorStreams' draws for every actor's first step take 0.012 s at 256 x 1,024 and 0.14 s at
# 16,384 x 16 environments (2^18), 0.77 s at 16,384 x 1,024 (2^24, each knob at its top); a 2 s
# run of traces/dqn-pong-cpu on dgx1-v100 (--replay-ratio none) at 2^24 took 0.92 CPU s and
# 293 MB peak RSS (plus 2.9 s deriving 1,024 inference batch sizes, which --inference-batch
# bounds). What the bound keeps is a plausible system: published systems run hundreds to thousands
# of environments (SEED RL, Espeholt et al. 2020: 256 on its V100 row); 2^18 is 1,024 times that.
MAX_ENVIRONMENTS = 2**18

# Simulator CPU one run may take, estimated before it starts as (an upper bound of its simulated
# actor and learner steps) x (CPU per step). CPU per step, measured (`archsim simulate
# traces/dqn-pong-cpu --hw dgx1-v100`, busy 2-core machine): 25 us on the fast paths, 36 us with
# --cpu-sched shared, 51 us with --engine simpy at 256 actors, --sim-seconds 0.5; it grows with the
# actors (measured, cause not traced): 1,903 us (--cpu-sched shared --inference local) and
# 2,571 us (--inference local) a step at 16,384 actors, --sim-seconds 1. So 51 us + 0.154 us x actors.
MAX_RUN_CPU_S = 600.0
STEP_CPU_US = 51.0
ACTOR_CPU_US = (2571.0 - STEP_CPU_US) / 16_384


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def check_knob_ranges(config) -> None:
    """Raise an ArchsimError naming the flag when a numeric knob of ``config`` (a SimConfig) is
    outside its range; knobs that are None (derived later) or words are not numbers to check."""
    for name, limits in KNOB_RANGES.items():
        value = getattr(config, name, None)
        if value is None or isinstance(value, str | bool):
            continue
        number = value  # ints compare exactly (a float of 2**64 - 1 rounds up)
        if not limits.holds(number):
            raise ArchsimError(
                f"{_flag(name)}: {format_number(value)} is outside "
                f"the supported range {limits.text()} ({limits.why}; docs/LIMITS.md)"
            )
    environments = config.actors * config.envs_per_actor
    if environments > MAX_ENVIRONMENTS:
        raise ArchsimError(
            f"--actors x --envs-per-actor: {format_number(environments)} environments are over the "
            f"{MAX_ENVIRONMENTS:,} one run may step (1,024 times the 256 of SEED RL's "
            "V100 runs; docs/LIMITS.md)"
        )


def step_rate_bounds(times, machine, config, learner_batch: int) -> tuple[float, float, float]:
    """(actor steps/s, learner steps/s, extra steps) that bound a run from above: actors step at
    most as fast as their env-step CPU work on the fastest thread allows, on at most as many threads
    as there are; the learner at most once per its step's CPU or GPU time, and (paced) at most its
    replay ratio x the inserts. Waiting only lowers the count. The rate limiter is not counted on
    to hold the actors back: a run of 16,384 paced DQN actors inserted 8x faster than its learner
    sampled (archsim.sim.replay lets inserts run ahead until the learner starts)."""
    threads = min(config.cpu_threads or machine.hw_threads, machine.hw_threads)
    threads *= getattr(config, "nodes", 1)  # every actor node has the hardware config's CPU
    speed = machine.thread_speed_rel
    actor_step_s = config.envs_per_actor * float(np.mean(times.actor_step_cpu_s)) / speed
    parallel = min(config.actors, threads)
    actor_rate = parallel / actor_step_s if actor_step_s > 0 else math.inf
    learner_cpu_s = (times.learner_sample_cpu_s + times.learner_launch_cpu_s) / speed
    if times.on_gpu:
        learner_step_s = max(learner_cpu_s, times.learner_gpu_s)
    else:  # the *_gpu_s figures are CPU seconds of the capture machine
        learner_step_s = learner_cpu_s + times.learner_gpu_s / speed
    learner_rate = 1.0 / learner_step_s if learner_step_s > 0 else math.inf
    ratio = getattr(config, "samples_per_insert", None)
    if ratio is None and isinstance(config.replay_ratio, int | float):
        ratio = config.replay_ratio
    if ratio and math.isfinite(actor_rate):
        learner_rate = min(learner_rate, ratio * actor_rate * config.envs_per_actor / learner_batch)
    return actor_rate, learner_rate, 0.0


def simulated_steps_bound(times, machine, config, learner_batch: int) -> float:
    """Upper bound of the actor and learner steps ``config.sim_seconds`` can hold (step_rate_bounds)."""
    actor_rate, learner_rate, extra = step_rate_bounds(times, machine, config, learner_batch)
    return config.sim_seconds * (actor_rate + learner_rate) + extra


def step_cpu_us(actors: int) -> float:
    """Simulator CPU per simulated step with ``actors`` actors (STEP_CPU_US, ACTOR_CPU_US)."""
    return STEP_CPU_US + ACTOR_CPU_US * actors


def check_simulated_work(times, machine, config, learner_batch: int) -> None:
    """Refuse a run whose simulated steps could take more than MAX_RUN_CPU_S of simulator CPU,
    saying how many simulated seconds fit."""
    actor_rate, learner_rate, extra = step_rate_bounds(times, machine, config, learner_batch)
    steps = config.sim_seconds * (actor_rate + learner_rate) + extra
    if not math.isfinite(steps):
        raise ArchsimError(
            "trace: its actor steps take no CPU time, so nothing bounds how many steps a simulated "
            "second holds (expected actor env steps with a positive duration)"
        )
    cost_s = step_cpu_us(config.actors) * 1e-6
    if steps * cost_s <= MAX_RUN_CPU_S:
        return
    fits = (MAX_RUN_CPU_S / cost_s - extra) / (actor_rate + learner_rate)
    raise ArchsimError(
        f"--sim-seconds: {config.sim_seconds:g} s of this system can hold up to {steps:,.0f} "
        f"simulated steps, ~{steps * cost_s:,.0f} s of CPU at {step_cpu_us(config.actors):.0f} us "
        f"a step with {config.actors:,} actors, over the {MAX_RUN_CPU_S:.0f} s a run may take "
        f"(docs/LIMITS.md); use --sim-seconds {fits:{'.3g' if fits < 100 else ',.0f'}} or less"
    )


def usable_cpus() -> int:
    """CPUs this process may run on (its affinity mask where the OS has one)."""
    import os

    try:
        return len(os.sched_getaffinity(0)) or 1
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def check_jobs(jobs: int) -> None:
    """``--jobs`` of a sweep: 1 to the usable CPUs. Each worker is a single-threaded simulation of
    ~0.2 GB RSS (measured: `archsim simulate traces/dqn-pong-cpu --actors 256`, 0.20 GB), so workers
    beyond the CPUs add memory and no speed."""
    cpus = usable_cpus()
    if not 1 <= jobs <= cpus:
        raise ArchsimError(
            f"--jobs: {format_number(jobs)} is outside the supported range 1..{cpus} (the CPUs this "
            "process may use: more single-threaded workers only add memory; docs/LIMITS.md)"
        )


# Points of one sweep (the product of its knob lists). Each point is a run of up to
# MAX_RUN_CPU_S; at the default 2 simulated seconds a point takes seconds, so 100,000 points
# are days of CPU: more belongs in several sweeps. The points are built as a list up front.
MAX_SWEEP_POINTS = 100_000


def check_sweep_points(points: int) -> None:
    """A sweep's point count (the product of its knob lists' lengths) against MAX_SWEEP_POINTS."""
    if points > MAX_SWEEP_POINTS:
        raise ArchsimError(
            f"sweep: the knob lists make {format_number(points)} points, over the "
            f"{MAX_SWEEP_POINTS:,} one sweep may run (days of CPU at seconds a point; "
            "docs/LIMITS.md): split it into several sweeps"
        )
