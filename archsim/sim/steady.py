"""``--engine steady``: a long run from short ones, by extrapolating the steady state.

Every metric the simulator reports is a time integral of the run (steps, busy seconds, bytes, queue
lengths and waits) divided by its length, or a ratio of two. A DQN or R2D2 system settles within a
fraction of a simulated second; after that each integral grows at a constant rate. What differs
between a 0.2 s run and a 60 s one is the start-up transient, a fixed amount at the start (the
rate limiter lets the actors insert its slack before the learner has sampled: ~500 env steps on
traces/dqn-pong-cpu at 256 actors), which weighs 1/length in the metrics, and noise.

So the steady engine runs the exact fast engine (``engine="auto"``) on windows that double, each a
complete run of its own with the same seed (common random numbers: a longer window's first part
repeats the shorter run), and takes the rate of every integral over the stretch between two
consecutive windows, ``(I(w) - I(w/2)) / (w/2)``: the transient is inside both windows and cancels.
Once two consecutive stretches give the same env-step, learner-update and GPU-busy rates within
``STEADY_REL_TOL`` (each stretch holding enough counts that one more moves a rate by at most the
tolerance), the run of the asked length is the longest window plus the rate of both agreeing
stretches together (w/4 to w) for the rest: ``I(T) = I(w) + rate x (T - w)``, summarized as any run
is (so derived metrics, power and energy stay consistent, and the transient keeps its 1/T weight as
in a real run of length T).

Error: the reported metrics are those of a run of the asked length where the system's rates after
the longest window equal those of its last two stretches. Measured against full-length exact runs
on random systems (tests/test_engine_steady.py states the distribution and the tolerance asserted)
and on the bundled traces (``python benchmarks/steady_accuracy.py``); speed by
``python benchmarks/sim_speed.py --engine auto steady``. Left out: the
network detail (per-link latencies under ``network``) and a timeline or power series are those of
the longest window (a run of that length), said in the result's notes.

When the doubling reaches the asked length the last window is the whole run (exact). When the next
window would exceed the run-time bound (archsim.sim.limits) the last two windows are extrapolated
with a note that the rates had not settled.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from archsim.errors import ArchsimError
from archsim.sim.config import SimConfig
from archsim.sim.limits import check_simulated_work, step_rate_bounds
from archsim.sim.metrics import QueueStat, Recorder

# Relative agreement of consecutive stretches' headline rates (a design choice: below the 3-15%
# spread of repeated real runs of one program in docs/VALIDATION.md, so a sweep's ranking of points
# that far apart does not depend on it).
STEADY_REL_TOL = 0.02
# Counts a stretch must hold before its rates are compared: one count more or less then moves a
# rate by at most the tolerance.
MIN_ENV_STEPS = round(1 / STEADY_REL_TOL)
MIN_LEARNER_UPDATES = round(1 / STEADY_REL_TOL)
# Recorder fields that are time integrals or counts over the window (extrapolated); the others
# (end, hw_threads, series_bins, frames_per_env_step, timeline, bins) describe the run.
INTEGRALS = (
    "env_steps",
    "learner_updates",
    "inference_batches",
    "inference_obs",
    "actor_wait_s",
    "cpu_busy_s",
    "gpu_sm_busy_s",
    "gpu_any_busy_s",
    "gpu_dram_bytes",
)


@dataclasses.dataclass(frozen=True)
class SteadyWindow:
    """How the steady engine ended: the windows it ran and whether their rates settled."""

    windows_s: tuple[float, ...]
    converged: bool  # False: the asked length or the run-time bound came first
    rel_change: float  # headline rates' largest relative change between the last two stretches

    def note(self, sim_seconds: float) -> str:
        tried = ", ".join(f"{w:.3g}" for w in self.windows_s)
        if self.windows_s[-1] >= sim_seconds:
            return f"--engine steady: ran the whole {sim_seconds:g} s (windows {tried} s): exact"
        how = (
            f"rates settled within {STEADY_REL_TOL:.0%}"
            if self.converged
            else f"NOT settled: the next window is over the run-time bound, last change "
            f"{self.rel_change:.1%}"
        )
        return (
            f"--engine steady: {sim_seconds:g} s extrapolated from runs of {tried} s ({how}; "
            "the network detail, timeline and power series are the last window's)"
        )


def headline(rec: Recorder) -> np.ndarray:
    """The integrals whose stretch rates must settle (relative_change): env steps, learner updates,
    GPU busy time."""
    return np.array([rec.env_steps, rec.learner_updates, rec.gpu_any_busy_s], dtype=float)


def stretch_rates(short: Recorder, long: Recorder) -> tuple[np.ndarray, bool]:
    """(headline rates between two windows, whether the stretch holds enough counts to compare)."""
    counts = headline(long) - headline(short)
    rates = counts / (long.end - short.end)
    return rates, counts[0] >= MIN_ENV_STEPS and counts[1] >= MIN_LEARNER_UPDATES


def stretch_busy(short: Recorder, long: Recorder) -> np.ndarray:
    """Each hardware thread's busy fraction between two windows."""
    return (long.cpu_busy_s - short.cpu_busy_s) / (long.end - short.end)


def relative_change(a: np.ndarray, b: np.ndarray) -> float:
    """Largest relative difference between two headline rate vectors (0 where both are 0): env
    steps, learner updates and GPU busy time. CPU busy time is left out:
    its stretches scatter by 1-3% (an env step's CPU work is drawn from the trace's long-tailed
    durations; tests/test_engine_steady.py measures the error it leaves in cpu_util). So are the
    inference batch rate and actor wait: in paced DQN on pinned threads they wander over seconds in
    the exact engine too, and waiting for them to agree took windows past the run-time bound
    (docs/SIMULATOR.md "The steady engine" gives their error)."""
    scale = np.maximum(np.abs(a), np.abs(b))
    with np.errstate(invalid="ignore", divide="ignore"):
        change = np.where(scale > 0, np.abs(a - b) / scale, 0.0)
    return float(change.max())


def extrapolate(short: Recorder, long: Recorder, end_s: float) -> Recorder:
    """``long`` continued to ``end_s`` at the rates of the stretch between ``short`` and it."""
    scale = (end_s - long.end) / (long.end - short.end)
    out = dataclasses.replace(long)  # shares arrays: replaced below, never mutated
    out.end = end_s
    for name in INTEGRALS:
        a, b = getattr(short, name), getattr(long, name)
        setattr(out, name, b + (b - a) * scale)
    if hasattr(long, "replay_network"):  # the network's detail: the long window's
        out.replay_network = long.replay_network
    out.queues = {}
    for name, q in long.queues.items():
        p = short.queues.get(name) or QueueStat(name, short.end)
        q.summary()  # brings its length integral up to the window's end
        p.summary()
        e = QueueStat(name, end_s)
        e.area = q.area + (q.area - p.area) * scale
        e.arrivals = q.arrivals + (q.arrivals - p.arrivals) * scale
        e.wait_sum = q.wait_sum + (q.wait_sum - p.wait_sum) * scale
        # items still queued at the end keep the residual wait they had at the long window's end
        e.n = q.n
        e.arrival_sum = q.arrival_sum + q.n * (end_s - long.end)
        e.last_t = end_s
        out.queues[name] = e
    return out


def first_window_s(times, machine, config: SimConfig, learner_batch: int) -> float:
    """The shortest window that could hold MIN_ENV_STEPS and MIN_LEARNER_UPDATES at the system's
    upper-bound rates (archsim.sim.limits), so the doubling skips no window that could already
    show the steady state (and no run is spent on windows that cannot)."""
    actor_rate, learner_rate, _ = step_rate_bounds(times, machine, config, learner_batch)
    window = max(MIN_ENV_STEPS / actor_rate, MIN_LEARNER_UPDATES / learner_rate)
    return min(config.sim_seconds, window)


def fits_run_bound(times, machine, config: SimConfig, learner_batch: int) -> bool:
    try:
        check_simulated_work(times, machine, config, learner_batch)
    except ArchsimError:
        return False
    return True


def simulate_steady(times, machine, config, learner_batch, timeline, series_bins, network, traffic):
    """``config.sim_seconds`` of the system from doubling windows (module docstring): a SimResult
    whose ``steady`` field says which windows ran."""
    from archsim.perf.cpu import smt_speeds
    from archsim.sim.run import (
        SMT_CALIBRATION_PASSES,
        _run,
        calibrates_smt,
        prepare_layout,
        summarize_run,
    )

    asked = config.sim_seconds
    inner = config.replace(engine="auto")
    window = first_window_s(times, machine, config, learner_batch)
    # (window s, recorder, layout, path, events, SMT calibrations before it)
    runs: list[tuple[float, Recorder, object, str, int, int]] = []
    previous_rates = None
    change = float("inf")
    converged = False
    layout = net_setup = None
    calibrations = 0  # SMT speed updates so far (at most SMT_CALIBRATION_PASSES, as a full run)
    calibrate_next = False
    base_s = 0.0  # the shortest window whose stretch from its half held enough counts
    while True:
        window = min(window, asked)
        window_config = inner.replace(sim_seconds=window)
        if layout is None:
            layout, net_setup = prepare_layout(
                times, machine, window_config, learner_batch, network, traffic, calibrate=False
            )
            smt = calibrates_smt(layout, machine, config)
        elif not fits_run_bound(times, machine, window_config, learner_batch):
            break
        elif calibrate_next:  # SMT speeds from the last stretch's busy fractions (steady state)
            busy = stretch_busy(runs[-2][1], runs[-1][1])
            layout = smt_speeds(layout, busy, machine.thread_speed_rel, machine.smt_yield)
            calibrations += 1
            calibrate_next = False
            # start again from the shortest pair of windows whose stretch held enough counts
            window = min(base_s / 2, asked)
            window_config = inner.replace(sim_seconds=window)
        rec, path, events = _run(
            times, layout, machine, window_config, learner_batch, False, 0, net_setup
        )
        runs.append((window, rec, layout, path, events, calibrations))
        if window >= asked:
            break
        if len(runs) >= 2 and runs[-2][5] == calibrations:  # a stretch under one layout
            rates, enough = stretch_rates(runs[-2][1], rec)
            if not enough:
                previous_rates = None
            elif smt and calibrations < SMT_CALIBRATION_PASSES:
                calibrate_next, previous_rates = True, None
                base_s = base_s or window
            elif previous_rates is not None:
                change = relative_change(previous_rates, rates)
                if change <= STEADY_REL_TOL:
                    converged = True
                    break
                previous_rates = rates
            else:
                previous_rates = rates
        window *= 2
    windows = tuple(run[0] for run in runs)
    last_window, rec, layout, path, _, _ = runs[-1]
    if last_window < asked:
        # Settled: both agreeing stretches together (twice the counts, half the noise of one);
        # else the last stretch.
        both = converged and len(runs) >= 3 and runs[-3][5] == runs[-1][5]
        rec = extrapolate(runs[-3 if both else -2][1], rec, asked)
    result = summarize_run(
        rec, layout, machine, config, learner_batch, net_setup, path, sum(r[4] for r in runs)
    )
    if timeline or series_bins:  # recorded on the last window, a run of its own length
        window_config = inner.replace(sim_seconds=last_window)
        shown, _, _ = _run(
            times, layout, machine, window_config, learner_batch, timeline, series_bins, net_setup
        )
        window_result = summarize_run(
            shown, layout, machine, window_config, learner_batch, net_setup, path, 0
        )
        result.timeline, result.power_series = window_result.timeline, window_result.power_series
    result.engine = f"steady+{path}"
    result.steady = SteadyWindow(windows, converged, change)
    result.notes = (*result.notes, result.steady.note(asked))
    return result
