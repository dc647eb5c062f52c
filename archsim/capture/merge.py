"""Merge the profiler traces of several processes of one run into one Kineto JSON (gzip).

Each process of a multi-process capture (learner, actors) records its own trace and a sidecar with
its role, index, pid and a few clock samples (``time.time_ns()`` taken just before each of a few
``archsim_clock_sync`` annotations). The merge

* puts every trace on one time base: Kineto timestamps are microseconds after the trace's
  ``baseTimeNanoseconds``, so each file is shifted onto the earliest base;
* aligns processes of other hosts: for each process, (annotation time on the Kineto clock) minus
  (its wall-clock sample) is the offset between the two clocks. Processes on the reference process's
  host (same hostname and kernel boot id in their sidecars) read one clock and are never shifted; their
  offsets differ only by when the sample was taken (record_function's entry cost, or a preemption on
  a loaded machine). A process on another host whose offset differs from the reference's by more than
  ``CLOCK_TOLERANCE_US`` is shifted by the difference;
* names every process by its role (Perfetto shows "learner 0", "actor 1") and lists them in the
  header under ``archsimProcesses`` (pid -> role, index, exit code, clock offset, shift applied).
"""

from __future__ import annotations

import dataclasses
import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from archsim.errors import ArchsimError

NS_PER_US = 1000.0
CLOCK_SYNC_NAME = "archsim_clock_sync"
# Across hosts, offsets differ by the clock difference plus the sample's lateness: record_function's
# entry cost (measured on one host: offsets 160-290 us, spread under 150 us across 3 processes,
# captures of 2026-11-22). 1 ms separates that from a genuinely different clock.
CLOCK_TOLERANCE_US = 1000.0
_ROLE_ORDER = {"learner": 0, "inference": 1, "actor": 2}


@dataclasses.dataclass
class ProcessPart:
    """One process's trace (None if it exported none, e.g. it was killed) and what we know of it."""

    role: str
    index: int
    pid: int | None
    trace_path: Path | None
    sidecar: dict[str, Any] | None = None
    exitcode: int | None = None

    @property
    def label(self) -> str:
        return f"{self.role} {self.index}"


def _clock_offset_us(
    path: Path, events: list[dict], base_ns: int, sidecar: dict | None
) -> float | None:
    """Kineto-clock minus wall-clock at the sync annotations, in us; None if either is missing.

    Every annotation starts after its sample, so each pair over-reads the offset by its lateness; the
    smallest reading is the least late (NTP's minimum filter). A sidecar with one sample (older
    captures) pairs it with the first annotation.
    """
    sample = (sidecar or {}).get("clock_sync")
    if not sample:
        return None
    starts_us = sorted(
        float(event["ts"])
        for event in events
        if event.get("name") == CLOCK_SYNC_NAME and event.get("ph") == "X"
    )
    if not starts_us:
        return None
    samples_ns = sample.get("samples_ns")
    if not isinstance(samples_ns, list) or len(samples_ns) != len(starts_us):
        samples_ns = [sample["time_ns"]]
    return min(
        start_us + base_ns / NS_PER_US - wall_ns / NS_PER_US
        for start_us, wall_ns in zip(starts_us, samples_ns, strict=False)
    )


def _load(path: Path) -> dict[str, Any]:
    try:
        opener = gzip.open if str(path).endswith(".gz") else open  # capture run's workers: gzip
        with opener(path, "rt") as handle:
            data = json.load(handle)
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise ArchsimError(
            f"{path}: cannot read process trace ({exc.__class__.__name__})"
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("traceEvents"), list):
        raise ArchsimError(f"{path}: not a Kineto trace (no traceEvents list)")
    return data


def merge_process_traces(parts: Sequence[ProcessPart], out_path: Path) -> dict[str, Any]:
    """Write the merged trace to ``out_path`` (gzip JSON); return the per-process summary for meta."""
    loaded = [(part, _load(part.trace_path)) for part in parts if part.trace_path is not None]
    if not loaded:
        raise ArchsimError("no process of the run exported a trace; nothing to merge")
    bases = {id(part): int(data.get("baseTimeNanoseconds", 0) or 0) for part, data in loaded}
    base_ns = min(bases.values())
    offsets = {
        id(part): _clock_offset_us(
            part.trace_path, data["traceEvents"], bases[id(part)], part.sidecar
        )
        for part, data in loaded
    }
    # The first process with a clock sample (the learner, in a SEED run) defines the clock.
    known = [part for part, _ in loaded if offsets[id(part)] is not None]
    reference = offsets[id(known[0])] if known else 0.0
    reference_host = _host(known[0]) if known else None
    header = {k: v for k, v in loaded[0][1].items() if k != "traceEvents"}
    events: list[dict[str, Any]] = []
    summary = []
    traced = {id(part) for part, _ in loaded}
    for part, data in loaded:
        offset = offsets[id(part)]
        correction = 0.0
        other_host = reference_host is None or _host(part) != reference_host
        if offset is not None and other_host and abs(offset - reference) > CLOCK_TOLERANCE_US:
            correction = reference - offset
        shift_us = (bases[id(part)] - base_ns) / NS_PER_US + correction
        pids = set()
        for event in data["traceEvents"]:
            if event.get("ph") == "M" and event.get("name") in (
                "process_name",
                "process_sort_index",
            ):
                continue  # replaced by the role names below
            if "ts" in event and shift_us:
                event["ts"] = float(event["ts"]) + shift_us
            if isinstance(event.get("pid"), int):
                pids.add(event["pid"])
            events.append(event)
        if part.pid is not None:
            pids.add(part.pid)
        for pid in sorted(pids):
            events.append(_process_meta(pid, "process_name", {"name": part.label}))
            sort_index = 100 * _ROLE_ORDER.get(part.role, 9) + part.index
            events.append(_process_meta(pid, "process_sort_index", {"sort_index": sort_index}))
        summary.append(_summary(part, offset, correction))
    summary += [_summary(part, None, 0.0) for part in parts if id(part) not in traced]
    header["baseTimeNanoseconds"] = base_ns
    header["traceName"] = Path(out_path).name
    header["archsimProcesses"] = summary
    header["traceEvents"] = events
    with gzip.open(out_path, "wt", compresslevel=6) as handle:
        json.dump(header, handle, separators=(",", ":"))
    return {"processes": summary, "events": len(events)}


def _host(part: ProcessPart) -> tuple[str, str] | None:
    """(hostname, boot id) from the sidecar; None when unknown (then clocks are compared)."""
    host = (part.sidecar or {}).get("host")
    if not host:
        return None
    return (str(host.get("hostname", "")), str(host.get("boot_id", "")))


def _process_meta(pid: int, name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"ph": "M", "name": name, "pid": pid, "tid": 0, "args": args}


# What an R2D2 process adds to its sidecar (workloads/r2d2/seed/profiling.py): when it stopped
# recording mid-run, the CPU time of the steps it ran after that, and (the learner, after the run)
# inference batches of other sizes.
OPTIONAL_SIDECAR_KEYS = ("recording_stopped_time_ns", "unprofiled_cpu_us", "inference_probe")


def _summary(part: ProcessPart, offset_us: float | None, correction_us: float) -> dict[str, Any]:
    sidecar = part.sidecar or {}
    return {
        "role": part.role,
        "index": part.index,
        "pid": part.pid,
        "exitcode": part.exitcode,
        "traced": part.trace_path is not None,
        "complete": bool(sidecar.get("complete", False)),
        "error": sidecar.get("error"),
        "clock_offset_us": None if offset_us is None else round(offset_us, 3),
        "clock_shift_us": round(correction_us, 3),
        "stats": sidecar.get("stats"),
        **{key: sidecar[key] for key in OPTIONAL_SIDECAR_KEYS if key in sidecar},
    }
