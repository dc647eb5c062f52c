"""Worker processes of a captured program (``archsim capture run``): each profiles and marks itself.

A program that steps its environments in worker processes (gymnasium's ``AsyncVectorEnv``,
Stable-Baselines3's ``SubprocVecEnv``, any ``multiprocessing.Process`` with a ``target``) does its env
work where the parent's profiler cannot see it. ``capture run`` therefore wraps each such process's
target, before it starts, in :class:`ChildCapture`: a picklable callable, so the same wrapper runs
in a forked child (which inherits the parent's patches: they are undone first) and in a ``spawn`` or
``forkserver`` child (a fresh interpreter that imports this module to unpickle it). In the child it
marks the worker's ``Env.step`` calls as actor steps (``env_step``, actor index = worker number, on
the child's own pid), reads the child's whole-process CPU clock, profiles (CPU activity only: a
worker steps environments, and a forked child cannot use CUDA) with the parent's schedule
counted in the child's own env steps from the parent's first optimizer step on (the parent writes
LEARNING_STARTED_FILE then; until it exists the child looks for it at every step: one
``Path.exists`` of 3.3 us, timed with timeit on the 2-core development box on 2026-11-24, against
ALE Pong env steps of about 700 us of CPU in the workers of the ``--async-envs`` example), and writes its
trace and a sidecar (archsim.capture.merge) when its target returns, or when it is terminated. The
sidecar also says its env's frames per step (``frameskip``, archsim.capture.frameskip): the parent's
vector env cannot see the envs its workers build.

The parent (:class:`Workers`) records who started, and after the program has ended waits for them
(a worker the program did not close is asked to stop with SIGTERM, then killed), so no process
outlives the capture. Their traces are merged with the parent's by archsim.capture.merge, as
``capture r2d2`` merges its processes; a killed worker's missing or partial trace is named in one
note line, and a worker that stepped no environment (a pool or manager process) is left out.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import signal
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

from archsim.capture import env_markers

# Written by the parent into the workers' folder at its first optimizer step: workers count their
# schedule from then on, so their recorded windows fall in the training phase as the parent's do.
LEARNING_STARTED_FILE = "learning-started"
# Written by the parent when the program has ended, before it stops the workers still running.
PROGRAM_ENDED_FILE = "program-ended"
# After the program has ended: how long a worker may take to finish (export its trace) before it is
# asked to stop, and then before it is killed. A daemon process is what Python's exit terminates at
# once (multiprocessing's atexit handler; SB3 programs rarely close their SubprocVecEnv): it gets
# DAEMON_GRACE_S only; others, which Python's exit would wait for, JOIN_TIMEOUT_S. Design choices: a
# worker's export takes well under a second for the default schedule's 8 windows of 8 env steps.
DAEMON_GRACE_S = 1.0
JOIN_TIMEOUT_S = 10.0
TERMINATE_TIMEOUT_S = 10.0
# Process targets of libraries that never step an environment: started as they are, not captured,
# and named in no note. A DataLoader(num_workers=2) over a replay buffer forks 2 workers per
# iteration; each started a profiler of its own and was named "forked while the parent's profiler
# was recording" (22 note lines for an 11-update CartPole loop, whose capture took 10.2 s, 7.0 s bare).
LIBRARY_TARGETS = ("torch.utils.data.",)


class _Terminated(BaseException):
    """SIGTERM in a captured worker: unwinds its target (not an Exception, which workers catch)."""


# Modules whose bookkeeping an exception must not cut in half: a SIGTERM raised inside
# torch.profiler's step or a record_function's enter/exit leaves the profiler unable to stop
# ("Expected record to be set") and the worker's windows were lost.
_PROFILER_MODULES = ("torch.profiler", "torch.autograd.profiler")


def _inside_profiler(frame: Any) -> bool:
    while frame is not None:
        if str(frame.f_globals.get("__name__", "")).startswith(_PROFILER_MODULES):
            return True
        frame = frame.f_back
    return False


class _TermSignal:
    """A worker's SIGTERM: raised at once, or, when it lands inside the profiler's bookkeeping, at
    the start of the worker's next env step (archsim.capture.env_markers.before_env_step). Once
    the target has ended (``exporting``) it is ignored until the worker's sidecar is on disk: a
    second SIGTERM (a Pool's terminate, then archsim's after the program ended) cut the export of
    the windows recorded, and SIGKILL after TERMINATE_TIMEOUT_S still bounds the worker's life."""

    def __init__(self) -> None:
        self.pending = False
        self.exporting = False

    def on_signal(self, signum: int, frame: Any) -> None:
        if self.exporting or _inside_profiler(frame):
            self.pending = True
            return
        raise _Terminated()

    def raise_if_pending(self) -> None:
        if self.pending:
            self.pending = False
            raise _Terminated()


@dataclasses.dataclass(frozen=True)
class ChildSettings:
    """What a worker needs to capture itself (picklable: crosses spawn/forkserver)."""

    folder: str
    schedule: dict[str, int]  # CaptureSchedule fields, as the parent's profiler runs them
    record_shapes: bool = True


def part_paths(folder: Path | str, index: int) -> tuple[Path, Path]:
    """(Kineto JSON.gz, sidecar JSON) of worker ``index``."""
    stem = Path(folder) / f"worker-{index}"
    return stem.with_suffix(".trace.json.gz"), stem.with_suffix(".json")


class ChildCapture:
    """A process target wrapped so that the child process captures itself (see module docstring)."""

    def __init__(self, target: Any, settings: ChildSettings, index: int) -> None:
        self.target, self.settings, self.index = target, settings, index

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from archsim.capture import auto_markers

        inherited = auto_markers.active_marker()
        if inherited is not None:  # forked: the parent's patches and steps are not this process's
            inherited.forget()
        sidecar: dict[str, Any] = {"role": "actor", "index": self.index, "pid": os.getpid()}
        try:
            import torch

            if torch.autograd.profiler._is_profiler_enabled:
                sidecar["error"] = "forked while the parent's profiler was recording; not profiled"
                _write_json(part_paths(self.settings.folder, self.index)[1], sidecar)
                return self.target(*args, **kwargs)
        except ImportError:  # a worker without torch is still run, unprofiled
            sidecar["error"] = "torch is not importable in the worker"
            _write_json(part_paths(self.settings.folder, self.index)[1], sidecar)
            return self.target(*args, **kwargs)
        return _run_captured(self, sidecar, args, kwargs)


def _run_captured(child: ChildCapture, sidecar: dict[str, Any], args: Any, kwargs: Any) -> Any:
    import torch

    from archsim.capture.auto_markers import auto_markers
    from archsim.capture.cpu_clock import process_cpu_time
    from archsim.capture.kineto_merge import merge_windows
    from archsim.capture.unprofiled import timing_unprofiled_steps

    settings = child.settings
    trace_path, sidecar_path = part_paths(settings.folder, child.index)
    started = Path(settings.folder) / LEARNING_STARTED_FILE

    def learning_started() -> bool:
        return started.exists()

    term = _TermSignal()
    env_markers.before_env_step = term.raise_if_pending
    previous_handler = signal.signal(signal.SIGTERM, term.on_signal)
    # inside the capture's own temporary folder, so a worker killed mid-run leaves nothing behind
    window_dir = Path(tempfile.mkdtemp(prefix=f"windows-{child.index}-", dir=settings.folder))
    windows: list[Path] = []

    def on_ready(profiler: Any) -> None:
        path = window_dir / f"window-{len(windows):04d}.json"
        profiler.export_chrome_trace(str(path))
        windows.append(path)

    # torch warns that each cycle's events are cleared; the worker exports every window itself
    # (archsim.capture.session filters the same line in the program's process)
    warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
    s = settings.schedule
    profiler = torch.profiler.profile(
        # CPU only: a worker steps environments, and a forked child cannot use CUDA
        activities=[torch.profiler.ProfilerActivity.CPU],
        schedule=torch.profiler.schedule(
            skip_first=s["skip_first"],
            wait=s["wait"],
            warmup=s["warmup"],
            active=s["active"],
            repeat=s["repeat"],
        ),
        on_trace_ready=on_ready,
        record_shapes=settings.record_shapes,
    )

    def tick() -> None:  # archsim's work, not the worker's: AutoMarker leaves it out of the gap
        profiler.step()

    sidecar["complete"] = False
    try:
        with (
            timing_unprofiled_steps(gaps=True) as times,
            profiler,
            process_cpu_time(),
            auto_markers(tick, (), actor=child.index, ready=learning_started) as m,
        ):
            try:
                result = child.target(*args, **kwargs)
                sidecar["complete"] = True
            except _Terminated:
                ended = (Path(settings.folder) / PROGRAM_ENDED_FILE).exists()
                by = "archsim after the program ended" if ended else "its program (SIGTERM)"
                sidecar["error"] = f"terminated by {by}"
                result = None
            except BaseException as exc:
                sidecar["error"] = "".join(traceback.format_exception_only(exc)).strip()
                raise
            finally:
                term.exporting = True
                m.end_done_update()  # its last update, done at its optimizer step, counts
                sidecar["counts"] = dataclasses.asdict(m.counts)
                if m.frameskip is not None:  # the parent's meta takes it (capture.run_script)
                    sidecar["frameskip"] = dataclasses.asdict(m.frameskip)
        sidecar["unprofiled_cpu_us"] = times.summary()
        if windows:
            merge_windows(windows, trace_path)
        sidecar["windows"] = len(windows)
        return result
    finally:
        try:
            _write_json(sidecar_path, sidecar)
            for path in windows:
                path.unlink(missing_ok=True)
            window_dir.rmdir()
        finally:
            # Restored only once the sidecar is on disk: restored before it, a Pool's terminate
            # (sent to a worker that took its exit sentinel and was still exporting) could land
            # in between and kill the worker with its counts unwritten, so a rollout program was
            # refused for "stepped no gymnasium environment" (1 of about 30 runs at load 4.5).
            # A SIGTERM held until here is not raised: the target has ended, the process exits.
            signal.signal(signal.SIGTERM, previous_handler)
            env_markers.before_env_step = None


def _write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data))
    os.replace(tmp, path)


@dataclasses.dataclass
class Worker:
    """One process the program started: its index (1, 2, ...), the Process, and whether it is ours."""

    index: int
    process: Any
    captured: bool
    pid: int | None = None
    library: bool = False  # a library's worker that steps no env (LIBRARY_TARGETS): no note


def patch_process_start(patches: Any, counts: Any, workers: Workers | None) -> None:
    """``multiprocessing`` ``Process.start`` counts each process (``counts.worker_processes``) and,
    given ``workers``, wraps its target first so that the child captures itself."""
    import multiprocessing.process as mp_process

    start = mp_process.BaseProcess.start

    def capturing_start(process: Any, *args: Any, **kwargs: Any) -> Any:
        counts.worker_processes += 1
        if workers is not None:
            workers.before_start(process)
        result = start(process, *args, **kwargs)
        if workers is not None:
            workers.after_start(process)
        return result

    patches.set(mp_process.BaseProcess, "start", capturing_start)


class Workers:
    """The parent's side: wraps targets before processes start, stops and collects them after."""

    def __init__(self, folder: Path, schedule: Any) -> None:
        self.folder = Path(folder)
        self.settings = ChildSettings(str(folder), schedule.as_dict())
        self.started: list[Worker] = []

    def before_start(self, process: Any) -> None:
        """Wrap the process's target (a plain ``Process(target=...)``; a subclass with its own
        ``run`` is started as it is, and named later as not captured)."""
        from multiprocessing.process import BaseProcess

        index = len(self.started) + 1
        own_run = type(process).run is not BaseProcess.run
        target = getattr(process, "_target", None)
        library = str(getattr(target, "__module__", None) or "").startswith(LIBRARY_TARGETS)
        captured = (
            not own_run
            and target is not None
            and not isinstance(target, ChildCapture)
            and not library
        )
        if captured:
            process._target = ChildCapture(target, self.settings, index)
        self.started.append(Worker(index, process, captured, library=library))

    def after_start(self, process: Any) -> None:
        for worker in self.started:
            if worker.process is process:
                worker.pid = process.pid

    def learning_started(self) -> None:
        (self.folder / LEARNING_STARTED_FILE).touch()

    def stop_all(self) -> None:
        """Wait for every worker still running; SIGTERM (it exports what it has), then SIGKILL."""
        (self.folder / PROGRAM_ENDED_FILE).touch()
        now = time.monotonic()
        for worker in self.started:
            daemon = bool(getattr(worker.process, "daemon", False))
            deadline = now + (DAEMON_GRACE_S if daemon else JOIN_TIMEOUT_S)
            _join(worker.process, max(0.0, deadline - time.monotonic()))
        for worker in self.started:
            process = worker.process
            if _alive(process):
                process.terminate()
                _join(process, TERMINATE_TIMEOUT_S)
            if _alive(process):
                process.kill()
                _join(process, TERMINATE_TIMEOUT_S)

    def env_counts(self) -> dict[str, int]:
        """The Counts fields summed over the captured workers' sidecars (after :meth:`stop_all`)."""
        total: dict[str, int] = {}
        for worker in self.started:
            sidecar = (
                _read_json(part_paths(self.folder, worker.index)[1]) if worker.captured else None
            )
            for key, value in ((sidecar or {}).get("counts") or {}).items():
                if isinstance(value, int):
                    total[key] = total.get(key, 0) + value
        return total

    def parts(self) -> tuple[list[Any], list[str]]:
        """(ProcessParts of the workers that stepped an environment, note lines about the rest)."""
        from archsim.capture.merge import ProcessPart

        parts, notes = [], []
        for worker in self.started:
            pid, exitcode = worker.pid, _exitcode(worker.process)
            name = f"worker {worker.index} (pid {pid})"
            if worker.library:
                continue
            if not worker.captured:
                notes.append(f"{name} runs its own Process.run: not captured")
                continue
            trace_path, sidecar_path = part_paths(self.folder, worker.index)
            sidecar = _read_json(sidecar_path)
            if sidecar is None:
                notes.append(f"{name} exited with code {exitcode} and wrote no trace (killed?)")
                continue
            if "counts" not in sidecar:  # ran unprofiled (see ChildCapture)
                notes.append(f"{name} is not in the trace: {sidecar.get('error')}")
                continue
            if not sidecar["counts"].get("env_steps"):
                continue  # a pool or manager process: no environment work to show
            if not trace_path.exists():
                why = sidecar.get("error") or "its schedule recorded no window (run longer)"
                notes.append(f"{name} stepped environments but has no trace: {why}")
                parts.append(ProcessPart("actor", worker.index, pid, None, sidecar, exitcode))
                continue
            if not sidecar.get("complete"):
                notes.append(f"{name}'s trace is partial ({sidecar.get('error')}); merged as is")
            parts.append(ProcessPart("actor", worker.index, pid, trace_path, sidecar, exitcode))
        return parts, notes


def _exitcode(process: Any) -> int | None:
    try:
        return process.exitcode
    except ValueError:  # closed by the program (Process.close): it had exited
        return None


def _alive(process: Any) -> bool:
    try:
        return bool(process.is_alive())
    except (AssertionError, ValueError):  # not started, or already closed by the program
        return False


def _join(process: Any, timeout_s: float) -> None:
    with contextlib.suppress(AssertionError, ValueError):  # never started, or closed
        process.join(timeout=timeout_s)


def _read_json(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def note(line: str) -> None:
    print(f"archsim: note: capture run: {line}", file=sys.stderr)
