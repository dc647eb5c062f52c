"""``archsim.capture``: run a block of PyTorch code under torch.profiler and save an archsim trace.

The profiler records bounded windows (a schedule) rather than the whole run: recording every aten op
with its input shapes costs a few microseconds per op, so a window every few dozen steps keeps the
overhead low while still sampling both acting and training steps. Nothing is written to ``out_dir``
until the block has finished and the trace is ingested; an error leaves no partial output.
"""

from __future__ import annotations

import contextlib
import dataclasses
import tempfile
import warnings
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from archsim.atomic import check_output_dir
from archsim.capture.kineto_merge import merge_windows
from archsim.capture.machine import source_description
from archsim.capture.progress import Progress
from archsim.capture.unprofiled import timing_unprofiled_steps
from archsim.errors import ArchsimError
from archsim.trace.format import RAW_FILE


@dataclasses.dataclass(frozen=True)
class CaptureSchedule:
    """torch.profiler.schedule in agent steps: skip ``skip_first``, then ``repeat`` cycles of
    ``wait`` idle steps, ``warmup`` discarded steps and ``active`` recorded steps (0 = until the end).
    """

    skip_first: int = 0
    wait: int = 60
    warmup: int = 2
    active: int = 8
    repeat: int = 8

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if not isinstance(value, int) or value < 0:
                raise ArchsimError(
                    f"capture schedule {field.name}={value!r}: expected an integer >= 0"
                )
        if self.active < 1:
            raise ArchsimError(f"capture schedule active={self.active}: expected at least 1 step")

    def first_recorded_step(self) -> int:
        """0-based index of the first step that lands in a recorded window."""
        return self.skip_first + self.wait + self.warmup

    def as_dict(self) -> dict[str, int]:
        return dataclasses.asdict(self)


DEFAULT_SCHEDULE = CaptureSchedule()


def check_device(device: str) -> str:
    """``cpu`` or ``cuda[:N]``; CUDA must be usable by this torch build."""
    import torch

    if device == "cpu":
        return device
    if device == "cuda" or device.startswith("cuda:"):
        if not torch.cuda.is_available():
            raise ArchsimError(
                f"--device {device}: CUDA is not available to this torch ({torch.__version__}); "
                "use --device cpu or install a CUDA build of torch"
            )
        return device
    raise ArchsimError(f"--device {device}: expected cpu, cuda or cuda:N")


class CaptureHandle:
    """What the ``with archsim.capture(...)`` block gets: call :meth:`step` once per agent step.

    After the block, ``trace`` holds the saved :class:`archsim.trace.Trace` and ``out_dir`` its folder.
    """

    def __init__(self, profiler: Any, window_dir: Path, progress: Progress | None = None):
        self._profiler = profiler
        self._window_dir = window_dir
        self._progress = progress or Progress(None, "", "", enabled=False)
        self.window_paths: list[Path] = []
        self.steps = 0
        self.trace = None
        self.out_dir: Path | None = None
        # more of the capture's own figures for ``meta.capture`` (capture run's marker_cpu_us)
        self.capture_meta: dict[str, Any] = {}

    def step(self) -> None:
        """Advance the profiler schedule by one step (call it at the end of every agent step)."""
        self.steps += 1
        self._profiler.step()
        self._progress.update()

    def _on_window_ready(self, profiler: Any) -> None:
        path = self._window_dir / f"window-{len(self.window_paths):04d}.json"
        profiler.export_chrome_trace(str(path))
        self.window_paths.append(path)


def _profiler_activities(device: str) -> list[Any]:
    import torch

    activities = [torch.profiler.ProfilerActivity.CPU]
    if device.startswith("cuda"):
        activities.append(torch.profiler.ProfilerActivity.CUDA)
    return activities


def check_workload_meta(workload_meta: Any) -> None:
    """Refuse before the loop runs what the saved meta.yaml could not hold or load back: a list
    (a TypeError once the loop had run), a name that is not a string or settings that are not a
    mapping (saved, then refused by every command), a value YAML cannot write (an object())."""
    import yaml

    what = "archsim.capture workload_meta"
    if not isinstance(workload_meta, Mapping):
        raise ArchsimError(
            f"{what} is {type(workload_meta).__name__} (expected a mapping like "
            "{'name': 'my-agent', 'settings': {}})"
        )
    if not isinstance(workload_meta.get("name"), str | type(None)):
        raise ArchsimError(f"{what}['name'] is {workload_meta['name']!r} (expected a string)")
    if not isinstance(workload_meta.get("settings"), Mapping | type(None)):
        raise ArchsimError(f"{what}['settings'] is not a mapping")
    try:
        yaml.safe_dump(dict(workload_meta))
    except yaml.YAMLError as exc:
        raise ArchsimError(
            f"{what} holds a value meta.yaml cannot store ({exc}); use numbers, strings, lists "
            "and mappings"
        ) from None


@contextlib.contextmanager
def capture(
    out_dir: Path | str,
    workload_meta: Mapping[str, Any],
    *,
    schedule: CaptureSchedule | None = DEFAULT_SCHEDULE,
    device: str = "cpu",
    force: bool = False,
    record_shapes: bool = True,
    total_steps: int | None = None,
    torch_schedule: Any = None,
    time_gaps: bool = False,
) -> Iterator[CaptureHandle]:
    """Profile the block and save a normalized trace (with its raw Kineto JSON.gz) to ``out_dir``.

    ``workload_meta`` is ``{"name": ..., "settings": {...}}``. ``schedule=None`` records the whole block
    as one window (fine for short user loops that never call ``step``). ``total_steps`` sizes the
    progress bar shown on a terminal. ``torch_schedule``: a torch.profiler schedule callable to run
    instead of ``schedule``'s (``capture run``'s archsim.capture.role_schedule.RoleSchedule).
    ``time_gaps``: also time the CPU between unprofiled steps (archsim.capture.unprofiled.GAP_KEY).
    """
    check_workload_meta(workload_meta)  # before torch loads: a refusal costs no import
    import torch

    out_dir = Path(out_dir)
    check_output_dir(out_dir, force)
    device = check_device(device)
    with tempfile.TemporaryDirectory(prefix="archsim-capture-") as tmp:
        tmp_dir = Path(tmp)
        if torch_schedule is None and schedule is not None:
            torch_schedule = torch.profiler.schedule(
                skip_first=schedule.skip_first,
                wait=schedule.wait,
                warmup=schedule.warmup,
                active=schedule.active,
                repeat=schedule.repeat,
            )
        progress = Progress(total_steps, f"capture {out_dir.name}", "step")
        handle = CaptureHandle(None, tmp_dir, progress)
        profiler = torch.profiler.profile(
            activities=_profiler_activities(device),
            schedule=torch_schedule,
            on_trace_ready=handle._on_window_ready,
            record_shapes=record_shapes,
        )
        handle._profiler = profiler
        with warnings.catch_warnings():
            # torch warns that each cycle's events are cleared; archsim exports every window itself
            warnings.filterwarnings("ignore", message=".*clears events at the end of each cycle.*")
            try:
                with timing_unprofiled_steps(time_gaps) as unprofiled_times, profiler:
                    yield handle
            finally:
                progress.close()
        if not handle.window_paths:
            first = schedule.first_recorded_step() if schedule else 0
            raise ArchsimError(
                f"the capture recorded nothing: it ran {handle.steps} steps but the schedule's first "
                f"recorded step is {first + 1}; run more steps or shorten the schedule"
            )
        raw_path = tmp_dir / RAW_FILE
        merged = merge_windows(handle.window_paths, raw_path)
        meta = {
            "workload": dict(workload_meta),
            "source": source_description(device),
            "torch_version": str(torch.__version__),
            "capture": {
                "schedule": schedule.as_dict() if schedule else None,
                "record_shapes": record_shapes,
                "steps": handle.steps,
                "windows": merged["windows"],
                "device": device,
                # CPU time per step of the steps outside the recorded windows (no profiler cost)
                "unprofiled_cpu_us": unprofiled_times.summary(),
                **handle.capture_meta,
            },
        }
        handle.trace = ingest_and_save(raw_path, meta, out_dir, force)
        handle.out_dir = out_dir


def ingest_and_save(raw_path: Path, meta: dict[str, Any], out_dir: Path, force: bool) -> Any:
    """Normalize the raw trace with archsim.trace.ingest and save it atomically to ``out_dir``."""
    from archsim.trace.format import save
    from archsim.trace.ingest import ingest

    trace = ingest(raw_path, meta)
    save(trace, out_dir, force=force)
    return trace
