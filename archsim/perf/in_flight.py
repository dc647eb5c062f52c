"""Bytes each thread keeps in flight to DRAM per round trip, by kernel family (the Little's-law term).

:mod:`archsim.perf.terms` prices T_lat = R / min(W, C / L) with R the bytes the kernel LOADS and C =
resident threads x bytes each thread has loading per round trip. Stores are not round trips: a store
writes no register, so no later instruction of its thread waits for it. NVIDIA: the control codes
give a variable-latency instruction a write barrier on its destination register (loads) and a store
only a read barrier, released once its source registers are read, not when memory acknowledges it
(Jia et al. 2018, "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
arXiv:1804.06826, section 2.1, control information); ordering across threads needs a fence (PTX ISA,
"Memory Consistency Model"). AMD: the LLVM backend waits on a load's counter before its result is
used (SIInsertWaitcnts) and inserts ``s_waitcnt vmcnt(0)`` for stores only at a release fence or
atomic (LLVM AMDGPUUsage, "Memory Model", GFX90A/GFX942 code sequences). A store retires into the
memory pipeline; only the kernel's end waits for its acknowledgement (archsim.perf.pipeline_fill).
The store queue does not bind either: a GFX9/CDNA wave may have 63 vector memory instructions
outstanding (LLVM AMDGPU gfx9 ``s_waitcnt`` operand: VM_CNT 0..63), 63 x 64 lanes x 4-16 B = 16-64 KB
per wave, while the whole MI300X needs 5.3 TB/s x 434 ns = 2.3 MB in flight (7.6 KB per CU); NVIDIA
publishes no store-queue depth. So stores are priced by bandwidth alone (T_bw counts them). What a
thread has loading depends on how its kernel's loop issues loads, which the public source of the
kernels says (github.com/pytorch/pytorch, github.com/NVIDIA/cutlass). Per family, first match on the
kernel name wins:

- ``vectorized_elementwise_kernel`` / ``unrolled_elementwise_kernel`` / ``softmax_warp_forward``
  (aten/src/ATen/native/cuda/CUDALoops.cuh, MemoryAccess.cuh ``policies::vectorized::load`` /
  ``policies::unroll::load``; PersistentSoftmax.cuh ``softmax_warp_forward`` loads its
  ``WARP_BATCH x WARP_ITERATIONS`` elements into registers before reducing): a thread loads every
  element it handles before computing and storing, one round trip for its whole share R / (B x T).
  The share is read off the op's own launch, not a library constant, since ``thread_work_size`` (4)
  became ``elems_per_thread<io_size>()`` (8 or 16) between PyTorch releases.
- legacy ``elementwise_kernel<nt, vt, ...>`` (CUDALoops.cuh, ``launch_legacy_kernel``: strided and
  non-contiguous TensorIterator loops): ``for (i < vt) f(idx)``, each ``f`` a load then a store through
  a pointer that may alias the next load, so the loads of one thread are serialized: one element of
  every input operand per round trip, R / (B x T x vt) (the store is posted; the next load is issued
  after it, not after its acknowledgement).
- ``CatArrayBatchedCopy`` / ``CatArrayBatchedCopy_contig`` (aten/src/ATen/native/cuda/Shape.cu): a
  grid-stride ``while (tid < nElements) { output[...] = data[...]; }``: one element loaded per round
  trip (its store posted), sizeof(OpaqueType<N>) = N bytes; only the threads of inputs still in
  their loop have it in flight (:func:`cat_busy_share`, applied by archsim.perf.terms).
- ``cunn_SoftMaxForward<ILP, ...>`` (aten/src/ATen/native/cuda/SoftMax.cu, ``ilpReduce`` /
  ``WriteFpropResults``: ``aligned_vector<scalar_t, ILP>`` loads): ILP elements per step. Where the
  op's bytes give its row, archsim.perf.passes.ilp_row_walk replaces this with the row's bytes per
  thread per round trip (its shift prologue and scalar tail load one element per step, and a row
  shorter than ILP x threads never reaches the vector loop); archsim.perf.terms applies it.
- ``vectorized_layer_norm_kernel`` (aten/src/ATen/native/cuda/layer_norm_kernel.cu: ``constexpr int
  vec_size = 4``, ``compute_stats`` loads one ``aligned_vector<T, vec_size>`` per step): 4 elements.
- ``reduce_kernel`` and the scalar-loop statistics kernels of :mod:`archsim.perf.memory_parallelism`
  (Reduce.cuh ``vt0`` / ``input_vec_size``; Normalization.cuh): recognized, but they keep
  DEFAULT_BYTES_PER_THREAD here. Their round trips are priced by ``memory_parallelism.step_floor``
  from the rows they read (the whole input where the trace records it); the op's bytes that this
  term spreads over the threads are reads and writes as the trace splits them among the op's
  kernels, which for a statistics kernel can be a share of the op's output it does not write.
- CUTLASS 2.x multistage GEMM/conv kernels, named ``..._<m>x<n>_<k>x<stages>_...`` (CUTLASS
  python/cutlass_library/library.py ``TileDescription.procedural_name``: "%dx%d_%dx%d" of the
  threadblock shape and stage count): a block has ``stages - 1`` A and B tiles of (m + n) x k
  elements in flight while it computes on one (include/cutlass/gemm/threadblock/mma_multistage.h,
  ``MmaMultistage``: the prologue issues ``kStages - 1`` complete stages of cp.async, and each
  mainloop iteration issues one more as it retires one); one stage for two-stage (``MmaPipelined``:
  the next tile's global loads are issued before the current tile's MMAs) and single-stage kernels
  (``MmaSingleStage``: it waits for its tile). Per thread: that / T.
- cuBLAS Hopper kernels ``sm90_xmma_..._tilesize<m>x<n>x<k>``: the stage count is not in the name, so
  one stage, (m + n) x k elements per block: the least a block has in flight, since its MMAs on a
  k-step need that step's whole A and B tiles (a lower bound; cuBLAS's Hopper kernels keep several
  stages in shared memory).
- everything else (cuBLAS/cuDNN kernels without a k-tile in the name such as
  ``cutlass_75_..._128x128_nn_align1``, MIOpen/Tensile, Triton, grid-less CPU captures): the former
  flat assumption, DEFAULT_BYTES_PER_THREAD (16 B, one 4 x fp32 vector load). Unsourced per kernel,
  and a figure of traffic (loads and the stores beside them), as it was priced before; only a
  kernel that loads nothing (MIOpen's SetTensor) then has no round trip. Read as loads alone it
  would make the H100 TimeSformer's align1 GEMM that writes the 1.89-GB attention scores
  bandwidth-bound, 0.72 ms against 1.90 measured (1.50 as traffic): its store-heavy epilogue costs
  what no published figure prices.

archsim.perf.terms applies Little's law at the latency of the kernel's own load: the pointer chase
near zero load, longer as the kernel draws more of the bandwidth (archsim.perf.loaded_latency, curves
from published stream tables; the flat pointer chase for generations without one).
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pandas as pd

from archsim.perf.blocks import BYTES_IN_FLIGHT_PER_THREAD, element_bytes
from archsim.perf.columns import by_unique
from archsim.perf.memory_parallelism import load_steps

DEFAULT_BYTES_PER_THREAD = BYTES_IN_FLIGHT_PER_THREAD
# layer_norm_kernel.cu: constexpr int vec_size = 4 (elements per aligned_vector load)
LAYER_NORM_VEC_ELEMENTS = 4

WHOLE_SHARE_PATTERN = (
    r"vectorized_elementwise_kernel<|unrolled_elementwise_kernel<|softmax_warp_forward<"
)
LEGACY_ELEMENTWISE_PATTERN = r"(?<![a-z_])elementwise_kernel<\d+, (\d+),"
CAT_COPY_PATTERN = r"CatArrayBatchedCopy(?:_contig)?<[^,]*OpaqueType<(\d+)u?>"
SOFTMAX_ILP_PATTERN = r"cunn_SoftMaxForward<(\d+),"
LAYER_NORM_PATTERN = r"vectorized_layer_norm_kernel<"
CUTLASS_STAGES_PATTERN = r"_(\d+)x(\d+)_(\d+)x(\d+)_"
SM90_TILE_PATTERN = r"tilesize(\d+)x(\d+)x(\d+)"

# family codes (first match wins, in this order)
_DEFAULT, _SHARE, _LEGACY, _CAT, _SOFTMAX, _LAYER_NORM, _STEPS, _CUTLASS, _SM90 = range(9)


def _families(names: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """(family code, per-family figure: vt, OpaqueType bytes, ILP, or block in-flight elements)."""

    def classify(unique: pd.Series) -> np.ndarray:
        code = np.full(len(unique), _DEFAULT, dtype=float)
        figure = np.zeros(len(unique))
        steps = load_steps(unique)[0]
        found = np.zeros(len(unique), dtype=bool)

        def take(mask: np.ndarray, family: int, value: np.ndarray | float) -> None:
            new = mask & ~found
            code[new] = family
            figure[new] = np.broadcast_to(value, figure.shape)[new]
            found[new] = True

        take(unique.str.contains(WHOLE_SHARE_PATTERN, regex=True).to_numpy(bool), _SHARE, 0.0)
        legacy = unique.str.extract(LEGACY_ELEMENTWISE_PATTERN)[0].astype(float).to_numpy()
        take(np.isfinite(legacy), _LEGACY, legacy)
        cat = unique.str.extract(CAT_COPY_PATTERN)[0].astype(float).to_numpy()
        take(np.isfinite(cat), _CAT, cat)
        ilp = unique.str.extract(SOFTMAX_ILP_PATTERN)[0].astype(float).to_numpy()
        take(np.isfinite(ilp), _SOFTMAX, ilp)
        take(unique.str.contains(LAYER_NORM_PATTERN, regex=True).to_numpy(bool), _LAYER_NORM, 0.0)
        take(steps > 0, _STEPS, steps)
        tile = unique.str.extract(CUTLASS_STAGES_PATTERN).astype(float).to_numpy()
        m, n, k, stages = tile.T
        take(np.isfinite(m), _CUTLASS, (m + n) * k * np.maximum(stages - 1, 1))
        sm90 = unique.str.extract(SM90_TILE_PATTERN).astype(float).to_numpy()
        take(np.isfinite(sm90[:, 0]), _SM90, (sm90[:, 0] + sm90[:, 1]) * sm90[:, 2])
        return np.stack([code, figure], axis=1)

    names = names.astype("string").fillna("")
    if not len(names):
        return np.zeros(0, dtype=int), np.zeros(0)
    table = by_unique(names, classify)  # remembered per name: classify captures nothing
    return table[:, 0].astype(int), table[:, 1]


def bytes_in_flight_per_thread(
    names: pd.Series,
    dtypes: pd.Series,
    read_bytes: np.ndarray,
    blocks: np.ndarray,
    threads: np.ndarray,
    dram_bytes: np.ndarray | None = None,
) -> np.ndarray:
    """Bytes each thread has loading per DRAM round trip, per op (module docstring), >= 0.
    ``read_bytes``: the bytes each op loads (its stores are posted, not round trips). The flat
    DEFAULT_BYTES_PER_THREAD is a figure of TRAFFIC in flight, unsourced and priced so before stores
    were known to be posted; it is kept as such: its loads' share R / D of it (``dram_bytes`` D;
    None: all of it), 0 for a kernel that loads nothing."""
    family, figure = _families(pd.Series(names).reset_index(drop=True))
    size = element_bytes(pd.Series(dtypes).reset_index(drop=True).astype("string").fillna(""))
    size = np.asarray(size, dtype=float)
    total_threads = np.maximum(np.asarray(blocks, float), 1.0) * np.maximum(
        np.asarray(threads, float), 1.0
    )
    share = np.nan_to_num(np.asarray(read_bytes, dtype=float), nan=0.0) / total_threads
    per_thread_block = figure * size / np.maximum(np.asarray(threads, float), 1.0)
    out = np.select(
        [
            family == _SHARE,
            family == _LEGACY,
            family == _CAT,
            family == _SOFTMAX,
            family == _LAYER_NORM,
            (family == _CUTLASS) | (family == _SM90),
        ],
        [
            share,
            share / np.maximum(figure, 1.0),
            figure,
            figure * size,
            LAYER_NORM_VEC_ELEMENTS * size,
            per_thread_block,
        ],
        default=0.0,
    )
    # a thread moves at least one element per round trip (CatArrayBatchedCopy's element is its
    # OpaqueType<N>, whatever the op's dtype)
    least = np.where(family == _CAT, figure, size)
    read = np.nan_to_num(np.asarray(read_bytes, dtype=float), nan=0.0)
    load_share = np.ones_like(read)
    if dram_bytes is not None:
        dram = np.nan_to_num(np.asarray(dram_bytes, dtype=float), nan=0.0)
        with np.errstate(divide="ignore", invalid="ignore"):
            load_share = np.where(dram > 0, np.clip(read / dram, 0.0, 1.0), 1.0)
    return np.where(out > 0, np.maximum(out, least), DEFAULT_BYTES_PER_THREAD * load_share)


def cat_busy_share(
    names: pd.Series, input_dims: pd.Series, grid_y: np.ndarray, resident_share: np.ndarray
) -> np.ndarray:
    """Share of a Shape.cu cat kernel's resident threads that carry its duration, per op (1 for
    other kernels). ``getCatGrid`` (``getCatGridRocm`` alike) launches the same gridDim.x blocks for
    each input (grid y = inputs), and a slice's threads leave the grid-stride loop after n_i /
    (gridDim.x T) elements, so while the largest input's slice runs the busy threads average
    sum_i min(1, n_i / n_max) / grid_y of them (the H100 TimeSformer: a 768-element class token
    beside 19.3M elements, 0.50), where the op's ``Input Dims`` list one shape per grid-y slice.
    ``resident_share``: the share of the grid's blocks resident at once, min(B, slots) / B (1 or
    True: all). Below 1 a finished block's slot takes a waiting one, so the B x share busy blocks
    fill min(B x share, slots) of the slots: a share of min(1, share / resident_share) (continuous,
    and never fewer busy threads for more slots: a step to 1 made one more SM slower)."""
    family, _ = _families(pd.Series(names).reset_index(drop=True))
    out = np.ones(len(family))
    dims = pd.Series(input_dims).reset_index(drop=True).astype("string").fillna("")
    gy = np.nan_to_num(np.asarray(grid_y, dtype=float), nan=0.0)
    resident = np.broadcast_to(np.asarray(resident_share, dtype=float), out.shape)
    for i in np.flatnonzero((family == _CAT) & (resident > 0)):
        sizes = _tensor_list_numels(str(dims[i]))
        if len(sizes) == gy[i] and len(sizes) > 1 and max(sizes) > 0:
            share = sum(min(1.0, n / max(sizes)) for n in sizes) / len(sizes)
            out[i] = min(1.0, share / min(resident[i], 1.0))
    return out


@lru_cache(maxsize=4096)
def _tensor_list_numels(text: str) -> tuple[int, ...]:
    """Elements of each tensor of a recorded TensorList (``[[[8,1,768],[8,3136,768]],[]]``: arg 0
    a list of shapes); () where the record is not one."""
    try:
        shapes = json.loads(text)[0]
    except (ValueError, TypeError, IndexError, KeyError):
        return ()
    if not isinstance(shapes, list) or not all(
        isinstance(s, list) and all(type(x) is int and x >= 0 for x in s) for s in shapes
    ):
        return ()
    return tuple(math.prod(s) if s else 0 for s in shapes)


def loaded_bytes(
    bytes_read: np.ndarray, bytes_written: np.ndarray, dram_bytes: np.ndarray
) -> np.ndarray:
    """Bytes each op loads from DRAM, the round trips' share of its ``dram_bytes`` (the model's DRAM
    bytes: traced reads and writes plus what it adds, re-read passes and padded channels, all loads):
    ``dram_bytes`` less the traced writes. Where the trace has neither reads nor writes (work
    inferred from the launch) no split is known, and every byte is taken as loaded: the round
    trips as they were priced before stores were known to be posted (an upper bound)."""
    read = np.nan_to_num(np.asarray(bytes_read, dtype=float), nan=0.0)
    written = np.nan_to_num(np.asarray(bytes_written, dtype=float), nan=0.0)
    dram = np.nan_to_num(np.asarray(dram_bytes, dtype=float), nan=0.0)
    traced = (read + written) > 0
    return np.where(traced, np.maximum(dram - written, 0.0), dram)


__all__ = [
    "CAT_COPY_PATTERN",
    "CUTLASS_STAGES_PATTERN",
    "DEFAULT_BYTES_PER_THREAD",
    "LAYER_NORM_VEC_ELEMENTS",
    "LEGACY_ELEMENTWISE_PATTERN",
    "SM90_TILE_PATTERN",
    "SOFTMAX_ILP_PATTERN",
    "WHOLE_SHARE_PATTERN",
    "bytes_in_flight_per_thread",
    "cat_busy_share",
    "loaded_bytes",
]
