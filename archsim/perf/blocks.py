"""Launch shape (blocks, threads per block) for ops captured on a CPU, which have no CUDA grid.

Estimated from the op's output size and the tile one thread block would compute on a GPU:
- GEMM/conv: 128x128 output tiles with 256 threads (CUTLASS's default threadblock tile 128x128 and
  cuBLAS's common sm70/sm80 kernels, e.g. ``volta_sgemm_128x128``; 256 threads = 8 warps).
  Registers and shared memory as the V100 fixture's cuBLAS/cuDNN tile kernels use
  (v100_cnn_ddp_train: volta_sgemm_*/scudnn_128x* at 126-128 registers per thread, 16-32 KB shared).
- skinny GEMM/conv (fewer output tiles than one wave of blocks): the same tiles split into K-slices
  (split_k_blocks; cuBLAS split-K and GEMV kernels), which kernel.kernel_terms tries as candidates.
- everything else: PyTorch's element-wise launch, 128 threads x 4 elements per thread = 512 output
  elements per block (aten/src/ATen/native/cuda/CUDALoops.cuh: num_threads = 4 * warp size,
  thread_work_size = 4).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.columns import by_unique
from archsim.perf.gemm_k1 import k1_gemm, k1_gemm_work

# Bytes each resident thread keeps in flight to DRAM: PyTorch's vectorized element-wise kernels load
# 4 x fp32 = 16 B per thread per iteration (aten/src/ATen/native/cuda/MemoryAccess.cuh, vec size 4).
BYTES_IN_FLIGHT_PER_THREAD = 16.0
GEMM_TILE_ELEMENTS = 128 * 128
# Tiles tried for GEMM/conv ops captured without a grid: (edge, threads, registers, shared bytes) of
# real cuBLAS kernels in the fixtures. The model keeps the fastest, as cuBLAS's heuristics pick small
# tiles for skinny problems (the A100 fixture's batch-128 classifier GEMMs use 32x32 tiles).
GEMM_TILE_CANDIDATES = (
    (
        128,
        256,
        128.0,
        32768.0,
    ),  # v100_cnn_ddp_train cudnn *_128x128_*: 256 threads, 128 regs, 32 KB
    (64, 64, 126.0, 8192.0),  # v100_cnn_ddp_train volta_sgemm_64x64_*: 64 threads, 126 regs, 8 KB
    (
        32,
        128,
        86.0,
        32768.0,
    ),  # a100_alexnet_forward ampere_sgemm_32x32_sliced1x4_tn: 128 thr, 86 regs, 32 KB
)
# Split-K kernel for skinny GEMM/conv (few output tiles, long reduction): cuBLAS's
# volta_sgemm_64x32_sliced1x4_tn in v100_cnn_ddp_train runs with 256 threads, 82 registers and 26 KB
# of shared memory on split-K grids [16, 1, 5] = 80 blocks (one per V100 SM) and [32, 1, 5] = 160
# (two per SM), each followed by cublasLt::splitKreduce_kernel<..., float, ...> summing the fp32
# partials; cuDNN does the same for convolutions (cudnn_train_volta_scudnn_128x128_stridedB_splitK_*,
# grid z = 7 to 28 K-slices), and the A100 fixture splits AlexNet's batch-128 fc8 GEMM
# (ampere_sgemm_32x32_sliced1x4_tn, grid [32, 4, 6]: 128 output tiles x 6 K-slices = 768 blocks).
# CUTLASS exposes the same scheme (cutlass/gemm/device/gemm_splitk_parallel.h: "a reduction over K
# partitions in parallel"). (tile m, tile n, threads, registers, shared bytes)
SPLIT_K_TILE = (64, 32, 256, 82.0, 26624.0)
# The largest tile cuBLAS/CUTLASS run on tensor cores (NVIDIA, "Matrix Multiplication Background
# User's Guide", section "Typical Tile Dimensions in cuBLAS and Performance": 256x128 and 128x256
# tiles have the most data reuse), as traced in fixtures a100_train_shapes and
# a100_80gb_train_prewindow: cutlass_80_tensorop_s1688gemm_256x128_32x3_* with 256 threads, 240-248
# registers and 147,456 B of shared memory. (tile m, tile n, threads, registers, shared bytes)
LARGE_GEMM_TILE = (256, 128, 256, 248.0, 147456.0)
# Blackwell (sm_100) tensor-core GEMMs: cuBLAS runs 2-CTA tcgen05 kernels in thread-block clusters.
# Measured: a public Nsight Compute capture of torch.mm on 4096x4096 BF16 on a B200 (the TVM TIRx
# book's chapter "Measuring and Analyzing GPU Kernel Performance") ran
# nvjet_sm100_tst_128x256_64x6_2x2_2cta_h_bz_NNT: 512 blocks (4096^2 / (128 x 256): the name's tile
# is one CTA's) of 256 threads, 255 registers, 213.28 KB of shared memory, 4 blocks per cluster
# (2x2), tensor pipe 77% busy and L2 at 34.6% of its peak; cuBLAS's other large-GEMM kernels in
# public B200 profiles are nvjet_tst_256x256_64x4_2x1_2cta / _2x2_2cta. L2 reuse is the cluster's,
# not the CTA's: the pair's tcgen05.mma.cta_group::2 reads one B panel for both CTAs, each loading
# half (CUTLASS examples/cute/tutorial/blackwell/04_mma_tma_2sm_sm100.cu), and TMA multicast loads
# each A panel from L2 once for the cluster's CTAs along N (03_mma_tma_multicast_sm100.cu; CUTLASS
# examples/70_blackwell_gemm: a 256x128 MMA tile over 2 SMs in a 2x2 cluster). A 2x2 cluster of
# 128x256 CTA tiles reads its A and B panels once per 256x512 outputs: L2 reuse edge
# 2 x 256 x 512 / 768 = 341.3 (the CTA tile alone: 170.7). (tile m, tile n, threads, registers,
# shared bytes, cluster tile m, cluster tile n: the outputs whose operands L2 serves once)
BLACKWELL_CLUSTER_TILE = (128, 256, 256, 255.0, 218399.0, 256, 512)
GEMM_THREADS_PER_BLOCK = 256
GEMM_REGISTERS_PER_THREAD = 128.0
GEMM_SHARED_MEMORY_BYTES = 32768.0
ELEMENTWISE_THREADS_PER_BLOCK = 128
# v100_cnn_ddp_train: at::native::vectorized_elementwise_kernel<4, ...> uses 16-22 registers, no shared
ELEMENTWISE_REGISTERS_PER_THREAD = 22.0
ELEMENTWISE_ELEMENTS_PER_BLOCK = 128 * 4

TILED_OP_CLASSES = frozenset({"gemm", "conv", "matmul", "attention"})

# bytes per element of the dtype strings the trace carries (torch dtype names)
DTYPE_BYTES = {
    "float32": 4,
    "float": 4,
    "float16": 2,
    "half": 2,
    "bfloat16": 2,
    "float64": 8,
    "double": 8,
    "int64": 8,
    "long": 8,
    "int32": 4,
    "int": 4,
    "int16": 2,
    "uint8": 1,
    "int8": 1,
    "bool": 1,
    # FP8 operands move 1 byte an element (torch.float8_*: c10/util/Float8_*.h); the *fnuz ones are
    # MI300's (archsim.perf.fp8)
    "float8_e4m3fn": 1,
    "float8_e5m2": 1,
    "float8_e4m3fnuz": 1,
    "float8_e5m2fnuz": 1,
}
DEFAULT_DTYPE_BYTES = 4  # fp32, the default torch dtype


def element_bytes(dtype: pd.Series) -> np.ndarray:
    def lookup(names: pd.Series) -> np.ndarray:
        names = names.str.replace("torch.", "", regex=False)
        return names.map(DTYPE_BYTES).fillna(DEFAULT_DTYPE_BYTES).to_numpy(dtype=float)

    return by_unique(dtype.astype("string").fillna(""), lookup).astype(float)


def estimate_launch_shape(
    ops: pd.DataFrame,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(blocks, threads per block, registers per thread, shared bytes) from bytes written and class."""
    out_elements = np.maximum(
        ops["bytes_written"].to_numpy(dtype=float) / element_bytes(ops["dtype"]), 1.0
    )
    tiled = by_unique(ops["op_class"].astype("string"), lambda u: u.isin(TILED_OP_CLASSES))
    tiled = tiled.astype(bool)
    blocks = np.where(
        tiled,
        np.ceil(out_elements / GEMM_TILE_ELEMENTS),
        np.ceil(out_elements / ELEMENTWISE_ELEMENTS_PER_BLOCK),
    )
    threads = np.where(tiled, GEMM_THREADS_PER_BLOCK, ELEMENTWISE_THREADS_PER_BLOCK).astype(float)
    registers = np.where(tiled, GEMM_REGISTERS_PER_THREAD, ELEMENTWISE_REGISTERS_PER_THREAD)
    shared = np.where(tiled, GEMM_SHARED_MEMORY_BYTES, 0.0)
    return np.maximum(blocks, 1.0), threads, registers, shared


# K-slice counts tried for every tile (the model keeps the fastest, like GEMM_TILE_CANDIDATES).
# The fixtures show 5-28 K-slices over several output tiles; the list goes further because the tile
# count below is output elements / tile outputs, which for a batch-1 GEMV (M = 1) undercounts the
# real N / tile-n column tiles tile-m-fold (cuBLAS runs a GEMV kernel with blocks along N there):
# tiles x slices, the block count, is what the model needs. 2048 slices of one output tile cover a
# full wave of any candidate tile on every preset (largest: 64x64 tiles on the H100, 132 SMs x 8
# resident = 1056 blocks). The counts are the same on every GPU and a split is usable below one wave,
# so a GPU with more SMs only gains candidates: it can never be predicted slower.
SPLIT_K_SLICES = (2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, 2048)


def split_k_blocks(
    out_elements: np.ndarray,
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    slices: float,
    wave_blocks: np.ndarray,
    tile_elements: float,
    threads: float,
) -> tuple[np.ndarray, np.ndarray]:
    """(blocks, usable) of a launch with ``slices`` K-slices of each output tile of ``tile_elements``
    outputs, ``threads`` per block.

    WHY: a batch-1 linear layer has one or two output tiles; one block per tile leaves all but one SM
    idle and the weights crawl in at one SM's share of DRAM latency. cuBLAS/cuDNN split the work
    instead (the fixtures' split-K grids, see SPLIT_K_TILE; GEMV kernels for M = 1) so every SM
    streams weights.
    A split is usable when the next smaller one (slices / 2) had fewer blocks than each of: one full
    wave of the GPU (``wave_blocks`` = SMs x resident blocks; cuBLAS splits only problems too small to
    fill it), the blocks it takes to have every DRAM byte in flight at once
    (BYTES_IN_FLIGHT_PER_THREAD per thread), and the blocks that still give every thread at least one
    multiply-add (FLOPs / 2 / threads). Beyond those, more blocks shorten no term, so the chosen
    split reaches the smallest of the three and the latency term cannot fall as the batch grows."""
    tiles = np.maximum(np.ceil(np.asarray(out_elements, dtype=float) / tile_elements), 1.0)
    streaming_blocks = np.asarray(dram_bytes, dtype=float) / (threads * BYTES_IN_FLIGHT_PER_THREAD)
    work_blocks = np.asarray(flops, dtype=float) / (2.0 * threads)
    cap = np.minimum(np.minimum(streaming_blocks, work_blocks), wave_blocks)
    return tiles * slices, tiles * (slices / 2) < cap


# ---- work from the launch shape ------------------------------------------------------------------
# Real GPU traces carry no FLOPs or bytes (fixtures/README.md), and when the launching op's Input Dims
# were not recorded (none of the NVIDIA fixtures has them) the work of a kernel can only be inferred
# from its grid. These estimates fix the *relative* size of kernels of one class; the absolute scale per
# class is what calibration (archsim.perf.calibrate) fits, so the constants below cancel after it.
TILE_PATTERN = (
    r"(\d{2,3})x(\d{2,3})"  # cuBLAS/cuDNN names carry the block tile: volta_sgemm_128x64_nn
)
# "(?<!fb)gemm": FBGEMM-GPU's kernels (fbgemm_gpu::permute_indices_weights_kernel, in fixture
# a100_train_shapes) permute sparse features; they multiply no tiles.
TILED_KERNEL_PATTERN = (
    r"(?<!fb)gemm|\d+x\d+|dgrad|wgrad|fprop|implicit|winograd|cutlass|xmma|hmma|conv"
)
# Kernels that GEMM/conv ops launch around their GEMM engine and that move data rather than multiply
# tiles: layout transforms (cudnn::ops::nchwToNhwcKernel), FFT and non-fused Winograd transforms
# (fft2d_r2c_32x32, fft2d_c2r_32x32, cudnn::winograd_nonfused::winogradForwardData4x4,
# cudnn::winograd::generateWinogradTilesKernel), index precomputation
# (cask_cudnn::computeOffsetsKernel), reductions of split-K partials (cublasLt::splitKreduce_kernel,
# cudnn::cnn::reduce_wgrad_nchw_helper), scaling (cudnn::ops::scalePackedTensor_kernel) and bias or
# activation epilogues (cublasLt epilogue::impl::globalKernel). Names as in the V100 and A100
# fixtures; several also match TILED_KERNEL_PATTERN ("32x32", "4x4", "winograd"). Their inferred work
# is element-wise (one pass over the grid's elements), as archsim.trace.flops gives such helpers no
# share of the op's FLOPs when shapes are recorded (MAIN_KERNEL_CLASSES).
# MIOpen's batched_transpose_32x32_half (fixture mi300x_sd35_inference) is the NCHW <-> NHWC layout
# transform around its NHWC implicit-GEMM convolutions: "transpose".
AUXILIARY_KERNEL_PATTERN = (
    r"fft|winograd_nonfused|generatewinogradtiles|nchwtonhwc|nhwctonchw|offsets|reduce|scalepacked"
    r"|epilogue|transpose"
)
ASSUMED_TILE_K = 512  # reduction depth per tile: unknown from a trace; absorbed by calibration
# An engine whose name gives no tile (cuDNN's dgrad_engine<...>, wgrad_alg0_engine<...>): each thread
# accumulates an 8 x 8 register tile, as in cuBLAS's volta_sgemm_128x128 (256 threads, 16,384
# outputs), so the block's tile is square with threads x 64 outputs. A fixed 128 x 128 tile cannot be
# right for the V100 fixture's 64-thread dgrad_engine blocks: 256 fp32 accumulators per thread exceed
# the 255 registers a thread may hold (CUDA C Programming Guide, "Compute Capabilities" table).
OUTPUTS_PER_THREAD = 64
ELEMENTS_PER_THREAD = 4  # PyTorch vectorized_elementwise_kernel<4, ...>: 4 elements per thread
OPERANDS_PER_ELEMENT = 3  # two inputs and one output, each of element size
# Layout transforms and in-place scaling around a GEMM/conv engine (cudnn nchwToNhwcKernel /
# nhwcToNchwKernel, MIOpen batched_transpose_*, cudnn::ops::scalePackedTensor_kernel: y = alpha * y)
# read each element once and write it once: two operands, not an element-wise op's three.
MOVE_KERNEL_PATTERN = r"nchwtonhwc|nhwctonchw|transpose|scalepacked"
MOVE_OPERANDS_PER_ELEMENT = 2
# PyTorch element-wise kernel names carry the operand count (at::detail::Array<char*, N>: outputs +
# inputs) and the elements per thread (vectorized_elementwise_kernel<4, ...>,
# elementwise_kernel<128, 4, ...>: block size, then elements per thread).
# Foreach/optimizer kernels (multi_tensor_apply_kernel): one block per chunk of kChunkSize = 65536
# elements (aten/src/ATen/native/cuda/MultiTensorApply.cuh); TensorListMetadata<depth> names how many
# tensor lists each element touches (all read, one written back).
MULTI_TENSOR_CHUNK_ELEMENTS = 65536
MULTI_TENSOR_PATTERN = r"TensorListMetadata<(\d+)>"
OPERANDS_PATTERN = r"Array<char\*, (\d+)>"
PER_THREAD_PATTERN = r"(?:vectorized_elementwise_kernel<|elementwise_kernel<\d+, )(\d+)"


def tiled_engine(
    ops: pd.DataFrame, grid_known: np.ndarray, flops: np.ndarray | None = None
) -> np.ndarray:
    """GEMM/conv ops that run as tiled GEMM engines: not named as one of the auxiliary kernels
    (AUXILIARY_KERNEL_PATTERN), and either grid-less (a CPU capture names the aten op, which stands
    for its main kernel), or given FLOPs of their own (archsim.trace.ingest shares an op's FLOPs
    among its main kernels only), or named as an engine (TILED_KERNEL_PATTERN)."""
    tiled_class = by_unique(ops["op_class"].astype("string"), lambda u: u.isin(TILED_OP_CLASSES))

    def engine_name(names: pd.Series) -> np.ndarray:
        lowered = names.str.lower()
        engine = lowered.str.contains(TILED_KERNEL_PATTERN, regex=True)
        auxiliary = lowered.str.contains(AUXILIARY_KERNEL_PATTERN, regex=True)
        return (engine & ~auxiliary).to_numpy(dtype=bool)

    def auxiliary_name(names: pd.Series) -> np.ndarray:
        return names.str.lower().str.contains(AUXILIARY_KERNEL_PATTERN, regex=True).to_numpy(bool)

    names = ops["name"].astype("string").fillna("")
    named = by_unique(names, engine_name).astype(bool)
    auxiliary = by_unique(names, auxiliary_name).astype(bool)
    has_flops = np.zeros(len(ops), dtype=bool) if flops is None else np.asarray(flops) > 0
    grid_less = ~np.asarray(grid_known, dtype=bool)
    # cuBLAS's K = 1 GEMM multiplies no K-deep tiles (archsim.perf.gemm_k1).
    engine = tiled_class.astype(bool) & ~k1_gemm(names)
    return engine & (named | ((grid_less | has_flops) & ~auxiliary))


def tile_dims(names: pd.Series, threads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(tile m, tile n) of each kernel: from its name (TILE_PATTERN), else a square tile of
    threads x OUTPUTS_PER_THREAD outputs (128 x 128 for 256 threads)."""

    def number(group: int):
        return lambda u: pd.to_numeric(u.str.extract(TILE_PATTERN)[group], errors="coerce")

    names = names.astype("string").fillna("")
    default = np.sqrt(np.maximum(np.asarray(threads, dtype=float), 1.0) * OUTPUTS_PER_THREAD)
    tile_m = by_unique(names, lambda u: number(0)(u).to_numpy(dtype=float)).astype(float)
    tile_n = by_unique(names, lambda u: number(1)(u).to_numpy(dtype=float)).astype(float)
    return np.where(np.isnan(tile_m), default, tile_m), np.where(np.isnan(tile_n), default, tile_n)


def estimate_work_from_launch(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    threads: np.ndarray,
    grid: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(FLOPs, DRAM bytes) per op inferred from its launch shape and kernel name (see above).

    ``grid`` = (x, y, z) block counts (default: ``blocks`` along x). A tiled engine's grid is read as
    cuBLAS lays it out: x over M tiles, y over N tiles, z over K-slices (split-K) or batch entries,
    each slice an (x tile_m) x (y tile_n) x ASSUMED_TILE_K GEMM. Its DRAM bytes are each operand once
    per slice, (MK + KN + MN) x element size: the panels the blocks of a row or column share are
    re-read from L2, which the kernel model charges separately (T_mem, from the tile's intensity),
    as in NVIDIA's GEMM roofline (Deep Learning Performance Guide, "Matrix Multiplication
    Background": arithmetic intensity = 2MNK / (bytes of A + B + C)). For an implicit-GEMM
    convolution this still counts the im2col view of the input (up to R x S / stride^2 times the
    input's bytes); the math term dominates such kernels."""
    if grid is None:
        grid = (np.asarray(blocks, dtype=float), np.ones(len(blocks)), np.ones(len(blocks)))
    grid_x, grid_y, grid_z = (np.maximum(np.nan_to_num(g, nan=1.0), 1.0) for g in grid)
    size = element_bytes(ops["dtype"])
    names = ops["name"].astype("string").fillna("")
    # GEMM-like work only for kernels whose name says they are tiled GEMM/conv engines; cuDNN's
    # batch-norm kernels (bn_fw_*, bn_bw_*) and layout transforms under a conv op stream like
    # element-wise kernels.
    tiled = tiled_engine(ops, np.ones(len(ops), dtype=bool))

    def number(pattern: str, group: int = 0):
        return lambda u: pd.to_numeric(u.str.extract(pattern)[group], errors="coerce").to_numpy(
            dtype=float
        )

    tile_m, tile_n = tile_dims(names, threads)
    tile_flops = 2.0 * tile_m * tile_n * ASSUMED_TILE_K
    m, n, k = grid_x * tile_m, grid_y * tile_n, ASSUMED_TILE_K
    gemm_bytes = grid_z * (m * k + k * n + m * n) * size
    per_thread = by_unique(names, number(PER_THREAD_PATTERN)).astype(float)
    operands = by_unique(names, number(OPERANDS_PATTERN)).astype(float)
    elements = blocks * threads * np.nan_to_num(per_thread, nan=ELEMENTS_PER_THREAD)
    moves = by_unique(
        names, lambda u: u.str.lower().str.contains(MOVE_KERNEL_PATTERN, regex=True).to_numpy(bool)
    ).astype(bool)
    default_operands = np.where(moves, MOVE_OPERANDS_PER_ELEMENT, OPERANDS_PER_ELEMENT)
    operand_bytes = np.where(np.isnan(operands), default_operands, operands) * size
    flops = np.where(tiled, blocks * tile_flops, elements)
    dram_bytes = np.where(tiled, gemm_bytes, elements * operand_bytes)
    # cuBLAS's K = 1 GEMM: element-wise in its outputs, 2 FLOPs each (archsim.perf.gemm_k1).
    k1 = k1_gemm(names)
    k1_flops, k1_bytes = k1_gemm_work(blocks, threads, ELEMENTS_PER_THREAD, size)
    flops, dram_bytes = np.where(k1, k1_flops, flops), np.where(k1, k1_bytes, dram_bytes)
    depth = by_unique(names, number(MULTI_TENSOR_PATTERN)).astype(float)
    foreach = np.isfinite(depth)
    depth = np.nan_to_num(depth, nan=1.0)
    chunk_elements = blocks * MULTI_TENSOR_CHUNK_ELEMENTS
    flops = np.where(foreach, chunk_elements * depth, flops)
    foreach_bytes = chunk_elements * (depth + 1) * size
    dram_bytes = np.where(foreach, foreach_bytes, dram_bytes)
    return flops, dram_bytes
