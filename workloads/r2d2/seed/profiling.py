"""Each process of a run records its own torch.profiler trace and a small sidecar describing it.

The sidecar (``<role>-<index>.json``) names the process (role, index, pid), says whether the process
finished normally, names its host (hostname and kernel boot id: processes with the same boot id read
one clock), holds the CPU time of the steps it ran after recording stopped mid-run
(``unprofiled_cpu_us``: the same work under the same load without the profiler's cost), and a
few clock-sync samples: ``time.time_ns()`` taken right before each of a few ``archsim_clock_sync``
annotations (``uncertainty_ns``: from the first sample to its annotation's end). The merge uses them
to align processes that ran on other hosts.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import time
import traceback
from pathlib import Path
from types import TracebackType

from archsim.capture.markers import all_threads_recording
from archsim.capture.merge import CLOCK_SYNC_NAME
from archsim.capture.unprofiled import timing_unprofiled_steps

# Written by the runner into the processes' directory halfway through a run: stop recording, time the
# remaining steps unprofiled (workloads/r2d2/seed/runner.py). A SEED learner relays it to its actors
# (learner_process.py), so that its recorded batches answer exactly the actors' recorded steps.
STOP_RECORDING_FILE = "stop-recording"
# How often a process looks for it: a stat call per 50 ms, nothing against ms-long steps.
POLL_PERIOD_S = 0.05
# Written into the same directory by a process once it has recorded its first whole step
# (``<role>-<index>.stepped``, holding time.time_ns(); R2D2 actors and the Ape-X learner): the sign,
# readable mid-run, that it records work. The Ape-X runner waits for the learner's before it stops
# the recording (workloads/apex/runner.py).
STEPPED_SUFFIX = ".stepped"
# Clock-sync rounds per process: a CI run on a loaded 2-core VM saw one process's single annotation
# start 2.1 ms after its sample (2026-11-24); five rounds take
# 47 us (median of 20 under the profiler on this 2-core VM, 72 us at most; 2026-11-25), once per process.
CLOCK_SYNC_ROUNDS = 5


def part_paths(raw_dir: Path, role: str, index: int) -> tuple[Path, Path]:
    """(Kineto JSON, sidecar JSON) of one process."""
    stem = f"{role}-{index}"
    return Path(raw_dir) / f"{stem}.trace.json", Path(raw_dir) / f"{stem}.json"


def stepped_path(raw_dir: Path, role: str, index: int) -> Path:
    """The file a process writes once it has recorded a whole step (STEPPED_SUFFIX)."""
    return Path(raw_dir) / f"{role}-{index}{STEPPED_SUFFIX}"


def clear_signals(raw_dir: Path) -> None:
    """Remove a reused run directory's old signals: its stop request (STOP_RECORDING_FILE) and
    its processes' stepped files (STEPPED_SUFFIX)."""
    (Path(raw_dir) / STOP_RECORDING_FILE).unlink(missing_ok=True)
    for old in Path(raw_dir).glob(f"*{STEPPED_SUFFIX}"):
        old.unlink()


def host_identity() -> dict[str, str]:
    """Hostname and Linux boot id: two processes with the same boot id share CLOCK_REALTIME."""
    boot_id = ""
    with contextlib.suppress(OSError):  # not Linux: the hostname alone identifies the host
        boot_id = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
    return {"hostname": socket.gethostname(), "boot_id": boot_id}


def _clock_sync_sample(record_function, torch) -> dict:
    """Wall clock right before each of ``CLOCK_SYNC_ROUNDS`` annotations.

    An annotation starts some time after its wall-clock sample (record_function's entry cost, the
    first call's lazy set-up, a preemption on a loaded machine), and that lateness adds to the offset
    the merge reads. The merge keeps the least late pair (the minimum filter NTP applies to its
    samples), so one slow round cannot shift a process. The top-level fields are the first round's
    (older sidecars hold only those); ``uncertainty_ns`` bounds how late its annotation is.
    """
    rounds = []
    for _ in range(CLOCK_SYNC_ROUNDS):
        wall_ns, perf_ns = time.time_ns(), time.perf_counter_ns()
        with record_function(CLOCK_SYNC_NAME):
            torch.zeros(1)
        rounds.append((wall_ns, perf_ns, time.time_ns() - wall_ns))
    first_wall_ns, first_perf_ns, first_uncertainty_ns = rounds[0]
    return {
        "time_ns": first_wall_ns,
        "perf_counter_ns": first_perf_ns,
        "uncertainty_ns": first_uncertainty_ns,
        "samples_ns": [wall_ns for wall_ns, _, _ in rounds],
    }


class ProcessProfiler:
    """Profile this process from ``__enter__`` to ``__exit__``; always export what was recorded."""

    # After a finished run the learner times more work unprofiled, into this sidecar (stand-ins
    # that record no trace say False)
    times_after_run = True

    def __init__(self, raw_dir: Path, role: str, index: int, record_shapes: bool = True):
        self.trace_path, self.sidecar_path = part_paths(raw_dir, role, index)
        self.stop_recording_path = Path(raw_dir) / STOP_RECORDING_FILE
        self.stepped_path = stepped_path(raw_dir, role, index)
        self._stepped = False
        self.role = role
        self.index = index
        self.record_shapes = record_shapes
        self._profiler = None
        # the unprofiled-step timing and its figures, once recording has stopped mid-run
        self._timing = None
        self._unprofiled_times = None
        self._next_poll_s = 0.0
        self.sidecar: dict = {"role": role, "index": index, "pid": os.getpid()}

    def __enter__(self) -> ProcessProfiler:
        import torch
        from torch._C._profiler import _ExperimentalConfig
        from torch.profiler import ProfilerActivity, profile, record_function

        # profile_all_threads: the learner's training thread is not the one that starts the profiler
        self._profiler = profile(
            activities=[ProfilerActivity.CPU],
            record_shapes=self.record_shapes,
            experimental_config=_ExperimentalConfig(profile_all_threads=True),
        )
        entered_ns = time.perf_counter_ns()
        self._all_threads = all_threads_recording()
        self._all_threads.__enter__()
        self._profiler.__enter__()
        self.sidecar["profiler_start_s"] = (time.perf_counter_ns() - entered_ns) / 1e9
        self.sidecar["host"] = host_identity()
        self.sidecar["clock_sync"] = _clock_sync_sample(record_function, torch)
        self.sidecar["started_time_ns"] = self.sidecar["clock_sync"]["time_ns"]
        return self

    @property
    def recording(self) -> bool:
        """The profiler is on (entered, not stopped mid-run, not finished)."""
        return self._profiler is not None and self._timing is None

    def stop_requested(self) -> bool:
        """Whether the runner has asked to stop recording (STOP_RECORDING_FILE); looks at the file
        at most every POLL_PERIOD_S, False otherwise and once recording has stopped."""
        now_s = time.monotonic()
        if not self.recording or now_s < self._next_poll_s:
            return False
        self._next_poll_s = now_s + POLL_PERIOD_S
        return self.stop_recording_path.exists()

    def stop_recording(self) -> None:
        """Call between steps: stop recording and time the rest of the run's steps without the
        profiler (archsim.capture.unprofiled), on every thread of this process; once."""
        if not self.recording:
            return
        self._profiler.stop()
        self._all_threads.__exit__(None, None, None)
        self.sidecar["recording_stopped_time_ns"] = time.time_ns()
        self._timing = timing_unprofiled_steps()
        self._unprofiled_times = self._timing.__enter__()

    def stepped(self) -> None:
        """Call after each whole step: the first one recorded writes this process's stepped file
        (STEPPED_SUFFIX); nothing after that, nor once recording has stopped."""
        if self._stepped or not self.recording:
            return
        self._stepped = True
        self.stepped_path.write_text(f"{time.time_ns()}\n")

    def poll(self) -> None:
        """Call between steps: stop recording once the runner asks. Only for a process whose
        recorded steps need not match another's one for one: each process sees the file at its
        own instant (SEED's actors follow the learner instead, InferenceServer)."""
        if self.stop_requested():
            self.stop_recording()

    def stop(self) -> None:
        """Stop recording (or the unprofiled timing) and export the trace, once; the sidecar is
        written on exit, so work done after this can still add to it."""
        if self._profiler is None:
            return
        profiler, self._profiler = self._profiler, None
        if self._timing is None:
            profiler.__exit__(None, None, None)
            self._all_threads.__exit__(None, None, None)
        else:
            self._timing.__exit__(None, None, None)
            self.sidecar["unprofiled_cpu_us"] = self._unprofiled_times.summary()
        profiler.export_chrome_trace(str(self.trace_path))
        self.sidecar["finished_time_ns"] = time.time_ns()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
        self.sidecar["complete"] = exc_type is None
        if exc is not None:
            self.sidecar["error"] = "".join(traceback.format_exception_only(exc)).strip()
        tmp = self.sidecar_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(self.sidecar))
        os.replace(tmp, self.sidecar_path)
