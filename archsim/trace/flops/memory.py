"""Data movement: copies, concatenation, gathers, embedding lookups and unfold/fold (im2col, col2im:
the adds where col2im's overlapping windows meet are the only arithmetic here besides embedding bags)."""

from __future__ import annotations

import math

from archsim.trace.flops.args import Formula, OpArgs, words


def _copy_into_self(args: OpArgs) -> tuple[float, float, float] | None:
    """copy_(self, src): reads src, writes self (dtype of self)."""
    dst, src = args.tensor(0), args.tensor(1)
    if dst is None or src is None:
        return None
    return 0.0, float(src.nbytes), float(dst.nbytes)


def _copy_same_size(args: OpArgs) -> tuple[float, float, float] | None:
    """clone/_to_copy/contiguous/flip/roll...: reads arg 0, writes a tensor of the same size."""
    x = args.tensor(0)
    return (0.0, float(x.nbytes), float(x.nbytes)) if x is not None else None


def _concat(args: OpArgs) -> tuple[float, float, float] | None:
    """cat/stack(tensors, dim): reads every input, writes their sum."""
    total = args.read_bytes()
    return (0.0, total, total) if total > 0 or args.tensors() else None


def _gather_rows(args: OpArgs) -> tuple[float, float, float] | None:
    """embedding(weight[V,D], indices): one D-row per index."""
    w, idx = args.tensor(0), args.tensor(1)
    if w is None or idx is None or len(w.shape) != 2:
        return None
    out = idx.numel * w.shape[1] * w.itemsize
    return 0.0, float(idx.nbytes + out), float(out)


def _gather(args: OpArgs) -> tuple[float, float, float] | None:
    """gather(self, dim, index): the output has index's shape."""
    x, idx = args.tensor(0), args.tensor(2)
    if x is None or idx is None:
        return None
    out = idx.numel * x.itemsize
    return 0.0, float(idx.nbytes + out), float(out)


def _window_hits(size: int, out: int, kernel: int, dilation: int, padding: int, stride: int) -> int:
    """Along one axis: (kernel offset, output position) pairs that land inside the image, not in
    the padding. Offset k at position o reads/writes image index o * stride - padding + k * dilation."""
    return sum(
        0 <= o * stride - padding + k * dilation < size for k in range(kernel) for o in range(out)
    )


def _unfold_geometry(
    size: list, kernel: list, dilation: list, padding: list, stride: list
) -> tuple[int, int, int] | None:
    """(kernel positions kh * kw, output positions L, in-image (offset, position) pairs, of the
    kh * kw * L) for a 2-D unfold over an image of ``size`` [H, W], or None if an argument is missing.
    L per axis: (size + 2 padding - dilation (kernel - 1) - 1) // stride + 1 (torch.nn.Unfold docs)."""
    geometry = (size, kernel, dilation, padding, stride)
    if not all(
        isinstance(g, list) and len(g) == 2 and all(isinstance(x, int) for x in g) for g in geometry
    ):
        return None
    outs = [
        (s + 2 * p - d * (k - 1) - 1) // st + 1 for s, k, d, p, st in zip(*geometry, strict=True)
    ]
    if min(outs) < 1 or min(kernel) < 1 or min(stride) < 1:
        return None
    hits = math.prod(
        _window_hits(s, o, k, d, p, st)
        for s, o, k, d, p, st in zip(size, outs, kernel, dilation, padding, stride, strict=True)
    )
    return kernel[0] * kernel[1], outs[0] * outs[1], hits


def _im2col(args: OpArgs) -> tuple[float, float, float] | None:
    """im2col(input [N, C, H, W], kernel_size, dilation, padding, stride) (F.unfold): copies each
    in-image window element into columns [N, C * kh * kw, L], padding positions written as zeros.
    Reads the input once, writes the columns; no arithmetic."""
    x = args.tensor(0)
    if x is None or len(x.shape) not in (3, 4):
        return None
    g = _unfold_geometry(list(x.shape[-2:]), *(args.value(i) for i in range(1, 5)))
    if g is None:
        return None
    kernel_positions, positions, _ = g
    channels = math.prod(x.shape[:-2])  # N * C
    return 0.0, float(x.nbytes), float(channels * kernel_positions * positions * x.itemsize)


def _col2im(args: OpArgs) -> tuple[float, float, float] | None:
    """col2im(columns [N, C * kh * kw, L], output_size [H, W], kernel_size, dilation, padding,
    stride) (F.fold, and im2col's backward): zero-fills the image [N, C, H, W] and adds every column
    element whose window position lies inside the image into it, one add each (those in the padding
    are skipped). Reads the columns, writes the image."""
    cols = args.tensor(0)
    size = args.value(1)
    if cols is None or len(cols.shape) not in (2, 3) or not isinstance(size, list):
        return None
    g = _unfold_geometry(size, *(args.value(i) for i in range(2, 6)))
    if g is None:
        return None
    kernel_positions, positions, hits = g
    rows = cols.shape[-2]
    if rows % kernel_positions or cols.shape[-1] != positions:
        return None
    channels = math.prod(cols.shape[:-2]) * (rows // kernel_positions)  # N * C
    written = channels * size[0] * size[1] * cols.itemsize
    return float(channels * hits), float(cols.nbytes), float(written)


def _spatial_out(x_shape: tuple[int, ...], size: object, scales: object) -> list[int] | None:
    """Output spatial dims of a nearest upsample: ``output_size`` when recorded, else each input dim
    times its scale factor, floored (torch.nn.functional.interpolate: floor(input_size x scale))."""
    spatial = len(x_shape) - 2
    if isinstance(size, list) and len(size) == spatial and all(isinstance(s, int) for s in size):
        return [int(s) for s in size]
    if (
        isinstance(scales, list)
        and len(scales) == spatial
        and all(isinstance(s, (int, float)) and not isinstance(s, bool) and s > 0 for s in scales)
    ):
        return [math.floor(d * s) for d, s in zip(x_shape[2:], scales, strict=True)]
    return None


def _upsample_nearest(args: OpArgs) -> tuple[float, float, float] | None:
    """upsample_nearest{1,2,3}d / _upsample_nearest_exact{1,2,3}d(input [N, C, *spatial],
    output_size, scales...), or the ``.vec`` overload (input, output_size or None, scale_factors):
    PyTorch's CUDA kernels (aten/src/ATen/native/cuda/UpSampleNearest2d.cu,
    ``upsample_nearest2d_out_frame`` and ``upsample_nearest2d_nhwc_out_frame``) store every output
    element once, ``odata[dst_index] = idata[src_index]``, each a copy of its nearest input element:
    the input is read once from DRAM (its repeats hit in cache), the output written once, no
    arithmetic. Reads the input, writes N x C x prod(output spatial dims) elements."""
    x = args.tensor(0)
    if x is None or len(x.shape) < 3:
        return None
    out = _spatial_out(x.shape, args.value(1), args.value(2))
    if out is None or min(out) < 1:
        return None
    written = math.prod(x.shape[:2]) * math.prod(out) * x.itemsize
    return 0.0, float(x.nbytes), float(written)


def _upsample_nearest_backward(args: OpArgs) -> tuple[float, float, float] | None:
    """upsample_nearest{1,2,3}d_backward(grad_output, output_size, input_size, scales...): the same
    file's ``*_backward_out_frame`` kernels write each grad_input element once, the sum of the
    grad_output elements that copied it (one add each). Reads grad_output, writes ``input_size``."""
    g = args.tensor(0)
    size = args.value(2)
    if g is None or not (isinstance(size, list) and size and all(isinstance(s, int) for s in size)):
        return None
    return float(g.numel), float(g.nbytes), float(math.prod(size) * g.itemsize)


_UPSAMPLE_NEAREST = tuple(
    f"{prefix}{dims}d"
    for prefix in ("upsample_nearest", "_upsample_nearest_exact")
    for dims in (1, 2, 3)
)

_COPY_OPS: dict[str, Formula] = {
    **dict.fromkeys(_UPSAMPLE_NEAREST, _upsample_nearest),
    **{f"{name}_backward": _upsample_nearest_backward for name in _UPSAMPLE_NEAREST},
    "copy": _copy_into_self,
    "_copy_from": _copy_into_self,
    "_copy_from_and_resize": _copy_into_self,
    **dict.fromkeys(
        words("_to_copy clone contiguous flip roll _reshape_copy index_put masked_scatter"),
        _copy_same_size,
    ),
    "cat": _concat,
    "stack": _concat,
    "_cat": _concat,
    "embedding": _gather_rows,
    "gather": _gather,
    "im2col": _im2col,
    "col2im": _col2im,
}

EMBEDDING_BAG_MEAN, EMBEDDING_BAG_MAX = 1, 2  # `mode` values (0 is sum), torch.nn.EmbeddingBag


def _embedding_bag(args: OpArgs) -> tuple[float, float, float] | None:
    """embedding_bag / _embedding_bag(weight[V, D], indices, offsets, scale_grad_by_freq, mode,
    sparse, per_sample_weights, include_last_offset, ...): each of the N indices gathers a D-row and
    folds it into its bag: one add (sum, mean) or compare (max) per element, N * D; per_sample_weights
    multiply each gathered element first (+ N * D); mean divides each bag's D sums (+ B * D). B bags:
    offsets' length (less one with include_last_offset), or the rows of a 2-D indices tensor.
    Reads the indices, offsets, weights and the N gathered rows (not the whole table); writes B x D."""
    w, idx = args.tensor(0), args.tensor(1)
    if w is None or idx is None or len(w.shape) != 2 or not idx.shape:
        return None
    offsets = args.tensor(2)
    d, n = w.shape[1], idx.numel
    if len(idx.shape) == 2:
        bags = idx.shape[0]
    elif offsets is not None and offsets.shape:
        bags = offsets.numel - (1 if args.value(7, False) else 0)
    else:
        return None
    mode = args.value(4, 0)
    weights = args.tensor(6)
    flops = float(n * d) + (n * d if weights is not None else 0)
    flops += bags * d if mode == EMBEDDING_BAG_MEAN else 0
    read = idx.nbytes + (offsets.nbytes if offsets else 0) + (weights.nbytes if weights else 0)
    read += n * d * w.itemsize
    return flops, float(read), float(max(bags, 0) * d * w.itemsize)


FORMULAS: dict[str, tuple[str, Formula]] = {
    **{name: ("copy", f) for name, f in _COPY_OPS.items()},
    **dict.fromkeys(
        ("embedding_bag", "_embedding_bag", "_embedding_bag_forward_only"),
        ("reduction", _embedding_bag),
    ),
}
