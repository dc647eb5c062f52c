"""Kernels that sweep one row per block several times (softmax, layer norm): re-read traffic and
dependent passes, for :mod:`archsim.perf.terms`.

PyTorch's block-per-row softmax (aten/src/ATen/native/cuda/SoftMax.cu, ``cunn_SoftMaxForward``)
reads its row three times from global memory: ``ilpReduce`` for the max, ``ilpReduce`` for the sum
of exponentials, then ``WriteFpropResults`` reads it again to write the output, with a
``blockReduce`` (``__syncthreads``) between passes, so each pass waits for the previous one.
``cunn_SoftMaxForwardSmem`` stages the row in shared memory and reads global memory once;
``cunn_SoftMaxBackward`` reads (grad_output, output) twice: the row sum, then the gradient. The
layer-norm kernels (aten/src/ATen/native/cuda/layer_norm_kernel.cu) read their row twice: the Welford
statistics (``compute_stats``), then the normalization (``vectorized_layer_norm_kernel``); the
backward ``layer_norm_grad_input_kernel`` sums over the row, then writes it. Batch norm's "row" is
a channel (ROW_PASS_KERNELS).

Where the re-reads come from: a row that fits in its block's share of the SM's on-chip L1 is re-read
there; one that does not, from L2 when every resident block's row fits in L2 together, else from
DRAM. Each pass costs at least one round trip to where its row is (the first pass to DRAM), and
every block of a wave waits at the same barrier (``blockReduce``'s ``__syncthreads``) before its
next pass, so no other block's transfer hides the round trips: a kernel of W waves of blocks takes
at least W x (L_dram + (P - 1) x L_reread) plus its transfer time (archsim.perf.terms adds the
DRAM and L2 terms: latency plus transfer, Hockney's model, instead of the larger of the two).

Round trips per pass. Within a pass a thread's loads are one after another: each loop iteration loads,
then folds the value into its accumulator before the next iteration's load is issued (the loops step
by the runtime ``blockDim.x``, so their trip count is unknown and nvcc does not unroll them: pytorch/
pytorch PR 195200 on the sibling ``cunn_SpatialSoftMaxForward``). ``cunn_SoftMaxForward<ILP>`` and
``cunn_SoftMaxBackward<ILP>`` (``ilpReduce``, ``WriteFpropResultsVectorized``,
``WriteBpropResultsVectorized``) walk a row of C elements with T threads as follows (ILP = 16 B /
element, ``constexpr int ILP = sizeof(float4) / sizeof(scalar_t)``; ``ALIGN_BYTES = 16``):

- a row whose start is ``shift`` elements past a 16-B boundary (``shift = address % 16 / element``)
  first loads one element per thread (``if (shift > 0)``, T - shift elements), then treats the rest
  of the row, C + shift - T elements;
- ``last = size % (ILP * T)``: the vectorized loop makes (size - last) / (ILP x T) steps of ILP
  elements per thread, then the tail loop ``for (; offset < size; offset += blockDim.x)`` makes
  ceil(last / T) scalar steps.

Rows follow each other in memory, so row r starts (r x C) mod (16 / element) elements past a 16-B
boundary (the CUDA caching allocator's blocks are 512-B aligned: c10/cuda/CUDACachingAllocator.cpp,
``kMinBlockSize = 512``); a block's round trips per pass are averaged over that cycle of shifts
(:func:`ilp_row_trips`). A row shorter than ILP x T elements never reaches the vectorized loop: every
load is one element (SoftMaxForward_getBlockSize gives T = min(C, 1024) rounded up to a warp, so rows
up to 8,191 bf16 or 4,095 fp32 elements load scalar). The Little's-law term then has one element per
thread in flight, not ILP (``RowPasses.bytes_per_thread``). ``vectorized_layer_norm_kernel`` steps
its loops the same way without prologue or tail (``for (int i = thrx; i < n_vec_to_read; i +=
numx)``, 4 elements a load): ceil(C / (4 x T)) round trips per pass. A kernel of W waves and P
passes takes at least W x trips x (L_dram + (P - 1) x L_reread) plus its transfer time; other
multi-pass kernels keep one round trip per pass.

On the H100 fixture h100_timesformer_inference, cunn_SoftMaxForward<8, BFloat16> on [8, 12, 3137,
3137] (C = 3137, T = 1024, 2 resident blocks per SM: 1,141 waves of 264) makes 4 round trips per pass
for every shift (shift 0: ceil(3137 / 1024); shift s > 0: 1 + ceil((2113 + s) / 1024)), so per wave
4 x (343 ns + 2 x 14.1 ns) = 1.49 us of round trips and 1.21 us of transfer: 3.07 ms per call against
5.72 ms measured (-46%; one round trip per pass gave 2.0 ms, -65%). Each wave also turns its
blocks over (238 ns, gpu-benches' H100 PCIe stream table) and runs two ``blockReduceWarp`` chains
(2 x 126 cycles, lower bounds from published cycle figures: archsim.perf.block_sync), 365 ns more
per wave: 3.49 ms (-39%). The passes re-read from L1 are bound by their instruction issue (SASS
counts of the loops at the published dispatch and pipe rates, archsim.perf.issue_rate, applied by the
same module: the sum pass 841.5 cycles against 4 x 28 of round trips, the write pass 1,534.5 less
its output's 0.60-us transfer): 484 ns more per wave, 4.04 ms (-29%). Shuffle and ``__syncthreads`` latencies have no published Hopper figure and are priced at
their issue cost and zero.
DRAM latency under load does not close the gap: the round trips here keep the pointer chase, since
this latency-plus-transfer form already prices the queue behind each burst (archsim.perf.loaded_latency
prices Little's-law terms at the kernel's own load). Priced instead as a closed loop at the Hopper
curve's loaded latency, the first pass's 540 KB in flight (264 x 1024 threads x 2 B) draws 1.31 TB/s
at 413 ns per round trip: 2.4 us per wave with the L1 passes and the output, against 2.7 us here and
5.0 us measured (the kernel runs at 0.66 TB/s, where the curve puts the latency 7% above the
chase). An earlier what-if at a flat 785 ns (gpu-benches' read kernel on an H200 at full occupancy)
counted that kernel's ~200-ns block turnover as latency and the queue twice. The op's bytes
(archsim.trace.flops) count one read of the input and one write; these extra bytes are per kernel
and per GPU, which is why they live here.

Kernels captured on a CPU have no kernel name or grid and are priced at one pass.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.block_sync import pass_floors, wave_fixed_seconds
from archsim.perf.blocks import DTYPE_BYTES, element_bytes
from archsim.perf.columns import by_unique, parsed_input_dims
from archsim.perf.inductor_loops import looped_norm_rows, looped_norm_trips
from archsim.perf.occupancy import blocks_per_sm

# (kernel-name pattern, passes over the row), first match wins; see the module docstring.
ROW_PASS_KERNELS: tuple[tuple[str, int], ...] = (
    (r"cunn_SoftMaxForwardSmem", 1),
    (r"cunn_SoftMaxForward", 3),
    (r"cunn_SoftMaxBackward", 2),
    (r"vectorized_layer_norm_kernel|layer_norm_grad_input_kernel", 2),
    # Batch norm in training needs a channel's statistics before it can normalize (forward) or form
    # the input gradient (backward, sum(dy) and sum(dy * x_hat) first): a block per channel that
    # cannot hold the channel on chip reads it twice. cuDNN names its one-read variants
    # (bn_fw_tr_1C11_singleread, bn_bw_1C11_singleread, picked for small channels); PyTorch's
    # batch_norm_backward_kernel (aten/src/ATen/native/cuda/Normalization.cuh) reduces over the
    # channel, then re-reads grad_output and input to write grad_input.
    (r"bn_fw_tr_1C11_singleread|bn_bw_1C11_singleread", 1),
    (r"bn_fw_tr_1C11_kernel|bn_bw_1C11_kernel|batch_norm_backward_kernel", 2),
)

# Kernels whose loops over a row step by the block's thread count, one load (of ``vector``
# elements) per step: (pattern, vector elements (0: the name's first template argument, ILP),
# tensors the row is read from, ilpReduce's shift prologue and scalar tail). SoftMax.cu's
# cunn_SoftMaxForward reads its input, cunn_SoftMaxBackward output and grad_output;
# layer_norm_kernel.cu's vectorized_layer_norm_kernel (compute_stats and the normalization loop:
# ``for (int i = thrx; i < n_vec_to_read; i += numx)``, ``constexpr int vec_size = 4``, "No tail, N
# is guaranteed to be multiple of vec size") reads X; its gamma and beta are shared by all rows.
ROW_WALK_KERNELS: tuple[tuple[str, int, int, bool], ...] = (
    (r"cunn_SoftMaxForward<(\d+),", 0, 1, True),
    (r"cunn_SoftMaxBackward<(\d+),", 0, 2, True),
    (r"vectorized_layer_norm_kernel<()", 4, 1, False),
)
# SoftMax.cu: constexpr int ALIGN_BYTES = 16 (a row's shift is its start's offset past 16 B)
ALIGN_BYTES = 16

# Load latencies on a hit, in SM clock cycles: Jia et al. 2018, "Dissecting the NVIDIA Volta GPU
# Architecture via Microbenchmarking" (arXiv:1804.06826), V100: L1 hit 28 cycles, L2 hit 193 cycles.
# The L1 figure is taken for every generation; the L2 one only where a config has no measured
# ``gpu.l2_latency_ns`` (its preset cites the pointer chase it comes from).
L1_HIT_CYCLES = 28
L2_HIT_CYCLES = 193
# L1 per CU on AMD CDNA, separate from the 64 KB LDS (unlike NVIDIA's unified L1/shared memory, whose
# size the config's shared_mem_per_sm_kb bounds): CDNA2 whitepaper 16 KB, CDNA3 whitepaper 32 KB.
CDNA2_L1_KB, CDNA3_L1_KB = 16, 32


def l2_hit_seconds(gpu: GpuConfig) -> float:
    """Seconds of one dependent L2 hit: the config's measured ``l2_latency_ns``, else Volta's
    L2_HIT_CYCLES at the config's clock (so configs without the field load and price as before)."""
    if gpu.l2_latency_ns is not None:
        return gpu.l2_latency_ns * 1e-9
    return L2_HIT_CYCLES * 1e-6 / gpu.clock_mhz


def row_passes(names: pd.Series) -> np.ndarray:
    """Passes over its row of each kernel (0: not a block-per-row multi-pass kernel)."""

    def passes(unique: pd.Series) -> pd.Series:
        out = pd.Series(0, index=unique.index)
        for pattern, count in reversed(ROW_PASS_KERNELS):  # first match wins: apply it last
            out = out.where(~unique.str.contains(pattern, regex=True), count)
        return out

    return by_unique(names, passes).astype(float)


def ilp_row_trips(
    row_elements: np.ndarray, threads: np.ndarray, ilp: np.ndarray, element_size: np.ndarray
) -> np.ndarray:
    """Dependent load steps per pass of one block over its row in SoftMax.cu's ilpReduce loops,
    averaged over the cycle of row shifts (module docstring): the shift prologue (one element per
    thread), (size - last) / (ILP x T) vector steps, ceil(last / T) scalar steps. >= 1."""
    row = np.maximum(np.round(np.asarray(row_elements, dtype=float)), 0.0)
    threads = np.maximum(np.asarray(threads, dtype=float), 1.0)
    chunk = np.maximum(np.asarray(ilp, dtype=float), 1.0) * threads
    cycle = np.clip(np.floor(ALIGN_BYTES / np.maximum(element_size, 1.0)), 1.0, ALIGN_BYTES)
    total = np.zeros_like(row)
    for r in range(ALIGN_BYTES):  # rows 0 .. cycle - 1 of the repeating shifts
        shift = np.mod(r * row, cycle)
        prologue = shift > 0
        size = np.where(prologue, np.maximum(row + shift - threads, 0.0), row)
        last = np.mod(size, chunk)
        trips = prologue + (size - last) / chunk + np.ceil(last / threads)
        total += np.where(r < cycle, trips, 0.0)
    return np.maximum(total / cycle, 1.0)


def ilp_row_walk(
    names: pd.Series,
    dtypes: pd.Series | None,
    bytes_read: np.ndarray,
    blocks: np.ndarray,
    threads: np.ndarray,
    input_dims: pd.Series | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(round trips per pass, bytes each thread loads per round trip) of every ROW_WALK_KERNELS
    kernel; (1, NaN) elsewhere (NaN: the family's figure of archsim.perf.in_flight stands). A row
    is the op's first input over its blocks where ``input_dims`` records it, else its share of
    ``bytes_read``; the element size is the op's dtype's, else 16 B / ILP."""
    names = pd.Series(names).reset_index(drop=True).astype("string").fillna("")

    def parse(unique: pd.Series) -> np.ndarray:
        out = np.full((len(unique), 3), np.nan)
        for pattern, vector, tensors, prologue in reversed(ROW_WALK_KERNELS):
            found = unique.str.extract(pattern)[0]
            ilp = found.replace("", str(vector)).astype(float).to_numpy()
            hit = found.notna().to_numpy(dtype=bool)
            out[hit] = np.stack([ilp, np.full(len(unique), float(tensors)),
                                 np.full(len(unique), float(prologue))], axis=1)[hit]  # fmt: skip
        return out

    unique = pd.Series(names.unique())
    table = parse(unique.astype(str)) if len(unique) else np.zeros((0, 3))
    ilp, tensors, prologue = table[pd.Index(unique).get_indexer(names)].T
    named = np.isfinite(ilp)
    if not named.any():
        return np.ones(len(names)), np.full(len(names), np.nan)
    ilp, tensors = np.where(named, ilp, 1.0), np.where(named, tensors, 1.0)
    size = np.full(len(names), np.nan)
    if dtypes is not None:
        dtypes = pd.Series(dtypes).reset_index(drop=True).astype("string").fillna("")
        known = dtypes.str.replace("torch.", "", regex=False).isin(list(DTYPE_BYTES))
        size = np.where(known.to_numpy(dtype=bool), element_bytes(dtypes), np.nan)
    size = np.where(np.isfinite(size) & (size > 0), size, ALIGN_BYTES / ilp)
    blocks = np.maximum(np.asarray(blocks, dtype=float), 1.0)
    threads = np.maximum(np.asarray(threads, dtype=float), 1.0)
    row_bytes = np.nan_to_num(np.asarray(bytes_read, dtype=float), nan=0.0) / blocks
    row_elements = row_bytes / tensors / size
    if input_dims is not None:
        first = _first_input_elements(input_dims) / blocks
        row_elements = np.where(np.isfinite(first) & (first > 0), first, row_elements)
    walked = ilp_row_trips(row_elements, threads, ilp, size)
    stepped = np.maximum(np.ceil(np.round(row_elements) / (ilp * threads)), 1.0)
    trips = np.where(prologue == 1.0, walked, stepped)
    per_thread = np.maximum(row_elements * tensors * size / (threads * trips), size)
    ilp_reduce = named & (prologue == 1.0) & (row_elements > 0)
    return np.where(named, trips, 1.0), np.where(ilp_reduce, per_thread, np.nan)


def _first_input_elements(input_dims: pd.Series) -> np.ndarray:
    """Elements of each op's first recorded input (NaN when absent)."""

    def parse(unique: pd.Series) -> np.ndarray:
        out = np.full(len(unique), np.nan)
        for i, text in enumerate(unique):
            try:
                dims = parsed_input_dims(text)[0]
                out[i] = float(np.prod([float(d) for d in dims])) if dims else np.nan
            except (ValueError, TypeError, IndexError, KeyError):
                pass
        return out

    texts = pd.Series(input_dims).reset_index(drop=True).astype("string").fillna("")
    return by_unique(texts, parse).astype(float)


def _l1_bytes_per_sm(gpu: GpuConfig, generation: str) -> float:
    if generation == "cdna":
        return (CDNA3_L1_KB if "mi300" in gpu.name.lower() else CDNA2_L1_KB) * 1024.0
    return gpu.shared_mem_per_sm_kb * 1024.0


def reread_terms(
    passes: np.ndarray,
    bytes_read: np.ndarray,
    blocks: np.ndarray,
    resident_per_sm: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
    trips: np.ndarray | float = 1.0,
    pass_floor_s: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(extra DRAM bytes, extra L2 bytes, latency floor in seconds) of the re-read passes.

    ``bytes_read`` is the kernel's input read once; ``resident_per_sm`` the blocks an SM holds at
    once (archsim.perf.occupancy); ``trips`` the dependent round trips each pass makes (1: one per
    pass; :func:`ilp_row_trips`); ``pass_floor_s`` (ops, k): seconds per wave the passes 2..k+1
    take at least whatever their round trips (archsim.perf.block_sync.pass_floor_seconds). Kernels
    with ``passes`` 0 or 1 get zeros."""
    multi = passes > 1
    blocks = np.maximum(blocks, 1.0)
    resident = np.maximum(resident_per_sm, 1.0)
    row_bytes = bytes_read / blocks
    concurrent = np.minimum(blocks, gpu.sms * resident)
    in_l1 = row_bytes <= _l1_bytes_per_sm(gpu, generation) / resident
    in_l2 = concurrent * row_bytes <= gpu.l2_size_mb * 1e6
    rereads = np.where(multi, passes - 1, 0.0) * bytes_read
    extra_dram = np.where(~in_l1 & ~in_l2, rereads, 0.0)
    extra_l2 = np.where(~in_l1 & in_l2, rereads, 0.0)

    cycle_s = 1e-6 / gpu.clock_mhz
    dram_s = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    on_chip_s = np.where(in_l1, L1_HIT_CYCLES * cycle_s, l2_hit_seconds(gpu))
    if "memory_system" in idealize:
        on_chip_s = np.zeros_like(on_chip_s)
    reread_s = np.where(in_l1 | in_l2, on_chip_s, dram_s)
    waves = np.ceil(blocks / concurrent)
    rereads_s = (passes - 1) * trips * reread_s
    if pass_floor_s is not None:
        for j in range(pass_floor_s.shape[1]):
            below = np.maximum(pass_floor_s[:, j] - trips * reread_s, 0.0)
            rereads_s = rereads_s + np.where(passes >= j + 2, below, 0.0)
    latency = np.where(multi, waves * (trips * dram_s + rereads_s), 0.0)
    return extra_dram, extra_l2, latency


@dataclass(frozen=True)
class RowPasses:
    """Per op: extra DRAM and L2 bytes of the re-reads, the passes' round trips in seconds, and
    the bytes a thread has in flight per round trip (NaN: not an ilpReduce kernel, its family's
    figure stands: archsim.perf.in_flight)."""

    extra_dram: np.ndarray
    extra_l2: np.ndarray
    latency: np.ndarray
    bytes_per_thread: np.ndarray


def row_pass_work(
    names: pd.Series,
    bytes_read: np.ndarray,
    dram_bytes: np.ndarray,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
    dtypes: pd.Series | None = None,
    input_dims: pd.Series | None = None,
    loop_steps: np.ndarray | None = None,
) -> RowPasses | None:
    """The re-read work of every multi-pass kernel among the ops (None when there is none).
    ``launch``: (blocks, threads, registers per thread, shared bytes) per op; a kernel whose bytes
    were inferred from its launch (no ``bytes_read``) is taken as half read, half written;
    ``dtypes``, ``input_dims``: the ops' dtypes and recorded shapes (a walked row's element size and
    length: :func:`ilp_row_walk`); ``loop_steps``: a looped Triton reduction's steps per loop (the
    ops table's ``reduction_loop_steps``: archsim.perf.inductor_loops)."""
    passes = row_passes(names)
    # Inductor's looped layer norms reload their row in a second loop; its row is what the first
    # loop loads (archsim.perf.inductor_loops)
    looped, first_loop = looped_norm_rows(names, input_dims, bytes_read, dtypes)
    passes = np.maximum(passes, looped)
    if not (passes > 1).any():
        return None
    blocks, threads, registers, shared = launch
    resident = blocks_per_sm(threads, registers, shared, gpu)
    read = np.nan_to_num(bytes_read, nan=0.0)
    read = np.where(read > 0, read, dram_bytes / 2)
    read = np.where(np.isfinite(first_loop), first_loop, read)
    trips, per_thread = ilp_row_walk(names, dtypes, read, blocks, threads, input_dims)
    trips = looped_norm_trips(looped, loop_steps, trips)
    # each wave's instruction issue in its re-read passes, its block turnover and block reductions
    # (archsim.perf.block_sync)
    blocks = np.maximum(blocks, 1.0)
    waves = np.ceil(blocks / np.minimum(blocks, gpu.sms * np.maximum(resident, 1.0)))
    floors = pass_floors(names, dtypes, read, dram_bytes, (blocks, threads, resident, waves), gpu,
                         generation, idealize)  # fmt: skip
    extra_dram, extra_l2, latency = reread_terms(passes, read, blocks, resident, gpu, generation,
                                                 idealize, trips, floors)  # fmt: skip
    fixed = wave_fixed_seconds(names, threads, gpu, generation, idealize)
    latency = latency + np.where(passes > 1, waves * fixed, 0.0)
    return RowPasses(extra_dram, extra_l2, latency, per_thread)


def add_pass_terms(
    terms: dict[str, np.ndarray], rows: RowPasses, gpu: GpuConfig, idealize: frozenset[str]
) -> None:
    """Add the re-reads' L2 time to ``mem`` and raise ``lat`` to the passes' round trips plus the
    transfer time (``bw``, already at the achieved DRAM fraction, and the L2 time): every block of
    a wave waits at the same barrier after each pass, so other blocks' transfers do not hide the
    round trips (latency plus transfer, Hockney's model, instead of the larger of the two)."""
    l2_s = 0.0 if "memory_system" in idealize else rows.extra_l2 / (gpu.l2_bw_gbs * 1e9)
    terms["mem"] = terms["mem"] + l2_s
    multi = rows.latency > 0
    terms["lat"] = np.where(
        multi, np.maximum(terms["lat"], rows.latency + terms["bw"] + l2_s), terms["lat"]
    )


__all__ = [
    "ALIGN_BYTES",
    "ROW_WALK_KERNELS",
    "RowPasses",
    "add_pass_terms",
    "ilp_row_trips",
    "ilp_row_walk",
    "row_pass_work",
    "CDNA2_L1_KB",
    "CDNA3_L1_KB",
    "L1_HIT_CYCLES",
    "L2_HIT_CYCLES",
    "ROW_PASS_KERNELS",
    "l2_hit_seconds",
    "reread_terms",
    "row_passes",
]
