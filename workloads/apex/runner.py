"""Start, watch and stop the processes of one Ape-X run (optionally each in its own namespace).

Servers start first and report their ports: the replay server (placement ``server``), then the
learner; then the actors, which connect to both. The run lasts ``seconds`` once every actor has its
first parameters; the first half is profiled, the second only timed (RECORDED_FRACTION, as R2D2's
runner). The recording goes on past half until the learner has recorded a whole step (its stepped
file), and the timed part then keeps its length: a short run on a loaded machine would otherwise
record no training. Any process exiting early stops the run; stopping, terminating stragglers and
(``--netns``) removing the namespaces happen on every exit path, Ctrl-C and SIGTERM included.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import queue
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from archsim.capture.progress import Progress
from archsim.errors import ArchsimError
from workloads.apex.nodes import messages_path, node_main
from workloads.apex.settings import ApexSettings
from workloads.r2d2.seed.profiling import STOP_RECORDING_FILE, clear_signals, stepped_path
from workloads.r2d2.seed.runner import (
    ABORT_GRACE_S,
    RECORDED_FRACTION,
    WATCH_PERIOD_S,
    ProcessRecord,
    SeedRunResult,
    _child_thread_limits,
    _first_exit,
    _status_queue,
    _stop_all,
    _write_processes,
    collect_processes,
)
from workloads.shared_flag import SharedFlag

PROCESSES_FILE = "processes.json"


class Terminated(Exception):
    """SIGTERM arrived: unwind like Ctrl-C so that every process and namespace is cleaned up."""


@contextlib.contextmanager
def _sigterm_unwinds() -> Iterator[None]:
    def handler(signum: int, frame: Any) -> None:
        raise Terminated("terminated by SIGTERM")

    try:
        previous = signal.signal(signal.SIGTERM, handler)
    except ValueError:  # not the main thread: leave signals alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def node_labels(settings: ApexSettings) -> list[str]:
    """Processes of the run in start order: replay server (placement server), learner, actors."""
    servers = ["replay-0"] if settings.replay_placement == "server" else []
    return servers + ["learner-0"] + [f"actor-{i}" for i in range(settings.actors)]


def _wait_ready(proc: Any, label: str, status: Any, timeout_s: float) -> int:
    """Port a server reports; a one-line ArchsimError if it fails or dies first."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        try:
            kind, who, value = status.get(timeout=WATCH_PERIOD_S)
        except queue.Empty:
            if not proc.is_alive():
                raise ArchsimError(
                    f"{label} process (pid {proc.pid}) exited with code {proc.exitcode} before it was ready"
                ) from None
            continue
        if kind == "ready" and who == label:
            return int(value)
        if kind == "error":
            raise ArchsimError(f"{who} process failed to start: {value}")
    raise ArchsimError(f"{label} process (pid {proc.pid}) not ready within {timeout_s:g} s")


def run_apex(settings: ApexSettings, raw_dir: Path) -> tuple[SeedRunResult, dict]:
    """Run every process for ``settings.seconds``; per-process traces, sidecars and message logs
    land in ``raw_dir``. Returns the run result and {label: message records}."""
    raw_dir = Path(raw_dir)
    raw_dir.mkdir(parents=True, exist_ok=True)
    clear_signals(raw_dir)  # a reused directory's old stop request and stepped files
    labels = node_labels(settings)
    with _sigterm_unwinds(), contextlib.ExitStack() as stack:
        topo = None
        if settings.netns:
            from workloads.apex.netns import Topology

            topo = stack.enter_context(
                Topology(labels, settings.link_delay_ms, settings.link_rate_mbit)
            )
        result = _run(settings, raw_dir, labels, topo)
    logs = {}
    for record in result.processes:
        path = messages_path(raw_dir, record.role, record.index)
        if path.exists():
            logs[f"{record.role}-{record.index}"] = json.loads(path.read_text())
    return result, logs


def _run(settings: ApexSettings, raw_dir: Path, labels: list[str], topo: Any) -> SeedRunResult:
    ctx = multiprocessing.get_context("spawn")  # fork is unsafe after torch has started threads
    # lock-free flags: a child killed inside Event.is_set() would leave the Event locked for good
    stop, go, status = SharedFlag(ctx), SharedFlag(ctx), _status_queue(ctx)
    peers: dict[str, tuple[str, int]] = {}
    records: list[ProcessRecord] = []
    procs: list[tuple[ProcessRecord, Any]] = []
    started = None
    failure = None
    try:
        for label in labels:
            role, _, index = label.partition("-")
            host = topo.address(label) if topo else settings.host
            proc = ctx.Process(
                target=node_main,
                args=(
                    role,
                    int(index),
                    settings,
                    str(raw_dir),
                    status,
                    stop,
                    topo.namespace(label) if topo else None,
                    host,
                    dict(peers),
                    go,
                ),
                name=f"apex-{label}",
            )
            with _child_thread_limits(settings.torch_threads):
                proc.start()
            record = ProcessRecord(role, int(index), proc.pid)
            records.append(record)
            procs.append((record, proc))
            if role != "actor":
                peers[role] = (host, _wait_ready(proc, label, status, settings.start_timeout_s))
                if role == "learner" and "replay" not in peers:
                    peers["replay"] = peers["learner"]  # placement learner: one process serves both
        _write_processes(raw_dir / PROCESSES_FILE, [r.__dict__ for r in records])
        failure = _wait_for_actors(procs, status, settings)
        go.set()
        started = time.monotonic()
        recording = True
        run_s = settings.seconds
        learner_stepped = stepped_path(raw_dir, "learner", 0)
        progress = Progress(settings.seconds, "apex run (profiled half)", "s")
        while failure is None and (recording or time.monotonic() - started < run_s):
            time.sleep(WATCH_PERIOD_S)
            failure = _first_exit(procs, started)
            elapsed_s = time.monotonic() - started
            progress.set_to(min(elapsed_s, settings.seconds))
            if recording and _recorded_enough(elapsed_s, settings, learner_stepped.exists()):
                (raw_dir / STOP_RECORDING_FILE).write_text(f"{elapsed_s:.3f}\n")
                recording = False
                run_s = max(run_s, elapsed_s + settings.seconds * (1 - RECORDED_FRACTION))
                progress.note("unprofiled half")
        progress.close()
    except BaseException:
        _stop_all(procs, stop, ABORT_GRACE_S)
        raise
    run_seconds = time.monotonic() - started
    _stop_all(procs, stop, settings.shutdown_timeout_s)
    failure = collect_processes(procs, raw_dir, status, failure)
    return SeedRunResult(records, failure is None, failure, run_seconds, peers["learner"][1])


def _recorded_enough(elapsed_s: float, settings: ApexSettings, learner_stepped: bool) -> bool:
    """Whether to stop recording now: half the run has passed and the learner has recorded a whole
    step, or it has not within ``start_timeout_s`` past half (a bound that only ends a learner that
    never trains; its trace is then kept without training, as a capture says)."""
    half_s = settings.seconds * RECORDED_FRACTION
    return elapsed_s >= half_s and (
        learner_stepped or elapsed_s >= half_s + settings.start_timeout_s
    )


def _wait_for_actors(procs: list, status: Any, settings: ApexSettings) -> str | None:
    """Block until every actor has its first parameters; a failure line if one dies first."""
    waiting = {f"actor-{i}" for i in range(settings.actors)}
    deadline = time.monotonic() + settings.start_timeout_s
    while waiting:
        if time.monotonic() > deadline:
            return f"actors {sorted(waiting)} not ready within {settings.start_timeout_s:g} s"
        try:
            kind, who, message = status.get(timeout=WATCH_PERIOD_S)
        except queue.Empty:
            failure = _first_exit(procs, None)
            if failure:
                return failure
            continue
        if kind == "ready":
            waiting.discard(who)
        else:
            status.put((kind, who, message))
            failure = _first_exit(procs, None)
            if failure:
                return failure
            time.sleep(WATCH_PERIOD_S)
    return None
