"""Why a kernel that starts on an idle GPU is priced at the GPU's clock like any other, and the
idle-gap reader that shows it: a pure function of the trace's own timeline.

AMD Instinct GPUs lower their engine clock when idle. The clock probe of te42kyfo/gpu-benches
(``gpu-clock.cuh``: launch ``powerKernel<<<1000, 1024>>>``, ``usleep(10000)``, read rocm_smi's
current ``RSMI_CLK_TYPE_SYS`` frequency; the iterations double each sample) reads 800 MHz on an
MI210 (``gpu-latency/mi210.txt``) and 739, 964, 1142, ... 2092 MHz on an MI300X
(``gpu-latency/mi300x.txt`` of the fork xxrjun/gpu-benches). That is not the clock a kernel runs
at: the reading is taken 10 ms after the launch, when a kernel of microseconds has long ended,
and on the MI300X it is the power-management firmware's metrics-table ``GfxclkFrequency`` (Linux
``smu_v13_0_6_ppt.c`` answers the current and the average GFX clock from that one field), not a
sample of the clock at a kernel's start. No published figure says how fast the engine clock rises
when work arrives (AMD's composable_kernel PR 1241, "Frequency ramp-up on MI300's take 400ms or
more", is about sustained benchmark clocks: it adds a second of warm-up runs).

A real trace measures it: ``mi300x_normalization_bench`` (TraceLens, three iterations of the same
ops) starts 9 kernels after 10 ms or more of idle GPU. Its ``batch_norm_collect_statistics_kernel``
after 332 ms idle takes 11.38 us, the same kernel in later iterations 10.17-11.42; its
instructions, counted from gfx940 ISA (:mod:`archsim.perf.issue_rate_amd`), occupy a SIMD for
11,424 issue cycles, so its clock averaged 1,004 MHz or more over the kernel even were issue all it
did (at 739 MHz issue alone takes 15.5 us). A 739-MHz clock makes cycle-bound work 2.84x slower
(2100 / 739); first-iteration kernels take a median 1.31x the same kernel in iterations 2-3 after
>= 10 ms idle (9 kernels), 1.24x after 1-10 ms (11), 1.28x after 0.1-1 ms (10), 1.05x after under
20 us (12), and iterations 2-3 (all gaps under 1 ms) 0.98-1.03x. The excess is about a microsecond
whatever the kernel's cycle count (statistics +0.6 us, group-norm moments +1.1, one-workgroup copies
+0.8 and +1.5, the mean's ``reduce_kernel<512, 1>`` +1.8) and the gap (> 100 us): a cost of the
cold first iteration, not of a clock, and with no published figure it is not modelled. MIOpen's
first ``MeanVariance`` (29.4 us against 3.7-4.0 later, 7.7x) exceeds any clock ratio: a cold
first execution. So the model prices a kernel the same whatever the gap before it; the H100 PCIe
probe reads 1755 MHz at every sample (``gpu-latency/h100_pcie.txt``) anyway.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.columns import MEASURED_KINDS
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings

# gpu-benches gpu-clock.cuh reads the clock 10 ms (usleep(10000)) after launching its kernel: the
# gap after which the probe's idle readings were taken (module docstring).
IDLE_WINDOW_US = 10_000.0


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


__all__ = ["IDLE_WINDOW_US", "idle_gaps_us"]
