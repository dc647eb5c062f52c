"""GEMM-family formulas: matmul variants and linear (a multiply-add is 2 FLOPs)."""

from __future__ import annotations

import math

from archsim.trace.flops.args import Formula, OpArgs, Tensor, broadcast


def _mm_like(a: Tensor | None, b: Tensor | None) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of a matmul of a[..., M, K] by b[..., K, N] with torch's 1-D rules."""
    if a is None or b is None or not a.shape or not b.shape:
        return None
    sa, sb = list(a.shape), list(b.shape)
    if len(sa) == 1:
        sa = [1, sa[0]]
    if len(sb) == 1:
        sb = [sb[0], 1]
    m, k, n = sa[-2], sa[-1], sb[-1]
    batch_a, batch_b = sa[:-2], sb[:-2]
    batch = broadcast(tuple(batch_a), tuple(batch_b))
    return (math.prod(batch) if batch is not None else 1), m, k, n


def _gemm(a_idx: int, b_idx: int, bias_idx: int | None = None) -> Formula:
    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        dims = _mm_like(args.tensor(a_idx), args.tensor(b_idx))
        if dims is None:
            return None
        batch, m, k, n = dims
        out = batch * m * n
        flops = 2.0 * batch * m * k * n  # one multiply-add per (m, k, n)
        if bias_idx is not None and args.tensor(bias_idx) is not None:
            flops += out  # adding the bias/C term: one add per output element
        return flops, args.read_bytes(), out * args.itemsize

    return formula


def _linear(args: OpArgs) -> tuple[float, float, float] | None:
    x, w = args.tensor(0), args.tensor(1)
    if x is None or w is None or not x.shape or len(w.shape) != 2:
        return None
    rows, k, n = math.prod(x.shape[:-1]), x.shape[-1], w.shape[0]
    flops = 2.0 * rows * k * n + (rows * n if args.tensor(2) is not None else 0)
    return flops, args.read_bytes(), rows * n * args.itemsize


FORMULAS: dict[str, tuple[str, Formula]] = {
    "mm": ("gemm", _gemm(0, 1)),
    "addmm": ("gemm", _gemm(1, 2, bias_idx=0)),
    "_addmm_activation": ("gemm", _gemm(1, 2, bias_idx=0)),
    "bmm": ("gemm", _gemm(0, 1)),
    "baddbmm": ("gemm", _gemm(1, 2, bias_idx=0)),
    "matmul": ("gemm", _gemm(0, 1)),
    "mv": ("gemm", _gemm(0, 1)),
    "addmv": ("gemm", _gemm(1, 2, bias_idx=0)),
    "dot": ("gemm", _gemm(0, 1)),
    "linear": ("gemm", _linear),
}
