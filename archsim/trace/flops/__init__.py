"""FLOPs, bytes and op class of an operator from its recorded input shapes (torch.profiler
``record_shapes``: ``Input Dims``, ``Input type``, ``Concrete Inputs``).

One small function per op family, keyed by the aten op name without namespace and trailing ``_``
(``aten::add_`` -> ``add``), one module per op family (gemm, conv, rnn, pointwise, memory,
optim; kernels classifies kernel names; registry holds the table). Conventions, so every number here has a stated origin:
- a multiply-add is 2 FLOPs (GEMM 2*M*K*N, convolution 2 * MACs);
- element-wise ops cost a fixed count of arithmetic operations per output element, worked out from
  the textbook formula in the comment beside each (a transcendental such as exp/tanh counts as 1);
- bytes_read = every tensor input once; bytes_written = the output once (no cache reuse modelled);
- an op with no formula (or whose shapes were not recorded) gets bytes_read from its tensor inputs,
  bytes_written 0, FLOPs 0 and ``has_formula`` False; ingest counts them in meta.
"""

from __future__ import annotations

from archsim.trace.flops.args import (
    DEFAULT_DTYPE,
    OP_CLASSES,
    TENSOR_TYPES,
    OpArgs,
    OpCost,
    Tensor,
    parse_args,
)
from archsim.trace.flops.kernels import MAIN_KERNEL_CLASSES, kernel_class
from archsim.trace.flops.optim import (
    ADAM_OPS_PER_ELEMENT,
    ADAMW_OPS_PER_ELEMENT,
    SGD_MOMENTUM_OPS_PER_ELEMENT,
)
from archsim.trace.flops.registry import (
    METADATA_OPS,
    has_formula,
    is_collective,
    is_metadata_op,
    op_class,
    op_cost,
    op_key,
)
from archsim.trace.flops.rnn import RNN_CELL_OPS_PER_HIDDEN, _rnn_sequence

__all__ = [
    "ADAMW_OPS_PER_ELEMENT",
    "ADAM_OPS_PER_ELEMENT",
    "DEFAULT_DTYPE",
    "MAIN_KERNEL_CLASSES",
    "METADATA_OPS",
    "OP_CLASSES",
    "RNN_CELL_OPS_PER_HIDDEN",
    "SGD_MOMENTUM_OPS_PER_ELEMENT",
    "TENSOR_TYPES",
    "OpArgs",
    "OpCost",
    "Tensor",
    "_rnn_sequence",
    "has_formula",
    "is_collective",
    "is_metadata_op",
    "kernel_class",
    "op_class",
    "op_cost",
    "op_key",
    "parse_args",
]
