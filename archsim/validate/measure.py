"""Run the REAL workloads at one configuration, without the profiler, and measure frames/s, learner
updates/s and CPU utilization over a steady window.

frames/s = 4 x env steps/s (ALE frameskip 4, REFERENCE.md). CPU utilization = CPU seconds of every
process of the run (``time.process_time``: all threads of a process) over the window, divided by
window x hardware threads of this machine (``os.cpu_count()``). The same CPU seconds are kept
(``cpu_s``): frames per CPU-second is the figure other jobs on the box cannot move much, since
a run slowed by time-sharing spends about the same CPU per frame (archsim.validate.load).

R2D2: the SEED runtime (workloads/r2d2/seed) always wraps each process in a torch profiler
(``ProcessProfiler``). Here each spawned process first swaps that class for ``SamplingRecorder``,
which records no trace but samples (wall time, counter, process CPU time) every ``SAMPLE_PERIOD_S``,
so the counts over any window can be read afterwards. The phase/step markers are no-ops without a
profiler (archsim.capture.markers).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np

from archsim.errors import ArchsimError
from archsim.validate.configs import (
    R2D2_BURN_IN,
    R2D2_REPLAY_CAPACITY,
    R2D2_SEQUENCE_LENGTH,
    R2D2_SEQUENCE_OVERLAP,
    RunConfig,
)

FRAMESKIP = 4  # ALE v5 frameskip (REFERENCE.md): one env step = 4 frames
SAMPLE_PERIOD_S = 0.1  # counter sampling in R2D2 processes: 1% of a 10 s window per sample
# R2D2: measuring starts this long after the last actor has stepped (its first steps pay one-off
# costs: allocator growth, the learner's first updates); a design choice, a tenth of a full run.
R2D2_WARMUP_S = 1.5
# DQN: the capture's warm-up (workloads/dqn/capture.py): learn start, then 8 training steps.
DQN_WARMUP_TRAIN_STEPS = 8


@dataclasses.dataclass(frozen=True)
class Measurement:
    frames_per_s: float
    learner_updates_per_s: float
    cpu_util: float  # fraction of all hardware threads of this machine
    window_s: float
    # 1-minute load average of the machine at the end of the run (os.getloadavg): other jobs on this
    # shared box move the measured rates; a run at a load well above the cores is suspect.
    loadavg_1min: float = float("nan")
    # the machine's speed around the run: CPU ms of archsim.validate.speed's reference work, the mean
    # of a reading before and one after (NaN in measurements from before it was taken)
    speed_ref_ms: float = float("nan")
    # CPU seconds of every thread of every process of the run over the window (NaN in measurements
    # from before it was kept: then cpu_util x window x hardware threads, see frames_per_cpu_s)
    cpu_s: float = float("nan")
    # the machine's load from the run's start to its end (archsim.validate.load): CPUs kept busy by
    # other processes, and CPUs' worth of time stolen by the hypervisor (NaN in older measurements)
    other_busy_cpus: float = float("nan")
    steal_cpus: float = float("nan")

    def frames_per_cpu_s(self, hw_threads: int) -> float:
        """Frames per CPU-second of the run's own processes; ``hw_threads`` (this machine's)
        rebuilds the CPU seconds of measurements saved before ``cpu_s`` was."""
        cpu_s = self.cpu_s
        if not math.isfinite(cpu_s):
            cpu_s = self.cpu_util * self.window_s * hw_threads
        return self.frames_per_s * self.window_s / cpu_s if cpu_s > 0 else math.nan


def dqn_settings(config: RunConfig) -> Any:
    from workloads.dqn.settings import DqnConfig

    return DqnConfig(batch_size=config.learner_batch, train_every=config.train_every)


def seed_settings(config: RunConfig, seconds: float) -> Any:
    from workloads.r2d2.config import R2D2Config
    from workloads.r2d2.seed.settings import SeedSettings

    r2d2 = R2D2Config(
        sequence_length=R2D2_SEQUENCE_LENGTH,
        burn_in=R2D2_BURN_IN,
        sequence_overlap=R2D2_SEQUENCE_OVERLAP,
        batch_size=config.learner_batch,
        replay_capacity_sequences=R2D2_REPLAY_CAPACITY,
    )
    return SeedSettings(
        actors=config.actors,
        envs_per_actor=config.envs_per_actor,
        inference_batch=config.inference_batch,
        replay_ratio=config.replay_ratio,
        seconds=seconds,
        r2d2=r2d2,
    )


def measure(config: RunConfig, dqn_steps: int, r2d2_seconds: float, work_dir: Path) -> Measurement:
    """One real run of ``config``, with the machine's speed read before and after it and its load
    read over it."""
    from archsim.validate.load import load_between, snapshot
    from archsim.validate.speed import reference_cpu_ms

    before_ms = reference_cpu_ms()
    start = snapshot()
    if config.workload == "dqn":
        m = measure_dqn(config, dqn_steps)
    else:
        m = measure_r2d2(config, r2d2_seconds, work_dir)
    load = load_between(start, snapshot())
    speed_ms = (before_ms + reference_cpu_ms()) / 2
    return dataclasses.replace(
        m,
        loadavg_1min=load.loadavg_1min,
        speed_ref_ms=speed_ms,
        other_busy_cpus=load.other_busy_cpus,
        steal_cpus=load.steal_cpus,
    )


# --- DQN: one process, in this one ---------------------------------------------------------------


def measure_dqn(config: RunConfig, measured_steps: int) -> Measurement:
    """Run DQN for warm-up + ``measured_steps`` agent steps; rates over the measured steps."""
    from workloads.dqn.run import run_dqn, train_due

    settings = dqn_settings(config)
    if settings.learn_start < settings.batch_size:
        raise ArchsimError(
            f"validation config {config.name}: learn start {settings.learn_start} is below the "
            f"batch {settings.batch_size}, so early updates would be skipped"
        )
    warmup = settings.learn_start + DQN_WARMUP_TRAIN_STEPS * settings.train_every
    wall: list[float] = []
    cpu: list[float] = []

    def on_step() -> None:
        wall.append(time.perf_counter())
        cpu.append(time.process_time())

    run_dqn(settings, warmup + measured_steps, on_step=on_step)
    # wall[i] is when agent step i ended: the window covers steps warmup .. end (exclusive of warmup)
    window_s = wall[-1] - wall[warmup - 1]
    steps = len(wall) - warmup
    updates = sum(train_due(t, settings) for t in range(warmup, len(wall)))
    cpu_s = cpu[-1] - cpu[warmup - 1]
    return Measurement(
        frames_per_s=FRAMESKIP * steps / window_s,
        learner_updates_per_s=updates / window_s,
        cpu_util=cpu_s / (window_s * (os.cpu_count() or 1)),
        window_s=window_s,
        cpu_s=cpu_s,
    )


# --- R2D2: the SEED runtime's processes, each sampling its own counters ---------------------------

_UPDATES = [0]  # learner updates of this process (the learner process only)


class SamplingRecorder:
    """Stands in for ProcessProfiler (same constructor and ``sidecar``): no trace, counter samples."""

    times_after_run = False  # a measured run ends with its window: no calibration work after it

    def poll(self) -> None:
        """Nothing is recorded, so nothing stops mid-run."""

    def stop_requested(self) -> bool:
        """Never: there is no recording for a learner to lead the stop of (ProcessProfiler's)."""
        return False

    def stop_recording(self) -> None:
        """Nothing is recorded."""

    def stepped(self) -> None:
        """Nothing is recorded, so no step is: no stepped file (ProcessProfiler's)."""

    def __init__(self, raw_dir: Path, role: str, index: int, record_shapes: bool = True):
        self.path = Path(raw_dir) / f"validate-{role}-{index}.json"
        self.role = role
        self.sidecar: dict = {"role": role, "index": index, "pid": os.getpid()}
        self.samples: list[tuple[float, int, float]] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True, name="validate-sampler")

    def _count(self) -> int:
        if self.role == "learner":
            return _UPDATES[0]
        return int(self.sidecar.get("stats", {}).get("actor_steps", 0))

    def _take(self) -> None:
        self.samples.append((time.time(), self._count(), time.process_time()))

    def _sample(self) -> None:
        while not self._stop.wait(SAMPLE_PERIOD_S):
            self._take()

    def __enter__(self) -> SamplingRecorder:
        self._take()
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._take()
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps({"role": self.role, "samples": self.samples}))
        os.replace(tmp, self.path)


def _learner_entry(settings: Any, raw_dir: str, status: Any, stop: Any) -> None:
    """Spawned learner: count updates, swap the profiler for the sampler, run the real learner."""
    import workloads.r2d2.seed.learner_process as learner_process
    from workloads.r2d2.learner import Learner

    real_train_step = Learner.train_step

    def counted_train_step(self: Any, *args: Any, **kwargs: Any) -> Any:
        result = real_train_step(self, *args, **kwargs)
        _UPDATES[0] += 1
        return result

    Learner.train_step = counted_train_step
    learner_process.ProcessProfiler = SamplingRecorder
    learner_process.learner_main(settings, raw_dir, status, stop)


def _actor_entry(
    actor: int, settings: Any, port: int, raw_dir: str, stop: Any, status: Any
) -> None:
    """Spawned actor: swap the profiler for the sampler, run the real actor."""
    import workloads.r2d2.seed.actor_process as actor_process

    actor_process.ProcessProfiler = SamplingRecorder
    actor_process.actor_main(actor, settings, port, raw_dir, stop, status)


def measure_r2d2(config: RunConfig, seconds: float, work_dir: Path) -> Measurement:
    """Run the SEED runtime for ``seconds`` after start-up; rates over the steady window."""
    import workloads.r2d2.seed.runner as runner

    raw_dir = Path(work_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    saved = runner.learner_main, runner.actor_main
    runner.learner_main, runner.actor_main = _learner_entry, _actor_entry
    try:
        result = runner.run_seed(seed_settings(config, seconds + R2D2_WARMUP_S), raw_dir)
    finally:
        runner.learner_main, runner.actor_main = saved
    if not result.complete:
        raise ArchsimError(f"validation run {config.name}: {result.failure}")
    parts = []
    for record in result.processes:
        path = raw_dir / f"validate-{record.role}-{record.index}.json"
        if not path.exists():
            raise ArchsimError(f"validation run {config.name}: {path} was not written")
        parts.append(json.loads(path.read_text()))
    return window_rates(parts, config.envs_per_actor, R2D2_WARMUP_S, os.cpu_count() or 1)


def window_rates(
    parts: list[dict], envs_per_actor: int, warmup_s: float, hw_threads: int
) -> Measurement:
    """Rates over [last actor's first step + warm-up, first process's last sample].

    Each part is {"role", "samples": [(wall s, count, cpu s), ...]}; counts and CPU seconds are
    interpolated linearly at the window's ends.
    """
    arrays = [(p["role"], np.asarray(p["samples"], dtype=float)) for p in parts]
    actors = [a for role, a in arrays if role == "actor"]
    if not actors:
        raise ArchsimError("validation run: no actor samples")
    first_steps = []
    for a in actors:
        moving = np.nonzero(a[:, 1] > 0)[0]
        if moving.size == 0:
            raise ArchsimError("validation run: an actor never stepped")
        first_steps.append(a[moving[0], 0])
    start = max(first_steps) + warmup_s
    end = min(a[-1, 0] for _, a in arrays)
    if end - start <= 0:
        raise ArchsimError(
            f"validation run: no steady window (start-up ran {start - end:.1f} s past the end); "
            "run longer"
        )

    def delta(a: np.ndarray, column: int) -> float:
        return float(
            np.interp(end, a[:, 0], a[:, column]) - np.interp(start, a[:, 0], a[:, column])
        )

    window_s = end - start
    env_steps = envs_per_actor * sum(delta(a, 1) for a in actors)
    updates = sum(delta(a, 1) for role, a in arrays if role == "learner")
    cpu_s = sum(delta(a, 2) for _, a in arrays)
    return Measurement(
        frames_per_s=float(FRAMESKIP * env_steps / window_s),
        learner_updates_per_s=float(updates / window_s),
        cpu_util=float(cpu_s / (window_s * hw_threads)),
        window_s=float(window_s),
        cpu_s=float(cpu_s),
    )
