"""Pipeline fill of a kernel's memory traffic: the round trips that no amount of parallelism hides.

The Little's-law and bandwidth terms of :mod:`archsim.perf.terms` are steady-state rates over the D
bytes a kernel moves (R of them loaded): T_bw = D / (W e_dram) (W the DRAM bandwidth, e_dram its
achieved fraction from :mod:`archsim.perf.efficiency`) and T_lat = D / min(W, C' / L), C' the bytes
in flight (the loads' C and the posted stores they carry: archsim.perf.in_flight), so that a
latency-bound kernel takes T_lat = R L / C: R / C rounds of one round trip L each. A kernel is not in
steady state at either end of its run. Derived from those definitions (issue time against L
neglected; L is each preset's published unloaded pointer chase, ``dram_latency_ns``, cited in
``hwconfigs/``):

1. First wave. At dispatch (t = 0) the resident workgroups issue their loads, C bytes: all the
   kernel can have in flight. The memory system is empty, so nothing returns before t = L.
2. Latency bound. A thread issues its next loads when its last ones return (or a new workgroup takes
   a finished one's place), so round k of C bytes returns at k L and the last of the R bytes at
   (R / C) L = T_lat. The first round trip is the FIRST of those R / C rounds: T_lat contains it
   (its later rounds at the latency under the kernel's own load: archsim.perf.loaded_latency).
3. Bandwidth bound. No byte returns before L, and from the first one on they return no faster than
   W e_dram: the last at L + T_bw. Here the first round trip is not in T_bw; it adds to it.
4. Both (2) and (3) bound the last load's return from below, so it returns at max(L + T_bw, T_lat).
5. Last stores. Stores are posted (archsim.perf.in_flight): the last is issued once the loads it
   depends on are in, and the kernel is complete only once it is acknowledged, one round trip
   later: a kernel boundary is an ordering point at which every write of the kernel is visible to
   the next kernel in the stream (CUDA C++ Programming Guide, "Streams": commands in a stream
   execute in order; the HIP programming guide says the same of HIP streams). Nothing overlaps it.

So a kernel that moves D > 0 bytes through DRAM takes at least

    T_fill = L + max(L + T_bw, T_lat)            kernels that load
    T_fill = L + max(T_bw, T_lat)                kernels that only store (T_lat = 0: no first load)

A bandwidth-bound kernel takes 2 L + T_bw (the first load's trip and the last store's); a
latency-bound one (T_lat >= L + T_bw) L + T_lat, its first trip counted once, inside T_lat. The
earlier form 2 L + max(T_bw, T_lat) counted a latency-bound kernel's first round trip twice: a
kernel whose loads all fit in one round (one workgroup moving a few bytes: T_lat = L, T_bw ~ 0) was
3 L, where its loads return at L and its stores are acknowledged at 2 L (:func:`minimal_kernel_seconds`,
which archsim.perf.dispatch_overhead takes off the GPU's floor). The first and last trips keep the
unloaded chase: they are issued into an empty memory system and acknowledged as its queue drains.
A kernel that only stores (MIOpen's SetTensor zeroing an output, fill kernels) has no first load to
wait for. Large kernels are unchanged to within 2 L (under 1 us on every preset, against transfers
of tens of microseconds and more); small and mid-size kernels (1-20 MB, 1-5 us of transfer) are
where it matters. A kernel that moves no DRAM bytes gets no term, and the breakdown's
``dram_latency`` idealization (L = 0) removes it.

Monotone as physics asks: in D, W and C through T_bw and T_lat, in L directly and through T_lat.
Pure functions over arrays of seconds.
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig

# The last stores' acknowledgement ends every kernel that moves DRAM bytes; the first loads' round
# trip precedes the first byte, in series with a bandwidth-bound transfer and the first of a
# latency-bound transfer's rounds (module docstring). Dependent round trips inside the kernel are
# priced elsewhere (archsim.perf.passes, archsim.perf.memory_parallelism), as floors that this term
# does not add to.
LAST_STORE_ROUND_TRIPS = 1
FIRST_LOAD_ROUND_TRIPS = 1
FILL_ROUND_TRIPS = LAST_STORE_ROUND_TRIPS + FIRST_LOAD_ROUND_TRIPS  # the most the fill adds


def fill_seconds(
    gpu: GpuConfig, idealize: frozenset[str] = frozenset(), loads: bool = True
) -> float:
    """The most the fill adds to a kernel's steady-state transfer (a bandwidth-bound kernel's two
    round trips; one for a kernel without ``loads``); 0 under the ``dram_latency`` idealization."""
    if "dram_latency" in idealize:
        return 0.0
    trips = FILL_ROUND_TRIPS if loads else LAST_STORE_ROUND_TRIPS
    return trips * gpu.dram_latency_ns * 1e-9


def with_fill(
    lat_s: np.ndarray | float,
    bw_s: np.ndarray | float,
    latency_s: float,
    loads: np.ndarray | bool = True,
) -> np.ndarray:
    """L x last + max(L x first + T_bw, T_lat) (module docstring), elementwise; ``first`` is 0 for
    ops without ``loads``."""
    first = np.where(loads, FIRST_LOAD_ROUND_TRIPS * latency_s, 0.0)
    lat = np.asarray(lat_s, dtype=float)
    bw = np.asarray(bw_s, dtype=float)
    return LAST_STORE_ROUND_TRIPS * latency_s + np.maximum(first + bw, lat)


def minimal_kernel_seconds(latency_s: float) -> float:
    """The terms' body of a kernel whose loads all fit in one round (a one-workgroup kernel moving a
    few bytes): one Little's-law round, T_lat = L, and T_bw -> 0, so L + max(L, L) = 2 L."""
    if latency_s < 0:
        raise ValueError("latency_s must be >= 0")
    return float(with_fill(latency_s, 0.0, latency_s, True))


def latency_with_fill(
    lat_s: np.ndarray,
    bw_s: np.ndarray,
    dram_bytes: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
    read_bytes: np.ndarray | None = None,
) -> np.ndarray:
    """The latency term with the pipeline fill, L + max(L + T_bw, T_lat) (``lat_s`` = T_lat =
    D / min(W, C' / L), ``bw_s`` = T_bw = D / (W e_dram)), for ops that move DRAM bytes; ``lat_s``
    unchanged for the others and under the ``dram_latency`` idealization. ``read_bytes`` (None:
    every op loads): ops that load nothing have no first load, L + max(T_bw, T_lat)."""
    lat_s = np.asarray(lat_s, dtype=float)
    if "dram_latency" in idealize:
        return lat_s
    moves = np.nan_to_num(np.asarray(dram_bytes, dtype=float), nan=0.0) > 0
    loads: np.ndarray | bool = True
    if read_bytes is not None:
        loads = np.nan_to_num(np.asarray(read_bytes, dtype=float), nan=0.0) > 0
    filled = with_fill(lat_s, bw_s, gpu.dram_latency_ns * 1e-9, loads)
    return np.where(moves, filled, lat_s)


__all__ = [
    "FILL_ROUND_TRIPS",
    "FIRST_LOAD_ROUND_TRIPS",
    "LAST_STORE_ROUND_TRIPS",
    "fill_seconds",
    "latency_with_fill",
    "minimal_kernel_seconds",
    "with_fill",
]
