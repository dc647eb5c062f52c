"""Sweeps: a base config plus factors (desmod style). Every knob given as a comma list is swept; the
product of the lists is the set of points. Each finished point is appended to ``sweep.csv`` at once
(one line, flushed and fsynced), so an interrupted sweep resumes where it stopped; ``sweep.json``
beside it holds the settings fingerprint (trace hash, hardware, fixed knobs) that a resumed sweep
must match. Points run on a local process pool (default) or on Dask distributed.
"""

from __future__ import annotations

import contextlib
import hashlib
import itertools
import math
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from archsim.analysis.sweep_results import (  # noqa: F401 (names re-exported for callers)
    CSV_NAME,
    INFORMATIONAL,
    METRIC_COLUMNS,
    SETTINGS_NAME,
    ResultsFile,
)
from archsim.atomic import check_output_path
from archsim.errors import ArchsimError
from archsim.sim.knobs import KNOB_BY_NAME, split_point
from archsim.sim.limits import check_jobs, check_sweep_points

SWEEP_FORMAT = 1


@dataclass
class SweepSpec:
    """What a sweep runs: trace, hardware, and the knob lists (a list of one value is fixed)."""

    trace: Path
    hw: str
    hw_set: list[str] = field(default_factory=list)
    knobs: dict[str, list[Any]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        # Canonical order (the flags' order in archsim.sim.knobs), so equal sweeps compare equal.
        self.knobs = {k: self.knobs[k] for k in KNOB_BY_NAME if k in self.knobs}

    @property
    def swept(self) -> list[str]:
        return [name for name, values in self.knobs.items() if len(values) > 1]

    @property
    def knob_names(self) -> list[str]:
        """CSV knob columns: the swept knobs, then the fixed ones."""
        return self.swept + [name for name in self.knobs if name not in self.swept]

    def points(self) -> list[dict[str, Any]]:
        names = self.knob_names
        values = [self.knobs[name] for name in names]
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*values)]

    def fingerprint(self) -> dict[str, Any]:
        return {
            "format": SWEEP_FORMAT,
            "trace": str(self.trace),
            "trace_sha256": trace_hash(self.trace),
            "hw": self.hw,
            "hw_set": list(self.hw_set),
            "fixed": {k: format_value(v[0]) for k, v in self.knobs.items() if len(v) == 1},
            "swept": self.swept,
        }


def trace_hash(path: Path) -> str:
    """SHA-256 over the trace's tables and meta (a raw JSON file: over the file)."""
    path = Path(path)
    digest = hashlib.sha256()
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    for file in files:
        if file.name.startswith("raw_trace"):
            continue  # the raw JSON is provenance; the tables are what the simulator reads
        digest.update(file.name.encode())
        with open(file, "rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()


def format_value(value: Any) -> str:
    return "none" if value is None else str(value)


def point_key(point: dict[str, Any]) -> tuple[str, ...]:
    return tuple(format_value(point[name]) for name in sorted(point))


def point_label(point: dict[str, Any]) -> str:
    """``sweep point actors=4, sms=40`` for errors."""
    return "sweep point " + ", ".join(f"{k}={format_value(v)}" for k, v in point.items())


def validate_points(spec: SweepSpec) -> None:
    """Build every point's SimConfig and hardware config up front: a bad combination fails before
    anything runs or is written."""
    from archsim.hw.presets import load_hw
    from archsim.sim.config import SimConfig

    check_sweep_points(math.prod(len(values) for values in spec.knobs.values()))
    load_hw(spec.hw, spec.hw_set)  # --hw and --set themselves
    hardware_seen: set[tuple[str, ...]] = {()}
    for point in spec.points():
        sim, overrides = split_point(point)
        try:
            SimConfig(**sim)
            if tuple(overrides) not in hardware_seen:  # one load per distinct --sms value
                load_hw(spec.hw, [*spec.hw_set, *overrides])
                hardware_seen.add(tuple(overrides))
        except ArchsimError as exc:
            raise ArchsimError(f"{point_label(point)}: {exc}") from None


# --- one point (runs in a worker process) ---------------------------------------------------------

_TRACE_CACHE: dict[str, Any] = {}


def run_point(trace: str, hw: str, hw_set: list[str], point: dict[str, Any]) -> dict[str, Any]:
    """Simulate one point and return its CSV row. Loads the trace once per worker process."""
    from archsim.commands._trace_input import load_trace_input
    from archsim.hw.presets import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.run import name_trace_in_errors, simulate

    started = time.perf_counter()
    if trace not in _TRACE_CACHE:
        _TRACE_CACHE[trace] = load_trace_input(Path(trace))
    sim, overrides = split_point(point)
    try:
        hw_config = load_hw(hw, [*hw_set, *overrides])
        with name_trace_in_errors(trace):
            result = simulate(_TRACE_CACHE[trace], hw_config, SimConfig(**sim))
    except ArchsimError as exc:  # say which point: others of the sweep may be fine
        raise ArchsimError(f"{point_label(point)}: {exc}") from None
    row: dict[str, Any] = {name: format_value(value) for name, value in point.items()}
    row.update({name: result.metrics.get(name, "") for name in METRIC_COLUMNS})
    row["hw_threads"] = hw_config.cpu.hw_threads
    row["sms_total"] = hw_config.gpu.sms * hw_config.gpu.count if hw_config.gpu else 0
    row["path"] = result.engine
    row["events"] = result.events
    row["wall_s"] = round(time.perf_counter() - started, 3)
    return row


# --- execution backends --------------------------------------------------------------------------


# How often a pool worker checks that the sweep that started it is still alive (seconds).
PARENT_POLL_S = 0.5


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


def _process_pool(tasks: list[tuple], jobs: int) -> Iterator[dict[str, Any]]:
    if jobs <= 1 or len(tasks) <= 1:  # no pool for a single point (or none left to resume)
        for task in tasks:
            yield run_point(*task)
        return
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    # "spawn" keeps workers free of the parent's threads (tqdm, Dask) and works on every platform.
    context = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(
        max_workers=min(jobs, len(tasks)),  # never a worker without a point
        mp_context=context,
        initializer=_exit_with_parent,
        initargs=(os.getpid(),),
    ) as pool:
        futures = [pool.submit(run_point, *task) for task in tasks]
        try:
            for future in as_completed(futures):
                yield future.result()
        except BaseException:
            for future in futures:
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


def _dask(tasks: list[tuple], jobs: int, scheduler: str | None) -> Iterator[dict[str, Any]]:
    from distributed import Client, LocalCluster, as_completed

    cluster = None
    if scheduler is None:
        # Ctrl-C reaches the whole process group: the sweep stops its cluster itself, so the worker
        # processes (which inherit an ignored SIGINT) must not each die printing a traceback.
        with _sigint_ignored():
            cluster = LocalCluster(
                host="127.0.0.1",
                n_workers=max(1, min(jobs, len(tasks))),  # never a worker without a point
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
        futures = [client.submit(run_point, *task, pure=False) for task in tasks]
        for future in as_completed(futures):
            yield future.result()
    finally:
        client.close()
        if cluster is not None:
            cluster.close()


BACKENDS = ("process", "dask")


def run_sweep(
    spec: SweepSpec,
    out: Path,
    jobs: int = 1,
    backend: str = "process",
    scheduler: str | None = None,
    force: bool = False,
    progress: bool = True,
    on_row: Callable[[dict[str, Any]], None] | None = None,
):
    """Run every point of ``spec`` not yet in ``out/sweep.csv``; returns the full results table.

    Bad settings, hardware and traces are refused before anything is written. A point that fails
    stops the sweep: finished points stay in sweep.csv (a rerun resumes after them); when no point
    had finished, sweep.csv and sweep.json are removed again, and ``out`` if this run created it.
    """
    if backend not in BACKENDS:
        raise ArchsimError(f"--backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    check_jobs(jobs)  # 1..usable CPUs (docs/LIMITS.md)
    if scheduler is not None and backend != "dask":
        raise ArchsimError("--scheduler: only used with --backend dask")
    if scheduler is not None and not scheduler.startswith("tcp://"):
        raise ArchsimError(f"--scheduler: {scheduler!r} is not an address like tcp://HOST:PORT")
    # A path that cannot be written fails before any point (files inside have short names).
    check_output_path(out, "directory", sibling_temp=False)
    validate_points(spec)
    from archsim.commands._trace_input import load_trace_input

    # A trace that does not load fails here, not in every worker; in-process points reuse it.
    _TRACE_CACHE[str(spec.trace)] = load_trace_input(Path(spec.trace))
    out_existed = Path(out).exists()
    results = ResultsFile(out, spec)
    done = results.open(force)
    todo = [p for p in spec.points() if point_key(p) not in done]
    tasks = [(str(spec.trace), spec.hw, list(spec.hw_set), point) for point in todo]
    rows: Iterable[dict[str, Any]] = (
        _dask(tasks, jobs, scheduler) if backend == "dask" else _process_pool(tasks, jobs)
    )
    from tqdm import tqdm

    bar = tqdm(
        total=len(spec.points()),
        initial=len(spec.points()) - len(todo),
        desc="sweep",
        unit="point",
        file=sys.stderr,
        disable=None if progress else True,  # None: only on a terminal, never into logs
    )
    try:
        for row in rows:
            results.append(row)
            bar.update(1)
            if on_row is not None:
                on_row(row)
    except BaseException as exc:
        bar.leave = False  # clear the bar so the error line stands alone
        bar.close()
        kept = results.finished_rows()
        if kept == 0:
            results.remove(remove_dir=not out_existed)
        elif isinstance(exc, ArchsimError):
            raise ArchsimError(
                f"{exc} ({kept} finished points are kept in {results.csv})"
            ) from None
        raise
    bar.close()
    return results.read()
