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


def _grouped_mm(offs_idx: int) -> Formula:
    """``_grouped_mm(self, mat2, offs, ...)`` / ``_scaled_grouped_mm(self, mat2, scale_a, scale_b,
    offs, ...)``: G independent GEMMs in one call (mixture-of-experts layers). Total FLOPs are
    2 * sum_g(M_g * K_g * N_g); whichever dimension ``offs`` splits, the per-group sizes sum to the
    split tensor's extent, so the total follows from the shapes alone:
    - A [M_total, K] x B [G, K, N] (rows of A split among groups):     2 * M_total * K * N, out [M_total, N]
    - A [G, M, K] x B [G, K, N] (batched):                             2 * G * M * K * N,  out [G, M, N]
    - A [M, K_total] x B [K_total, N] (K split; one output per group): 2 * M * K_total * N, out [G, M, N]
    - A [G, M, K] x B [K, N_total] (columns of B split):               2 * M * K * N_total, out [M, N_total]
    The output is written in the inputs' element size (fp8 scaled variants write wider: a lower bound).
    """

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        a, b = args.tensor(0), args.tensor(1)
        if a is None or b is None:
            return None
        offs = args.tensor(offs_idx)
        groups = offs.numel if offs is not None and offs.shape else 1
        shapes = (len(a.shape), len(b.shape))
        if shapes == (2, 3) and a.shape[1] == b.shape[1]:
            flops, out = 2.0 * a.shape[0] * a.shape[1] * b.shape[2], a.shape[0] * b.shape[2]
        elif shapes == (3, 3) and a.shape[0] == b.shape[0] and a.shape[2] == b.shape[1]:
            g, m, k = a.shape
            flops, out = 2.0 * g * m * k * b.shape[2], g * m * b.shape[2]
        elif shapes == (2, 2) and a.shape[1] == b.shape[0]:
            flops, out = (
                2.0 * a.shape[0] * a.shape[1] * b.shape[1],
                groups * a.shape[0] * b.shape[1],
            )
        elif shapes == (3, 2) and a.shape[2] == b.shape[0]:
            flops, out = 2.0 * a.shape[1] * a.shape[2] * b.shape[1], a.shape[1] * b.shape[1]
        else:
            return None
        return flops, args.read_bytes(), float(out * args.itemsize)

    return formula


FORMULAS: dict[str, tuple[str, Formula]] = {
    "_grouped_mm": ("gemm", _grouped_mm(2)),
    "_scaled_grouped_mm": ("gemm", _grouped_mm(4)),
    "mm": ("gemm", _gemm(0, 1)),
    # torch._scaled_mm(self, mat2, scale_a, scale_b, bias=None, scale_result=None, out_dtype=None,
    # use_fast_accum=False) (aten/src/ATen/native/native_functions.yaml): the FP8 GEMM of FP8
    # training and inference, 2MKN FLOPs (+ MN for the bias). The output is written in the inputs'
    # element size (1 B; out_dtype, often bf16, writes wider: a lower bound, as _scaled_grouped_mm).
    "_scaled_mm": ("gemm", _gemm(0, 1, bias_idx=4)),
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
