"""Vector-env worker processes of a single loop (``--loop sequential`` of a ``capture run`` trace of a
program using gymnasium's AsyncVectorEnv or Stable-Baselines3's SubprocVecEnv).

Such a program runs one loop in its own process: it acts on the batch of N observations, sends the
N actions to its N workers, waits for every worker's env step, and trains every k-th iteration. The
workers step their environments in parallel, each in its own process. Per loop iteration the env
phase therefore lasts as long as the slowest of the N workers' steps; the parent's own CPU around
it (sending actions, receiving observations) is in the parent's recorded steps and is charged to
the loop's thread as before (archsim.sim.sequential).

Worker step times are drawn from the trace's worker steps, pooled over the workers: every worker
runs the same environment code (a different seed), so they are exchangeable, and a capture window
holds only a few dozen steps per worker, too few for a per-worker distribution's tail. A step's
work is its CPU time (``cpu_us``, the env step and the worker's own code around it) plus the
worker's CPU between its steps (``gap_cpu_us``: the pipe receive and send of gymnasium's worker
loop), CPU time only, so a capture box's descheduling is not taken as work; the env step at the
target's emulator speed, the rest at its interpreter speed (archsim.perf.cpu_speed).

Placement on the target: while the workers step, the loop's thread waits (the vector step is
synchronous), so the workers may use every hardware thread: they are placed as
archsim.perf.cpu.place_threads places actors (idle cores first, then SMT siblings at the preset's
``smt_yield``; beyond the hardware threads they wrap round). Each worker alone on its core: the
expected maximum of N independent draws from the pooled empirical distribution, in closed form
(sorted draws x_1..x_m: P(max <= x_j) = (j/m)^N). Otherwise (SMT siblings, or more workers than
hardware threads) the workers on one hardware thread time-share it and all finish when their summed
work is done (a work-conserving scheduler on that thread, no migration to another thread: an upper
estimate when the OS balances load), at that thread's speed; the phase is the slowest thread,
averaged over SAMPLES seeded draws.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.perf.cpu import place_threads_on
from archsim.perf.cpu_speed import EMULATOR, INTERPRETER, class_speed
from archsim.sim.step_work import phase_work_us, step_work_us

# Draws of the sampled expectation (time-shared placements): the standard error of a mean of 4,096
# draws is 1.6% of the per-draw spread, well under the run-to-run spread of a capture. Design choice.
SAMPLES = 4096
SEED = 0


@dataclass(frozen=True)
class WorkerPhase:
    """The workers' env phase of one loop iteration on the target, in seconds."""

    workers: int  # N: worker processes (one env each)
    slowest_s: float  # expected duration of the phase: the slowest worker (or shared thread)
    busy_s: float  # mean CPU seconds of one worker's step (for utilization and CPU-seconds)


def split_workers(steps: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(the loop's own steps, the worker processes' actor steps): workers are actor steps on a pid
    other than the learner's (archsim.trace.info.loop_of_steps has checked the structure)."""
    learner_pids = set(steps.loc[steps["role"] == "learner", "pid"])
    workers = (steps["role"] == "actor") & ~steps["pid"].isin(learner_pids)
    return steps[~workers], steps[workers]


def worker_step_seconds(rows: pd.DataFrame, cpu) -> np.ndarray:
    """Per worker step: its work on the target, in seconds (module docstring); rows with no work
    recorded are dropped."""
    whole = step_work_us(rows)
    if "gap_cpu_us" in rows:
        whole = whole + rows["gap_cpu_us"].astype(float).fillna(0.0)
    env = phase_work_us(rows, "env_step").fillna(0.0)
    env = np.minimum(np.maximum(env.to_numpy(float), 0.0), np.maximum(whole.to_numpy(float), 0.0))
    rest = np.maximum(whole.to_numpy(float) - env, 0.0)
    seconds = 1e-6 * (env / class_speed(cpu, EMULATOR) + rest / class_speed(cpu, INTERPRETER))
    return seconds[np.isfinite(whole.to_numpy(float))]


def expected_max_of_draws(draws_s: np.ndarray, n: int) -> float:
    """E[max of ``n`` independent draws] from the empirical distribution of ``draws_s``, exactly."""
    x = np.sort(np.asarray(draws_s, dtype=float))
    m = len(x)
    if m == 0 or n < 1:
        return 0.0
    cdf = np.arange(1, m + 1, dtype=float) / m
    weights = cdf**n - np.concatenate(([0.0], cdf[:-1])) ** n
    return float(np.dot(weights, x))


def worker_phase(draws_s: np.ndarray, n: int, cpu) -> WorkerPhase:
    """The env phase of ``n`` workers on ``cpu`` (a CpuConfig), from pooled step draws (seconds)."""
    draws_s = np.asarray(draws_s, dtype=float)
    if n < 1 or len(draws_s) == 0:
        return WorkerPhase(workers=max(n, 0), slowest_s=0.0, busy_s=0.0)
    layout = place_threads_on(cpu, n_reserved=0, n_actors=n)
    placement = layout.placement
    # the draws are already at the target thread's speed; an SMT-shared thread runs slower
    slow = cpu.thread_speed_rel / layout.speed[placement]
    busy = float(draws_s.mean())
    if len(np.unique(placement)) == n and bool(np.all(slow == 1.0)):
        return WorkerPhase(workers=n, slowest_s=expected_max_of_draws(draws_s, n), busy_s=busy)
    rng = np.random.default_rng(SEED)
    sample = rng.choice(draws_s, size=(SAMPLES, n)) * slow  # per worker, on its thread
    per_thread = np.zeros((SAMPLES, layout.hw_threads))
    for worker, thread in enumerate(placement):
        per_thread[:, thread] += sample[:, worker]
    return WorkerPhase(workers=n, slowest_s=float(per_thread.max(axis=1).mean()), busy_s=busy)


def without_worker_profiler_cost(workers: pd.DataFrame, meta: dict) -> pd.DataFrame:
    """``workers``' CPU columns deflated per worker process, as archsim.sim.profiler_cost does per
    role: by the process's own unprofiled mean over its profiled mean (``meta.capture.processes[i]
    .unprofiled_cpu_us.actor``, written by archsim.capture.child_capture); factors of 1 or more
    and processes without the figures are left as they are."""
    from archsim.capture.unprofiled import STEP_KEY
    from archsim.sim.profiler_cost import MIN_STEPS

    out = workers.copy()
    for process in ((meta or {}).get("capture") or {}).get("processes") or []:
        figures = ((process or {}).get("unprofiled_cpu_us") or {}).get("actor") or {}
        rows = out["pid"] == process.get("pid")
        for name, stats in figures.items():
            column = "cpu_us" if name == STEP_KEY else f"{name}_cpu_us"
            if column not in out or int(stats.get("steps", 0)) < MIN_STEPS:
                continue
            profiled = out.loc[rows, column].dropna()
            if len(profiled) < MIN_STEPS or "mean_us" not in stats or not profiled.mean() > 0:
                continue
            ratio = float(stats["mean_us"]) / float(profiled.mean())
            if 0 < ratio < 1:
                out.loc[rows, column] = out.loc[rows, column].to_numpy(dtype=float) * ratio
    return out


def loop_meta(meta: dict) -> dict:
    """``meta`` with ``capture.unprofiled_cpu_us.actor`` made the loop's own: ``capture run`` pools
    the parent's and its workers' unprofiled actor figures (step-weighted means), so the parent's
    mean is the pool less each worker's own (meta.capture.processes); medians cannot be un-pooled
    and are dropped (archsim.sim.profiler_cost then uses the mean)."""
    capture = (meta or {}).get("capture") or {}
    pooled = (capture.get("unprofiled_cpu_us") or {}).get("actor") or {}
    workers = [
        ((p or {}).get("unprofiled_cpu_us") or {}).get("actor") or {}
        for p in capture.get("processes") or []
        if (p or {}).get("role") == "actor"
    ]
    if not pooled or not any(workers):
        return meta
    own: dict[str, dict] = {}
    for name, figures in pooled.items():
        parts = [w[name] for w in workers if name in w]
        steps = int(figures.get("steps", 0)) - sum(int(p.get("steps", 0)) for p in parts)
        if "mean_us" not in figures or not all("mean_us" in p for p in parts) or steps <= 0:
            continue
        total = float(figures["mean_us"]) * int(figures.get("steps", 0))
        total -= sum(float(p["mean_us"]) * int(p.get("steps", 0)) for p in parts)
        if total > 0:
            own[name] = {"steps": steps, "mean_us": total / steps}
    unprofiled = {**capture["unprofiled_cpu_us"], "actor": own}
    return {**meta, "capture": {**capture, "unprofiled_cpu_us": unprofiled}}
