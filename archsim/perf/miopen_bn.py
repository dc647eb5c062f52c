"""MIOpen's spatial batch-norm kernels on CDNA3, priced from their counted gfx940 code: dependent
DRAM round trips, LDS round trips and instruction issue, in series on the busiest CU.

``aten::miopen_batch_norm`` / ``_backward`` call MIOpen's OpenCL kernels (github.com/ROCm/MIOpen,
now github.com/ROCm/rocm-libraries projects/miopen: src/kernels/MIOpenBatchNormFwdTrainSpatial.cl,
MIOpenBatchNormBwdSpatial.cl, batchnorm_functions.h, reduction_functions.h; the host solvers
src/solver/batchnorm/forward_spatial*.cpp, backward_spatial*.cpp and
src/include/miopen/batchnorm/common_spatial.hpp set their ``MIO_BN_*`` macros). A variant is known
from the kernel's name and launch, for fp32 NCHW input (N, C, HW = H x W):

- variant 2, the multi-kernel reduction (``...MeanVariance``, ``...FinalMeanVariance``,
  ``...Norm``): ``GetSpatialMultipleConfig``: a workgroup of (1, ylocal, 1) per channel and
  HW / (vec x ylocal) y-groups, vec = 4 where HW % 4 == 0 (``DefaultConfigSpatialMultiple``), so
  vec = HW / (threads in y) and each thread walks N_el = N / z-groups batch entries
  (``MIO_BN_N_ELEMENTS``). ``MeanVariance``'s loop over N_el float4 loads has a constant trip
  count and no unroll pragma: clang unrolls it and issues all N_el loads before the first wait (one
  round trip, N_el x 16 B a thread); then ``gcn_reduce2`` (12 DPP adds, lane 63 writes LDS,
  ``barrier``, LDSGCN / 2 iterations of two ``ds_read2`` each waited on) and one store.
  ``FinalMeanVariance`` loads the stash (a round trip), reduces, stores, and one wave commits the
  running statistics (``running_stash`` loads them: a second round trip). ``Norm``: wave 0 loads
  scale, bias and the stash (a round trip) and writes LDS, ``barrier``, LDS read, then its loop
  under ``opencl_unroll_hint(2)`` (``MIO_BN_HW <= MIO_BN_LOOP_UNROLL_MAXHW``, 2500): two float4
  loads, then their two stores, an iteration. gfx9 counts stores in ``vmcnt`` (no separate store
  counter before gfx10: LLVM AMDGPUUsage, "Memory Model"), so the next iteration's wait also
  covers them: 1 + ceil(N_el / 2) round trips.
- variant 3, one workgroup of 1,024 per channel (``DefaultConfigSpatialSingle``: 512 < HW <= 1024,
  N < 32): forward ``MIOpenBatchNormFwdTrainSpatial``, N = 1: lid 0 loads scale and bias through
  ``__constant`` pointers as two scalar loads, each waited on (clang 16's schedule), then x, so
  wave 0 makes 3 round trips (4 with running statistics) before ``barrier``; 11 LDS round trips.
  Backward ``MIOpenBatchNormBwdSpatial`` (saved mean and inverse variance): lid 0's three scalar
  loads (one round trip), ``barrier``, then every x and dy of the thread (2 N loads, compiled for N
  = 1 ... 31: one round trip), the reduction, the dx stores: 2 round trips, 11 LDS round trips.

Sources read (commits as stored by the public index): rocm-libraries 38f69481f478
(MIOpenBatchNormFwdTrainSpatial.cl), 109ded932ab1 (MIOpenBatchNormBwdSpatial.cl,
batchnorm_functions.h); MIOpen 01970d6cd671 (reduction_functions.h), 39c256112c8e
(common_spatial.hpp), 0242120b60af (backward_spatial_single.cpp). The bench was captured on ROCm 7.0
(``hip_runtime_version`` 70051831), whose launches match these: forward (8, 16, 32, 32) records
grid (16, 256, 1) work-items of (1, 256, 1) (vec 4, one y-group), backward one kernel of 1,024 per
channel (the single-workgroup solver; the unified solver's multi-kernel default would launch three).

Counts: the kernels' bodies copied with their expressions and types into a standalone OpenCL file
(the OpenCL built-ins as ROCm device-libs define them), compiled by ``clang-16 -x cl -cl-std=CL2.0
-target amdgcn-amd-amdhsa -mcpu=gfx940 -O3 -S -nogpulib`` with the macros MIOpen's solvers pass for
the shapes of ``mi300x_normalization_bench`` (forward (8, 16, 32, 32): variant 2, vec 4, ylocal 256,
one y-group, N_el 8, LDSGCN 4, running statistics; (1, 128, 32, 32): variant 3, no running
statistics; backward (1, 128, 32, 32) and (8, 16, 32, 32): variant 3, saved statistics), counted
per basic block times its trips, VALU classed by ``llvm-mca-16 -mcpu=gfx940`` (full or quarter
rate), as :mod:`archsim.perf.issue_rate_amd` counts PyTorch's. WaveCount(full VALU, quarter VALU,
SALU, other issue turns):

============================  ==============================  ========================  ======
kernel                        every wave                      one wave only             LDS rt
============================  ==============================  ========================  ======
MeanVariance (N_el 8)         (126, 0, 18, 47): 38 + 11/el    (3, 0, 3, 1) stash store  3
FinalMeanVariance             (43, 1, 21, 35)                 (17, 0, 0, 14)            3
Norm (N_el 8)                 (116, 0, 20, 44): 20 + 24/2 el  (5, 0, 3, 9) param loads  2
FwdTrainSpatial v3, N 1       (83, 1, 25, 78)                 (3, 0, 10, 9); running    11
                                                              (10, 0, 14, 16)
BwdSpatial v3, N 1 / N 8      (83, 0, 25, 83) / (180, 0, 32,  (5, 0, 13, 10)            11
                              117), linear in N between
============================  ==============================  ========================  ======

The kernel then takes, on the busiest CU (one round: every fixture launch fits),

    T = (T_min - L) + trips x L + lds_trips x L_lds + issue

with L the DRAM pointer chase, L_lds mt4g's LDS latency (archsim.perf.block_sync, 52 cycles on the
MI300X), ``issue`` :func:`archsim.perf.issue_rate_amd.simd_cycles` of every wave's count at the
CU's waves per SIMD plus the one wave's, and T_min - L the fixed cost in series with the round
trips (archsim.perf.memory_parallelism.serial_overhead_seconds). ``s_barrier`` is priced at zero
beyond the waits, as in block_sync. Little's law gets the counted bytes a thread has in flight per
round trip (:func:`miopen_bn_bytes_per_thread`) instead of the flat 16 B of unknown kernels.
CDNA2 (gfx90a: MI210, MI250X) runs the same kernels: the replica compiled with
``-mcpu=gfx90a`` has the same loads, waits and barriers, so the same round trips, and issues more
VALU (its 64-bit address arithmetic: 143/43/140/88/89/200 against gfx940's 126/43/116/83/83/180 in
the table's order), the same SALU, and 0-8 fewer waits and nops; the gfx940 counts stand for both
(L_lds: MI210's 48 cycles), lest an MI210 price these kernels below the MI300X.

On ``mi300x_normalization_bench`` (model vs measured, us): Norm 8.5 -> 4.16 (4.1-4.3), the
single-kernel forward 2.26 -> 3.85 (3.9-5.0), backward 2.39 -> 3.39 (4.0-5.1) and 4.28 -> 4.13
(4.7-5.6), FinalMeanVariance 2.0 -> 2.76 (4.7-6.1), MeanVariance 5.04 -> 2.45 (3.7-4.0 steady,
29.4 first): its one round trip is what the code issues, yet it takes about as long as Norm's
five, as if a CU kept about 8 KB in flight, a limit with no published CDNA3 figure (not modelled).
Configurations not compiled (other variants, vec != 4, fwd variant 3 with N > 1, where clang 16
loads each element twice, MeanVariance N_el > 8, Norm HW > 2500, NHWC, fp16) get no term.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.block_sync import SYNC_FIGURES
from archsim.perf.columns import column as _column
from archsim.perf.columns import parsed_input_dims
from archsim.perf.columns import strings as _strings
from archsim.perf.issue_rate_amd import WaveCount, cu_rounds, simd_cycles
from archsim.perf.memory_parallelism import serial_overhead_seconds

# Generations whose ISA the counts stand for (gfx940; gfx90a checked: module docstring)
MIOPEN_BN_GENERATIONS = frozenset({"cdna3", "cdna2"})
FLOAT_BYTES = 4  # fp32: MIOPEN_USE_FP32 (other types are not counted)
VEC = 4  # DefaultConfigSpatialMultiple: float4 where HW % 4 == 0
NORM_UNROLL = 2  # Norm's opencl_unroll_hint(2)
LOOP_UNROLL_MAXHW = 2500  # batchnorm_functions.h MIO_BN_LOOP_UNROLL_MAXHW
MEAN_VARIANCE_MAX_ELEMENTS = 8  # compiled: all N_el loads before the first wait
BWD_MAX_N = 31  # compiled N = 1 ... 31: all 2 N loads before the first wait
SINGLE_THREADS = 1024  # variant 3: xlocalsize 1024 (one workgroup per channel)


@dataclass(frozen=True)
class BnChain:
    """A kernel's counted critical path for one launch (module docstring)."""

    dram_trips: int
    lds_trips: int
    every_wave: WaveCount
    one_wave: WaveCount
    bytes_per_thread: float  # loaded per thread per round trip (Little's law)


# (kernel name, exact), first match wins
_MEAN_VARIANCE = re.compile(r"^MIOpenBatchNormFwdTrainSpatialMeanVariance$")
_FINAL = re.compile(r"^MIOpenBatchNormFwdTrainSpatialFinalMeanVariance$")
_NORM = re.compile(r"^MIOpenBatchNormFwdTrainSpatialNorm$")
_FWD_SINGLE = re.compile(r"^MIOpenBatchNormFwdTrainSpatial$")
_BWD_SINGLE = re.compile(r"^MIOpenBatchNormBwdSpatial$")


def _nchw(dims: list) -> tuple[int, int, int] | None:
    """(N, C, HW) of an op's first recorded input, None unless a 4-D shape of ints >= 1."""
    first = dims[0] if dims else None
    if not isinstance(first, list) or len(first) != 4:
        return None
    if not all(isinstance(d, int) and d >= 1 for d in first):
        return None
    return first[0], first[1], first[2] * first[3]


def _running(dims: list) -> bool:
    """Forward ops record running mean and variance as their 4th and 5th inputs ([] when absent)."""
    return len(dims) >= 5 and all(isinstance(d, list) and len(d) == 1 for d in dims[3:5])


def bn_chain(
    name: str, input_dims: str, block: tuple[float, float, float], grid: tuple[float, float, float]
) -> BnChain | None:
    """The counted chain of one MIOpen batch-norm launch (module docstring), or None where the
    kernel, its variant or its configuration was not compiled. ``block``: threads (x, y, z) a
    workgroup; ``grid``: workgroups (x, y, z)."""
    dims = parsed_input_dims(input_dims)
    shape = _nchw(dims)
    if shape is None:
        return None
    n, c, hw = shape
    bx, by, bz = (max(int(v), 1) if math.isfinite(v) else 1 for v in block)
    gx, gy, gz = (max(int(v), 1) if math.isfinite(v) else 1 for v in grid)
    multi = bx == 1 and gx == c  # variant 2: (1, ylocal, zlocal) workgroups, one x-group a channel
    vec_ok = multi and hw % VEC == 0 and hw == VEC * by * gy
    n_el = n / (bz * gz)
    if _MEAN_VARIANCE.match(name):
        if not vec_ok or n_el != int(n_el) or not 1 <= n_el <= MEAN_VARIANCE_MAX_ELEMENTS:
            return None
        every = WaveCount(38, 0, 18, 31) + WaveCount(11, 0, 0, 2).times(n_el)
        return BnChain(1, 3, every, WaveCount(3, 0, 3, 1), n_el * VEC * FLOAT_BYTES)
    if _FINAL.match(name):
        if not multi:
            return None
        trips = 1 + int(_running(dims))
        return BnChain(trips, 3, WaveCount(43, 1, 21, 35), WaveCount(17, 0, 0, 14), 2 * FLOAT_BYTES)
    if _NORM.match(name):
        if not vec_ok or n_el != int(n_el) or n_el < 1 or hw > LOOP_UNROLL_MAXHW:
            return None
        iterations = math.ceil(n_el / NORM_UNROLL)
        every = WaveCount(20, 0, 12, 12) + WaveCount(24, 0, 2, 8).times(iterations)
        per_trip = min(n_el, NORM_UNROLL) * VEC * FLOAT_BYTES
        return BnChain(1 + iterations, 2, every, WaveCount(5, 0, 3, 9), per_trip)
    single = bx == SINGLE_THREADS and by == 1 and bz == 1 and gx == c and 512 < hw <= 1024
    if _FWD_SINGLE.match(name):
        if not single or n != 1:
            return None
        running = _running(dims)
        one = WaveCount(10, 0, 14, 16) if running else WaveCount(3, 0, 10, 9)
        return BnChain(3 + int(running), 11, WaveCount(83, 1, 25, 78), one, FLOAT_BYTES)
    if _BWD_SINGLE.match(name):
        # saved mean and inverse variance (inputs 6 and 7, MIO_BN_USESAVED): without them the
        # kernel recomputes the statistics first, which was not compiled
        saved = len(dims) >= 7 and all(isinstance(d, list) and len(d) == 1 for d in dims[5:7])
        if not single or n > BWD_MAX_N or not saved:
            return None
        # N = 8 less N = 1, over the 7 batch entries between: each entry's loads, FMAs and store
        per_n = WaveCount(180 - 83, 0, 32 - 25, 117 - 83).times(1 / 7)
        every = WaveCount(83, 0, 25, 83) + per_n.times(n - 1)
        return BnChain(2, 11, every, WaveCount(5, 0, 13, 10), 2 * n * FLOAT_BYTES)
    return None


def _chains(ops: pd.DataFrame) -> list[BnChain | None]:
    names = _strings(ops, "name").to_numpy(dtype=object)
    dims = _strings(ops, "input_dims").to_numpy(dtype=object)
    block = [_column(ops, f"block_{a}", np.nan) for a in "xyz"]
    grid = [_column(ops, f"grid_{a}", np.nan) for a in "xyz"]
    out: list[BnChain | None] = []
    for i, name in enumerate(names):
        if not str(name).startswith("MIOpenBatchNorm"):
            out.append(None)
            continue
        out.append(bn_chain(str(name), str(dims[i]), tuple(b[i] for b in block),
                            tuple(g[i] for g in grid)))  # fmt: skip
    return out


def miopen_bn_bytes_per_thread(ops: pd.DataFrame, generation: str) -> np.ndarray:
    """Bytes a thread has loading per round trip, per op (NaN where no chain is counted)."""
    out = np.full(len(ops), np.nan)
    if generation not in MIOPEN_BN_GENERATIONS or not len(ops):
        return out
    for i, chain in enumerate(_chains(ops)):
        if chain is not None:
            out[i] = chain.bytes_per_thread
    return out


def miopen_bn_seconds(
    ops: pd.DataFrame,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """The counted chain's seconds per op (module docstring), 0 where none is counted. ``launch``:
    (workgroups, threads per workgroup, resident workgroups per CU)."""
    out = np.zeros(len(ops))
    if generation not in MIOPEN_BN_GENERATIONS or not len(ops):
        return out
    chains = _chains(ops)
    rows = [i for i, chain in enumerate(chains) if chain is not None]
    if not rows:
        return out
    blocks, threads, resident = (np.asarray(a, dtype=float)[rows] for a in launch)
    ideal = "sm_utilization" in idealize
    rounds, _, waves = cu_rounds(np.maximum(blocks, 1.0), resident, threads, gpu.sms, ideal)
    dram_s = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    lds_cycles = 0.0 if "memory_system" in idealize else SYNC_FIGURES[generation].shared_load_cycles
    cycle_s = 1e-6 / gpu.clock_mhz
    fixed_s = serial_overhead_seconds(gpu, idealize)
    for j, i in enumerate(rows):
        chain = chains[i]
        assert chain is not None
        issue = simd_cycles(chain.every_wave, waves[j]) + simd_cycles(chain.one_wave, 1.0)
        per_round = chain.dram_trips * dram_s + (chain.lds_trips * lds_cycles + issue) * cycle_s
        out[i] = fixed_s + rounds[j] * per_round
    return out


__all__ = [
    "BnChain",
    "MIOPEN_BN_GENERATIONS",
    "bn_chain",
    "miopen_bn_bytes_per_thread",
    "miopen_bn_seconds",
]
