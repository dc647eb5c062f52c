"""Running a sweep's points: batches of points per task, on this process, a local process pool or
Dask distributed, with a bounded window of tasks in flight.

A task is a batch of points, sized from the points measured so far to take about
``TARGET_TASK_S`` in its worker: a task per point would pay a submit/pickle/result round trip per
point (~1-3 ms on a process pool, more on Dask), and a whole sweep's futures at once would hold
10,000 point lists and results in memory. Each worker keeps its trace, hardware configs and derived
service times between tasks (archsim.analysis.sweep_cache), so a point costs its simulation plus a
millisecond or so.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from archsim.analysis.sweep_cache import STATE
from archsim.analysis.sweep_results import CLOCK_COLUMNS, METRIC_COLUMNS
from archsim.errors import ArchsimError
from archsim.sim.knobs import split_point

# A task's target time in its worker: long enough that the ~1-3 ms round trip of a task is under
# 1% of it, short enough that the bar moves and a Ctrl-C is answered within about a second.
TARGET_TASK_S = 0.5
# Dask spends more CPU per task than the pool (scheduler, worker event loop, transitions): longer
# tasks there. benchmarks/sweep_speed.py measures the per-point overhead either way.
DASK_TARGET_TASK_S = 1.0
MAX_BATCH_POINTS = 1000  # bounds one task's argument and result (~1000 rows of ~40 fields)
# Weight of the latest batch in the running seconds-per-point estimate (an exponential average).
RECENT_WEIGHT = 0.5
# Tasks in flight per worker: one running, one queued, so a worker never waits for the parent.
TASKS_PER_WORKER = 2
# The LocalCluster a sweep starts has no dashboard, so its workers need not sample their own stacks
# every 10 ms nor the GIL every 1 ms (distributed's defaults): CPU taken from the points for as long
# as the sweep runs.
QUIET_WORKERS = {
    "distributed.worker.profile.enabled": False,
    "distributed.admin.system-monitor.gil.enabled": False,
}
# How often a pool worker checks that the sweep that started it is still alive (seconds).
PARENT_POLL_S = 0.5


def format_value(value: Any) -> str:
    return "none" if value is None else str(value)


def point_label(point: dict[str, Any]) -> str:
    """``sweep point actors=4, sms=40`` for errors."""
    return "sweep point " + ", ".join(f"{k}={format_value(v)}" for k, v in point.items())


def run_point(trace: str, hw: str, hw_set: list[str], point: dict[str, Any]) -> dict[str, Any]:
    """Simulate one point and return its CSV row, reusing this process's cached state."""
    from archsim.errors import name_trace_in_errors
    from archsim.sim.config import SimConfig
    from archsim.sim.run import simulate

    started = time.perf_counter()
    loaded = STATE.trace(trace)
    sim, overrides = split_point(point)
    settings = (*hw_set, *overrides)
    try:
        hw_config = STATE.hw(hw, settings)
        times = STATE.memo.bind(trace, (hw, settings))
        with name_trace_in_errors(trace):
            result = simulate(loaded, hw_config, SimConfig(**sim), service_times=times)
    except ArchsimError as exc:  # say which point: others of the sweep may be fine
        raise ArchsimError(f"{point_label(point)}: {exc}") from None
    row: dict[str, Any] = {name: format_value(value) for name, value in point.items()}
    row.update({name: result.metrics.get(name, "") for name in METRIC_COLUMNS})
    row["hw_threads"] = hw_config.cpu.hw_threads
    row["sms_total"] = hw_config.gpu.sms * hw_config.gpu.count if hw_config.gpu else 0
    row.update(clocks_run(result.hw_run or hw_config))
    row["path"] = result.engine
    row["events"] = result.events
    row["wall_s"] = round(time.perf_counter() - started, 4)
    return row


def clocks_run(hw_run) -> dict[str, Any]:
    """The CLOCK_COLUMNS of a point: the clocks its run ran at (the hardware config's, or those the
    power cap lowered them to: archsim.sim.power_cap); empty where the part has none."""
    cpu_mhz = hw_run.cpu.boost_clock_mhz
    gpu_mhz = hw_run.gpu.clock_mhz if hw_run.gpu is not None else None
    return dict(
        zip(CLOCK_COLUMNS, ("" if v is None else v for v in (cpu_mhz, gpu_mhz)), strict=True)
    )


@dataclass
class BatchResult:
    """What a task sends back: the rows of the points it finished, in order, the worker seconds
    they took, and the one-line error of the point that stopped it (the rest were not run)."""

    rows: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    error: str | None = None


def run_batch(trace: str, hw: str, hw_set: list[str], points: list[dict]) -> BatchResult:
    """Run ``points`` in order in this worker; a point that fails ends the batch, keeping the rows
    before it (they are results like any other)."""
    started = time.perf_counter()
    result = BatchResult()
    for point in points:
        try:
            result.rows.append(run_point(trace, hw, hw_set, point))
        except ArchsimError as exc:
            result.error = str(exc)
            break
    result.seconds = time.perf_counter() - started
    return result


class Batcher:
    """Cuts the points left into batches: one point a task until points have been timed, then
    ``TARGET_TASK_S`` worth, and never so many that the last tasks leave workers idle."""

    def __init__(
        self, points: list[dict[str, Any]], workers: int, target_s: float = TARGET_TASK_S
    ) -> None:
        self._points = points
        self.target_s = target_s
        self._next = 0
        self.workers = max(1, workers)
        self._per_point_s: float | None = None

    def observe(self, result: BatchResult) -> None:
        """Fold a finished batch's seconds per point into the estimate. Recent batches weigh
        most: a worker's first batch also loads the trace and derives service times."""
        if not result.rows:
            return
        latest = result.seconds / len(result.rows)
        last = self._per_point_s
        self._per_point_s = (
            latest if last is None else RECENT_WEIGHT * latest + (1 - RECENT_WEIGHT) * last
        )

    def size(self) -> int:
        left = len(self._points) - self._next
        if self._per_point_s is None:
            return 1
        per_point_s = max(self._per_point_s, 1e-6)
        by_time = int(self.target_s / per_point_s)
        balance = math.ceil(left / (TASKS_PER_WORKER * self.workers))  # even out the tail
        return max(1, min(by_time, balance, MAX_BATCH_POINTS))

    def take(self) -> list[dict[str, Any]] | None:
        if self._next >= len(self._points):
            return None
        size = self.size()
        batch = self._points[self._next : self._next + size]
        self._next += len(batch)
        return batch


def locality_order(points: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``points`` with the hardware knobs (``--sms``) varying slowest, then the knobs in their flag
    order: neighbouring points, so the points of one batch, mostly share a hardware point and
    inference batch, whose service times their worker derives once."""
    from archsim.sim.knobs import KNOB_BY_NAME

    if not points:
        return points
    names = sorted(
        points[0], key=lambda n: (KNOB_BY_NAME[n].hw_field is None, list(KNOB_BY_NAME).index(n))
    )
    values = {name: {} for name in names}
    for point in points:  # each knob's values in first-seen order (the order given on the flag)
        for name in names:
            values[name].setdefault(format_value(point[name]), len(values[name]))
    return sorted(points, key=lambda p: tuple(values[n][format_value(p[n])] for n in names))


def in_process(args: tuple, batcher: Batcher) -> Iterator[BatchResult]:
    while (batch := batcher.take()) is not None:
        result = run_batch(*args, batch)
        batcher.observe(result)
        yield result


def _exit_with_parent(parent_pid: int) -> None:
    """Pool-worker initializer: exit when the sweep process is gone. A sweep killed with SIGKILL
    cannot stop its workers, and they would otherwise wait for work forever."""
    import threading

    def watch() -> None:
        while True:
            time.sleep(PARENT_POLL_S)
            if os.getppid() != parent_pid:
                os._exit(1)

    threading.Thread(target=watch, name="archsim-parent-watch", daemon=True).start()


def process_pool(args: tuple, batcher: Batcher, jobs: int) -> Iterator[BatchResult]:
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait

    # "spawn" keeps workers free of the parent's threads (tqdm, Dask) and works on every platform.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=jobs,
        mp_context=context,
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        pending: set = set()

        def fill() -> None:
            while len(pending) < TASKS_PER_WORKER * jobs:
                batch = batcher.take()
                if batch is None:
                    return
                pending.add(pool.submit(run_batch, *args, batch))

        try:
            fill()
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    result = future.result()
                    batcher.observe(result)
                    yield result
                fill()
        except BaseException:
            for future in pending:
                future.cancel()
            raise


@contextlib.contextmanager
def _sigint_ignored() -> Iterator[None]:
    """Ignore SIGINT while child processes start (they keep the setting); main thread only."""
    import signal
    import threading

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def dask(args: tuple, batcher: Batcher, jobs: int, scheduler: str | None) -> Iterator[BatchResult]:
    from dask import config as dask_config
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        # Ctrl-C reaches the whole process group: the sweep stops its cluster itself, so the worker
        # processes (which inherit an ignored SIGINT) must not each die printing a traceback.
        with _sigint_ignored(), dask_config.set(QUIET_WORKERS):
            cluster = LocalCluster(
                host="127.0.0.1",
                n_workers=jobs,
                threads_per_worker=1,
                processes=True,
                dashboard_address=None,
            )
        client = Client(cluster)
    else:
        try:
            client = Client(scheduler)
        except (OSError, TimeoutError) as exc:
            raise ArchsimError(f"--scheduler {scheduler}: cannot connect ({exc})") from None
    try:
        workers = max(1, len(client.scheduler_info().get("workers", {})) or jobs)
        batcher.workers = workers
        batcher.target_s = DASK_TARGET_TASK_S
        flight = as_completed()

        def submit() -> bool:
            batch = batcher.take()
            if batch is None:
                return False
            flight.add(client.submit(run_batch, *args, batch, pure=False))
            return True

        for _ in range(TASKS_PER_WORKER * workers):
            if not submit():
                break
        for future in flight:
            result = future.result()
            future.release()  # no reference kept: memory stays bounded by the window
            batcher.observe(result)
            yield result
            submit()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
