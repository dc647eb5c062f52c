"""Memory-level parallelism of loop-carried reduction kernels: dependent load steps (Little's law).

A GPU reaches DRAM bandwidth W only with W x L bytes in flight (Little's law; L the loaded DRAM
latency). :mod:`archsim.perf.terms` prices every kernel so, with the bytes in flight per resident thread
of its kernel family (:mod:`archsim.perf.in_flight`) and the op's bytes spread evenly over the GPU. Kernels
that reduce a row per block in a scalar loop have far less in flight: each thread loads one element per
loop iteration and folds it into its accumulator, so a block of T threads has T x e elements in flight
and needs ceil(row / (T x e)) round trips to DRAM, one after another. With few blocks (one per channel
or group, 16-128 on a GPU with 100-300 SMs) nothing else hides those round trips:

    T_steps = waves x ceil(row_elements / (threads x e)) x L_dram      (+ k x L_L2 for global reductions)

where waves = ceil(blocks / (SMs x resident blocks per SM)), row_elements = elements a block reads,
e = elements each thread loads per loop step (KERNEL_LOAD_STEPS, from the kernel's source). The round
trips run after the kernel is dispatched and before it completes, so they are in series with the
kernel's fixed cost, not beside it: the GPU's kernel floor T_min (``kernel_min_us``: the median
one-workgroup kernel, which makes one dependent DRAM round trip of its own) less that one round trip,

    T_chain = (T_min - L_dram) + T_steps                                 (serial_overhead_seconds)

is a floor on the kernel's time (T_lat = max(T_lat, T_chain)). A kernel of one step costs T_min, as
before; each further step adds one round trip. With many blocks or short rows it is below the
bandwidth and Little's-law terms and changes nothing, so large kernels are unchanged. Not counted: the
block's tree reduction after its loop (wavefront shuffles and LDS round trips between barriers), for
which no published CDNA/NVIDIA latency per level was found; the chain is a lower bound.

Sources (PyTorch, github.com/pytorch/pytorch):
- ``batch_norm_collect_statistics_kernel`` (aten/src/ATen/native/cuda/Normalization.cuh): one block per
  channel (``int plane = blockIdx.x``); ``for (batch = threadIdx.y; ...) for (x = threadIdx.x; x <
  input.size(2); x += blockDim.x) { v = input[batch][plane][x]; /* Welford update */ }``: one scalar
  load per step. It reads the whole input (every batch entry and position of its channel), so its
  row is the op's first input / channels, whatever share of the op's bytes the trace gives it.
- ``RowwiseMomentsCUDAKernel`` (aten/src/ATen/native/cuda/group_norm_kernel.cu): one block per
  (sample, group) row, ``for (int64_t j = threadIdx.x; j < N; j += blockDim.x)`` folding ``X[i * N + j]``
  into a Welford accumulator: one scalar load per step, and the rows cover the first input.
- ``batch_norm_backward_kernel`` and ``batch_norm_backward_reduce_kernel`` (Normalization.cuh) sum over
  their channel with the file's ``reduce`` helper: ``for (batch = threadIdx.y; ...) for (x =
  threadIdx.x; x < tensor.size(2); x += blockDim.x) sum += op(batch, plane, x)``, ``op`` loading one
  element of grad_output and of input (issued together): one element per step. Only this reduction
  counts; the backward kernel's second loop (writing grad_input) streams and is not counted.
- ``layer_norm_grad_input_kernel`` (aten/src/ATen/native/cuda/layer_norm_kernel.cu, ``compute_gI``):
  one block per row; its reduction loop is unrolled by hand (``constexpr int unroll = 4``, "vectorized
  reads don't improve perf, so use regular unrolling"): four elements of X, dY (and gamma) per step.
  The loop that writes dX afterwards is not counted, so the term is a floor for this kernel.
- ``reduce_kernel<..., ReduceOp<..., vt0, input_vec_size>>`` (aten/src/ATen/native/cuda/Reduce.cuh):
  ``thread_reduce`` loads ``vt0`` values per unrolled step (``input_vec_size`` per vector load on the
  vectorized path): max(vt0, input_vec_size) elements per step, from the template arguments in the
  kernel's name. Its grid is (outputs, ``ctas_per_output``); with ``ctas_per_output`` > 1 the blocks
  ``global_reduce``: each stores its partial, ``__threadfence()``, ``atomicAdd`` on a semaphore, and the
  last block loads the partials: GLOBAL_REDUCE_L2_TRIPS dependent round trips to L2.

Kernels captured on a CPU have no kernel name or grid and get no term.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import element_bytes
from archsim.perf.columns import by_unique, parsed_input_dims
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.passes import l2_hit_seconds

# (kernel-name pattern, elements each thread loads per dependent step, row = op's first input),
# first match wins; see the module docstring for the source lines.
KERNEL_LOAD_STEPS: tuple[tuple[str, int, bool], ...] = (
    (r"batch_norm_collect_statistics_kernel", 1, True),
    (r"batch_norm_backward_(?:reduce_)?kernel", 1, True),
    (r"RowwiseMomentsCUDAKernel", 1, True),
    (r"layer_norm_grad_input_kernel<", 4, True),
)
# at::native::reduce_kernel<threads, vt, ReduceOp<scalar, ops, index, out, vt0, input_vec_size>>
# (older PyTorch names give only vt0: input_vec_size defaults to it)
REDUCE_KERNEL_PATTERN = r"reduce_kernel<\d+, \d+, at::native::ReduceOp<.*?, (\d+)(?:, (\d+))?>\s*>"
# Reduce.cuh global_reduce: partial store made visible (__threadfence), semaphore atomicAdd, partials
# loaded by the last block: three dependent round trips to L2, where atomics and partials live.
GLOBAL_REDUCE_L2_TRIPS = 3


def load_steps(names: pd.Series) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(elements per thread per dependent step (0: no term), row is the op's first input, is a
    reduce_kernel) of each kernel name."""

    def elements(unique: pd.Series) -> np.ndarray:
        unrolled = unique.str.extract(REDUCE_KERNEL_PATTERN).astype(float).max(axis=1)
        out = unrolled.fillna(0.0)
        for pattern, count, _ in reversed(KERNEL_LOAD_STEPS):  # first match wins: apply it last
            out = out.where(~unique.str.contains(pattern, regex=True), float(count))
        return out.to_numpy(dtype=float)

    def first_input(unique: pd.Series) -> np.ndarray:
        hit = pd.Series(False, index=unique.index)
        for pattern, _, whole in KERNEL_LOAD_STEPS:
            hit |= unique.str.contains(pattern, regex=True) & whole
        return hit.to_numpy(dtype=bool)

    def reduce(unique: pd.Series) -> np.ndarray:
        named = pd.Series(False, index=unique.index)
        for pattern, _, _ in KERNEL_LOAD_STEPS:
            named |= unique.str.contains(pattern, regex=True)
        unrolled = unique.str.extract(REDUCE_KERNEL_PATTERN)[0].notna()
        return (unrolled & ~named).to_numpy(dtype=bool)

    names = names.astype("string").fillna("")
    return (
        by_unique(names, elements).astype(float),
        by_unique(names, first_input).astype(bool),
        by_unique(names, reduce).astype(bool),
    )


def first_input_elements(input_dims: pd.Series) -> np.ndarray:
    """Elements of each op's first input from its recorded ``Input Dims`` (NaN when absent)."""

    def parse(text: str) -> float:
        try:
            dims = parsed_input_dims(text)[0]
            return float(np.prod([float(d) for d in dims])) if dims else np.nan
        except (ValueError, TypeError, IndexError, KeyError):
            return np.nan

    return by_unique(
        input_dims.astype("string").fillna(""), lambda u: np.array([parse(t) for t in u])
    ).astype(float)


def dependent_step_seconds(
    elements_per_step: np.ndarray,
    row_elements: np.ndarray,
    blocks: np.ndarray,
    threads: np.ndarray,
    resident_per_sm: np.ndarray,
    l2_trips: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray:
    """Seconds of dependent round trips (module docstring): waves x steps x L_dram plus ``l2_trips``
    L2 round trips per wave. 0 where ``elements_per_step`` is 0 or nothing is read."""
    blocks = np.maximum(np.asarray(blocks, dtype=float), 1.0)
    threads = np.maximum(np.asarray(threads, dtype=float), 1.0)
    per_step = np.asarray(elements_per_step, dtype=float)
    # whole elements: a byte count that is not a multiple of the element size (an op's few bytes of
    # scalars or outputs on top of its input) must not add a step
    rows = np.round(np.nan_to_num(np.asarray(row_elements, dtype=float), nan=0.0))
    active = (per_step > 0) & (rows > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        steps = np.where(active, np.ceil(rows / (threads * np.where(active, per_step, 1.0))), 0.0)
    concurrent = np.minimum(blocks, gpu.sms * np.maximum(resident_per_sm, 1.0))
    waves = np.ceil(blocks / concurrent)
    dram_s = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    l2_s = 0.0 if "memory_system" in idealize else l2_hit_seconds(gpu)
    trips = np.where(active, np.asarray(l2_trips, dtype=float), 0.0)
    return waves * (steps * dram_s + trips * l2_s)


def step_floor(
    ops: pd.DataFrame,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray],
    dram_bytes: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str],
) -> np.ndarray | None:
    """The dependent-step floor of every named reduction kernel among ``ops`` (None when there is
    none). ``launch``: (blocks, threads per block, resident blocks per SM) per op; ``dram_bytes``: the
    op's DRAM bytes (half taken as read where ``bytes_read`` is missing)."""
    per_step, first_input, reduce = load_steps(_strings(ops, "name"))
    if not (per_step > 0).any():
        return None
    blocks, threads, resident = launch
    size = element_bytes(_strings(ops, "dtype"))
    read = np.nan_to_num(_column(ops, "bytes_read"), nan=0.0)
    read = np.where(read > 0, read, np.asarray(dram_bytes, dtype=float) / 2)
    whole_input = first_input_elements(_strings(ops, "input_dims"))
    elements = np.where(first_input & np.isfinite(whole_input), whole_input, read / size)
    rows = elements / np.maximum(blocks, 1.0)
    ctas_per_output = np.nan_to_num(_column(ops, "grid_y", np.nan), nan=1.0)
    trips = np.where(reduce & (ctas_per_output > 1), GLOBAL_REDUCE_L2_TRIPS, 0.0)
    chain = dependent_step_seconds(per_step, rows, blocks, threads, resident, trips, gpu, idealize)
    return np.where(chain > 0, chain + serial_overhead_seconds(gpu, idealize), 0.0)


def serial_overhead_seconds(gpu: GpuConfig, idealize: frozenset[str] = frozenset()) -> float:
    """The kernel's fixed cost in series with its dependent round trips: the kernel floor (a
    one-workgroup kernel: dispatch, one dependent DRAM round trip, completion) less that round trip,
    never negative. 0 under ``sm_utilization``, which removes the floor (archsim.perf.kernel)."""
    if "sm_utilization" in idealize:
        return 0.0
    dram_s = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    return max(gpu.kernel_min_us * 1e-6 - dram_s, 0.0)


__all__ = [
    "GLOBAL_REDUCE_L2_TRIPS",
    "KERNEL_LOAD_STEPS",
    "REDUCE_KERNEL_PATTERN",
    "dependent_step_seconds",
    "first_input_elements",
    "load_steps",
    "serial_overhead_seconds",
    "step_floor",
]
