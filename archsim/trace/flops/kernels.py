"""Op class of a GPU kernel guessed from its name (when its launching op says nothing).

Names are matched by whole tokens, never by substring: the name is split at every non-alphanumeric
character and at lower-to-upper case changes (``_typeConvert`` -> ``type convert``,
``cudnn::bn_fw_tr_1C11`` -> ``cudnn bn fw tr 1 c11``), and each rule matches a token that starts with
its prefix (``conv`` matches ``convolve`` and ``conv2d`` but a rule may exclude continuations such as
``convert``). Vendor GEMM kernels that carry the GEMM in a token's middle (``volta_sgemm_128x64``,
``ampere_h16816gemm``) are matched on the token's ending instead.
"""

from __future__ import annotations

import functools
import re

_SPLIT = re.compile(r"[^A-Za-z0-9]+|(?<=[a-z0-9])(?=[A-Z])")

# (token regex, class), checked in order: normalisation and softmax kernels often also contain
# "cudnn" or "reduce" tokens. Each regex must match a whole token.
_KERNEL_TOKEN_CLASSES: tuple[tuple[re.Pattern[str], str], ...] = tuple(
    (re.compile(pattern), klass)
    for pattern, klass in (
        # NCCL/RCCL collectives (ncclKernel_AllReduce_RING_LL_Sum_float, ncclDevKernel_...): first,
        # lest their "reduce" token make them reductions; their time is the wire's and the peers'
        (r"nccl|rccl", "communication"),
        (r"softmax\w*|soft", "softmax"),  # softmax_warp_forward; cunn_SoftMaxForward -> soft max
        (r"flash\w*|fmha\w*|attention\w*|sdpa\w*", "attention"),
        (r"bn|batchnorm\w*|layernorm\w*|rmsnorm\w*|groupnorm\w*", "reduction"),
        (r"norm", "reduction"),  # batch_norm, layer_norm, group_norm split at "_"
        (r"reduce\w*|\w*kreduce", "reduction"),  # reduce_kernel; splitKreduce_kernel
        (r"\w*gemm\w*|\w*gemv\w*|cutlass\w*|cublas\w*|cijk|xmma\w*", "gemm"),
        (r"conv(?!ert)\w*|\w*scudnn\w*|wgrad\w*|dgrad\w*|winograd\w*", "conv"),
        (r"elementwise\w*|vectorized\w*", "elementwise"),
        (r"copy\w*", "copy"),
        (r"lstm\w*|gru\w*", "rnn"),
    )
)
# vLLM's Triton grouped GEMM of a mixture-of-experts layer, ``fused_moe_kernel`` (vllm/
# model_executor/layers/fused_moe/fused_moe.py; SGLang and LMDeploy keep the name): tiles of
# tokens sorted by expert times that expert's weights (tl.dot), one launch for w1 and one for w2.
# Matched as the whole run of tokens: "moe" alone also names its helpers (moe_align_block_size,
# moe_sum), which multiply nothing.
_FUSED_MOE_GEMM = re.compile(r"(?:^|_)fused_moe_kernel(?:_|$)")

# Kernels that do the work of an op of a class; other kernels an op launches (bias copies, layout
# transforms) are helpers and get no share of its FLOPs.
MAIN_KERNEL_CLASSES: dict[str, frozenset[str]] = {
    "gemm": frozenset({"gemm"}),
    "conv": frozenset({"conv", "gemm"}),
}


# TorchInductor names each generated Triton kernel, and the op the profiler records for it,
# ``triton_{category}_{fused aten ops}_{n}``, the category's first three letters
# (torch/_inductor/codegen/triton.py, get_kernel_category_by_source_code: "pointwise",
# "reduction", "persistent_reduction", "template", "foreach"). The fused ops say what was fused,
# not what the kernel is: ``triton_red_fused_..._convolution_..._native_layer_norm`` is a reduction
# over a convolution's output, and ``triton_poi_fused_convolution_0`` a pointwise epilogue (bias
# add) after one. A template kernel (``triton_tem_``) is one of Inductor's GEMM, convolution or
# flex-attention templates (torch/_inductor/kernel/mm.py, bmm.py, conv.py, flex_attention.py), and
# its fused name carries the template's op (``triton_tem_fused_addmm_relu_0``).
_INDUCTOR_PREFIX_CLASSES = {"triton_poi_": "elementwise", "triton_red_": "reduction",
                            "triton_per_": "reduction"}  # fmt: skip
_TEMPLATE_TOKEN_CLASSES = (
    (frozenset({"conv", "convolution"}), "conv"),
    (frozenset({"flex", "attention"}), "attention"),
    (frozenset({"mm", "addmm", "bmm", "baddbmm", "scaled"}), "gemm"),
)


def inductor_kernel_class(name: str) -> str | None:
    """Op class of a TorchInductor Triton kernel (or its record_function) from its category
    prefix; None for other names and for a template whose name does not say its op."""
    for prefix, klass in _INDUCTOR_PREFIX_CLASSES.items():
        if name.startswith(prefix):
            return klass
    if name.startswith("triton_tem_"):
        tokens = set(name.split("_"))
        for names, klass in _TEMPLATE_TOKEN_CLASSES:
            if tokens & names:
                return klass
    return None


def kernel_tokens(kernel_name: str) -> list[str]:
    """Lower-case tokens of a kernel name (see the module docstring)."""
    return [t.lower() for t in _SPLIT.split(kernel_name) if t]


@functools.lru_cache(
    maxsize=65_536
)  # a trace repeats a few hundred kernel names thousands of times
def kernel_class(kernel_name: str) -> str:
    """Op class guessed from a kernel's name ("other" when no token matches)."""
    inductor = inductor_kernel_class(kernel_name)
    if inductor is not None:
        return inductor
    if _FUSED_MOE_GEMM.search(kernel_name):
        return "gemm"
    tokens = kernel_tokens(kernel_name)
    for pattern, klass in _KERNEL_TOKEN_CLASSES:
        if any(pattern.fullmatch(t) for t in tokens):
            return klass
    return "other"
