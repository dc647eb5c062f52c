"""Start, watch and stop the processes of one SEED-style R2D2 run.

The learner starts first and reports its port (or why it could not listen); then the actors start.
The run lasts ``seconds`` after every process is up; halfway through, the processes stop recording
and time their remaining steps unprofiled (RECORDED_FRACTION; with central inference the learner
sees the request and tells each actor after which step to stop). If any process exits early the whole
run stops: the others are told to stop, joined with a timeout, and terminated (then killed) if they
hang, so no process outlives the run. What each surviving process recorded is kept.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import multiprocessing
import os
import queue
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from archsim.atomic import atomic_output_file
from archsim.capture.progress import Progress
from archsim.errors import ArchsimError
from workloads.r2d2.seed.actor_process import actor_main
from workloads.r2d2.seed.learner_process import learner_main
from workloads.r2d2.seed.profiling import STOP_RECORDING_FILE, clear_signals, part_paths
from workloads.r2d2.seed.settings import SeedSettings
from workloads.shared_flag import SharedFlag

WATCH_PERIOD_S = 0.1
ABORT_GRACE_S = 2.0
THREAD_ENV = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
# The first half of a run is profiled, the second half only timed (thread CPU per step, no profiler),
# so that the simulator can take the profiler's own cost out at the run's own load
# (archsim.sim.profiler_cost). A design choice: both halves hold hundreds of inference batches.
RECORDED_FRACTION = 0.5
PROCESSES_FILE = "processes.json"  # written as soon as processes start: who is who (pid -> role)


@dataclasses.dataclass
class ProcessRecord:
    role: str
    index: int
    pid: int | None
    exitcode: int | None = None
    trace: str | None = None  # Kineto JSON path if the process exported one
    sidecar: dict | None = None

    @property
    def label(self) -> str:
        return f"{self.role} {self.index}"


@dataclasses.dataclass
class SeedRunResult:
    processes: list[ProcessRecord]
    complete: bool
    failure: str | None  # one line naming the failed process, when not complete
    run_seconds: float
    port: int


def _write_processes(path: Path, rows: list[dict]) -> None:
    """Write the processes file whole or not at all (a temporary renamed over it): it is read while
    the run goes on (tests, a user finding a process), and a plain rewrite is empty for a moment."""
    with atomic_output_file(path) as handle:
        handle.write(json.dumps(rows, indent=1))


def _status_queue(ctx: Any) -> Any:
    """The queue children report on. The parent puts back messages it read too early; should a
    child be killed while writing (holding the queue's shared write lock), the parent's feeder
    thread would block on that lock and, joined at exit, hang the parent: it is not joined. What
    the parent may lose that way is only its own put-back messages, detail for a failure line."""
    status = ctx.Queue()
    status.cancel_join_thread()
    return status


def _stop_all(procs: list[tuple[ProcessRecord, Any]], stop: Any, timeout_s: float) -> None:
    """Ask everyone to stop, wait, then terminate and finally kill stragglers."""
    stop.set()
    deadline = time.monotonic() + timeout_s
    for _, proc in procs:
        proc.join(timeout=max(0.0, deadline - time.monotonic()))
    for _, proc in procs:
        if proc.is_alive():
            proc.terminate()
            proc.join(timeout=5.0)
        if proc.is_alive():
            proc.kill()
            proc.join(timeout=5.0)


def _wait_for_learner(learner: Any, status: Any, timeout_s: float) -> int:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            kind, *rest = status.get(timeout=WATCH_PERIOD_S)
        except queue.Empty:
            if not learner.is_alive():
                raise ArchsimError(
                    f"learner process (pid {learner.pid}) exited with code {learner.exitcode} "
                    "before it was ready"
                ) from None
            continue
        if kind == "ready":
            return int(rest[-1])
        raise ArchsimError(f"learner process (pid {learner.pid}) failed to start: {rest[-1]}")
    raise ArchsimError(
        f"learner process (pid {learner.pid}) did not become ready within {timeout_s:g} s "
        "(raise --learner-start-timeout on a slow machine)"
    )


def _first_exit(procs: list[tuple[ProcessRecord, Any]], started: float | None) -> str | None:
    for record, proc in procs:
        if proc.exitcode is not None:
            when = (
                "before the run started"
                if started is None
                else f"{time.monotonic() - started:.1f} s into the run"
            )
            return (
                f"{record.label} process (pid {record.pid}) exited with code {proc.exitcode} {when}"
            )
    return None


@contextlib.contextmanager
def _child_thread_limits(threads: int) -> Iterator[None]:
    """Children inherit the environment at spawn: cap BLAS/OpenMP pools before numpy loads there
    (each process is one worker; oversubscribed pools make the frame resize ~100x slower here)."""
    saved = {name: os.environ.get(name) for name in THREAD_ENV}
    os.environ.update({name: str(threads) for name in THREAD_ENV})
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def _wait_for_actors(
    procs: list[tuple[ProcessRecord, Any]], status: Any, settings: SeedSettings
) -> str | None:
    """Block until every actor has connected (the run's clock starts then); a failure line if one
    dies first. Error messages seen here are put back for the final report."""
    waiting = {f"actor {i}" for i in range(settings.actors)}
    deadline = time.monotonic() + settings.connect_timeout_s + settings.learner_start_timeout_s
    errors = []
    failure = None
    while waiting and failure is None:
        if time.monotonic() > deadline:
            failure = f"actors {sorted(waiting)} did not connect to the learner in time"
            break
        try:
            kind, who, message = status.get(timeout=WATCH_PERIOD_S)
        except queue.Empty:
            failure = _first_exit(procs, None)
            continue
        if kind == "ready":
            waiting.discard(who)
        else:
            errors.append((kind, who, message))
    for item in errors:
        status.put(item)
    return failure


def run_seed(settings: SeedSettings, raw_dir: Path) -> SeedRunResult:
    """Run learner + actors for ``settings.seconds``; per-process traces land in ``raw_dir``."""
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    clear_signals(raw_dir)  # a reused directory's old stop request and stepped files
    ctx = multiprocessing.get_context("spawn")  # fork is unsafe after torch has started threads
    stop = SharedFlag(ctx)  # lock-free: a child killed inside Event.is_set() would lock an Event
    status = _status_queue(ctx)
    learner = ctx.Process(
        target=learner_main, args=(settings, str(raw_dir), status, stop), name="r2d2-learner"
    )
    records = [ProcessRecord("learner", 0, None)]
    procs: list[tuple[ProcessRecord, Any]] = [(records[0], learner)]
    with _child_thread_limits(settings.torch_threads):
        learner.start()
    records[0].pid = learner.pid
    try:
        port = _wait_for_learner(learner, status, settings.learner_start_timeout_s)
        for i in range(settings.actors):
            proc = ctx.Process(
                target=actor_main,
                args=(i, settings, port, str(raw_dir), stop, status),
                name=f"r2d2-actor-{i}",
            )
            with _child_thread_limits(settings.torch_threads):
                proc.start()
            record = ProcessRecord("actor", i, proc.pid)
            records.append(record)
            procs.append((record, proc))
        _write_processes(raw_dir / PROCESSES_FILE, [dataclasses.asdict(r) for r in records])
        failure = _wait_for_actors(procs, status, settings)
        started = time.monotonic()
        _write_processes(
            raw_dir / PROCESSES_FILE,
            [dict(dataclasses.asdict(r), run_started=failure is None) for r in records],
        )
        recording = True
        progress = Progress(settings.seconds, "r2d2 run (profiled half)", "s")
        while time.monotonic() - started < settings.seconds and failure is None:
            time.sleep(WATCH_PERIOD_S)
            failure = _first_exit(procs, started)
            elapsed_s = time.monotonic() - started
            progress.set_to(min(elapsed_s, settings.seconds))
            if recording and elapsed_s >= settings.seconds * RECORDED_FRACTION:
                (raw_dir / STOP_RECORDING_FILE).write_text(f"{elapsed_s:.3f}\n")
                recording = False
                progress.note("unprofiled half")
        progress.close()
        run_seconds = time.monotonic() - started
    except BaseException:
        # a start-up failure or an interrupt: whatever is still starting has nothing worth waiting for
        _stop_all(procs, stop, ABORT_GRACE_S)
        raise
    _stop_all(procs, stop, settings.shutdown_timeout_s)
    failure = collect_processes(procs, raw_dir, status, failure)
    return SeedRunResult(records, failure is None, failure, run_seconds, port)


def collect_processes(procs: list, raw_dir: Path, status: Any, failure: str | None) -> str | None:
    """After the processes stopped: each record's exit code, trace and sidecar, and the run's failure
    line (a non-zero exit at shutdown; a process's own error message appended when it sent one).
    Shared by the R2D2 and Ape-X runners."""
    for record, proc in procs:
        record.exitcode = proc.exitcode
        trace_path, sidecar_path = part_paths(raw_dir, record.role, record.index)
        if trace_path.exists() and sidecar_path.exists():
            record.trace = str(trace_path)
            record.sidecar = json.loads(sidecar_path.read_text())
        if failure is None and proc.exitcode != 0:
            failure = f"{record.label} process (pid {record.pid}) exited with code {proc.exitcode} at shutdown"
    while True:  # a process's own error message makes the failure line more useful
        try:
            kind, who, message = status.get_nowait()
        except (queue.Empty, ValueError, OSError):
            break
        named = failure is not None and (
            failure.startswith(who) or who.replace("-", " ") in failure
        )
        if kind == "error" and named:
            failure += f": {message}"
    return failure
