"""Join the Chrome-trace files of several profiler windows into one Kineto JSON (gzip).

torch.profiler writes one trace per recorded window (a schedule cycle). archsim keeps one raw trace per
capture, so the windows' events are concatenated under the first window's header. Timestamps are
relative to ``baseTimeNanoseconds``; a window with another base is shifted onto the first one's.
"""

from __future__ import annotations

import gzip
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

NS_PER_US = 1000.0


def merge_windows(window_paths: Sequence[Path], out_path: Path) -> dict[str, Any]:
    """Write the merged trace to ``out_path`` (gzip JSON); return a summary (windows, events)."""
    if not window_paths:
        raise ValueError("no profiler window to merge")
    merged: dict[str, Any] | None = None
    seen_metadata: set[str] = set()
    events: list[dict[str, Any]] = []
    base_ns = 0
    for path in window_paths:
        with open(path) as handle:
            window = json.load(handle)
        window_events = window.pop("traceEvents", [])
        window_base_ns = int(window.get("baseTimeNanoseconds", 0) or 0)
        if merged is None:
            merged = window
            base_ns = window_base_ns
        shift_us = (window_base_ns - base_ns) / NS_PER_US
        for event in window_events:
            if event.get("ph") == "M":
                # process/thread names repeat in every window; keep one copy
                key = json.dumps(
                    [event.get("name"), event.get("pid"), event.get("tid"), event.get("args")],
                    sort_keys=True,
                )
                if key in seen_metadata:
                    continue
                seen_metadata.add(key)
            if shift_us and "ts" in event:
                event["ts"] = float(event["ts"]) + shift_us
            events.append(event)
    assert merged is not None
    merged["traceName"] = Path(out_path).name
    merged["archsimWindows"] = len(window_paths)
    merged["traceEvents"] = events
    # One dumps + one compress call: json.dump into a gzip text stream makes many small writes and
    # took 5 s for 8 windows; level 6 is gzip's default speed/size balance.
    payload = json.dumps(merged, separators=(",", ":")).encode()
    with open(out_path, "wb") as handle:
        handle.write(gzip.compress(payload, compresslevel=6))
    return {"windows": len(window_paths), "events": len(events)}
