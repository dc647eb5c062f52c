"""GPU kernel-time terms, vectorized over an ops table (docs/ACCURACY.md: how well they price kernels).

For an op with FLOPs F, DRAM bytes D, B thread blocks of T threads, on a GPU with N SMs, a resident
blocks per SM, per-SM peak P, DRAM bandwidth W and latency L, and the achieved fractions of
:mod:`archsim.perf.efficiency` (e_math for the kernel family and math unit, e_dram per generation):

    T_math = F / (N P)                          perfect parallelism at peak
    T_comp = T_math * N ceil(B/N) / B / u / e_math
                                                tail and underfill: the busiest SM runs ceil(B/N)
                                                blocks; u = fraction of its math rate that its
                                                min(a, ceil(B/N)) resident blocks can use (16 warps
                                                saturate an SM, 4 for tiled GEMM engines: ILP)
    T_bw   = D / (W e_dram)                     achievable (stream) bandwidth
    T_lat  = R / bw, bw = min(W, C / L(bw))     Little's law on the R bytes LOADED (stores are
                                                posted: archsim.perf.in_flight), C = bytes in
                                                flight (<= R): resident
                                                threads x bytes per thread by kernel family
                                                (archsim.perf.in_flight), L(bw) the latency at the
                                                kernel's own load (archsim.perf.loaded_latency:
                                                L at bw = 0); then L + max(L + T_bw,
                                                T_lat): the first load's round trip and
                                                the last store's (pipeline fill:
                                                archsim.perf.pipeline_fill)
    T_mem  = L2 bytes / L2 bandwidth            on-chip memory system
    T      = max(T_comp, T_bw, T_lat, T_mem)    (archsim.perf.kernel adds floor, launch, calibration)

Traced tiled kernels add to T_comp what runs in series with their math (term ``serial``): the fixed
cost, one prologue round trip per round of workgroups and the last round's stores
(archsim.perf.gemm_latency).

Block-per-row kernels that re-read their row (softmax, layer norm) add the re-reads that miss L1 to
D or the L2 bytes, and T_lat becomes at least their dependent passes' round trips plus the transfer
time (archsim.perf.passes).

Idealizations (the breakdown's steps, Inci et al. 2020): ``dram_bw`` W = inf, ``dram_latency`` L = 0,
``memory_system`` T_mem = 0, ``sm_utilization`` the op on a single SM divided by N: T_comp =
T_math x padding / u1 (u1: the usable fraction of one SM running all B blocks), e_math = 1 and no
T_min.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import (
    element_bytes,
    estimate_launch_shape,
    estimate_work_from_launch,
    tile_dims,
    tiled_engine,
)
from archsim.perf.columns import by_unique
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.conv_channels import channel_padding
from archsim.perf.efficiency import achieved_fractions, generation, is_cdna
from archsim.perf.elementwise_issue_amd import elementwise_issue_seconds
from archsim.perf.gemm_latency import epilogue_store_seconds, k_loop_floor, prologue_seconds
from archsim.perf.in_flight import bytes_in_flight_per_thread, cat_busy_share, loaded_bytes
from archsim.perf.issue_rate import cat_issue_seconds, legacy_copy_issue_seconds
from archsim.perf.issue_rate_amd import cdna_issue_seconds
from archsim.perf.launch_terms import (
    at_achieved,
    launch_terms,
)
from archsim.perf.loaded_latency import dram_load
from archsim.perf.math_units import math_units
from archsim.perf.memory_parallelism import step_floor
from archsim.perf.miopen_bn import miopen_bn_bytes_per_thread, miopen_bn_seconds
from archsim.perf.occupancy import blocks_per_sm
from archsim.perf.passes import add_pass_terms, row_pass_work
from archsim.perf.pipeline_fill import latency_with_fill
from archsim.perf.reduce_issue_amd import output_vectorized_steps_seconds, reduce_issue_seconds
from archsim.perf.sectors import strided_traffic
from archsim.perf.segment_chain import segment_chain_seconds
from archsim.perf.tensile_loop import lds_serial_factor, tile_bytes_in_flight_per_thread
from archsim.perf.tile_padding import accumulator_registers, tile_padding
from archsim.perf.tile_search import search_tiles
from archsim.perf.triton_issue_amd import triton_issue_seconds

IDEALIZATIONS = ("dram_bw", "dram_latency", "memory_system", "sm_utilization")

# An m x n threadblock tile re-reads A and B panels from L2 once per tile: 2*m*n*k FLOPs per (m+n)*k
# elements, i.e. (2mn/(m+n)) / element_bytes FLOPs per L2 byte (_tile_edge); 128 for a 128x128 tile.


def launch_shape(ops: pd.DataFrame) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(blocks, threads per block, registers per thread, shared bytes per block): from the CUDA trace
    when it has a grid, else estimated (archsim.perf.blocks)."""
    grid = (
        np.maximum(_column(ops, "grid_x"), 1)
        * np.maximum(_column(ops, "grid_y"), 1)
        * np.maximum(_column(ops, "grid_z"), 1)
    )
    block = (
        np.maximum(_column(ops, "block_x"), 1)
        * np.maximum(_column(ops, "block_y"), 1)
        * np.maximum(_column(ops, "block_z"), 1)
    )
    known = np.nan_to_num(_column(ops, "grid_x"), nan=0.0) > 0
    est_blocks, est_threads, est_regs, est_smem = estimate_launch_shape(_shape_view(ops))
    return (
        np.where(known, grid, est_blocks),
        np.where(known, block, est_threads),
        np.where(known, _column(ops, "registers_per_thread", np.nan), est_regs),
        np.where(known, _column(ops, "shared_memory_bytes", np.nan), est_smem),
    )


def _name_view(ops: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "name": _strings(ops, "name"),
            "dtype": _strings(ops, "dtype"),
            "op_class": _strings(ops, "op_class"),
        }
    )


def _shape_view(ops: pd.DataFrame) -> pd.DataFrame:
    return pd.DataFrame(
        {
            "bytes_written": np.nan_to_num(_column(ops, "bytes_written"), nan=0.0),
            "dtype": _strings(ops, "dtype"),
            "op_class": _strings(ops, "op_class"),
        }
    )


def kernel_terms(
    ops: pd.DataFrame,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
    config_name: str = "",
) -> dict[str, np.ndarray]:
    """The model's time terms in seconds for every op treated as a kernel (see module docstring):
    ``math`` at peak; ``comp`` and ``bw`` at the achieved fractions of archsim.perf.efficiency for
    the GPU's generation (recognized from its name or ``config_name``).

    GEMM/conv ops captured without a CUDA grid are tried with each tile of GEMM_TILE_CANDIDATES and
    SPLIT_K_TILE, each unsplit and split into K-slices (SPLIT_K_SLICES, usable below one wave of
    blocks), and keep the fastest, as cuBLAS/cuDNN heuristics pick small tiles and split-K or GEMV
    kernels for skinny problems (a batch-1 linear layer streams its weights on every SM):
    archsim.perf.tile_search.
    """
    flops = np.nan_to_num(_column(ops, "flops"), nan=0.0)
    dram_bytes = np.nan_to_num(_column(ops, "bytes_read"), nan=0.0) + np.nan_to_num(
        _column(ops, "bytes_written"), nan=0.0
    )
    blocks, threads, registers, shared = launch_shape(ops)
    gen = generation(gpu, config_name)
    if is_cdna(gen):
        blocks = np.where(_work_item_grid(ops, blocks, threads), blocks / threads, blocks)
    # Kernels from a real GPU trace without the launching op's shapes carry no FLOPs/bytes: infer the
    # missing one(s) from the launch shape (archsim.perf.blocks.estimate_work_from_launch).
    grid = tuple(_column(ops, f"grid_{axis}", np.nan) for axis in "xyz")
    est_flops, est_bytes = estimate_work_from_launch(_name_view(ops), blocks, threads, grid)
    flops = np.where(flops > 0, flops, est_flops)
    dram_bytes = np.where(dram_bytes > 0, dram_bytes, est_bytes)
    # Block-per-row kernels that re-read their row (softmax, layer norm: archsim.perf.passes).
    row_work = row_pass_work(_strings(ops, "name"), _column(ops, "bytes_read"), dram_bytes,
                         (blocks, threads, registers, shared), gpu, gen, idealize,
                         _strings(ops, "dtype"), _strings(ops, "input_dims"),
                         _column(ops, "reduction_loop_steps", np.nan))  # fmt: skip
    if row_work is not None:
        dram_bytes = dram_bytes + row_work.extra_dram
    # Strided copies move whole sectors (archsim.perf.sectors): DRAM's or only the L2's traffic.
    sector_dram, sector_l2 = strided_traffic(ops, is_cdna(gen), gpu.l2_size_mb * 2**20)
    dram_bytes = dram_bytes + sector_dram
    rate, tensor = math_units(ops, gpu)  # TF32 for FP32 operands included (one source)
    # Tensor-core convolutions multiply zero-padded channels too (archsim.perf.conv_channels).
    channel_factor, channel_bytes = channel_padding(ops, tensor)
    flops, dram_bytes = flops * channel_factor, dram_bytes + channel_bytes
    size = element_bytes(_strings(ops, "dtype"))
    grid_known = np.nan_to_num(_column(ops, "grid_x"), nan=0.0) > 0
    tiled = tiled_engine(_name_view(ops), grid_known, _column(ops, "flops"))
    # Traced tiled kernels hold their output tile in registers (archsim.perf.tile_padding): a floor
    # on registers per thread, and so on residency, where the trace recorded none (ROCm).
    registers = accumulator_registers(ops, threads, registers, tiled & grid_known)
    tile_edge = _tile_edge(ops, threads)
    # Achieved, not peak: the library's GEMM fraction on tiled engines (1 under perfect SM
    # utilization, which idealizes away what keeps SMs below peak) and the stream fraction of DRAM.
    # Applied to every candidate of the tile search below, so that it keeps the fastest launch as
    # achieved (ties at peak broken afterwards could pick a slower one: a higher clock was slower).
    attention = (_strings(ops, "op_class") == "attention").to_numpy(dtype=bool)
    math_fraction, dram_fraction = achieved_fractions(tiled, tensor, gen, attention)
    # DRAM latency under the kernel's own load (archsim.perf.loaded_latency), for Little's law.
    load = dram_load(gpu.dram_bw_gbs, gen, idealize)
    if "sm_utilization" in idealize:
        math_fraction = np.ones_like(math_fraction)
    # Traced tiled GEMMs compute whole tiles at ragged edges: their padding from the tile in the
    # kernel's name and the op's dims, confirmed by the traced grid (archsim.perf.tile_padding).
    padding = tile_padding(ops, blocks, tiled)
    # Bytes in flight per thread by kernel family (archsim.perf.in_flight), for the Little's-law term,
    # which counts loads only: stores are posted, priced by bandwidth (archsim.perf.in_flight).
    reads = loaded_bytes(_column(ops, "bytes_read"), _column(ops, "bytes_written"), dram_bytes)
    per_thread = bytes_in_flight_per_thread(_strings(ops, "name"), _strings(ops, "dtype"),
                                            reads, blocks, threads, dram_bytes)  # fmt: skip
    # Cat kernels: only the slices of inputs still in their grid-stride loop have loads in flight
    slots = gpu.sms * blocks_per_sm(threads, registers, shared, gpu)
    resident_share = np.minimum(blocks, slots) / np.maximum(blocks, 1.0)
    per_thread = per_thread * cat_busy_share(_strings(ops, "name"), _strings(ops, "input_dims"),
                                             _column(ops, "grid_y"), resident_share)  # fmt: skip
    if row_work is not None:  # ilpReduce rows shorter than ILP x T load one element per step
        per_thread = np.where(np.isfinite(row_work.bytes_per_thread), row_work.bytes_per_thread,
                              per_thread)  # fmt: skip
    # Tensile GEMMs on CDNA: one K step's A and B tiles in flight (archsim.perf.tensile_loop).
    tile_flight = tile_bytes_in_flight_per_thread(ops, threads, tiled & grid_known, is_cdna(gen))
    per_thread = np.where(np.isfinite(tile_flight), tile_flight, per_thread)
    # MIOpen's batch-norm kernels on CDNA3: the bytes their counted code loads per round trip
    # (archsim.perf.miopen_bn, from gfx940 ISA of MIOpen's OpenCL source).
    bn_flight = miopen_bn_bytes_per_thread(ops, gen)
    per_thread = np.where(np.isfinite(bn_flight), bn_flight, per_thread)
    terms = at_achieved(launch_terms(flops, dram_bytes, blocks, threads, registers, shared, rate, tiled,
                             tile_edge / size, gpu, idealize, padding, per_thread, load, reads),
                      math_fraction, dram_fraction)  # fmt: skip
    # Pipeline fill: the first loads' and the last stores' round trips add to the transfer
    # (archsim.perf.pipeline_fill); in the tile search below too, so that it keeps the fastest.
    terms["lat"] = latency_with_fill(terms["lat"], terms["bw"], dram_bytes, gpu, idealize, reads)
    # ... and their LDS reads in series with the MFMAs where one LDS buffer forces it (same module).
    lds_factor = lds_serial_factor(ops, blocks, blocks_per_sm(threads, registers, shared, gpu),
                                   rate, tiled & grid_known, gpu, is_cdna(gen), idealize)  # fmt: skip
    terms["comp"] = terms["comp"] * lds_factor
    if "memory_system" not in idealize:
        terms["mem"] = terms["mem"] + sector_l2 / (gpu.l2_bw_gbs * 1e9)

    choose = tiled & ~grid_known
    if choose.any():
        rows = np.flatnonzero(choose)  # candidates only where they apply: the search is ~40 passes
        out_elements = np.maximum(np.nan_to_num(_column(ops, "bytes_written"), nan=0.0) / size, 1.0)
        args = [a[rows] for a in (flops, dram_bytes, out_elements, rate, tiled, size)]
        chosen = search_tiles(*args, math_fraction[rows], dram_fraction, gpu, idealize, load)
        for k, v in chosen.items():
            terms[k] = terms[k].copy()
            terms[k][rows] = v
    resident = blocks_per_sm(threads, registers, shared, gpu)
    # CDNA3 normalization statistics kernels: their instructions issue in series with their
    # dependent round trips (the passes' below, the load steps' after) and are a throughput floor
    # of their own (archsim.perf.issue_rate_amd, counted from gfx940 ISA).
    amd_issue = cdna_issue_seconds(ops, (blocks, threads, resident), gpu, gen, idealize)
    # ... and ATen's reduce_kernel (archsim.perf.reduce_issue_amd, counted from gfx940 ISA): its
    # thread loop, block tree and global reduce issue in series with its load steps below.
    amd_issue = amd_issue + reduce_issue_seconds(
        ops, (blocks, threads, resident), gpu, gen, idealize
    )
    if row_work is not None:
        mem_before = terms["mem"]
        add_pass_terms(terms, row_work, gpu, idealize)
        # the passes' chain as add_pass_terms prices it: round trips, transfer and re-reads' L2 time
        chain = row_work.latency + terms["bw"] + (terms["mem"] - mem_before) + amd_issue
        in_series = (row_work.latency > 0) & (amd_issue > 0)
        terms["lat"] = np.where(in_series, np.maximum(terms["lat"], chain), terms["lat"])
    # Scalar-loop reductions with few blocks: dependent load steps (archsim.perf.memory_parallelism).
    steps = step_floor(ops, (blocks, threads, resident), dram_bytes, gpu, idealize)
    if steps is not None:
        terms["lat"] = np.maximum(terms["lat"], np.where(steps > 0, steps + amd_issue, 0.0))
    # ... counted where only some of a block's threads load (archsim.perf.reduce_issue_amd)
    vec_steps = output_vectorized_steps_seconds(
        ops, (blocks, threads, resident), gpu, gen, idealize
    )
    terms["lat"] = np.maximum(terms["lat"], np.where(vec_steps > 0, vec_steps + amd_issue, 0.0))
    # ... and their round trips, LDS round trips and issue in series (archsim.perf.miopen_bn).
    blocks_resident = (blocks, threads, resident)
    terms["lat"] = np.maximum(
        terms["lat"], miopen_bn_seconds(ops, blocks_resident, gpu, gen, idealize)
    )
    # FBGEMM's warp-per-segment kernels: dependent offset loads a warp (archsim.perf.segment_chain).
    chain = segment_chain_seconds(_strings(ops, "name"), blocks, resident, gpu, idealize)
    terms["lat"] = np.maximum(terms["lat"], chain)
    terms["comp"] = np.maximum(terms["comp"], amd_issue)
    # Tiled GEMMs: one prefetched K step per load round trip (archsim.perf.gemm_latency).
    k_chain = k_loop_floor(ops, blocks, resident, tiled, gpu, idealize)
    if k_chain is not None:
        terms["lat"] = np.maximum(terms["lat"], k_chain)
    # Legacy strided copies and Shape.cu's cat kernels: their per-element index arithmetic issues
    # at the SM's published rates (archsim.perf.issue_rate), a throughput bound like the math's.
    issue = legacy_copy_issue_seconds(ops, blocks, threads, gpu, gen, idealize)
    issue = np.maximum(issue, cat_issue_seconds(ops, blocks, gpu, gen, idealize))
    # ... and on CDNA3, Inductor's Welford layer norms and GELU epilogues, counted from Triton's
    # gfx942 code (archsim.perf.triton_issue_amd).
    issue = np.maximum(issue, triton_issue_seconds(ops, blocks, threads, gpu, gen, idealize))
    terms["comp"] = np.maximum(terms["comp"], issue)
    # ROCm PyTorch's element-wise loops: their offsets' divmods and bf16 conversions issue at
    # CDNA's rates (archsim.perf.elementwise_issue_amd, counted from gfx940/gfx90a ISA).
    terms["comp"] = np.maximum(
        terms["comp"],
        elementwise_issue_seconds(ops, (blocks, threads, resident), gpu, gen, idealize),
    )
    # Traced tiled kernels: the math is in series with the kernel's fixed cost and each round's
    # prologue round trip (archsim.perf.gemm_latency.prologue_seconds), the ``serial`` term.
    terms["serial"] = prologue_seconds(blocks, resident, tiled & grid_known, gpu, idealize)
    # ... and the last round's stores, where each workgroup computes one tile (same module).
    terms["serial"] = terms["serial"] + epilogue_store_seconds(
        ops, blocks, resident, tiled & grid_known, terms["comp"], gpu, dram_fraction, idealize
    )
    return terms


# ROCm traces record a kernel's grid as the HIP launch call gave it. hipLaunchKernel (PyTorch's
# <<<...>>> kernels, names "void at::native::...") and hipModuleLaunchKernel (Triton) take blocks;
# hipExtModuleLaunchKernel, through which rocBLAS/Tensile (Cijk_...) and MIOpen (igemm_...,
# SubTensorOp...) may launch their code objects, takes the GLOBAL work size in work-items (HIP API
# reference, hipExtModuleLaunchKernel: "globalWorkSizeX ... work items"). The fixtures hold both
# readings for the same libraries: in mi300x_sd35_inference, Cijk_..._MT320x224x64 with grid 75,776
# x block 256 and 9.69e10 FLOPs is 296 workgroups (as 75,776 tiles of 320 x 224 outputs its depth
# would be 9, less than one 64-deep tile step), while Cijk_..._MT64x64x128 with grid 256 and 8.6e9
# FLOPs is 256 workgroups (as one, a 64 x 64 tile 1M deep). So a grid is read as work-items only
# for names with no C++ scope whose grid is a whole number of blocks, and, when the kernel has
# FLOPs and a tile in its name (MT64x64x128, bt128x256x32), only if read as blocks its depth would
# be shallower than one tile step. Without FLOPs (no shapes; mi210_gpu_only's MIOpen igemm kernels)
# the work-item reading is taken: it is the documented one for module launches.
_MODULE_KERNEL_NAME = r"^(?!void |triton)[^:<(]*$"
_TILE_MNK = r"(?:MT|bt)(\d+)x(\d+)x(\d+)"


def _work_item_grid(ops: pd.DataFrame, blocks: np.ndarray, threads: np.ndarray) -> np.ndarray:
    """ROCm kernels whose traced grid counts work-items, not blocks (see _MODULE_KERNEL_NAME).

    Only for traces ingested before ops carried ``launch_api``: ingest now converts the grids of
    ``hipExtModuleLaunchKernel`` launches to blocks itself (archsim.trace.kineto.grid_in_blocks), so
    a kernel whose launch is known is already in blocks and must not be divided again."""
    names = _strings(ops, "name")
    launched_by_known_api = _strings(ops, "launch_api").to_numpy(dtype=object) != ""
    module = by_unique(
        names, lambda u: u.str.match(_MODULE_KERNEL_NAME) & (u.str.strip() != "")
    ).astype(bool)
    grid_x = np.nan_to_num(_column(ops, "grid_x"), nan=0.0)
    whole = (grid_x >= threads) & (np.mod(grid_x, np.maximum(threads, 1)) == 0)
    kernel = (_strings(ops, "kind") == "kernel").to_numpy(dtype=bool)
    candidate = module & whole & kernel & (threads > 1) & ~launched_by_known_api
    tile = names.str.extract(_TILE_MNK).astype(float).to_numpy()  # m, n, k (NaN: no tile)
    flops = np.nan_to_num(_column(ops, "flops"), nan=0.0)
    with np.errstate(divide="ignore", invalid="ignore"):
        depth_as_blocks = flops / (2.0 * blocks * tile[:, 0] * tile[:, 1])
    shallow = np.nan_to_num(depth_as_blocks, nan=np.inf) < np.nan_to_num(tile[:, 2], nan=0.0)
    return candidate & ((flops <= 0) | shallow)


# cuBLAS's Blackwell 2-CTA kernels name their CTA tile, K tile x stages and cluster:
# nvjet_sm100_tst_128x256_64x6_2x2_2cta_h_bz_NNT (archsim.perf.blocks.BLACKWELL_CLUSTER_TILE: a B200
# capture's 512 blocks of 4096^2 BF16 outputs are 128x256 CTA tiles, 4 to a 2x2 cluster)
_NVJET_2CTA_CLUSTER = r"nvjet\w*?_\d+x\d+_\d+x\d+_(\d+)x(\d+)_2cta"


def _tile_edge(ops: pd.DataFrame, threads: np.ndarray) -> np.ndarray:
    """Tile edge for L2 reuse: harmonic tile (2mn/(m+n)) of the kernel's tile (archsim.perf.blocks.
    tile_dims: from a name like 128x64, else threads x 64 outputs, 128 x 128 for 256 threads); for a
    2-CTA cluster kernel, of its cluster's tile, whose A and B panels L2 serves once (tcgen05
    cta_group::2 and TMA multicast: archsim.perf.blocks.BLACKWELL_CLUSTER_TILE)."""
    names = _strings(ops, "name")
    m, n = tile_dims(names, threads)
    cluster = by_unique(
        names, lambda u: u.str.extract(_NVJET_2CTA_CLUSTER).astype(float).to_numpy()
    )
    m = m * np.nan_to_num(cluster[:, 0], nan=1.0)
    n = n * np.nan_to_num(cluster[:, 1], nan=1.0)
    return 2 * m * n / (m + n)
