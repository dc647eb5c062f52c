"""``--engine steady``: a long run from a short one, by extrapolating the steady state.

Every metric the simulator reports is a time integral of the run (steps, busy seconds, bytes, queue
lengths and waits) divided by its length, or a ratio of two. A DQN or R2D2 system settles within a
fraction of a simulated second; after that each integral grows at a constant rate. What differs
between a 0.2 s run and a 60 s one is the start-up transient, a fixed amount at the start (the
rate limiter lets the actors insert its slack before the learner has sampled: ~500 env steps on
traces/dqn-pong-cpu at 256 actors), which weighs 1/length in the metrics, and noise.

So the steady engine builds the exact fast engine's system once (``engine="auto"``, its recorder's
window the asked length) and advances that one run checkpoint to checkpoint, doubling until two
stretches disagree and growing by ``SETTLING_GROWTH`` (1.5) after (``env.run(until=c)``: the same
events in the same order as a run to the end), reading its integrals at each (``snapshot``) and
taking the rate of every integral over the stretch between two consecutive checkpoints ``b < c``,
``(I(c) - I(b)) / (c - b)``: the transient is inside both and cancels.
Once two consecutive stretches give the same env-step, learner-update and GPU-busy rates within
``STEADY_REL_TOL`` (each stretch holding enough counts that one more moves a rate by at most the
tolerance), the run of the asked length is the last checkpoint plus the rate of both agreeing
stretches together (from the checkpoint two before the last) for the rest: ``I(T) = I(c) + rate x (T - c)``, summarized as any run
is (so derived metrics, power and energy stay consistent, and the transient keeps its 1/T weight as
in a real run of length T). A run that reaches the asked length is the exact engine's run, to the
bit (at the SMT speeds calibrated below, where they are; local-inference actors that own their
threads run as processes instead of ``closed_form_local``, which books the whole window at t=0:
the same model, not the same sums).
(Before, each window was a run of its own from t=0 with the same seed; a checkpoint reads as that
run did, below, for about half the events and one set-up.)

Reading a checkpoint: a run's recorder clips to its window's end, fixed when it is built, and some
parts book work ahead of the clock (a pinned thread's burst [start, finish] at its arrival, the
actor fleet's env step when its burst is booked, the polling cores of a replay network for the
whole window at t=0), others keep it until their flush. ``snapshot`` takes the recorder's copy
(archsim.sim.metrics.Recorder.snapshot) and, exactly, adds what the executors keep until their
flush (a pinned thread's busy time; the time-shared CPU's levels up to the checkpoint) less a
pinned thread's busy time past it (one block from the checkpoint to its free moment: bursts are
booked on arrival and run back to back), the fleet's steps that end past it and the polling cores'
rest. Error, what is left, measured against runs of the checkpoint's length
(tests/test_engine_steady.py, 60 random systems, and traces/dqn-pong-cpu at 256 and 4,096 actors):
env steps, learner updates, inference batches and GPU integrals are equal, and the
time-shared CPU's busy time to 1e-9; on pinned threads the fast GIL plays its threads' transitions
lazily, so a checkpoint may lack the parts of the learner process's bursts under way (at most one
burst a thread; cpu_util 1e-5 to 7e-5 relative at 0.1 s on traces/dqn-pong-cpu), and the
``cpu_run`` queue keeps the waits booked past the checkpoint of bursts queued on a pinned thread
(``cpu_run_*`` within 1.5% at 0.1-0.4 s there). A stretch's rate moves by the change of those amounts
over the stretch, a few bursts' worth; the rates that must settle (env steps, updates, GPU
busy), on exact integrals, not at all.

Error of the extrapolation: the reported metrics are those of a run of the asked length where the
system's rates after the last checkpoint equal those of its last two stretches. Measured against
full-length exact runs on random systems (tests/test_engine_steady.py states the distribution and
the tolerance asserted) and on the bundled traces (``python benchmarks/steady_accuracy.py``); speed
by ``python benchmarks/sim_speed.py --engine auto steady``. Left out: a timeline or power series is
that of a run of the last checkpoint's length (run again with them), and the network detail's rates
are over the last checkpoint (its latencies those of the messages that finished by then), said in
the result's notes.

The actors' placement (archsim.sim.placement): the exact engine ranks its candidates on runs of the
whole window; here each candidate runs as above (its SMT speeds calibrated) and is ranked on its
run extrapolated to the asked length. Ranking them on the first checkpoint's run ranked the
start-up and could pick another placement than the exact engine (tests/test_engine_steady_outliers.py).

SMT speeds under the "busy" model (``calibrates_smt``): a full run calibrates them on two short runs
from t=0; here the first run's first stretch with enough counts gives the busy fractions (the
steady state's), and a fresh run from t=0 at the new speeds is read again, for the two passes a
full run makes, before the run that is extrapolated. Changing the speeds in place instead would
need two stretches after each change: at 4,096 paced pinned actors on traces/dqn-pong-cpu (the
restarts read 0.185, 0.185 and 0.555 s, 0.925 simulated seconds) it would settle at 1.48 s at the
earliest. When the next checkpoint would exceed the
run-time bound (archsim.sim.limits) the last two are extrapolated with a note that the rates had
not settled.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from archsim.errors import ArchsimError
from archsim.sim.config import SimConfig
from archsim.sim.cpu import LindleyThreads
from archsim.sim.limits import check_simulated_work, step_rate_bounds
from archsim.sim.metrics import QueueStat, Recorder
from archsim.sim.shared_cpu import SharedThreads

# Relative agreement of consecutive stretches' headline rates (a design choice: below the 3-15%
# spread of repeated real runs of one program in docs/VALIDATION.md, so a sweep's ranking of points
# that far apart does not depend on it).
STEADY_REL_TOL = 0.02
# Counts a stretch must hold before its rates are compared: one count more or less then moves a
# rate by at most the tolerance.
MIN_ENV_STEPS = round(1 / STEADY_REL_TOL)
MIN_LEARNER_UPDATES = round(1 / STEADY_REL_TOL)
# Checkpoints double until two stretches with those counts disagree, then grow by this factor:
# a disagreement says the earlier stretch still held the start-up transient, and a shorter step
# compares two stretches after it sooner (at 4,096 paced time-shared DQN actors the run settles
# at 0.83 s instead of 1.48 s). Error against full-length runs, 300 random systems
# (benchmarks/steady_accuracy.py --random-systems 300), largest headline error per system,
# median / 90th / 99th percentile / largest: hypothesis seed 17, doubling throughout 0.19%,
# 0.61%, 1.47%, 2.18%; 1.5 0.21%, 0.77%, 1.57%, 1.91%; sqrt(2) 0.22%, 0.77%, 1.72%, 1.91%.
# Seed 18: doubling 0.29%, 1.26%, 4.87%, 14.06%; 1.5 0.30%, 1.33%, 4.21%, 8.25%. 2.0 restores
# doubling throughout.
SETTLING_GROWTH = 1.5
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
    """How the steady engine ended: the checkpoints it read (across the SMT calibration runs, each
    from t=0) and whether their rates settled."""

    windows_s: tuple[float, ...]
    converged: bool  # False: the asked length or the run-time bound came first
    rel_change: float  # headline rates' largest relative change between the last two stretches

    def note(self, sim_seconds: float) -> str:
        tried = ", ".join(f"{w:.3g}" for w in self.windows_s)
        if self.windows_s[-1] >= sim_seconds:
            return (
                f"--engine steady: ran the whole {sim_seconds:g} s (checkpoints {tried} s): exact"
            )
        how = (
            f"rates settled within {STEADY_REL_TOL:.0%}"
            if self.converged
            else f"NOT settled: the next checkpoint is over the run-time bound, last change "
            f"{self.rel_change:.1%}"
        )
        return (
            f"--engine steady: {sim_seconds:g} s extrapolated from one run read at {tried} s "
            f"({how}; the network detail, timeline and power series are the last checkpoint's)"
        )


def headline(rec: Recorder) -> np.ndarray:
    """The integrals whose stretch rates must settle (relative_change): env steps, learner updates,
    GPU busy time."""
    return np.array([rec.env_steps, rec.learner_updates, rec.gpu_any_busy_s], dtype=float)


def stretch_rates(short: Recorder, long: Recorder) -> tuple[np.ndarray, bool]:
    """(headline rates between two checkpoints, whether the stretch holds enough counts to compare)."""
    counts = headline(long) - headline(short)
    rates = counts / (long.end - short.end)
    return rates, counts[0] >= MIN_ENV_STEPS and counts[1] >= MIN_LEARNER_UPDATES


def stretch_busy(short: Recorder, long: Recorder) -> np.ndarray:
    """Each hardware thread's busy fraction between two checkpoints."""
    return (long.cpu_busy_s - short.cpu_busy_s) / (long.end - short.end)


def relative_change(a: np.ndarray, b: np.ndarray) -> float:
    """Largest relative difference between two headline rate vectors (0 where both are 0): env
    steps, learner updates and GPU busy time. CPU busy time is left out:
    its stretches scatter by 1-3% (an env step's CPU work is drawn from the trace's long-tailed
    durations; tests/test_engine_steady.py measures the error it leaves in cpu_util). So are the
    inference batch rate and actor wait: in paced DQN on pinned threads they wander over seconds in
    the exact engine too, and waiting for them to agree took checkpoints past the run-time bound
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
    if hasattr(long, "replay_network"):  # the network's detail: the last checkpoint's
        out.replay_network = long.replay_network
    out.queues = {}
    for name, q in long.queues.items():
        p = short.queues.get(name) or QueueStat(name, short.end)
        q._advance(q.end)  # its length integral up to its end (a snapshot's already is)
        p._advance(p.end)
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
    """The first checkpoint: the shortest run that could hold MIN_ENV_STEPS and MIN_LEARNER_UPDATES
    at the system's upper-bound rates (archsim.sim.limits), so the growth skips no checkpoint
    that could already show the steady state."""
    actor_rate, learner_rate, _ = step_rate_bounds(times, machine, config, learner_batch)
    window = max(MIN_ENV_STEPS / actor_rate, MIN_LEARNER_UPDATES / learner_rate)
    return min(config.sim_seconds, window)


def fits_run_bound(times, machine, config: SimConfig, learner_batch: int) -> bool:
    try:
        check_simulated_work(times, machine, config, learner_batch)
    except ArchsimError:
        return False
    return True


def snapshot(built, at_s: float, polling: tuple = ()) -> Recorder:
    """The integrals of ``built`` (archsim.sim.assemble.BuiltRun, its clock at ``at_s``) as a run ending
    at ``at_s`` would report them: the recorder's snapshot plus what its executors keep until their
    flush, less what was booked ahead of the clock where that is exact and simple (module docstring,
    "Error" says what is left)."""
    rec = built.rec
    out = rec.snapshot(at_s)
    end = rec.end
    threads = built.threads
    if isinstance(threads, LindleyThreads | SharedThreads):
        busy = threads.unflushed_busy_s(at_s)
        out.cpu_busy_s[: len(busy)] += busy
    for thread in polling:  # busy the whole window, booked at t=0 (archsim.sim.replay_server)
        out.cpu_busy_s[int(thread)] -= end - at_s
    fleet = built.fleet
    if fleet is not None:  # a step counts when booked if it ends inside [0, end): those past at_s
        sent = np.asarray(fleet.sent_at)
        ahead = int(np.count_nonzero((sent >= at_s) & (sent < end)))
        out.env_steps -= ahead * built.system.config.envs_per_actor
    return out


def _checkpoints(built, c_s: float, asked: float, fits, calibrating: bool, polling: tuple):
    """Advance ``built`` checkpoint to checkpoint from ``c_s``, doubling, then growing by
    SETTLING_GROWTH once two stretches disagreed: ([(checkpoint s,
    recorder)], how it ended, last relative change). How: "exact" (reached ``asked``; the last
    recorder is the run's own), "settled", "bound" (the next checkpoint is over the run-time bound)
    or "calibrate" (a stretch held enough counts to measure SMT busy fractions)."""
    read: list[tuple[float, Recorder]] = []
    previous = None
    change = float("inf")
    disagreed = False
    while True:
        c_s = min(c_s, asked)
        if read and not fits(c_s):
            return read, "bound", change
        built.env.run(until=c_s)
        if c_s >= asked:
            built.threads.flush()
            read.append((c_s, built.rec))
            return read, "exact", change
        read.append((c_s, snapshot(built, c_s, polling)))
        if len(read) >= 2:
            rates, enough = stretch_rates(read[-2][1], read[-1][1])
            if not enough:
                previous = None
            elif calibrating:
                return read, "calibrate", change
            else:
                if previous is not None:
                    change = relative_change(previous, rates)
                    if change <= STEADY_REL_TOL:
                        return read, "settled", change
                    disagreed = True
                previous = rates
        c_s *= SETTLING_GROWTH if disagreed else 2.0


def simulate_steady(times, machine, config, learner_batch, timeline, series_bins, network, traffic):
    """``config.sim_seconds`` of the system from one run read at growing checkpoints (module
    docstring): a SimResult whose ``steady`` field says which checkpoints were read."""
    from archsim.perf.cpu import smt_speeds
    from archsim.sim.run import (
        SMT_CALIBRATION_PASSES,
        _events_processed,
        _run,
        build_run,
        calibrates_smt,
        prepare_layout,
        simulate_system,
        summarize_run,
    )

    asked = config.sim_seconds
    inner = config.replace(engine="auto")
    first = first_window_s(times, machine, config, learner_batch)
    if first >= asked:  # the first checkpoint is the whole run: the exact engine's run itself
        result = simulate_system(
            times, machine, inner, learner_batch, timeline, series_bins, network, traffic
        )
        result.engine = f"steady+{result.engine}"
        result.steady = SteadyWindow((asked,), False, float("inf"))
        result.notes = (*result.notes, result.steady.note(asked))
        return result
    net_setup, polling = None, ()  # a network's, once prepare_layout has set it up

    def fits(c_s: float) -> bool:
        return fits_run_bound(times, machine, inner.replace(sim_seconds=c_s), learner_batch)

    def run_layout(layout):
        """One layout's run read at checkpoints, its SMT speeds calibrated on the way: (layout,
        built run, reads, how it ended, last change, checkpoints, events, asked-length recorder)."""
        checkpoints: list[float] = []
        events = 0
        calibrations = 0  # SMT speed updates (SMT_CALIBRATION_PASSES, as a full run makes)
        start_s = first
        smt = calibrates_smt(layout, machine, config)
        while True:
            built = build_run(
                times, layout, machine, inner, learner_batch, False, 0, net_setup, closed_form=False
            )
            calibrating = smt and calibrations < SMT_CALIBRATION_PASSES
            read, how, change = _checkpoints(built, start_s, asked, fits, calibrating, polling)
            checkpoints += [c for c, _ in read]
            events += _events_processed(built.env)
            if how != "calibrate":
                break
            # SMT speeds from the stretch's busy fractions (the steady state's), then a fresh run
            # from t=0 whose first stretch is this one's last
            busy = stretch_busy(read[-2][1], read[-1][1])
            layout = smt_speeds(layout, busy, machine.thread_speed_rel, machine.smt_yield)
            calibrations += 1
            start_s = read[-2][0]
        rec = read[-1][1]
        if how != "exact":
            # Settled: both agreeing stretches together (twice the counts, half the noise of
            # one); else the last stretch (or, with one checkpoint read, the run from t=0).
            if how == "settled" and len(read) >= 3:
                base = read[-3][1]
            elif len(read) >= 2:
                base = read[-2][1]
            else:
                base = Recorder(end=0.0, hw_threads=rec.hw_threads)
            rec = extrapolate(base, rec, asked)
        return layout, built, read, how, change, checkpoints, events, rec

    # The actors' placement as the exact engine picks it (archsim.sim.placement): candidates
    # ranked on the asked length, here each one's own steady run extrapolated to it. Ranked on the
    # first checkpoint's run instead (prepare_layout's default), the unpaced start chose 1 actor
    # thread for 5 actors where the 2-s run keeps the default 4 (a random system: updates/s 797.8
    # against 664.5, cpu_util 0.248 against 0.478; tests/test_engine_steady_outliers.py).
    runs: dict[int, tuple] = {}

    def ranked(candidate, _config):
        runs[id(candidate)] = (candidate, run_layout(candidate))
        return runs[id(candidate)][1][-1]

    layout, net_setup = prepare_layout(
        times,
        machine,
        inner.replace(sim_seconds=first),
        learner_batch,
        network,
        traffic,
        calibrate=False,
        rank=ranked,
    )
    polling = tuple(net_setup[2]) if net_setup is not None else ()
    if net_setup is None:
        match = [r for c, r in runs.values() if c.placement.tolist() == layout.placement.tolist()]
        outcome = match[0] if match else run_layout(layout)
        layout = dataclasses.replace(outcome[0], note=layout.note)
        _, built, read, how, change, checkpoints, events, rec = outcome
    else:
        layout, built, read, how, change, checkpoints, events, rec = run_layout(layout)
    last_s = read[-1][0]
    if how != "exact" and net_setup is not None:  # the network's detail: over the last checkpoint
        rec.replay_network.end = last_s
    result = summarize_run(
        rec, layout, machine, config, learner_batch, net_setup, built.path, events
    )
    if timeline or series_bins:  # recorded on a run of the last checkpoint's length
        shown_config = inner.replace(sim_seconds=last_s)
        shown, _, _ = _run(
            times, layout, machine, shown_config, learner_batch, timeline, series_bins, net_setup
        )
        shown_result = summarize_run(
            shown, layout, machine, shown_config, learner_batch, net_setup, built.path, 0
        )
        result.timeline, result.power_series = shown_result.timeline, shown_result.power_series
    result.engine = f"steady+{built.path}"
    result.steady = SteadyWindow(tuple(checkpoints), how == "settled", change)
    # the placement's note (archsim.sim.placement), as the exact engine's run gives it
    result.notes = (*result.notes, *filter(None, [layout.note]), result.steady.note(asked))
    return result
