"""Padded work of traced GEMM kernels: a tiled kernel computes whole tiles, ragged or not.

A GEMM library cuts the M x N output into tile_m x tile_n tiles and gives each workgroup (thread
block) one tile, or one K-slice of one (split-K). At the ragged edge the matrix units still run the
whole tile: the out-of-range rows are masked on load and store, not skipped (NVIDIA, "Matrix
Multiplication Background User's Guide", section "Tile Quantization": a dimension one element
past a multiple of the tile adds a whole row of tiles, and those tiles cost as much as full
ones; hipBLASLt/Tensile and CUTLASS launch ceil(M / tile_m) x ceil(N / tile_n) tiles the same way). So
the busiest SM's work is its blocks times the tile's work, and the op's FLOPs undercount it by

    padding = tiles x tile_m x tile_n / (batch x M x N),  tiles = batch x ceil(M/a) x ceil(N/b)

for the assignment (a, b) of the kernel's tile to (M, N) that the traced grid confirms: its block
count is a whole multiple of the tiles (the multiple is the split-K count, which the grid cannot
tell apart from padding otherwise). hipBLASLt's kernels compute C^T = B^T A^T for PyTorch's
row-major tensors, so the tile's first edge may lie along either output axis; both are tried. Where
neither assignment matches the grid (persistent or stream-K kernels, swizzled grids), or the
launching op's output dims are not recorded, the padding is 1: the op's own FLOPs.

Worked example (fixture mi300x_sd35_inference, hipBLASLt ``..._MT320x224x64_...``, grid 296): an
aten::mm of [8192, 2432] x [2432, 2432]: 224 along M and 320 along N gives ceil(8192/224) = 37 x
ceil(2432/320) = 8 = 296 tiles = the grid, so padding = 296 x 320 x 224 / (8192 x 2432) = 1.065.

Pure functions over an ops table. The factor is meant for the ``padding`` argument of
``archsim.perf.launch_terms.launch_terms`` (compute term x padding), which the grid-less candidate tiles of
``archsim.perf.tile_search.tile_terms`` already use; traced launches pass 1 there today.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from archsim.perf.columns import column, parsed_input_dims, strings

# Launching op -> (index of A, index of B, B is stored [N, K] as in linear). aten::addmm(bias, A, B)
# and aten::baddbmm(C, A, B) take their matrices second and third.
GEMM_OPERANDS: dict[str, tuple[int, int, bool]] = {
    "aten::mm": (0, 1, False),
    "aten::matmul": (0, 1, False),
    "aten::bmm": (0, 1, False),
    "aten::addmm": (1, 2, False),
    "aten::baddbmm": (1, 2, False),
    "aten::linear": (0, 1, True),
}
# Output tile of a kernel from its name: hipBLASLt/Tensile MT<m>x<n>x<depth>, MIOpen bt<m>x<n>x<k>,
# cuBLAS sm90 "tilesize<m>x<n>x<k>", cuBLAS/CUTLASS "_<m>x<n>_" (volta_sgemm_128x64_nn,
# cutlass_80_tensorop_..._256x128_32x3_...).
TILE_NAME_PATTERN = r"(?:MT|bt|tilesize)(\d+)x(\d+)x\d+|_(\d{2,3})x(\d{2,3})_"


def tile_of(name: str) -> tuple[int, int] | None:
    """(tile m, tile n) named by a GEMM kernel, or None."""
    match = re.search(TILE_NAME_PATTERN, name)
    if match is None:
        return None
    groups = [g for g in match.groups() if g is not None]
    return int(groups[0]), int(groups[1])


def gemm_output_dims(launch_op: str, input_dims: str) -> tuple[int, int, int] | None:
    """(batch, M, N) of the output of a GEMM op from its recorded Input Dims, or None."""
    operands = GEMM_OPERANDS.get(launch_op)
    if operands is None or not input_dims:
        return None
    dims = parsed_input_dims(input_dims)
    a_idx, b_idx, b_is_nk = operands
    if len(dims) <= max(a_idx, b_idx):
        return None
    a, b = dims[a_idx], dims[b_idx]
    shapes_ok = all(
        isinstance(s, list) and len(s) >= 2 and all(isinstance(x, int) and x > 0 for x in s)
        for s in (a, b)
    )
    if not shapes_ok:
        return None
    if b_is_nk:  # linear: x [..., K] times w [N, K]^T
        return 1, math.prod(a[:-1]), b[0]
    batch = max(math.prod(a[:-2]), math.prod(b[:-2]))
    return batch, a[-2], b[-1]


def padding_factor(batch: int, m: int, n: int, tile: tuple[int, int], blocks: float) -> float:
    """Work of the launched tiles over the op's outputs (>= 1), for the tile-to-axis assignment
    whose tile count divides ``blocks`` (the smaller if both do); 1 if none does."""
    found = []
    for a, b in (tile, tile[::-1]):
        tiles = batch * math.ceil(m / a) * math.ceil(n / b)
        if blocks >= tiles and blocks % tiles == 0:
            found.append(tiles * a * b / (batch * m * n))
    return min(found) if found else 1.0


def tile_padding(ops: pd.DataFrame, blocks: np.ndarray, tiled: np.ndarray) -> np.ndarray:
    """Padding factor (>= 1) of each op: for tiled GEMM kernels with a traced grid, a tile in their
    name and a GEMM launching op with recorded dims (see module docstring); 1 for every other op."""
    out = np.ones(len(ops))
    blocks = np.nan_to_num(np.asarray(blocks, dtype=float), nan=0.0)
    traced = np.nan_to_num(column(ops, "grid_x"), nan=0.0) > 0
    wanted = np.asarray(tiled, dtype=bool) & traced & (blocks > 0)
    if not wanted.any():
        return out
    names = strings(ops, "name").to_numpy(dtype=object)
    launch = strings(ops, "launch_op").to_numpy(dtype=object)
    dims = strings(ops, "input_dims").to_numpy(dtype=object)
    cache: dict[tuple, float] = {}
    for i in np.flatnonzero(wanted):
        key = (names[i], launch[i], dims[i], blocks[i])
        if key not in cache:
            tile = tile_of(names[i])
            output = gemm_output_dims(launch[i], dims[i]) if tile is not None else None
            cache[key] = 1.0 if output is None else padding_factor(*output, tile, blocks[i])
        out[i] = cache[key]
    return out


def accumulator_registers(
    ops: pd.DataFrame, threads: np.ndarray, registers: np.ndarray, wanted: np.ndarray
) -> np.ndarray:
    """Registers per thread, with a floor where the trace recorded none (ROCm traces carry no
    register counts): a tiled kernel keeps its whole m x n output tile in fp32 accumulators for
    its K loop, m x n / threads registers per thread at least (MFMA's C/D operands are VGPRs or
    AccVGPRs, AMD "CDNA3 Instruction Set Architecture", matrix fused-multiply-add section; HMMA's
    are registers too), so a 256 x 224 tile of 256 threads holds 224 and two fit a CDNA3 CU's
    512 per lane. Elsewhere, and for names without a tile, ``registers`` unchanged."""
    registers = np.asarray(registers, dtype=float)
    unknown = np.asarray(wanted, dtype=bool) & ~(np.nan_to_num(registers, nan=0.0) > 0)
    if not unknown.any():
        return registers
    names = strings(ops, "name").to_numpy(dtype=object)
    tiles: dict[str, float] = {}
    out = registers.copy()
    for i in np.flatnonzero(unknown):
        if names[i] not in tiles:
            tile = tile_of(names[i])
            tiles[names[i]] = math.nan if tile is None else float(tile[0] * tile[1])
        if np.isfinite(tiles[names[i]]):
            out[i] = math.ceil(tiles[names[i]] / max(float(threads[i]), 1.0))
    return out


__all__ = [
    "accumulator_registers",
    "gemm_output_dims",
    "padding_factor",
    "tile_of",
    "tile_padding",
]
