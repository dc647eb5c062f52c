"""Say when a trace's GPU work ran concurrently, which the per-step sums cannot show.

``archsim predict`` adds a step's kernel, copy and memset times as one stream of one GPU runs them
(archsim.analysis.predict). Work that ran side by side sums to more than the time any device was
busy: replicas on several GPUs of one process (``nn.DataParallel``: each GPU runs its own copy at
the same time) or streams of one GPU that overlap (DDP's NCCL all-reduce on its own stream during
the backward pass). Those sums are not wrong as "one GPU doing all of it in turn", but read as the
step's GPU time they overstate it; this module measures by how much, from the trace's own
timestamps, so the command can say so in one line.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

# Measured GPU work (archsim.perf.columns.MEASURED_KINDS names the same kinds).
_GPU_KINDS = ("kernel", "memcpy", "memset")
# Below this excess of summed over busy time the overlap is launch-edge noise, not concurrency.
_OVERLAP_TOLERANCE = 0.05


def busy_us(start_us: np.ndarray, end_us: np.ndarray) -> float:
    """Length of the union of the intervals [start, end) (us)."""
    if not len(start_us):
        return 0.0
    order = np.argsort(start_us, kind="stable")
    start, end = start_us[order], end_us[order]
    reach = np.maximum.accumulate(end)
    # an interval opens a new busy run where it starts after everything before it ended
    new_run = np.concatenate(([True], start[1:] > reach[:-1]))
    run_id = np.cumsum(new_run) - 1
    run_start = start[new_run]
    run_end = pd.Series(end).groupby(run_id).max().to_numpy()
    return float(np.sum(run_end - run_start))


def concurrency_note(ops: pd.DataFrame) -> str | None:
    """One line when the trace's GPU work overlapped in time (across devices or streams), giving
    the summed and the busy time; None when it ran one piece at a time (or was not measured)."""
    gpu = ops[ops["kind"].astype(str).isin(_GPU_KINDS)]
    start = pd.to_numeric(gpu["start_us"], errors="coerce").to_numpy(dtype=float)
    dur = pd.to_numeric(gpu["dur_us"], errors="coerce").to_numpy(dtype=float)
    ok = np.isfinite(start) & np.isfinite(dur) & (dur > 0)
    if ok.sum() < 2:
        return None
    gpu, start, end = gpu[ok], start[ok], start[ok] + dur[ok]
    total_us = float(np.sum(end - start))
    devices = sorted(int(d) for d in gpu["device"].unique() if d >= 0)
    if len(devices) > 1:
        per_device = [
            busy_us(start[(gpu["device"] == d).to_numpy()], end[(gpu["device"] == d).to_numpy()])
            for d in devices
        ]
        return (
            f"GPU work ran on {len(devices)} devices ({', '.join(map(str, devices))}): predict adds "
            f"their {total_us / 1e3:.3f} ms as if one GPU ran it all in turn; the busiest device "
            f"was busy {max(per_device) / 1e3:.3f} ms"
        )
    union_us = busy_us(start, end)
    if total_us <= union_us * (1 + _OVERLAP_TOLERANCE):
        return None
    streams = gpu["stream"].nunique()
    return (
        f"GPU work on {streams} streams overlapped: the GPU was busy {union_us / 1e3:.3f} ms but "
        f"the work sums to {total_us / 1e3:.3f} ms, which predict adds as one stream running it in "
        "turn"
    )
