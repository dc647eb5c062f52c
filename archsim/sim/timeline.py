"""The simulated run as a Chrome-trace JSON (opens in Perfetto, ui.perfetto.dev, and chrome://tracing):
one track per hardware thread under "CPU", one per GPU stream under "GPU", and a power counter."""

from __future__ import annotations

import json
from pathlib import Path

from archsim.atomic import atomic_output_file

CPU_PID, GPU_PID, POWER_PID = 1, 2, 3


def chrome_trace(timeline: list, power_series=None) -> dict:
    """Chrome trace-event JSON object of (label, track, start s, duration s) slices."""
    events: list[dict] = [
        {"ph": "M", "name": "process_name", "pid": CPU_PID, "args": {"name": "CPU"}},
        {"ph": "M", "name": "process_name", "pid": GPU_PID, "args": {"name": "GPU"}},
    ]
    tids: dict[str, tuple[int, int]] = {}
    for label, track, start, duration in timeline:
        if track not in tids:
            pid = GPU_PID if track.startswith("gpu") else CPU_PID
            tid = int(track[3:]) if track.startswith("cpu") else len(tids) + 10_000
            tids[track] = (pid, tid)
            events.append(
                {"ph": "M", "name": "thread_name", "pid": pid, "tid": tid, "args": {"name": track}}
            )
        pid, tid = tids[track]
        events.append(
            {
                "ph": "X",
                "name": label,
                "pid": pid,
                "tid": tid,
                "ts": start * 1e6,
                "dur": duration * 1e6,
            }
        )
    if power_series is not None:
        events.append(
            {"ph": "M", "name": "process_name", "pid": POWER_PID, "args": {"name": "Power"}}
        )
        for start, watts in zip(*power_series, strict=True):
            events.append(
                {
                    "ph": "C",
                    "name": "power_w",
                    "pid": POWER_PID,
                    "ts": float(start) * 1e6,
                    "args": {"power_w": float(watts)},
                }
            )
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: Path, timeline: list, power_series=None) -> Path:
    with atomic_output_file(Path(path)) as handle:
        json.dump(chrome_trace(timeline, power_series), handle)
    return Path(path)
