"""The device of GPU events recorded on the CPU process's pid, with no ``device`` of their own."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.trace.ingest_meta import device_properties
from archsim.trace.kineto import KinetoTrace


def device_of_cpu_pid(
    kt: KinetoTrace,
    fields: pd.DataFrame,
    gpu: pd.DataFrame,
    cpu: pd.DataFrame,
    runtime: pd.DataFrame,
) -> int:
    """GPU events that record no ``device`` take their pid as the device (Kineto puts a GPU's
    events on pid = device index). A hand-edited trace may leave kernels on the CPU process's pid
    (pytorch/pytorch test/inductor/test_analysis.py: pid 1147039 beside one H100): such a pid is
    no device index, so where the trace lists at most one device the events are that device's
    (0 when none is listed). Returns how many events were moved; several devices stay as read."""
    props = device_properties(kt.top)
    ids = {int(p["id"]) for p in props if type(p.get("id")) is int}
    if len(props) > 1 or not len(gpu):
        return 0
    host = np.union1d(cpu["pid"].to_numpy(), runtime["pid"].to_numpy())
    device = fields["device"].to_numpy()
    moved = (device == gpu["pid"].to_numpy()) & np.isin(device, host) & ~np.isin(device, list(ids))
    if moved.any():
        fields.loc[moved, "device"] = next(iter(ids), 0)
    return int(moved.sum())
