"""The tile search of archsim.perf.terms for GEMM/conv ops captured without a CUDA grid: each tile of
GEMM_TILE_CANDIDATES, LARGE_GEMM_TILE and SPLIT_K_TILE, unsplit and split into K-slices
(SPLIT_K_SLICES, usable below one wave of blocks), priced by archsim.perf.launch_terms at the
achieved fractions with the pipeline fill; each op keeps the fastest usable candidate, as cuBLAS and
cuDNN heuristics pick small tiles and split-K or GEMV kernels for skinny problems.

Split out of archsim.perf.terms (one job: choosing a launch for grid-less ops). The search runs each
tile's slice counts in one pass over a (slices x ops) table: every step is elementwise, so each
candidate's numbers are those a pass of its own gives, at a twelfth of the passes' fixed cost (the
simulator and the property tests price small tables call after call).
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import (
    GEMM_TILE_CANDIDATES,
    LARGE_GEMM_TILE,
    SPLIT_K_SLICES,
    SPLIT_K_TILE,
    split_k_blocks,
)
from archsim.perf.launch_terms import at_achieved, body_of, launch_terms
from archsim.perf.loaded_latency import DramLoad
from archsim.perf.occupancy import blocks_per_sm
from archsim.perf.pipeline_fill import latency_with_fill


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
    n_rows, n_slices = len(flops), len(slice_counts)
    stacked = [np.tile(a, n_slices) for a in args]
    fractions = np.tile(math_fraction, n_slices)
    slices = np.repeat(slice_counts, n_rows)
    chosen = np.zeros(n_rows, dtype=np.intp)
    best = np.full(n_rows, np.inf)
    per_tile: list[dict[str, np.ndarray]] = []
    for tile in candidate_tiles():
        candidate, usable = tile_terms(*stacked, tile, slices, gpu, idealize, load)
        candidate = at_achieved(candidate, fractions, dram_fraction)
        candidate["lat"] = latency_with_fill(candidate["lat"], candidate["bw"], stacked[1],
                                             gpu, idealize)  # fmt: skip
        body = body_of(candidate).reshape(n_slices, n_rows)
        usable = usable.reshape(n_slices, n_rows)
        for j in range(n_slices):
            better = usable[j] & (body[j] < best)
            best = np.where(better, body[j], best)
            chosen = np.where(better, len(per_tile) * n_slices + j, chosen)
        per_tile.append({k: v.reshape(n_slices, n_rows) for k, v in candidate.items()})
    columns = np.arange(n_rows)
    return {k: np.concatenate([t[k] for t in per_tile])[chosen, columns] for k in per_tile[0]}


def candidate_tiles() -> list[tuple[int, int, int, float, float]]:
    """(tile m, tile n, threads, registers, shared bytes) of every tile tried for grid-less ops."""
    square = [
        (edge, edge, threads, regs, smem) for edge, threads, regs, smem in GEMM_TILE_CANDIDATES
    ]
    return [*square, LARGE_GEMM_TILE, SPLIT_K_TILE]


def tile_terms(
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    out_elements: np.ndarray,
    rate: np.ndarray,
    tiled: np.ndarray,
    size: np.ndarray,
    tile: tuple[int, int, int, float, float],
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
    tile_m, tile_n, threads, registers, shared = tile
    full = np.ones(len(flops))
    wave = gpu.sms * blocks_per_sm(full * threads, full * registers, full * shared, gpu)
    blocks, usable = split_k_blocks(
        out_elements, flops, dram_bytes, slices, wave, tile_m * tile_n, threads
    )
    usable = usable | (slices == 1)
    edge = 2.0 * tile_m * tile_n / (tile_m + tile_n)
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
