"""Instruction issue of ATen's ``reduce_kernel`` on AMD CDNA3, counted from compiled gfx940 ISA.

``at::native::reduce_kernel<nt, output_vec_size, ReduceOp<...>>`` (pytorch/pytorch,
aten/src/ATen/native/cuda/Reduce.cuh) runs ``ReduceOp::run``: a thread loop over its inputs, the
block's tree reduction, and, when the input is split over ``ctas_per_output`` blocks (grid y > 1),
``global_reduce``: each block stores its partial, counts itself done on a semaphore with
``atomicAdd``, and the last block re-reads the partials and reduces them again. Its instructions
issue on the SIMDs at the rates of :mod:`archsim.perf.issue_rate_amd` (4-cycle wave64 VALU on a
SIMD16, one instruction a wave per 4-cycle issue turn, a quarter of the CU's scalar unit a SIMD),
in series with the kernel's dependent round trips (:mod:`archsim.perf.memory_parallelism`).

Source and compile: Reduce.cuh as of pytorch commit 0660972b (ReduceOp::run, thread_reduce,
input_vectorized_thread_reduce_impl, thread_reduce_impl, block_y_reduce, block_x_reduce,
mark_block_finished, global_reduce with ROCm's ``cmtdStore`` of aten/src/ATen/native/cuda/
KernelUtils.cuh in place of ``__threadfence``, and ROCm's 4-deep partial prefetch), with
OffsetCalculator (ATen/cuda/detail/OffsetCalculator.cuh, MAX_DIMS 16 on ROCm), IntDivider<unsigned
int> (IntegerDivider.cuh: ``__umulhi``, add, shift), MeanOps (ATen/native/SharedReduceOps.h),
sum_functor's lambda in func_wrapper_t, aligned_vector / load_vector (MemoryAccess.cuh), HIP's
``__shfl_down`` (amd_warp_functions.h) and relaxed agent-scope ``atomicAdd``, copied into a
standalone HIP source with the same expressions and types (float, ``index_t`` unsigned int),
compiled by clang 16 (``-x hip --cuda-device-only -nogpulib -nogpuinc --offload-arch=gfx940 -O3
-S``) and counted along the path each wave takes, each VALU instruction classed by ``llvm-mca-16
-mcpu=gfx940 -instruction-info`` (every one on these paths is full rate: v_mul_lo_u32 and
v_mad_u64_u32 are full rate on gfx940, ``FullRate64Ops``). Two departures, both towards fewer
instructions: the kernel argument is read in place from the kernarg segment (clang 16 copies the
776-byte by-value ``ReduceOp`` into scratch, 45 ``scratch_store_dwordx4`` a wave, and reads its
OffsetCalculator from there; whether ROCm's newer clang elides that copy is not known here), and the
tail loops of thread_reduce_impl (``if (idx >= end) break;``, which clang 16 does not unroll,
leaving ``values[]`` in scratch) are counted as one exit test. Not counted either way: the path's
waits on memory and LDS, which are the chain's (memory_parallelism), not issue.

Configurations (setReduceConfig of the same Reduce.cuh with USE_ROCM, fp32, on MI300X's 304 CUs and
2048 threads a CU; both match the launches the mi300x_normalization_bench trace records):

- ``reduce_kernel<512, 1, ReduceOp<float, MeanOps<...>, unsigned int, float, 4, 4>>``, aten::mean of
  a contiguous [8, 16, 32, 32] to a scalar: the reduction is on the fastest dimension, so the input
  is vectorized (``dim0 >= 128``, one reduced dim: 131072 / 4), block (512, 1); 256 values a thread
  >= min(16 x 1, 256) splits across warps (``input_mult[1]``); one block, so max threads a CU stays
  2048, target grid 304 x 4; ctas_per_output = max(min(1216, 256 / 16), 1) = 16 (ROCm keeps 16: not
  above 304 or 152, not below 16): grid (1, 16). A wave: 4 loop steps (a 16-byte load, two
  v_pk_add_f32), block_y_reduce's store (blockDim.y 1), three LDS tree levels between barriers, 6
  ``ds_bpermute`` shuffle steps, the committed partial store, two barriers around the semaphore;
  wave 0 stores the partial and does the atomic. The last block also loads the 16 partials and runs
  the tree and shuffles again before wave 0 stores ``sum x factor``.
- ``reduce_kernel<128, 4, ReduceOp<float, func_wrapper_t<float, sum_functor...>, unsigned int,
  float, 4, 4>>``, aten::sum of a [8, 16] over dim 0: not on the fastest dimension, so the output is
  vectorized (``output_vec_size`` 4), block (4, 8), 8 values a thread < 128: no split, grid (1, 1).
  A wave: the OffsetCalculator of the output (one divmod) five times, 2 loop steps of four 16-byte
  loads and 8 v_pk_add_f32, the combine, four stores.

Counts (``WaveCount``: full-rate VALU, quarter-rate VALU, SALU, others that take an issue turn:
vector memory, LDS, scalar loads, waits, branches, barriers):

=========================  ==========================================  =======================
kernel                     section                                     count
=========================  ==========================================  =======================
reduce_kernel<512, 1>      every wave (one pass, the global handshake)  100, 0, 92, 97 (289)
                           a loop step (16-byte load, 2 v_pk_add)       6, 0, 2, 3 (11)
                           wave 0 (partial store, atomic, tree reads)   13, 0, 9, 22 (44)
                           the last block's second pass, every wave     80, 0, 60, 61 (201)
                           the last block's second pass, wave 0         22, 0, 12, 30 (64)
reduce_kernel<128, 4>      the wave (offsets x5, combine, 4 stores)     124, 0, 116, 86 (326)
                           a loop step (4 x 16-byte loads, 8 v_pk_add)  39, 0, 3, 9 (51)
=========================  ==========================================  =======================

So the mean's last block issues 289 + 4 x 11 + 201 = 534 instructions a wave (642 in wave 0), two
waves a SIMD: 2,568 SIMD cycles, 1.22 us at 2.1 GHz; the sum's one wave 326 + 2 x 51 = 428: 1,712
cycles, 0.82 us. The sum's loop also waits for each step's four loads before its adds (``s_waitcnt
vmcnt(0)``): 2 dependent DRAM round trips where the step floor of memory_parallelism, spreading the
128 elements over all 32 threads, counts 1; only its 4 output-owning threads load
(:func:`output_vectorized_steps_seconds`). The same source compiled for gfx90a holds 1,899 /
2,622 instructions against gfx940's 1,843 / 2,564 (818 / 1,235 VALU against 755 / 1,172), but
its paths were not traced: CDNA2 gets no term. The counts stand for these launch shapes only: the
512-wide block of the vectorized path (three tree levels, six shuffles) with a global reduce, and
the output-vectorized path over a 2-D input (one output dimension, no block reduction); other
reduce_kernel launches get no term. The counted instantiations are the fixture's (MeanOps on the
first path, sum_functor on the second); the other of the two ops on each path differs by its
``project`` (a multiply an output) and is given the same count.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.columns import by_unique, parsed_input_dims
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.issue_rate_amd import SIMDS_PER_CU, WaveCount, cu_rounds, simd_cycles
from archsim.perf.memory_parallelism import dependent_step_seconds, serial_overhead_seconds

# Generations whose ISA the counts stand for (module docstring)
REDUCE_ISSUE_GENERATIONS = frozenset({"cdna3"})
VECTOR_ELEMENTS = 4  # vt0 = input_vec_size = 4 in the names counted: one 16-byte load of floats
# ReduceOp<float, MeanOps<float...> or sum_functor<float...>, unsigned int, float, 4, 4>
_OPS = r"(?:MeanOps<float, float, float, float>|func_wrapper_t<float, at::native::sum_functor<float, float, float>)"  # noqa: E501
INPUT_VECTORIZED = rf"reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::{_OPS}.*, unsigned int, float, 4, 4>\s*>"  # noqa: E501
OUTPUT_VECTORIZED = rf"reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::{_OPS}.*, unsigned int, float, 4, 4>\s*>"  # noqa: E501


@dataclass(frozen=True)
class ReduceCount:
    """A reduce_kernel path's sections (module docstring): ``fixed`` once a wave, ``step`` per
    thread-loop step, ``first_wave`` wave 0's extra, ``last`` / ``last_first_wave`` the last
    block's second pass of a global reduce (zero without one)."""

    fixed: WaveCount
    step: WaveCount
    first_wave: WaveCount
    last: WaveCount
    last_first_wave: WaveCount


# clang 16, -x hip --cuda-device-only -nogpulib -nogpuinc --offload-arch=gfx940 -O3 -S (module
# docstring); WaveCount(full-rate VALU, quarter-rate VALU, SALU, other)
INPUT_VECTORIZED_COUNT = ReduceCount(
    fixed=WaveCount(100, 0, 92, 97),
    step=WaveCount(6, 0, 2, 3),
    first_wave=WaveCount(13, 0, 9, 22),
    last=WaveCount(80, 0, 60, 61),
    last_first_wave=WaveCount(22, 0, 12, 30),
)
OUTPUT_VECTORIZED_COUNT = ReduceCount(
    fixed=WaveCount(124, 0, 116, 86),
    step=WaveCount(39, 0, 3, 9),
    first_wave=WaveCount(0),
    last=WaveCount(0),
    last_first_wave=WaveCount(0),
)


def reduce_path(names: pd.Series) -> np.ndarray:
    """Per kernel name: 1 the input-vectorized path, 2 the output-vectorized one, 0 neither."""

    def find(unique: pd.Series) -> np.ndarray:
        out = np.where(unique.str.contains(INPUT_VECTORIZED, regex=True), 1, 0)
        return np.where(unique.str.contains(OUTPUT_VECTORIZED, regex=True), 2, out)

    return by_unique(names.astype("string").fillna(""), find).astype(int)


def loop_steps(
    path: int, dims: list[int], outputs: float, block_x: float, block_y: float, grid_y: float
) -> float:
    """Thread-loop steps of one wave, NaN where the launch is not the counted one (module
    docstring): the input-vectorized loop walks ``numel / (4 x block_x x grid_y)`` 16-byte steps
    (block (512, 1), grid y > 1); the output-vectorized one ``floor(rows / 4)`` steps of four
    loads (a 2-D input reduced over its first dimension, one wave, no split)."""
    numel = float(math.prod(dims))
    if path == 1:
        if block_x != 512 or block_y != 1 or grid_y <= 1:
            return np.nan
        return float(math.ceil(numel / (VECTOR_ELEMENTS * block_x * grid_y) - 1e-9))
    if len(dims) != 2 or grid_y > 1 or block_x * block_y > 64 or outputs != dims[1]:
        return np.nan
    return float(dims[0] // VECTOR_ELEMENTS)


def reduce_issue_seconds(
    ops: pd.DataFrame,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds the SIMDs of the busiest CU take to issue a counted reduce_kernel's instructions:
    its blocks in ``cu_rounds`` rounds, a round's waves at :func:`simd_cycles` of ``fixed`` plus
    the loop steps, wave 0's extra one a SIMD; with a global reduce, the last block's second pass
    after them. ``launch``: (blocks, threads per block, resident blocks per CU). Zero for other
    kernels, launches and generations (REDUCE_ISSUE_GENERATIONS)."""
    out = np.zeros(len(ops))
    if generation not in REDUCE_ISSUE_GENERATIONS or not len(ops):
        return out
    path = reduce_path(_strings(ops, "name"))
    rows = np.flatnonzero(path > 0)
    if not rows.size:
        return out
    blocks, threads, resident = (np.asarray(a, dtype=float)[rows] for a in launch)
    ideal = "sm_utilization" in idealize
    rounds, in_round, waves = cu_rounds(np.maximum(blocks, 1.0), resident, threads, gpu.sms, ideal)
    block_x, block_y, grid_y = (np.nan_to_num(_column(ops, c, np.nan), nan=1.0)[rows]
                                for c in ("block_x", "block_y", "grid_y"))  # fmt: skip
    written = np.nan_to_num(_column(ops, "bytes_written", np.nan), nan=0.0)[rows]
    dims_text = _strings(ops, "input_dims").iloc[rows]
    hz = gpu.clock_mhz * 1e6
    for j, (i, text) in enumerate(zip(rows, dims_text.astype("string").fillna(""), strict=True)):
        parsed = parsed_input_dims(str(text))
        first = parsed[0] if parsed else None
        if not isinstance(first, list) or not first:
            continue
        if not all(isinstance(d, int) and d > 0 for d in first):
            continue
        steps = loop_steps(int(path[i]), first, written[j] / 4.0, block_x[j], block_y[j], grid_y[j])
        if not np.isfinite(steps):
            continue
        count = INPUT_VECTORIZED_COUNT if path[i] == 1 else OUTPUT_VECTORIZED_COUNT
        first_waves = in_round[j] / SIMDS_PER_CU  # wave 0 of each block: one a SIMD at most per 4
        first_waves = first_waves if ideal else math.ceil(first_waves - 1e-9)
        cycles = rounds[j] * (
            simd_cycles(count.fixed + count.step.times(steps), waves[j])
            + simd_cycles(count.first_wave, first_waves)
        )
        # the last block's second pass: its own waves, after every block has counted itself done
        own = math.ceil(threads[j] / 64.0 / SIMDS_PER_CU - 1e-9)
        cycles += simd_cycles(count.last, own) + simd_cycles(count.last_first_wave, 1.0)
        out[i] = cycles / hz
    return out


def output_vectorized_steps_seconds(
    ops: pd.DataFrame,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """The dependent load steps of a counted output-vectorized reduce_kernel, after the kernel's
    fixed cost (memory_parallelism.serial_overhead_seconds): its loop waits for each step's four
    16-byte loads (``s_waitcnt vmcnt(0)`` before the adds in the gfx940 code), and only the threads
    that own outputs load, outputs / 4 of them, 16 elements a step: ceil(rows / 4) steps (2 for
    the bench's [8, 16] sum, where the step floor's even spread over the block's 32 threads gives
    1). Zero for other kernels, launches and generations (REDUCE_ISSUE_GENERATIONS)."""
    out = np.zeros(len(ops))
    if generation not in REDUCE_ISSUE_GENERATIONS or not len(ops):
        return out
    path = reduce_path(_strings(ops, "name"))
    written = np.nan_to_num(_column(ops, "bytes_written", np.nan), nan=0.0)
    block_x, block_y, grid_y = (np.nan_to_num(_column(ops, c, np.nan), nan=1.0)
                                for c in ("block_x", "block_y", "grid_y"))  # fmt: skip
    blocks, _, resident = (np.asarray(a, dtype=float) for a in launch)
    for i in np.flatnonzero(path == 2):
        parsed = parsed_input_dims(str(_strings(ops, "input_dims").iloc[i]))
        first = parsed[0] if parsed else None
        if not isinstance(first, list) or not all(isinstance(d, int) and d > 0 for d in first):
            continue
        outputs = written[i] / 4.0
        steps = loop_steps(2, first, outputs, block_x[i], block_y[i], grid_y[i])
        if not np.isfinite(steps):
            continue
        owners = np.array([math.ceil(outputs / VECTOR_ELEMENTS)])
        elements = np.array([float(math.prod(first))])
        chain = dependent_step_seconds(np.array([VECTOR_ELEMENTS**2]), elements,
                                       blocks[i : i + 1], owners, resident[i : i + 1], np.zeros(1),
                                       gpu, idealize)  # fmt: skip
        out[i] = chain[0] + serial_overhead_seconds(gpu, idealize) if chain[0] > 0 else 0.0
    return out


__all__ = [
    "INPUT_VECTORIZED",
    "INPUT_VECTORIZED_COUNT",
    "OUTPUT_VECTORIZED",
    "OUTPUT_VECTORIZED_COUNT",
    "REDUCE_ISSUE_GENERATIONS",
    "ReduceCount",
    "loop_steps",
    "output_vectorized_steps_seconds",
    "reduce_issue_seconds",
    "reduce_path",
]
