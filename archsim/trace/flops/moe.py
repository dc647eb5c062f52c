"""Fused mixture-of-experts ops: the whole expert layer of T tokens in one custom op.

vLLM's and SGLang's fused-MoE custom ops take ``(hidden_states [T, H], w1 [E, N1, H],
w2 [E, H, N2], topk_weights [T, k], topk_ids [T, k], ...)`` (vllm/model_executor/layers/fused_moe:
``inplace_fused_experts``, ``outplace_fused_experts``, ``rocm_aiter_fused_moe_impl``; sglang
srt/layers/moe/fused_moe_triton the same first five): each token runs through its k chosen
experts, ``x @ w1[e].T`` (N1 = 2 * N2 for a gated activation) then ``act(...) @ w2[e].T``.
- FLOPs: T * k (token, expert) pairs, each 2 * N1 * H + 2 * H * N2 (the activation and the
  weighted sum of the k outputs add T * k * (N2 + H) element operations, under 1/H of the GEMMs;
  left out). Exact whatever the routing.
- Bytes read: the tokens, the router's tensors, and the weights of the experts the tokens reach:
  not all E unless T * k >= E (16 tokens of top-2 reach at most 32 of 64 experts). Which ones is
  in topk_ids, a value the trace does not keep, so the count is its expectation under uniform
  routing, the balance a load-balancing loss trains for (Fedus, Zoph and Shazeer 2021, Switch
  Transformers, JMLR 23(120), eq. 4): E * (1 - (1 - k/E)^T), k experts at T = 1, -> E for many
  tokens. Skewed routing reaches fewer, so this is high for a skewed layer.
- Bytes written: the output, [T, H] (the in-place variant overwrites hidden_states).
Weights packed two values a byte (int4) or otherwise not [E, N, H] fail the shape checks: no
formula, as before. Under expert parallelism w1 holds one rank's E of the model's experts and
tokens routed elsewhere skip this op's GEMMs (vLLM's expert_map); the shapes do not say how many
experts the model has, so such a call is priced as if all k choices were local: high by the
model's expert count over E. vLLM's Triton path launches fused_moe_kernel twice (x @ w1, then
act @ w2), and the op's work is shared between them by launch size (archsim.trace.gpu_costs
split_op): their tiles differ in depth (K = H, then N2), so that split is off, the total is not.
"""

from __future__ import annotations

from archsim.trace.flops.args import Formula, OpArgs


def expected_experts_reached(experts: int, top_k: int, tokens: int) -> float:
    """Distinct experts that ``tokens`` tokens reach, each choosing ``top_k`` of ``experts``
    uniformly: experts * (1 - (1 - k/E)^T)."""
    return experts * (1.0 - (1.0 - top_k / experts) ** tokens)


def _fused_moe(args: OpArgs) -> tuple[float, float, float] | None:
    x, w1, w2, topk = args.tensor(0), args.tensor(1), args.tensor(2), args.tensor(3)
    if x is None or w1 is None or w2 is None or topk is None or not x.shape:
        return None
    if len(w1.shape) != 3 or len(w2.shape) != 3 or not topk.shape:
        return None
    hidden = x.shape[-1]
    experts, n1, n2 = w1.shape[0], w1.shape[1], w2.shape[2]
    if w1.shape[2] != hidden or w2.shape[:2] != (experts, hidden) or hidden == 0:
        return None
    tokens, top_k = x.numel // hidden, topk.shape[-1]
    if tokens == 0 or not 0 < top_k <= experts:
        return None
    flops = 2.0 * tokens * top_k * (n1 * hidden + hidden * n2)
    per_expert = (w1.nbytes + w2.nbytes) / experts
    reached = expected_experts_reached(experts, top_k, tokens)
    others = args.read_bytes() - w1.nbytes - w2.nbytes  # tokens, router weights, ids, scales
    return flops, others + reached * per_expert, float(x.nbytes)


FORMULAS: dict[str, tuple[str, Formula]] = {
    "inplace_fused_experts": ("gemm", _fused_moe),
    "outplace_fused_experts": ("gemm", _fused_moe),
    "rocm_aiter_fused_moe": ("gemm", _fused_moe),
}
