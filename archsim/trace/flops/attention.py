"""Scaled dot-product attention (SDPA and its flash / memory-efficient / cuDNN kernels).

Forward, per batch*head, with L query rows, S key rows, head dims E (q, k) and Ev (v), and P the
number of (query, key) pairs actually computed (L*S; with ``is_causal`` torch masks the upper
triangle of the L x S matrix aligned top-left, so P = sum over rows i of min(i + 1, S), and the
flash kernels skip the masked blocks):
- scores Q K^T: P multiply-adds of length E          -> 2 * P * E FLOPs
- scale by 1/sqrt(E): 1 per score                    -> P
- softmax: max, subtract, exp, sum, divide (archsim.trace.flops.pointwise._SOFTMAX_OPS) -> 5 * P
- output softmax(S) V: P multiply-adds of length Ev  -> 2 * P * Ev
total 2 * P * (E + Ev) + 6 * P per batch*head (an additive mask adds 1 * P).
Backward (FlashAttention-2, Dao 2023, arXiv:2307.08691, Algorithm 2): recompute Q K^T (2PE), dV = P^T dO
(2P*Ev), dP = dO V^T (2P*Ev), dQ = dS K (2PE), dK = dS^T Q (2PE) = 2P(3E + 2Ev), plus the softmax
recompute (5P) and its backward dS = P * (dP - rowsum(dO * O)) (4P, _SOFTMAX_OPS backward).
Bytes: the tensors read once (q, k, v, mask / grad_out, out), the output (or the three gradients)
written once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from archsim.trace.flops.args import Formula, OpArgs, Tensor

SOFTMAX_OPS_PER_SCORE = 5  # max, subtract, exp, sum, divide
SCALE_OPS_PER_SCORE = 1
SOFTMAX_BACKWARD_OPS_PER_SCORE = 4  # g*y, row sum, subtract, multiply


def _pairs(length_q: int, length_k: int, causal: bool) -> int:
    """(query, key) pairs computed: all of them, or the top-left-aligned lower triangle."""
    if not causal:
        return length_q * length_k
    full = max(0, length_q - length_k)  # rows at or past the last key see every key
    tri = min(length_q, length_k)
    return tri * (tri + 1) // 2 + full * length_k


def _dims(
    q: Tensor, k: Tensor, v: Tensor, heads_last: bool
) -> tuple[int, int, int, int, int] | None:
    """(batch*heads, L, S, E, Ev) of [B, H, L, E] tensors (SDPA) or [B, L, H, E] (flash entry)."""
    if len(q.shape) < 3 or len(k.shape) != len(q.shape) or len(v.shape) != len(q.shape):
        return None
    if heads_last:
        if len(q.shape) != 4:
            return None
        b, length_q, h, e = q.shape
        return b * h, length_q, k.shape[1], e, v.shape[-1]
    groups = math.prod(q.shape[:-2])
    return groups, q.shape[-2], k.shape[-2], q.shape[-1], v.shape[-1]


def _forward(causal_idx: int, mask_idx: int | None = None, heads_last: bool = False) -> Formula:
    """(query, key, value, ...) forward entry points; is_causal and the mask at the given positions."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        q, k, v = args.tensor(0), args.tensor(1), args.tensor(2)
        if q is None or k is None or v is None:
            return None
        dims = _dims(q, k, v, heads_last)
        if dims is None:
            return None
        groups, length_q, length_k, e, ev = dims
        causal = bool(args.value(causal_idx, False))
        pairs = groups * _pairs(length_q, length_k, causal)
        flops = 2.0 * pairs * (e + ev) + (SOFTMAX_OPS_PER_SCORE + SCALE_OPS_PER_SCORE) * pairs
        if (
            mask_idx is not None and args.tensor(mask_idx) is not None
        ):  # attn_mask / attn_bias: one add per score
            flops += pairs
        return flops, args.read_bytes(), float(groups * length_q * ev * args.itemsize)

    return formula


def _backward(causal_idx: int) -> Formula:
    """(grad_out, query, key, value, out, logsumexp, ...): writes grad q, k, v."""

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        q, k, v = args.tensor(1), args.tensor(2), args.tensor(3)
        if q is None or k is None or v is None:
            return None
        dims = _dims(q, k, v, heads_last=False)
        if dims is None:
            return None
        groups, length_q, length_k, e, ev = dims
        pairs = groups * _pairs(length_q, length_k, bool(args.value(causal_idx, False)))
        flops = 2.0 * pairs * (3 * e + 2 * ev)
        flops += (SOFTMAX_OPS_PER_SCORE + SOFTMAX_BACKWARD_OPS_PER_SCORE) * pairs
        return flops, args.read_bytes(), float(q.nbytes + k.nbytes + v.nbytes)

    return formula


# Positions of is_causal (and of the additive mask) in each entry point's schema (torch 2.x
# native_functions.yaml).
_ENTRIES: dict[str, Callable[[], Formula]] = {
    "scaled_dot_product_attention": lambda: _forward(5, mask_idx=3),
    "_scaled_dot_product_flash_attention": lambda: _forward(4),
    "_scaled_dot_product_flash_attention_for_cpu": lambda: _forward(4),
    "_scaled_dot_product_efficient_attention": lambda: _forward(6, mask_idx=3),
    "_scaled_dot_product_cudnn_attention": lambda: _forward(6, mask_idx=3),
    "_flash_attention_forward": lambda: _forward(8, heads_last=True),
    "_scaled_dot_product_flash_attention_backward": lambda: _backward(11),
    "_scaled_dot_product_efficient_attention_backward": lambda: _backward(11),
    "_scaled_dot_product_flash_attention_for_cpu_backward": lambda: _backward(7),
}

FORMULAS: dict[str, tuple[str, Formula]] = {
    name: ("attention", make()) for name, make in _ENTRIES.items()
}
