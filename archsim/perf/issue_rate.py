"""Instruction issue: the time a kernel's per-element instructions take to issue on an NVIDIA SM.

A kernel whose loads are few and cheap can still be bound by the instructions around them: index
arithmetic, conversions, the range reduction of ``expf``, an IEEE division. Each of its warps issues
every instruction of its loop body once per iteration, so an SM scheduler spends at least

    cycles per warp-iteration = max(N, N_int x 32 / (64 / 4), N_mufu x 32 / (16 / 4))

on it, summed over the warp-iterations it holds (:func:`warp_cycles`). The rates are published:

- dispatch: an SM has 4 processing blocks (SM sub-partitions), each with a warp scheduler that
  dispatches one warp instruction per clock (NVIDIA Volta V100 whitepaper, 2017; Turing, Ampere
  GA100 and Hopper H100 whitepapers: "32 thread/clk" per dispatch unit, 4 per SM);
- pipes: CUDA C++ Programming Guide, "Arithmetic Instructions", throughput table in results per
  clock per multiprocessor, compute capability 7.x-9.0: 64 for 32-bit integer add/subtract,
  multiply(-add), shift, bitwise operations and compare/minimum/maximum (``INT_RESULTS_PER_CLOCK``;
  FMNMX, FSETP and FSEL are counted there), 16 for the MUFU's reciprocal and exp2
  (``MUFU_RESULTS_PER_CLOCK``). FP32 add/multiply/FMA (64 or 128) never binds below the dispatch
  rate in the loops counted here.

Instruction counts (``LoopCount``) come from SASS: the loops of the kernels' public source
(pytorch/pytorch), copied into standalone .cu files with the same expressions and types, compiled
by nvcc 13.0 (``-O3 -arch=sm_90``) and disassembled with nvdisasm; the count is the instructions a
loop body executes on its fast path (the IEEE division's slow-path call excluded), per warp-
iteration. Counted here:

- ``cunn_SoftMaxForward`` (aten/src/ATen/native/cuda/SoftMax.cu): ``ilpReduce``'s vector loop
  (ILP elements a load) and scalar loop (its shift prologue and tail) for the max (``MaxFloat``:
  convert, ``fmaxf``) and the sum of exponentials (``SumExpFloat``: ``std::exp``, nvcc's accurate
  ``expf``: 6 FP32 operations, a shift and one MUFU.EX2), and ``WriteFpropResultsVectorized``
  (``SoftMaxForwardEpilogue``: ``expf`` and an IEEE division, MUFU.RCP plus a Newton step and
  FCHK, then the store). bf16 scalar loops 7, 17 and 31 instructions, vector loops 26, 92 and 192
  per 8 elements; fp32 6, 16 and 30, vector 10, 44 and 90 per 4. The sm_80 listing gives the
  same scalar counts within one instruction, sm_75 too except bf16's output conversion (no
  F2FP.BF16 before sm_80: 44 instead of 31), so the sm_90 figures stand for every generation
  from Volta on. fp16 takes the 2-byte (bf16) figures: its conversions are one instruction too.
- The legacy TensorIterator copy (aten/src/ATen/native/cuda/CUDALoops.cuh ``elementwise_kernel
  <128, vt>`` with ``gpu_kernel_impl_nocast``'s lambda, which ``direct_copy_kernel_cuda`` launches
  for strided copies): each element computes its offsets with ``OffsetCalculator<2>::get``
  (aten/src/ATen/cuda/detail/OffsetCalculator.cuh: one ``IntDivider::divmod`` per dim, a
  ``__umulhi``, add and shift, IntegerDivider.cuh, then one multiply-add per operand; the unrolled
  loop tests ``dim == dims`` at every dim), then loads and stores it: 18 instructions (7 integer)
  per element and 12 (7 integer) per dim of the coalesced iteration space (:func:`coalesced_dims`:
  TensorIterator drops size-1 dims, orders the rest by the output's strides and merges neighbours
  that are contiguous in every operand). The 4-dim transposes of the H100 TimeSformer take
  18 + 4 x 12 = 66 instructions, 35 integer: 70 cycles a warp-element, the integer pipe binding.

- ``CatArrayBatchedCopy`` / ``CatArrayBatchedCopy_contig<OpaqueType<N>, unsigned int, Dims,
  batch_size, stride_size>`` (aten/src/ATen/native/cuda/Shape.cu, the grid-stride loop
  ``while (tid < nElements)``): each element computes its output offset with
  ``CatArrIndexToOffset<unsigned, Dims>::compute``, a real 32-bit unsigned division and a
  multiply-subtract per dim from ``Dims - 1`` down to 1 (the divisor, a kernel argument, is loop-
  invariant: nvcc hoists its reciprocal, I2F/MUFU.RCP/F2I, out of the loop, leaving IMAD.HI, the
  two-step correction, ISETP/SEL per dim in it), then loads ``data[tid]`` and stores. The strided
  kernel (``stride_size > 1``, every ``isContiguous`` false) computes the input's offset the same
  way, a second ``compute`` per element (nvcc unswitches the loop on ``isContig``; the strided
  loop counted). Replica instantiated for N in 1, 2, 4, 8 and Dims 1-4 (CAT_COPY_LOOPS): contiguous
  ~12.4 per dim above 1 (N = 4: 8, 20, 33, 45), strided ~25 (N = 2: 10, 35, 60, 85). The H100
  TimeSformer's cats (N = 2, Dims 3): 34 instructions, 31 integer (62 cycles a warp-element)
  contiguous, 60 and 56 (112 cycles) strided: the integer pipe binds. sm_75 and sm_80 listings:
  within 2 instructions (1 integer); sm_100: contiguous the same, strided more (87 at Dims 3).

Pascal (GP100) gets the same floor as a lower bound: its SM has 2 processing blocks, each a warp
scheduler with 2 dispatch units (NVIDIA Tesla P100 whitepaper, 2016), at most 4 warp instructions a
clock per SM as modelled; its 64 cores per SM (same whitepaper) also run the integer operations, so
no more than the 64 integer results modelled; cc 6.0 has the same 16 MUFU results a clock per SM and
multiplies 32-bit integers in several instructions (the Programming Guide's table), so sm_90's counts
are at most sm_60's. Generations without the counts' ISA (AMD CDNA, Maxwell and older) get no issue floor.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.columns import by_unique, strings

WARP_SIZE = 32
SMSPS_PER_SM = 4  # Volta/Turing/Ampere/Hopper whitepapers: 4 processing blocks per SM
DISPATCH_PER_CLOCK = 1.0  # warp instructions per clock per SM sub-partition (same whitepapers)
INT_RESULTS_PER_CLOCK = 64.0  # CUDA C++ Programming Guide throughput table, cc 7.x-9.0
MUFU_RESULTS_PER_CLOCK = 16.0  # the same table: 32-bit reciprocal, exp2 (cc 5.x-9.0)
# NVIDIA generations whose SASS the counts below stand for (module docstring)
ISSUE_GENERATIONS = frozenset(
    {"pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"}  # Pascal: a lower bound
)
# SoftMax.cu: constexpr int ALIGN_BYTES = 16 (a row's start is ``shift`` elements past it)
ALIGN_BYTES = 16


@dataclass(frozen=True)
class LoopCount:
    """Instructions one warp issues per iteration of a loop body: all of them, those of the
    64-results-per-clock integer/compare pipe, and MUFU ones (module docstring)."""

    instructions: float
    int_ops: float = 0.0
    mufu_ops: float = 0.0

    def __add__(self, other: LoopCount) -> LoopCount:
        return LoopCount(self.instructions + other.instructions, self.int_ops + other.int_ops,
                         self.mufu_ops + other.mufu_ops)  # fmt: skip

    def times(self, k: float) -> LoopCount:
        return LoopCount(self.instructions * k, self.int_ops * k, self.mufu_ops * k)


def warp_cycles(
    count: LoopCount,
    dispatch_per_clock: float = DISPATCH_PER_CLOCK,
    int_results_per_clock: float = INT_RESULTS_PER_CLOCK,
    mufu_results_per_clock: float = MUFU_RESULTS_PER_CLOCK,
) -> float:
    """Cycles of an SM sub-partition per warp-iteration: the dispatch slot of every instruction,
    or the integer pipe's or the MUFU's share of the SM's rate (results per clock per SM),
    whichever is longest."""
    per_smsp = WARP_SIZE * SMSPS_PER_SM
    return max(
        count.instructions / dispatch_per_clock,
        count.int_ops * per_smsp / int_results_per_clock,
        count.mufu_ops * per_smsp / mufu_results_per_clock,
    )


# cunn_SoftMaxForward loop bodies (nvcc 13.0, sm_90): element bytes -> (scalar loop per element,
# vector loop per ILP elements), each (max pass, sum pass, write pass)
SOFTMAX_FORWARD_LOOPS: dict[int, tuple[tuple[LoopCount, ...], tuple[LoopCount, ...]]] = {
    2: (
        (LoopCount(7, 5), LoopCount(17, 6, 1), LoopCount(31, 7, 2)),
        (LoopCount(26, 24), LoopCount(92, 24, 8), LoopCount(192, 31, 16)),
    ),
    4: (
        (LoopCount(6, 4), LoopCount(16, 5, 1), LoopCount(30, 7, 2)),
        (LoopCount(10, 8), LoopCount(44, 9, 4), LoopCount(90, 11, 8)),
    ),
}
# Legacy TensorIterator copy (nvcc 13.0, sm_90): per element, plus per coalesced dim
LEGACY_COPY_ELEMENT = LoopCount(18, 7)
LEGACY_COPY_PER_DIM = LoopCount(12, 7)


def ilp_row_warp_iterations(
    row_elements: np.ndarray, threads: np.ndarray, ilp: np.ndarray, element_size: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(scalar, vector) warp-iterations of one block's pass over its row in SoftMax.cu's ilpReduce
    walk, averaged over the cycle of row shifts (archsim.perf.passes.ilp_row_trips walks it the
    same way): the shift prologue's T - shift elements and the tail's ``last`` elements one a
    lane, the vector loop's size - last elements ILP a lane; a warp with no element left skips."""
    row = np.maximum(np.round(np.asarray(row_elements, dtype=float)), 0.0)
    threads = np.maximum(np.asarray(threads, dtype=float), 1.0)
    ilp = np.maximum(np.asarray(ilp, dtype=float), 1.0)
    chunk = ilp * threads
    cycle = np.clip(np.floor(ALIGN_BYTES / np.maximum(element_size, 1.0)), 1.0, ALIGN_BYTES)
    scalar, vector = np.zeros_like(row), np.zeros_like(row)
    for r in range(ALIGN_BYTES):
        shift = np.mod(r * row, cycle)
        prologue = np.where(shift > 0, np.minimum(threads - shift, row), 0.0)
        size = np.where(shift > 0, np.maximum(row + shift - threads, 0.0), row)
        last = np.mod(size, chunk)
        take = r < cycle
        scalar += np.where(take, np.ceil(prologue / WARP_SIZE) + np.ceil(last / WARP_SIZE), 0.0)
        vector += np.where(take, (size - last) / (ilp * WARP_SIZE), 0.0)
    return scalar / cycle, vector / cycle


def softmax_pass_cycles(
    row_elements: np.ndarray, threads: np.ndarray, ilp: np.ndarray, element_size: np.ndarray
) -> np.ndarray:
    """(ops, 3): issue cycles one block's passes over its row take on one SM sub-partition if it
    held every warp-iteration (max, sum, write: SOFTMAX_FORWARD_LOOPS; 2-byte figures for elements
    under 4 bytes)."""
    size = np.asarray(element_size, dtype=float)
    scalar, vector = ilp_row_warp_iterations(row_elements, threads, ilp, size)
    out = np.zeros((len(scalar), 3))
    for nbytes, (scalar_loops, vector_loops) in SOFTMAX_FORWARD_LOOPS.items():
        hit = (size >= 4) if nbytes == 4 else (size < 4)
        for j in range(3):
            cycles = scalar * warp_cycles(scalar_loops[j]) + vector * warp_cycles(vector_loops[j])
            out[:, j] = np.where(hit, cycles, out[:, j])
    return out


def coalesced_dims(shape: list[int], operand_strides: list[list[int]]) -> int:
    """Dims of a TensorIterator's iteration space after coalescing (module docstring): size-1 dims
    dropped, the rest ordered by the first operand's (the output's) strides, innermost first, and
    a dim merged into the one inside it where every operand's stride continues it. >= 1."""
    dims = [d for d, size in enumerate(shape) if size != 1]
    if not dims:
        return 1
    order = sorted(dims, key=lambda d: tuple(abs(s[d]) for s in operand_strides))
    groups, size = 1, shape[order[0]]
    inner = [s[order[0]] for s in operand_strides]
    for d in order[1:]:
        if all(s[d] == size * st for s, st in zip(operand_strides, inner, strict=True)):
            size *= shape[d]
            continue
        groups, size, inner = groups + 1, shape[d], [s[d] for s in operand_strides]
    return groups


@lru_cache(maxsize=4096)
def copy_iteration_dims(launch_op: str, dims_json: str, strides_json: str) -> int:
    """Coalesced dims of a copy op's TensorIterator from its recorded ``Input Dims`` / ``Input
    Strides``: ``copy_`` (destination arg 0, source arg 1) or a copy into a new contiguous
    tensor (``clone``, ``contiguous``, ``_to_copy``: arg 0 read, row-major output); 0 where
    the record does not give it."""
    try:
        dims, strides = json.loads(dims_json), json.loads(strides_json)
    except (ValueError, TypeError):
        return 0
    if not isinstance(dims, list) or not isinstance(strides, list) or not dims or not strides:
        return 0
    if launch_op in ("aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize"):
        if len(dims) < 2 or len(strides) < 2 or dims[0] != dims[1]:
            return 0
        shape, operands = dims[0], [strides[0], strides[1]]
    elif launch_op in ("aten::clone", "aten::contiguous", "aten::_to_copy", "aten::to"):
        shape = dims[0]
        operands = [[math.prod(shape[d + 1 :]) for d in range(len(shape))], strides[0]]
    else:
        return 0
    ok = (
        isinstance(shape, list)
        and all(type(x) is int for x in shape)
        and all(
            isinstance(s, list) and len(s) == len(shape) and all(type(x) is int for x in s)
            for s in operands
        )
    )
    return coalesced_dims(shape, operands) if ok and shape else 0


# Shape.cu cat kernels (nvcc 13.0, sm_90): (strided, OpaqueType bytes, Dims) -> loop body per element
CAT_COPY_LOOPS: dict[tuple[bool, int, int], LoopCount] = {
    (strided, nbytes, dims): LoopCount(*counts)
    for strided, table in (
        (
            False,
            {
                1: ((10, 7), (22, 19), (35, 32), (47, 44)),
                2: ((9, 6), (21, 18), (34, 31), (46, 43)),
                4: ((8, 5), (20, 17), (33, 30), (45, 42)),
                8: ((8, 5), (20, 17), (33, 30), (45, 42)),
            },
        ),
        (
            True,
            {
                1: ((11, 8), (36, 33), (60, 57), (84, 81)),
                2: ((10, 7), (35, 32), (60, 56), (85, 81)),
                4: ((9, 6), (34, 31), (59, 55), (84, 80)),
                8: ((9, 6), (34, 31), (59, 55), (84, 80)),
            },
        ),
    )  # fmt: skip
    for nbytes, rows in table.items()
    for dims, counts in enumerate(rows, start=1)
}
# CatArrayBatchedCopy[_contig]<OpaqueType<N>, unsigned int, Dims, batch_size, stride_size>
CAT_KERNEL_PATTERN = (
    r"CatArrayBatchedCopy(_contig)?<[^,]*OpaqueType<(\d+)u?>, unsigned int, (\d+), \d+, \d+>"
)


def cat_copy_count(strided: bool, element_bytes: int, dims: int) -> LoopCount | None:
    """CAT_COPY_LOOPS' loop body for an OpaqueType of ``element_bytes`` (over 8 bytes: the 8-byte
    figures, the index arithmetic being the same) and ``dims`` in 1-4; None outside them."""
    if not 1 <= dims <= 4 or element_bytes < 1:
        return None
    nbytes = min((b for b in (1, 2, 4, 8) if b >= element_bytes), default=8)
    return CAT_COPY_LOOPS[(strided, nbytes, dims)]


def cat_issue_seconds(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds the busiest SM sub-partition takes to issue a Shape.cu cat kernel's loop: its
    elements (bytes written / N) spread evenly over the B blocks, the busiest SM holding ceil(B /
    N_sm) of them (B / N_sm under ``sm_utilization``), a warp-iteration per 32 elements, over 4
    sub-partitions, at :func:`warp_cycles` of :func:`cat_copy_count` (kernel, N and Dims from the
    name). Zero for other kernels, ops without written bytes, and generations outside
    ISSUE_GENERATIONS."""
    n = len(ops)
    out = np.zeros(n)
    if generation not in ISSUE_GENERATIONS or n == 0 or "bytes_written" not in ops.columns:
        return out
    cycles = by_unique(strings(ops, "name"), _cat_cycles).astype(float)
    written = np.nan_to_num(pd.to_numeric(ops["bytes_written"], errors="coerce").to_numpy(float))
    rows = np.flatnonzero(np.isfinite(cycles[:, 0]) & (written > 0))
    if not rows.size:
        return out
    elements = written[rows] / cycles[rows, 1]
    b = np.maximum(np.asarray(blocks, dtype=float)[rows], 1.0)
    per_sm = _busiest_sm_blocks(b, gpu, idealize)
    per_smsp = per_sm / b * elements / WARP_SIZE / SMSPS_PER_SM
    out[rows] = issue_seconds(per_smsp, cycles[rows, 0], gpu.clock_mhz)
    return out


def _cat_cycles(names: pd.Series) -> np.ndarray:
    """(cycles per warp-element, OpaqueType bytes) per unique name; NaN where not a counted cat."""
    found = names.str.extract(CAT_KERNEL_PATTERN)
    out = np.full((len(names), 2), np.nan)
    for i, (contig, nbytes, dims) in enumerate(found.itertuples(index=False)):
        if isinstance(nbytes, str):
            count = cat_copy_count(not isinstance(contig, str), int(nbytes), int(dims))
            if count is not None:
                out[i] = (warp_cycles(count), int(nbytes))
    return out


def legacy_copy_cycles(dims: np.ndarray) -> np.ndarray:
    """Cycles per warp-element of the legacy TensorIterator copy over ``dims`` coalesced dims."""
    dims = np.asarray(dims, dtype=float)
    return np.array(
        [warp_cycles(LEGACY_COPY_ELEMENT + LEGACY_COPY_PER_DIM.times(d)) for d in dims]
    ).reshape(dims.shape)


def _busiest_sm_blocks(blocks: np.ndarray, gpu: GpuConfig, idealize: frozenset[str]) -> np.ndarray:
    """Blocks the busiest SM issues: ceil(B / N), or B / N under ``sm_utilization`` (the op on one
    SM divided by N, as archsim.perf.launch_terms prices its compute)."""
    per_sm = blocks / gpu.sms
    return per_sm if "sm_utilization" in idealize else np.ceil(per_sm)


def issue_seconds(
    warp_iterations_per_smsp: np.ndarray, cycles_per_iteration: np.ndarray, clock_mhz: float
) -> np.ndarray:
    """Seconds an SM sub-partition takes to issue its warp-iterations."""
    return (
        np.asarray(warp_iterations_per_smsp) * np.asarray(cycles_per_iteration) / (clock_mhz * 1e6)
    )


# CUDALoops.cuh's legacy loop, elementwise_kernel<nt, vt, ...> (vt elements a thread), launched by
# direct_copy_kernel_cuda through gpu_kernel_impl_nocast
LEGACY_COPY_PATTERN = r"(?<![a-z_])elementwise_kernel<\d+, (\d+), [^>]*direct_copy_kernel_cuda"


def legacy_copy_issue_seconds(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    threads: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds the busiest SM sub-partition takes to issue a legacy copy's instructions: its
    ceil(B / N) blocks x warps x vt warp-elements over 4 sub-partitions (B / N under the
    ``sm_utilization`` idealization), at :func:`legacy_copy_cycles` of the op's coalesced dims.
    Zero for other kernels, copies whose shapes are not recorded, and generations outside
    ISSUE_GENERATIONS."""
    n = len(ops)
    out = np.zeros(n)
    if generation not in ISSUE_GENERATIONS or n == 0 or "input_strides" not in ops.columns:
        return out
    vt = by_unique(
        strings(ops, "name"),
        lambda u: u.str.extract(LEGACY_COPY_PATTERN)[0].astype(float).to_numpy(),
    ).astype(float)
    rows = np.flatnonzero(np.isfinite(vt))
    if not rows.size:
        return out
    launch, dims_json, strides_json = (strings(ops, c).to_numpy(dtype=object)
                                       for c in ("launch_op", "input_dims", "input_strides"))  # fmt: skip
    dims = np.array([copy_iteration_dims(str(launch[i]), str(dims_json[i]), str(strides_json[i]))
                     for i in rows], dtype=float)  # fmt: skip
    known = dims > 0
    rows, dims = rows[known], dims[known]
    per_sm = _busiest_sm_blocks(np.asarray(blocks, dtype=float)[rows], gpu, idealize)
    warps = np.ceil(np.asarray(threads, dtype=float)[rows] / WARP_SIZE)
    per_smsp = per_sm * warps * vt[rows] / SMSPS_PER_SM
    out[rows] = issue_seconds(per_smsp, legacy_copy_cycles(dims), gpu.clock_mhz)
    return out


__all__ = [
    "CAT_COPY_LOOPS",
    "CAT_KERNEL_PATTERN",
    "cat_copy_count",
    "cat_issue_seconds",
    "LEGACY_COPY_PATTERN",
    "legacy_copy_issue_seconds",
    "DISPATCH_PER_CLOCK",
    "INT_RESULTS_PER_CLOCK",
    "ISSUE_GENERATIONS",
    "LEGACY_COPY_ELEMENT",
    "LEGACY_COPY_PER_DIM",
    "LoopCount",
    "MUFU_RESULTS_PER_CLOCK",
    "SMSPS_PER_SM",
    "SOFTMAX_FORWARD_LOOPS",
    "coalesced_dims",
    "copy_iteration_dims",
    "ilp_row_warp_iterations",
    "issue_seconds",
    "legacy_copy_cycles",
    "softmax_pass_cycles",
    "warp_cycles",
]
