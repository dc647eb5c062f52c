"""Pipeline fill of a kernel's memory traffic: the round trips that no amount of parallelism hides.

The Little's-law and bandwidth terms of :mod:`archsim.perf.terms` are steady-state rates: D bytes at
min(W e_dram, C / L) bytes per second (W the DRAM bandwidth, e_dram its achieved fraction from
:mod:`archsim.perf.efficiency`, C the bytes in flight, L the DRAM latency). A kernel is not in steady
state at either end of its run:

- its first loads return one latency L after they are issued, before which nothing arrives;
- it is complete only once its last stores are acknowledged: a kernel boundary is an ordering point
  at which every write of the kernel is visible to the next kernel in the stream (CUDA C++
  Programming Guide, "Streams": commands in a stream execute in order; the HIP programming guide
  says the same of HIP streams), so the last store's round trip to memory ends inside the kernel.

So a kernel that moves D > 0 bytes through DRAM takes at least

    T_fill = FILL_ROUND_TRIPS x L + D / min(W e_dram, C / L)

which adds to the transfer, not beside it as the max of the terms would. A kernel that only stores
(no loads: MIOpen's SetTensor zeroing an output, fill kernels) has no first load to wait for: one
round trip, its last stores' acknowledgement (its stores themselves are posted, not round trips:
archsim.perf.in_flight). L is each preset's published
unloaded pointer-chase latency (``dram_latency_ns``, cited in ``hwconfigs/``): these are the kernel's
first and last round trips, issued into an empty memory system and acknowledged as its queue drains;
the steady-state Little's-law rate C / L takes the loaded latency (archsim.perf.loaded_latency).
Large kernels are unchanged to within 2L (under 1 us on every
preset, against transfers of tens of microseconds and more); small and mid-size kernels (1-20 MB,
1-5 us of transfer) are where it matters. A kernel that moves no DRAM bytes gets no term, and the
breakdown's ``dram_latency`` idealization (L = 0) removes it.

Pure functions over arrays of seconds.
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig

# One round trip for the first loads' data, one for the last stores' acknowledgement (module
# docstring). Dependent round trips inside the kernel are priced elsewhere (archsim.perf.passes,
# archsim.perf.memory_parallelism), as floors that this term does not add to.
FILL_ROUND_TRIPS = 2


def fill_seconds(
    gpu: GpuConfig, idealize: frozenset[str] = frozenset(), loads: bool = True
) -> float:
    """Seconds of round trips at a kernel's two ends (0 under the ``dram_latency`` idealization);
    one fewer for a kernel without ``loads`` (only its last stores' acknowledgement)."""
    if "dram_latency" in idealize:
        return 0.0
    trips = FILL_ROUND_TRIPS if loads else max(FILL_ROUND_TRIPS - 1, 0)
    return trips * gpu.dram_latency_ns * 1e-9


def latency_with_fill(
    lat_s: np.ndarray,
    bw_s: np.ndarray,
    dram_bytes: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
    read_bytes: np.ndarray | None = None,
) -> np.ndarray:
    """The latency term with the pipeline fill: FILL x L + the slower of the steady-state transfer
    times (``lat_s`` = R / min(W, C / L), ``bw_s`` = D / (W e_dram)), for ops that move DRAM bytes;
    ``lat_s`` unchanged for the others and under the ``dram_latency`` idealization. ``read_bytes``
    (None: every op loads): ops that load nothing get one round trip fewer."""
    fill = fill_seconds(gpu, idealize)
    lat_s = np.asarray(lat_s, dtype=float)
    if fill == 0.0:
        return lat_s
    moves = np.nan_to_num(np.asarray(dram_bytes, dtype=float), nan=0.0) > 0
    if read_bytes is not None:
        loads = np.nan_to_num(np.asarray(read_bytes, dtype=float), nan=0.0) > 0
        fill = np.where(loads, fill, fill_seconds(gpu, idealize, loads=False))
    return np.where(moves, fill + np.maximum(lat_s, np.asarray(bw_s, dtype=float)), lat_s)


__all__ = ["FILL_ROUND_TRIPS", "fill_seconds", "latency_with_fill"]
