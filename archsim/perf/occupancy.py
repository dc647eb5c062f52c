"""Resident thread blocks per SM (occupancy) from block size, registers and shared memory.

The same limits as NVIDIA's CUDA Occupancy Calculator: a block occupies whole warps; registers are
allocated per warp in units of 256 (compute capability 7.x/8.x/9.x, CUDA C Programming Guide, "Compute
Capabilities" table: register allocation unit size 256); shared memory per block; and the SM's
max threads and max blocks. Vectorized over numpy arrays.
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig

WARP_SIZE = 32  # CUDA C Programming Guide: warp size 32 on every NVIDIA architecture
REGISTER_ALLOCATION_UNIT = 256  # registers per warp are allocated in chunks of 256 (CC 7.x-9.x)


def blocks_per_sm(
    threads_per_block: np.ndarray,
    registers_per_thread: np.ndarray,
    shared_memory_bytes: np.ndarray,
    gpu: GpuConfig,
) -> np.ndarray:
    """How many blocks of each op fit on one SM at once (>= 1). NaN/0 registers or shared memory
    mean "unknown" and impose no limit."""
    threads = np.maximum(np.asarray(threads_per_block, dtype=float), 1.0)
    warps = np.ceil(threads / WARP_SIZE)
    by_threads = np.floor(gpu.max_threads_per_sm / (warps * WARP_SIZE))

    regs = _unknown_as_zero(registers_per_thread)
    regs_per_warp = np.ceil(regs * WARP_SIZE / REGISTER_ALLOCATION_UNIT) * REGISTER_ALLOCATION_UNIT
    with np.errstate(divide="ignore"):
        by_regs = np.where(
            regs_per_warp > 0, np.floor(gpu.registers_per_sm / (regs_per_warp * warps)), np.inf
        )
        smem = _unknown_as_zero(shared_memory_bytes)
        by_smem = np.where(smem > 0, np.floor(gpu.shared_mem_per_sm_kb * 1024 / smem), np.inf)
    # the same minimum as np.minimum.reduce over the four, without stacking them (min is exact)
    limit = np.minimum(np.minimum(np.minimum(by_threads, by_regs), by_smem),
                       float(gpu.max_blocks_per_sm))  # fmt: skip
    return np.maximum(limit, 1.0)


def _unknown_as_zero(values: np.ndarray) -> np.ndarray:
    """``np.nan_to_num(values, nan=0.0)`` as a float copy, in two ufunc calls when every value is
    NaN or finite (the model calls this function over a hundred times per table; nan_to_num's own
    checks cost more than the work on a few ops)."""
    out = np.array(values, dtype=float)
    nan = np.isnan(out)
    out[nan] = 0.0
    if np.isinf(out).any():  # nan_to_num also clips infinities to the largest finite floats
        return np.nan_to_num(out, nan=0.0)
    return out
