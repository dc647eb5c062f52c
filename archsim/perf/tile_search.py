"""The tile search of archsim.perf.terms for GEMM/conv ops captured without a CUDA grid: each tile of
GEMM_TILE_CANDIDATES, LARGE_GEMM_TILE and SPLIT_K_TILE (on Blackwell also BLACKWELL_CLUSTER_TILE,
whose operands L2 serves once per thread-block cluster), unsplit and split into K-slices
(SPLIT_K_SLICES, usable below one wave of blocks), priced by archsim.perf.launch_terms at the
achieved fractions with the pipeline fill; each op keeps the fastest usable candidate, as cuBLAS and
cuDNN heuristics pick small tiles and split-K or GEMV kernels for skinny problems.

Split out of archsim.perf.terms (one job: choosing a launch for grid-less ops). The search runs each
tile's slice counts in one pass over a (slices x ops) table: every step is elementwise, so each
candidate's numbers are those a pass of its own gives, at a twelfth of the passes' fixed cost on a
small table (the simulator and the property tests price small tables call after call).
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import (
    BLACKWELL_CLUSTER_TILE,
    GEMM_TILE_CANDIDATES,
    LARGE_GEMM_TILE,
    SPLIT_K_SLICES,
    SPLIT_K_TILE,
    split_k_blocks,
)
from archsim.perf.efficiency import generation
from archsim.perf.launch_terms import at_achieved, body_of, launch_terms
from archsim.perf.loaded_latency import DramLoad
from archsim.perf.occupancy import blocks_per_sm
from archsim.perf.pipeline_fill import latency_with_fill

# Elements per pass of the search: measured on this machine (20,000 grid-less ops on the A100
# preset), one slice count per pass took 0.09-0.10 s of CPU and all twelve stacked 0.18-0.22 s
# (0.12 s in passes of one stacked); on one op, twelve per pass took the search from 7.8 to 1.1 ms.
_PASS_ELEMENTS = 4096


def search_tiles(
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    out_elements: np.ndarray,
    rate: np.ndarray,
    tiled: np.ndarray,
    size: np.ndarray,
    math_fraction: np.ndarray,
    dram_fraction: float,
    gpu: GpuConfig,
    idealize: frozenset[str],
    load: DramLoad | None,
) -> dict[str, np.ndarray]:
    """The terms of each op's fastest usable candidate (achieved, with the fill), tried in the order
    of candidate_tiles x (1, *SPLIT_K_SLICES): the first strictly faster one is kept, and an op no
    candidate is usable for keeps the first candidate's terms."""
    args = (flops, dram_bytes, out_elements, rate, tiled, size)
    slice_counts = np.array((1, *SPLIT_K_SLICES), dtype=float)
    n_rows = len(flops)
    # as many slice counts per pass as keep it within _PASS_ELEMENTS (all 12 for a few ops, one for
    # thousands: past that, stacking costs more in memory traffic than the passes it saves)
    per_pass = max(1, _PASS_ELEMENTS // n_rows)
    if per_pass == 1:
        return _one_pass_per_candidate(args, math_fraction, dram_fraction, gpu, idealize, load)
    groups = [slice_counts[i : i + per_pass] for i in range(0, len(slice_counts), per_pass)]
    chosen = np.zeros(n_rows, dtype=np.intp)
    best = np.full(n_rows, np.inf)
    tried: list[dict[str, np.ndarray]] = []  # each pass's terms, (slice counts, rows)
    first = 0  # candidates tried before this pass
    for tile in candidate_tiles(gpu):
        for group in groups:
            n_group = len(group)
            stacked = tuple(np.tile(a, n_group) for a in args)
            slices = np.repeat(group, n_rows)
            candidate, usable = _achieved_candidate(
                stacked, tile, slices, np.tile(math_fraction, n_group), dram_fraction, gpu,
                idealize, load,
            )  # fmt: skip
            body = body_of(candidate).reshape(n_group, n_rows)
            usable = usable.reshape(n_group, n_rows)
            for j in range(n_group):
                better = usable[j] & (body[j] < best)
                best = np.where(better, body[j], best)
                chosen = np.where(better, first + j, chosen)
            first += n_group
            tried.append({k: v.reshape(n_group, n_rows) for k, v in candidate.items()})
    columns = np.arange(n_rows)
    return {k: np.concatenate([t[k] for t in tried])[chosen, columns] for k in tried[0]}


def _one_pass_per_candidate(
    args: tuple[np.ndarray, ...],
    math_fraction: np.ndarray,
    dram_fraction: float,
    gpu: GpuConfig,
    idealize: frozenset[str],
    load: DramLoad | None,
) -> dict[str, np.ndarray]:
    """search_tiles for thousands of ops: a pass per candidate, the best terms kept as it goes."""
    best_terms: dict[str, np.ndarray] = {}
    best = np.full(len(args[0]), np.inf)
    for tile in candidate_tiles(gpu):
        for slices in (1, *SPLIT_K_SLICES):
            slice_column = np.full(len(args[0]), float(slices))
            candidate, usable = _achieved_candidate(
                args, tile, slice_column, math_fraction, dram_fraction, gpu, idealize, load
            )
            body = body_of(candidate)
            better = usable & (body < best)
            best = np.where(better, body, best)
            best_terms = {
                k: np.where(better, v, best_terms.get(k, v)) for k, v in candidate.items()
            }
    return best_terms


Tile = tuple[int, int, int, float, float] | tuple[int, int, int, float, float, int, int]


def _achieved_candidate(
    args: tuple[np.ndarray, ...],
    tile: Tile,
    slices: np.ndarray,
    math_fraction: np.ndarray,
    dram_fraction: float,
    gpu: GpuConfig,
    idealize: frozenset[str],
    load: DramLoad | None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """One candidate's terms at the achieved fractions, with the pipeline fill (both search paths)."""
    candidate, usable = tile_terms(*args, tile, slices, gpu, idealize, load)
    candidate = at_achieved(candidate, math_fraction, dram_fraction)
    candidate["lat"] = latency_with_fill(candidate["lat"], candidate["bw"], args[1], gpu, idealize)
    return candidate, usable


def candidate_tiles(gpu: GpuConfig | None = None) -> list[Tile]:
    """(tile m, tile n, threads, registers, shared bytes[, cluster tile m, n]) of every tile tried
    for grid-less ops; on Blackwell also cuBLAS's 2-CTA cluster kernel (archsim.perf.blocks.
    BLACKWELL_CLUSTER_TILE), whose operands L2 serves once per cluster."""
    square = [
        (edge, edge, threads, regs, smem) for edge, threads, regs, smem in GEMM_TILE_CANDIDATES
    ]
    tiles: list[Tile] = [*square, LARGE_GEMM_TILE, SPLIT_K_TILE]
    if gpu is not None and generation(gpu) == "blackwell":
        tiles.append(BLACKWELL_CLUSTER_TILE)
    return tiles


def tile_terms(
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    out_elements: np.ndarray,
    rate: np.ndarray,
    tiled: np.ndarray,
    size: np.ndarray,
    tile: Tile,
    slices: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str],
    load: DramLoad | None = None,
) -> tuple[dict[str, np.ndarray], np.ndarray]:
    """Terms of a launch of ``tile`` output tiles, each split into ``slices`` K-slices (per row), and
    where that split is usable (archsim.perf.blocks.split_k_blocks; always for one slice).

    Approximation: the fp32 partial sums of K-slices (2 x slices x outputs x 4 B, written and read
    back by cuBLAS's splitKreduce_kernel) are not charged. Splits happen only below one wave of
    blocks, so the partials are at most 2 x wave x tile outputs x 4 B, most of it L2-resident, and
    for GEMV-like shapes the slices stand for the finer column tiles of a GEMV kernel, which need no
    partials at all. (Charging them as DRAM traffic made the fastest split jump between slice counts
    from one batch size to the next, and the predicted time with it.)
    """
    tile_m, tile_n, threads, registers, shared = tile[:5]
    # L2 serves each operand panel once per cluster tile where the kernel multicasts (tile[5:]),
    # else once per CTA tile
    reuse_m, reuse_n = tile[5:] if len(tile) == 7 else (tile_m, tile_n)
    full = np.ones(len(flops))
    wave = gpu.sms * blocks_per_sm(full * threads, full * registers, full * shared, gpu)
    blocks, usable = split_k_blocks(
        out_elements, flops, dram_bytes, slices, wave, tile_m * tile_n, threads
    )
    usable = usable | (slices == 1)
    edge = 2.0 * reuse_m * reuse_n / (reuse_m + reuse_n)
    # Ragged tiles: beyond one tile the last one is padded to full size. A single partial tile is not
    # (GEMV-like shapes run GEMV kernels, whose blocks share out the rows), which keeps the padded
    # work continuous at one tile: T outputs in 1 tile, T + 1 in 2 tiles of the same per-block work.
    tile_outputs = float(tile_m * tile_n)
    padded = np.where(out_elements > tile_outputs, np.ceil(out_elements / tile_outputs) * tile_outputs,
                      out_elements)  # fmt: skip
    terms = launch_terms(flops, dram_bytes, blocks, full * threads, full * registers,
                   full * shared, rate, tiled, edge / size, gpu, idealize,
                   padded / out_elements, load=load)  # fmt: skip
    return terms, usable
