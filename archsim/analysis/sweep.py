"""Sweeps: a base config plus factors (desmod style). Every knob given as a comma list is swept; the
product of the lists is the set of points. Points run in batches (archsim.analysis.sweep_exec) on
this process, a local process pool or Dask distributed; each finished batch is appended to
``sweep.csv`` at once (flushed and fsynced), so an interrupted sweep resumes where it stopped, and
streamed into ``sweep.parquet`` (archsim.analysis.sweep_store), complete only when every point is
in. ``sweep.json`` beside them holds the settings fingerprint (trace hash, hardware, fixed knobs)
that a resumed sweep must match.
"""

from __future__ import annotations

import hashlib
import itertools
import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from archsim.analysis import sweep_exec
from archsim.analysis.sweep_cache import STATE
from archsim.analysis.sweep_exec import (  # noqa: F401 (names re-exported for callers)
    Batcher,
    BatchResult,
    format_value,
    locality_order,
    point_label,
    run_batch,
    run_point,
)
from archsim.analysis.sweep_results import (  # noqa: F401 (names re-exported for callers)
    CSV_NAME,
    INFORMATIONAL,
    METRIC_COLUMNS,
    SETTINGS_NAME,
    ResultsFile,
)
from archsim.analysis.sweep_store import ROW_GROUP_ROWS, column_types, parquet_stream
from archsim.atomic import check_output_path
from archsim.capture.progress import Progress
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


def point_key(point: dict[str, Any]) -> tuple[str, ...]:
    return tuple(format_value(point[name]) for name in sorted(point))


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


# --- running the points ---------------------------------------------------------------------------

BACKENDS = ("process", "dask")


def _check_scheduler_address(scheduler: str) -> None:
    """Refuse a --scheduler Dask could not parse ('tcp://[::1', a port that is not a number or
    past 65535) in one line before any work: Dask raised a ValueError traceback for them."""
    refusal = f"--scheduler: {scheduler!r} is not an address like tcp://HOST:PORT"
    try:
        parts = urlsplit(scheduler)
        port = parts.port
    except ValueError as exc:
        raise ArchsimError(f"{refusal} ({exc})") from None
    if parts.scheme != "tcp" or not parts.hostname or port is None:
        raise ArchsimError(refusal)


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
    stops the sweep: finished points stay in sweep.csv (a rerun resumes after them) and in
    sweep.partial.parquet; when no point had finished, the sweep's files are removed again, and
    ``out`` if this run created it.
    """
    if backend not in BACKENDS:
        raise ArchsimError(f"--backend: {backend!r} is not one of {', '.join(BACKENDS)}")
    check_jobs(jobs)  # 1..usable CPUs (docs/LIMITS.md)
    if scheduler is not None and backend != "dask":
        raise ArchsimError("--scheduler: only used with --backend dask")
    if scheduler is not None:
        _check_scheduler_address(scheduler)
    # A path that cannot be written fails before any point (files inside have short names).
    check_output_path(out, "directory", sibling_temp=False)
    validate_points(spec)
    # A trace that does not load fails here, not in every worker; in-process points reuse it.
    STATE.trace(str(spec.trace))
    out_existed = Path(out).exists()
    results = ResultsFile(out, spec)
    done = results.open(force)
    points = spec.points()
    todo = [p for p in points if point_key(p) not in done]
    types = column_types(spec.knobs, tuple(results.columns[len(spec.knob_names) :]))
    types = {name: types[name] for name in results.columns}
    bar = Progress(len(points), "sweep", "point", enabled=None if progress else False)
    bar.update(len(points) - len(todo))
    try:
        with parquet_stream(out, types) as stream:
            _stream_finished_rows(results, stream)
            for batch in _batches(spec, todo, jobs, backend, scheduler):
                results.append(batch.rows)  # durable first: the CSV is what a resume reads
                stream.add(batch.rows)
                bar.update(len(batch.rows))
                if on_row is not None:
                    for row in batch.rows:
                        on_row(row)
                if batch.error is not None:
                    raise ArchsimError(batch.error)
    except BaseException as exc:
        bar.close()  # the bar is cleared so the error line stands alone
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


def _stream_finished_rows(results: ResultsFile, stream) -> None:
    """An earlier run's rows (from the CSV) go into the new Parquet stream first, a row group at a
    time, so the finished file holds every point."""
    chunk: list[dict[str, Any]] = []
    for row in results.rows():
        chunk.append(row)
        if len(chunk) >= ROW_GROUP_ROWS:
            stream.add(chunk)
            chunk = []
    stream.add(chunk)


def _batches(
    spec: SweepSpec, todo: list[dict[str, Any]], jobs: int, backend: str, scheduler: str | None
) -> Iterator[BatchResult]:
    if not todo:  # everything finished earlier: no pool, no cluster
        return iter(())
    args = (str(spec.trace), spec.hw, list(spec.hw_set))
    workers = min(jobs, len(todo))  # never a worker without a point
    batcher = Batcher(locality_order(todo), workers)
    if backend == "dask":
        return sweep_exec.dask(args, batcher, max(1, workers), scheduler)
    if workers <= 1:  # no pool for one worker (or a single point left to resume)
        return sweep_exec.in_process(args, batcher)
    return sweep_exec.process_pool(args, batcher, workers)
