"""Dependent offset loads of FBGEMM's warp-per-segment kernels: a floor of waves x round trips.

These kernels give each warp one segment (bag, or feature x batch) of a jagged tensor, and a warp
cannot load its segment before it has loaded where the segment starts: a chain of dependent DRAM
round trips per warp, however few bytes it moves. Blocks run in waves of the resident slots
(SMs x resident blocks per SM), so

    T_chain = waves x trips x L_dram + (T_min - L_dram)       (memory_parallelism.serial_overhead_seconds)

is a floor on the kernel's time (T_lat = max(T_lat, T_chain)). ``trips`` counts only the round trips
every warp makes whatever its segment's length (github.com/pytorch/FBGEMM, fbgemm_gpu):

- ``bounds_check_indices_kernel`` (codegen/embedding_bounds_check.cu; ``_v1`` in
  codegen/utils/embedding_bounds_check_v1.cu): ``b_t = blockIdx.x * blockDim.y + threadIdx.y``, a
  warp per bag, loads ``rows_per_table[t]``, ``offsets[b_t]`` and ``offsets[b_t + 1]`` together: 1.
  Its index loads (``indices[indices_start + i]``) need those offsets, but a bag may be empty and
  the trace records only the mean bag length, so they are not counted.
- ``permute_2D_data_kernel`` / ``permute_indices_weights_kernel`` (src/sparse_ops/sparse_permute_2d.cu,
  src/sparse_ops.cu): ``output_offsets[b_t]``, ``output_offsets[b_t + 1]`` and ``permute[t]``, then
  ``input_offsets[permute[t] * B + b]``, whose address needs ``permute[t]``: 2.

Measured against it (A100, 408 ns, 4 resident 256-thread blocks an SM): ``bounds_check_indices``
takes 1.0-2.9 us a wave against the chain's 0.41 us; the rest (ceil(L / 32) dependent index loads for a bag
of L, and block turnover) is not known from the trace, so the floor is a lower bound. On the fixtures every floored kernel stays below its measured time (77 launches), and
``a100_80gb_train_prewindow``'s checks go from 3.0 to 10.3-49.1 us (23-126 measured), its permutes
from 3.0 to 6.7-49.1 (16-304), ``nodevice_sampled_train``'s 2D permutes from 118-190 to 313-339
(925-1,155) and ``a100_train_shapes``' sparse-feature permutes from 43-49 to 122 (382-593).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.memory_parallelism import serial_overhead_seconds

# (kernel-name pattern, dependent DRAM round trips every warp makes); see the module docstring.
SEGMENT_CHAIN_TRIPS: tuple[tuple[str, int], ...] = (
    (r"\bbounds_check_indices_kernel(?:_v1)?<", 1),
    (r"\bpermute_2D_data_kernel<|\bpermute_indices_weights_kernel<", 2),
)


def chain_trips(names: pd.Series) -> np.ndarray:
    """Round trips every warp of each named kernel makes (0: not a warp-per-segment kernel)."""
    names = names.astype("string").fillna("")
    trips = np.zeros(len(names))
    for pattern, count in reversed(SEGMENT_CHAIN_TRIPS):  # first match wins: apply it last
        trips = np.where(names.str.contains(pattern, regex=True).to_numpy(dtype=bool), count, trips)
    return trips


def segment_chain_seconds(
    names: pd.Series,
    blocks: np.ndarray,
    resident_per_sm: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray:
    """T_chain of each op (module docstring); 0 where the kernel is not named or its grid unknown."""
    trips = chain_trips(names)
    blocks = np.nan_to_num(np.asarray(blocks, dtype=float), nan=0.0)
    active = (trips > 0) & (blocks > 0)
    slots = gpu.sms * np.maximum(np.asarray(resident_per_sm, dtype=float), 1.0)
    waves = np.ceil(np.where(active, blocks, 0.0) / slots)
    dram_s = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    chain = waves * trips * dram_s
    return np.where(active, chain + serial_overhead_seconds(gpu, idealize), 0.0)


__all__ = ["SEGMENT_CHAIN_TRIPS", "chain_trips", "segment_chain_seconds"]
