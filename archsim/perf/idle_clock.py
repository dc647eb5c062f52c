"""The clock of a kernel that starts on a GPU left idle: a pure function of the trace's own timeline.

AMD Instinct GPUs drop their engine clock when idle and ramp it up over hundreds of milliseconds of
work (AMD, ROCm/composable_kernel PR 1241: "Frequency ramp-up on MI300's take 400ms or more"). The
published clock probe of te42kyfo/gpu-benches (``gpu-clock.cuh``: launch a kernel, sleep 10 ms, read
the current engine clock through rocm_smi / NVML) reads, 10 ms after a kernel of microseconds:

- MI210 (CDNA2): 800 MHz (``gpu-latency/mi210.txt``; 1700 MHz once a kernel still runs at the
  sample);
- MI300X (CDNA3): 739 MHz, then 964, 1142, ... up to 2092 MHz as the probe's kernels lengthen
  (``gpu-latency/mi300x.txt``, as carried by the fork xxrjun/gpu-benches);
- H100 PCIe: 1755 MHz at every sample, short kernels included (``gpu-latency/h100_pcie.txt``): no
  drop within 10 ms, so NVIDIA GPUs get no idle clock here (no NVIDIA figure of a drop was found).

So a GPU idle for ``IDLE_WINDOW_US`` is at its idle clock when the next kernel starts, and a kernel of
microseconds ends long before the ramp. Such a kernel's cycle-bound time (math, L2, dependent
round trips, the per-kernel floor) scales by clock / idle clock; its DRAM-bandwidth time does not
(the HBM clock is not the engine clock). After a shorter gap nothing is published about the clock,
so nothing changes: the model is never faster than on a busy GPU. The idle gap is read off the trace:
the time from the end of the device's previous kernel, copy or memset to this op's start.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.columns import MEASURED_KINDS
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.efficiency import generation

# gpu-benches gpu-clock.cuh samples the clock 10 ms (usleep(10000)) after launching its kernel; a
# kernel of microseconds has by then left the GPU idle for ~10 ms, and the MI210 and MI300X read
# their idle clocks (module docstring). A GPU idle that long is taken to be at its idle clock.
IDLE_WINDOW_US = 10_000.0

# Engine clock (MHz) a GPU of each generation reads after IDLE_WINDOW_US idle (module docstring).
IDLE_CLOCK_MHZ: dict[str, float] = {
    "cdna2": 800.0,  # te42kyfo/gpu-benches gpu-latency/mi210.txt, first 15 samples
    "cdna3": 739.0,  # xxrjun/gpu-benches gpu-latency/mi300x.txt, first sample
}

# Terms of archsim.perf.terms that run at the engine clock (math; L2, whose bandwidth is bytes per
# clock); "bw" (DRAM bandwidth) does not, and "lat" only beyond it (at_idle_clock).
CYCLE_BOUND_TERMS = ("math", "comp", "mem")


def idle_clock_mhz(gpu: GpuConfig, config_name: str = "") -> float | None:
    """The published idle engine clock of ``gpu``'s generation, or None where none is published."""
    return IDLE_CLOCK_MHZ.get(generation(gpu, config_name))


def idle_gaps_us(ops: pd.DataFrame) -> np.ndarray:
    """Microseconds each device op waited on an idle device: its start minus the latest end of the
    same device's earlier kernels, copies and memsets (NaN for the first, for ops without a measured
    start and duration, and for CPU ops)."""
    n = len(ops)
    gaps = np.full(n, np.nan)
    start = _column(ops, "start_us", np.nan)
    dur = _column(ops, "dur_us", np.nan)
    on_device = (
        _strings(ops, "kind").isin(MEASURED_KINDS).to_numpy(dtype=bool)
        & np.isfinite(start)
        & np.isfinite(dur)
    )
    rows = np.flatnonzero(on_device)
    if len(rows) < 2:
        return gaps
    device = _strings(ops, "device").to_numpy(dtype=object)[rows]
    frame = pd.DataFrame({"row": rows, "device": device, "start": start[rows],
                          "end": start[rows] + np.maximum(dur[rows], 0.0)})  # fmt: skip
    frame = frame.sort_values(["device", "start"], kind="stable")
    previous_end = frame.groupby("device", sort=False)["end"].transform(
        lambda e: e.cummax().shift(1)
    )
    gaps[frame["row"].to_numpy()] = (frame["start"] - previous_end).to_numpy(dtype=float)
    return gaps


def idle_clock_factor(ops: pd.DataFrame, gpu: GpuConfig, config_name: str = "") -> np.ndarray:
    """Per op, how much slower its cycle-bound time runs: clock / idle clock for device ops that start
    after at least IDLE_WINDOW_US of idle device, else 1 (never below 1)."""
    factor = np.ones(len(ops))
    idle_mhz = idle_clock_mhz(gpu, config_name)
    if idle_mhz is None or idle_mhz >= gpu.clock_mhz or len(ops) == 0:
        return factor
    gaps = idle_gaps_us(ops)
    idle = np.nan_to_num(gaps, nan=0.0) >= IDLE_WINDOW_US
    return np.where(idle, gpu.clock_mhz / idle_mhz, factor)


def at_idle_clock(terms: dict[str, np.ndarray], factor: np.ndarray) -> dict[str, np.ndarray]:
    """The kernel terms with their cycle-bound parts slowed by ``factor`` (DRAM bandwidth kept).

    The latency term holds the DRAM transfer too (archsim.perf.pipeline_fill: round trips plus the
    slower of the Little's-law and bandwidth transfers), so only its excess over the bandwidth term,
    the round trips, is slowed: lat + (factor - 1) x max(lat - bw, 0)."""
    if np.all(factor == 1.0):
        return terms
    scaled = {k: (v * factor if k in CYCLE_BOUND_TERMS else v) for k, v in terms.items()}
    if "lat" in terms and "bw" in terms:
        round_trips = np.maximum(terms["lat"] - terms["bw"], 0.0)
        scaled["lat"] = terms["lat"] + (factor - 1.0) * round_trips
    return scaled


__all__ = [
    "CYCLE_BOUND_TERMS",
    "IDLE_CLOCK_MHZ",
    "IDLE_WINDOW_US",
    "at_idle_clock",
    "idle_clock_factor",
    "idle_clock_mhz",
    "idle_gaps_us",
]
