"""Bytes a strided copy really moves: whole memory sectors for the elements a warp touches.

A copy kernel's threads walk its output in order (PyTorch's TensorIterator walks a copy in the
destination's memory order, CatArrayBatchedCopy the contiguous output's), so lane i of a warp
reads output element i of the warp's run, at the source's strides. The memory system moves whole
sectors: where a warp's addresses fall in few sectors the access is coalesced, where each lane
hits its own sector the access moves a sector per element for a few useful bytes (CUDA C++ Best
Practices Guide, "Coalesced Access to Global Memory", strided-access figure: sectors of 32 B since
Volta). AMD: a wavefront of 64 lanes, whose vector L1 (TCP) requests from the L2 are counted in
64-B and 128-B units (ROCm Compute Profiler documentation, "Vector L1 cache", vL1D-L2
transactions); the smaller, 64 B, is taken as the unit a lane's scattered load moves (a lower
bound where a part moves 128-B lines).

:func:`sector_factor` is the ratio of the sectors a strided read touches to those a contiguous
read of the same elements touches, from the op's ``Input Dims`` and ``Input Strides`` (>= 1:
contiguous is exactly 1, and the useful bytes are never undercut). Where the sectors go:

- The sectors one warp wastes hold the neighbours that later warps need (the next rows along the
  source's contiguous dim). If the bytes moved between two consecutive uses of a sector fit the
  L2 (its LRU stack distance: :func:`reuse_gap_bytes`), the L2 serves the reuse: DRAM moves the
  useful bytes once, while the L2 serves every sector request (the kernel's L2 traffic is the
  factor times its reads: :func:`strided_traffic`).
- Otherwise each reuse misses the L2 as well, and DRAM moves the sectors.

Elementwise kernels read the same way (:func:`elementwise_read_sectors`): TensorIterator walks
the output's order (arg 0's strides decide, ``reorder_dimensions``), so an operand of another
layout (a channels-last input of an add into an NCHW tensor, a broadcast bias transposed against
the walk) is read across its strides, each lane in its own sector. MI300X SD3.5's
``add_`` of a [1,64,256,256] bf16 tensor with a channels-last one: lanes 128 B apart, one 64-B
line each (32x), its 8.4 MB read moving 268 MB of lines, reused 4 MB later (the next channel):
the L2 serves them. H100 TimeSformer's add of a [1,128,768] bias broadcast over 196 with its
innermost dim at stride 128: 16x, reused every 24.6 KB. Measured against model (fixture
kernels): H100 86 us vs 35 -> 67; MI300X 28 us vs 8.3 -> 9.4 and 76 vs 14.6 -> 17.7: the L2 at
its whole-line rate still under-prices one-line requests (not modelled, as for copies).

Measured on TraceLens' H100 TimeSformer (bf16 legacy ``elementwise_kernel`` copies): a transpose
whose innermost 8 elements stride 4.6 KB (factor 4) takes 51 us per 38.5 MB, the same as the
permuted copies with a contiguous inner row (52-59 us), so DRAM did not move its 4x sectors (that
reading gives 70 us); it fits the L2 reading. Not modelled: the L2's rate for one-sector requests
(its 9.8 TB/s is measured with whole lines), which leaves the 16x transposes at 67 us against 154
measured; MI300X's L2 is 4 MB per XCD, its blocks spread over 8, and a miss there is served by
the Infinity Cache, which the one-level schema prices as HBM.
"""

from __future__ import annotations

import json
import math
from functools import lru_cache

import numpy as np
import pandas as pd

from archsim.perf.blocks import element_bytes
from archsim.perf.columns import column, strings
from archsim.trace.flops.args import TENSOR_TYPES

NVIDIA_SECTOR_BYTES, NVIDIA_WARP = 32, 32  # CUDA C++ Best Practices Guide (sectors since Volta)
AMD_SECTOR_BYTES, AMD_WAVEFRONT = 64, 64  # ROCm Compute Profiler docs (vL1D-L2 64-B requests)
SAMPLED_WARPS = 64  # warps read at evenly spaced places of the output (the pattern repeats)

# Ops whose source is arg 1 and destination arg 0 (TensorIterator walks the destination's order).
_COPY_INTO = ("aten::copy_", "aten::_copy_from", "aten::_copy_from_and_resize")
# Ops that read arg 0 (a tensor, or for cat/stack a tensor list) into a new contiguous output.
_COPY_OUT = ("aten::clone", "aten::contiguous", "aten::_to_copy", "aten::to", "aten::cat",
             "aten::_cat", "aten::stack")  # fmt: skip


def warp_sectors(
    shape: tuple[int, ...],
    strides: tuple[int, ...],
    itemsize: int,
    sector_bytes: int = NVIDIA_SECTOR_BYTES,
    lanes: int = NVIDIA_WARP,
) -> tuple[int, int]:
    """(sectors touched by the sampled warps reading at ``strides``, sectors they touch reading
    the same elements contiguously): lane i of a warp reads element i of a row-major walk of
    ``shape``; each warp's distinct sectors counted, the source assumed sector-aligned."""
    numel = math.prod(shape)
    if numel <= 0 or itemsize <= 0:
        return 0, 0
    warps = -(-numel // lanes)
    picks = np.unique(np.linspace(0, warps - 1, min(warps, SAMPLED_WARPS)).astype(np.int64))
    flat = (picks[:, None] * lanes + np.arange(lanes)[None, :]).ravel()
    flat = flat[flat < numel]
    offset = np.zeros(len(flat), dtype=np.int64)
    rest = flat.copy()
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        offset += (rest % size) * stride
        rest //= size
    warp = flat // lanes
    strided = len(np.unique(np.stack([warp, offset * itemsize // sector_bytes]), axis=1)[0])
    contiguous = len(np.unique(np.stack([warp, flat * itemsize // sector_bytes]), axis=1)[0])
    return strided, contiguous


def sector_factor(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
                  sector_bytes: int = NVIDIA_SECTOR_BYTES, lanes: int = NVIDIA_WARP) -> float:  # fmt: skip
    """Sectors moved over the sectors a contiguous read moves (>= 1; 1 when contiguous)."""
    strided, contiguous = warp_sectors(shape, strides, itemsize, sector_bytes, lanes)
    return max(1.0, strided / contiguous) if contiguous else 1.0


def _walk_order(dst_strides: list[int], dims: list[int]) -> list[int]:
    """Dims in the destination's memory order, outermost first (TensorIterator.reorder_dimensions
    sorts by the output's strides): stable by descending stride, size-1 dims kept in place."""
    return sorted(range(len(dims)), key=lambda d: -abs(dst_strides[d]) if dims[d] > 1 else 0)


@lru_cache(maxsize=4096)
def copy_read_sectors(
    launch_op: str, dims_json: str, strides_json: str, types_json: str, itemsize: int,
    sector_bytes: int, lanes: int,
) -> tuple[float, float]:  # fmt: skip
    """(sector factor of the op's reads, reuse bytes of its worst read) for a copy op's recorded
    ``Input Dims`` / ``Input Strides`` / ``Input type`` JSON (``itemsize``: the element size where
    the source's type is not recorded, a cat's tensor list); (1, 0) where absent, not a copy, or
    malformed."""
    try:
        dims, strides = json.loads(dims_json), json.loads(strides_json)
        types = json.loads(types_json) if types_json else []
    except (ValueError, TypeError):
        return 1.0, 0.0
    source = 1 if launch_op in _COPY_INTO else 0
    if isinstance(types, list) and len(types) > source and types[source] in TENSOR_TYPES:
        itemsize = TENSOR_TYPES[types[source]][1]
    if not isinstance(dims, list) or not isinstance(strides, list) or not dims or not strides:
        return 1.0, 0.0
    reads: list[tuple[list, list]] = []
    if launch_op in _COPY_INTO and len(dims) > 1 and len(strides) > 1:
        order_of = strides[0] if _ints(strides[0]) and len(strides[0]) == len(dims[0]) else None
        if _ints(dims[1]) and _ints(strides[1]) and order_of is not None and dims[0] == dims[1]:
            order = _walk_order(order_of, dims[1])
            reads.append(([dims[1][d] for d in order], [strides[1][d] for d in order]))
    elif launch_op in _COPY_OUT:
        d0, s0 = dims[0], strides[0]
        if _ints(d0) and _ints(s0):
            reads.append((d0, s0))
        elif isinstance(d0, list) and isinstance(s0, list) and len(d0) == len(s0):
            reads += [(d, s) for d, s in zip(d0, s0, strict=True) if _ints(d) and _ints(s)]
    reads = [(d, s) for d, s in reads if len(d) == len(s) and math.prod(d) > 0]
    if not reads:
        return 1.0, 0.0
    useful = sum(math.prod(d) for d, _ in reads)
    moved = sum(
        math.prod(d) * sector_factor(tuple(d), tuple(s), itemsize, sector_bytes, lanes)
        for d, s in reads
    )
    reuse = max(reuse_gap_bytes(tuple(d), tuple(s), itemsize, sector_bytes) for d, s in reads)
    return moved / useful, reuse


def iteration_order(shapes: list[list[int]], strides: list[list[int]]) -> list[int]:
    """Dims of the broadcast shape, outermost first, as TensorIterator.reorder_dimensions orders an
    elementwise op (PyTorch aten/src/ATen/TensorIterator.cpp): an insertion sort where, for each
    pair of dims, the first operand (arg 0 first: an in-place op's output) whose strides differ and
    are both nonzero decides, the smaller stride inner; equal strides put the larger size outer.
    ``shapes`` / ``strides`` already broadcast to one rank (stride 0 on broadcast dims)."""
    ndim = len(shapes[0])
    perm = list(range(ndim - 1, -1, -1))  # innermost first, as in TensorIterator

    def should_swap(d0: int, d1: int) -> int:
        for shape, stride in zip(shapes, strides, strict=True):
            s0, s1 = stride[d0], stride[d1]
            if s0 == 0 or s1 == 0:
                continue
            if s0 != s1:
                return -1 if s0 < s1 else 1
            if shape[d0] > shape[d1]:
                return 1
        return 0

    for i in range(1, ndim):
        d1 = i
        for d0 in range(i - 1, -1, -1):
            cmp = should_swap(perm[d0], perm[d1])
            if cmp > 0:
                perm[d0], perm[d1] = perm[d1], perm[d0]
                d1 = d0
            elif cmp < 0:
                break
    return perm[::-1]


def reuse_gap_bytes(shape: tuple[int, ...], strides: tuple[int, ...], itemsize: int,
                    sector_bytes: int = NVIDIA_SECTOR_BYTES) -> float:  # fmt: skip
    """Longest gap between two consecutive uses of one sector in a row-major walk of ``shape`` at
    ``strides``, in bytes of sectors this operand moves meanwhile (each output element at most one
    sector): the LRU stack distance, which decides whether the L2 still holds the sector at its next
    use (an LRU cache of C bytes hits every reuse whose stack distance is below C: Mattson et al.,
    "Evaluation techniques for storage hierarchies", IBM Systems Journal 9(2), 1970). A dim reuses
    the sector where its stride is 0 (broadcast) or below a sector; incrementing dim k after its
    inner reusing dims ran to their end is ``out_stride(k) - sum((size_j - 1) out_stride(j))``
    elements later. 0 where no dim reuses a sector."""
    gap, out_stride, inner_reuse = 0.0, 1, 0
    for size, stride in zip(reversed(shape), reversed(strides), strict=True):
        span = abs(stride) * itemsize
        if size > 1 and span < sector_bytes:
            uses = size if span == 0 else min(size, sector_bytes // span)
            gap = max(gap, float(out_stride - inner_reuse))
            inner_reuse += (uses - 1) * out_stride
        out_stride *= size
    return gap * sector_bytes


@lru_cache(maxsize=4096)
def elementwise_read_sectors(
    dims_json: str, strides_json: str, types_json: str, itemsize: int, sector_bytes: int,
    lanes: int,
) -> tuple[float, float]:  # fmt: skip
    """(extra bytes its strided operands' sectors move beyond a coalesced walk, the longest reuse
    gap of those operands) for an elementwise op's recorded ``Input Dims`` / ``Input Strides`` /
    ``Input type``: every tensor operand broadcast to the output's shape, walked in TensorIterator's
    order (:func:`iteration_order`), lane i of a warp at element i; an operand's extra is
    (sector factor - 1) x its walk's bytes (output elements x its element size). (0, 0) where no
    operand is strided, or the record is absent or malformed."""
    try:
        dims, strides = json.loads(dims_json), json.loads(strides_json)
        types = json.loads(types_json) if types_json else []
    except (ValueError, TypeError):
        return 0.0, 0.0
    if not isinstance(dims, list) or not isinstance(strides, list):
        return 0.0, 0.0
    types = types if isinstance(types, list) else []
    operands = []
    for k, (d, s) in enumerate(zip(dims, strides, strict=False)):
        if _ints(d) and _ints(s) and len(d) == len(s):
            size = itemsize
            if len(types) > k and types[k] in TENSOR_TYPES:
                size = TENSOR_TYPES[types[k]][1]
            operands.append((d, s, size))
    if not operands:
        return 0.0, 0.0
    rank = max(len(d) for d, _, _ in operands)
    out = [1] * rank
    for d, _, _ in operands:
        for j, n in enumerate([1] * (rank - len(d)) + d):
            if n != 1 and out[j] not in (1, n):
                return 0.0, 0.0  # not broadcastable: not an elementwise record
            out[j] = max(out[j], n)
    if math.prod(out) <= 0:
        return 0.0, 0.0
    shapes, walks = [], []
    for d, s, _ in operands:
        pad_d, pad_s = [1] * (rank - len(d)) + d, [0] * (rank - len(s)) + s
        walks.append([0 if pad_d[j] == 1 and out[j] > 1 else pad_s[j] for j in range(rank)])
        shapes.append(out)
    order = iteration_order(shapes, walks)
    shape = tuple(out[j] for j in order)
    extra, gap = 0.0, 0.0
    for walk, (_, _, size) in zip(walks, operands, strict=True):
        stride = tuple(walk[j] for j in order)
        factor = sector_factor(shape, stride, size, sector_bytes, lanes)
        if factor > 1.0:
            extra += (factor - 1.0) * math.prod(shape) * size
            gap = max(gap, reuse_gap_bytes(shape, stride, size, sector_bytes))
    return extra, gap


def _ints(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(type(x) is int for x in v)


def strided_traffic(
    ops: pd.DataFrame, amd: bool, l2_bytes: float, reuse_in_l2: bool | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(extra DRAM bytes, extra L2 bytes) of each copy kernel's strided reads: its reads x (sector
    factor - 1), served by the L2 where the bytes moved between a sector's uses fit ``l2_bytes``,
    else by DRAM (module docstring). ``reuse_in_l2`` forces one reading (None: by the fit).
    Elementwise kernels: the extra sectors of operands read across TensorIterator's walk
    (:func:`elementwise_read_sectors`), by the same rule at their LRU reuse gap.
    Zeros where the op records no ``Input Strides`` or is neither."""
    n = len(ops)
    zeros = np.zeros(n)
    if "input_strides" not in ops.columns or n == 0:
        return zeros, zeros
    strides = strings(ops, "input_strides").to_numpy(dtype=object)
    op_class = strings(ops, "op_class")
    copy = (op_class == "copy").to_numpy(dtype=bool) & (strides != "")
    # TensorIterator's kernels only: Inductor's Triton kernels tile their own walk (not modelled).
    aten = ~strings(ops, "name").str.startswith("triton_").to_numpy(dtype=bool)
    pointwise = (op_class == "elementwise").to_numpy(dtype=bool) & (strides != "") & aten
    if not (copy.any() or pointwise.any()):
        return zeros, zeros
    sector, lanes = (AMD_SECTOR_BYTES, AMD_WAVEFRONT) if amd else (NVIDIA_SECTOR_BYTES, NVIDIA_WARP)
    rows = np.flatnonzero(copy)
    launch = strings(ops, "launch_op").to_numpy(dtype=object)
    dims = strings(ops, "input_dims").to_numpy(dtype=object)
    types = strings(ops, "input_types").to_numpy(dtype=object)
    size = element_bytes(strings(ops, "dtype"))
    factor, reuse = np.ones(n), np.zeros(n)
    for i in rows:
        factor[i], reuse[i] = copy_read_sectors(str(launch[i]), str(dims[i]), str(strides[i]),
                                                str(types[i]), int(size[i]), sector, lanes)  # fmt: skip
    extra = np.nan_to_num(column(ops, "bytes_read"), nan=0.0) * (factor - 1.0)
    for i in np.flatnonzero(pointwise):
        extra[i], reuse[i] = elementwise_read_sectors(str(dims[i]), str(strides[i]), str(types[i]),
                                                      int(size[i]), sector, lanes)  # fmt: skip
    in_l2 = reuse <= l2_bytes if reuse_in_l2 is None else np.full(n, reuse_in_l2)
    return np.where(in_l2, 0.0, extra), np.where(in_l2, extra, 0.0)
