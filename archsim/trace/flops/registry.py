"""The table of formulas by op key, and the lookups ingest uses: op_key, op_class, op_cost."""

from __future__ import annotations

import re
from typing import Any

from archsim.trace.flops import attention, conv, gemm, memory, moe, optim, pointwise, rnn
from archsim.trace.flops.args import Formula, OpCost, parse_args, words
from archsim.trace.flops.kernels import inductor_kernel_class

_FORMULAS: dict[str, tuple[str, Formula]] = {
    **gemm.FORMULAS,
    **moe.FORMULAS,
    **attention.FORMULAS,
    **conv.FORMULAS,
    **rnn.FORMULAS,
    **pointwise.FORMULAS,
    **memory.FORMULAS,
    **optim.FORMULAS,
}

# Ops that only change metadata (views, allocation) and do no device work. CPU-only traces leave them
# out of ops.parquet; `aten::to`/`reshape`/`contiguous` are listed because when they do copy, the copy
# shows up as their child (_to_copy/copy_/clone), which is kept.
METADATA_OPS = frozenset(
    words(
        "empty empty_like empty_strided new_empty new_empty_strided view view_as reshape "
        "_reshape_alias _unsafe_view as_strided as_strided_ t transpose transpose_ permute "
        "expand expand_as squeeze squeeze_ unsqueeze unsqueeze_ slice select narrow split "
        "split_with_sizes unbind chunk unsafe_split unsafe_chunk detach detach_ alias "
        "lift_fresh lift resize_ set_ flatten unflatten numpy_T contiguous to result_type "
        "resolve_conj resolve_neg broadcast_tensors _local_scalar_dense item is_nonzero size "
        "stride dim _nnz _has_compatible_shallow_copy_type record_stream zeros ones full "
        "scalar_tensor empty_like view_as_real view_as_complex real imag "
        "movedim moveaxis swapaxes diagonal indices values"
    )
)
METADATA_OPS = frozenset(name.rstrip("_") for name in METADATA_OPS)  # keys as op_key() makes them

_CAMEL_BOUNDARY = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def op_key(name: str) -> str:
    """``aten::add_`` -> ``add``; ``ConvolutionBackward0`` -> ``convolution_backward``;
    ``autograd::engine::evaluate_function: MseLossBackward0`` -> ``mse_loss_backward``."""
    if ": " in name:
        name = name.rsplit(": ", 1)[1]
    base = name.rsplit("::", 1)[-1]
    if re.fullmatch(r"[A-Z][A-Za-z]*Backward\d*", base):
        base = _CAMEL_BOUNDARY.sub("_", re.sub(r"\d+$", "", base)).lower()
    if base.startswith("__") and base.endswith("__"):
        return base  # operators such as __and__ keep their dunder name
    return base.rstrip("_") if base.rstrip("_") else base


def is_metadata_op(name: str) -> bool:
    return op_key(name) in METADATA_OPS and "::" in name


# Collectives and point-to-point ops of torch.distributed: c10d's dispatcher ops (c10d::allreduce_,
# c10d::broadcast_, c10d::barrier: torch/csrc/distributed/c10d/Ops.cpp) and the record_function title
# each process group gives its work, "<backend>:<op>" (ProcessGroupGloo.cpp "gloo:all_reduce",
# ProcessGroupNCCL.cpp "nccl:all_reduce", ProcessGroupMPI.cpp "mpi:all_reduce", ProcessGroupXCCL.cpp
# "xccl:all_reduce"). Their time is the wire's and the peers', not arithmetic on the op's shapes.
_COLLECTIVE = re.compile(r"(?:c10d::|(?:gloo|nccl|mpi|xccl):)\w+")


def is_collective(name: str) -> bool:
    """``gloo:all_reduce``, ``nccl:broadcast``, ``c10d::allreduce_``: an op of torch.distributed."""
    return _COLLECTIVE.fullmatch(name) is not None


def op_class(name: str) -> str:
    """The family an op (or an autograd node / backward op of it) belongs to."""
    if is_collective(name):
        return "communication"
    inductor = inductor_kernel_class(name)  # a torch.compile kernel's record_function
    if inductor is not None:
        return inductor
    key = op_key(name)
    if key in _FORMULAS:
        return _FORMULAS[key][0]
    if key.endswith("_backward"):
        forward = key[: -len("_backward")]
        if forward in _FORMULAS:
            return _FORMULAS[forward][0]
    if key.startswith(("_foreach_", "_fused_")):
        return "optimizer"
    tokens = key.split("_")
    if any(t.startswith("conv") and not t.startswith("convert") for t in tokens):
        return "conv"  # conv2d, convolution, slow_conv3d; not convert_element_type
    if any(t in ("lstm", "gru", "rnn") for t in tokens):
        return "rnn"
    return "other"


def has_formula(name: str) -> bool:
    return op_key(name) in _FORMULAS


def op_cost(
    name: str,
    dims: Any,
    types: Any = None,
    concrete: Any = None,
    output_shape: tuple[int, ...] | None = None,
) -> OpCost:
    """FLOPs and bytes of one recorded op call; falls back to input bytes when no formula applies.
    ``output_shape``: the op's output shape when known from elsewhere in the trace (legacy convs)."""
    args = parse_args(dims, types, concrete)
    if args is not None and output_shape is not None:
        args.output_shape = tuple(output_shape)
    klass = op_class(name)
    if args is None:
        return OpCost(klass, 0.0, 0.0, 0.0, False, "")
    entry = _FORMULAS.get(op_key(name))
    result = entry[1](args) if entry is not None else None
    if result is None:
        return OpCost(klass, 0.0, args.read_bytes(), 0.0, False, args.dtype)
    flops, read, written = result
    return OpCost(klass, float(flops), float(read), float(written), True, args.dtype)
