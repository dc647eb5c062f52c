"""Data movement: copies, concatenation, gathers and embedding lookups (no arithmetic)."""

from __future__ import annotations

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


_COPY_OPS: dict[str, Formula] = {
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
