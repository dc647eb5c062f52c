"""Bytes a TorchInductor Triton pointwise kernel writes back in place, read from its recorded call.

Inductor records each generated Triton kernel as a cpu op named after the kernel
(``triton_poi_fused_addmm_gelu_view_15``) whose ``Input Dims`` are the kernel's pointer arguments and
whose ``Concrete Inputs`` end with its iteration counts (``xnumel``, and ``ynumel`` for tiled
kernels; ``kernel_kwargs`` names one ``XBLOCK``/``YBLOCK``/``ZBLOCK`` per count). The shapes do not
say which pointer is an output, so archsim.trace.gpu_costs counts every tensor once, as read. Two
facts of Inductor's code generation (github.com/pytorch/pytorch) pin down one case:

- argument order: ``KernelArgs.python_argdefs`` (torch/_inductor/codegen/common.py) lists the
  in-place buffers (``in_out_ptr*``) first, then the inputs (``in_ptr*``), then the outputs
  (``out_ptr*``), then size variables; the Triton kernel appends its ``*numel`` counts last;
- a pointwise kernel (``triton_poi_`` prefix, torch/_inductor/codegen/triton.py names kernels
  ``triton_{poi|red|per}_{fused name}_{n}``) stores every one of its xnumel (x ynumel) iterations
  into each buffer it writes (``tl.store(out_ptr0 + (x0), tmp, xmask)``), so each written buffer has
  at least that many elements.

So when the LAST tensor argument has fewer elements than the iterations, it is not an output, hence
no ``out_ptr`` exists (outputs come last); the kernel still stores, so its FIRST tensor argument is an
``in_out_ptr``: read (already counted) and written again, iterations x element size bytes. Anything
less certain (which of several large tensors are written) is left out: the result is a lower bound,
0 when the rule does not apply.
"""

from __future__ import annotations

import math
import re
from typing import Any

from archsim.trace.flops.args import TENSOR_TYPES
from archsim.trace.kineto import op_shapes

POINTWISE_PREFIX = "triton_poi_"
# One iteration count per tiled axis: XBLOCK, YBLOCK, ZBLOCK in the kernel's launch kwargs.
_BLOCK_AXIS = re.compile(r"\b[XYZ]BLOCK=")


def _iterations(args: dict[str, Any], types: list[Any], concrete: list[Any]) -> int:
    """xnumel x ynumel x ... from the trailing Concrete Inputs, 0 when not recorded. The count of
    axes is ``kernel_kwargs``' XBLOCK/YBLOCK/ZBLOCK where the trace keeps it; else only a kernel
    with exactly one scalar argument is read (its xnumel: a tiled kernel has two counts and a
    dynamic-shape kernel size variables ``ks*`` besides, which the values alone cannot tell apart)."""
    axes = len(_BLOCK_AXIS.findall(str(args.get("kernel_kwargs", ""))))
    if "kernel_kwargs" not in args:
        axes = 1 if sum(1 for t in types if t == "Scalar") == 1 else 0
    if axes == 0 or len(concrete) < axes:
        return 0
    try:
        counts = [int(str(c)) for c in concrete[-axes:]]
    except ValueError:
        return 0
    return math.prod(counts) if all(c > 0 for c in counts) else 0


def inplace_written_bytes(name: str, args: dict[str, Any]) -> float:
    """Bytes the Triton pointwise kernel ``name`` provably stores into its first tensor argument (an
    ``in_out_ptr``; see module docstring), or 0.0."""
    if not str(name).startswith(POINTWISE_PREFIX) or not isinstance(args, dict):
        return 0.0
    dims, types, concrete = op_shapes(args)
    if not isinstance(dims, list) or not isinstance(types, list) or not isinstance(concrete, list):
        return 0.0
    if not (len(dims) == len(types) == len(concrete)):
        return 0.0
    tensors = [
        (math.prod(d), TENSOR_TYPES[t][1])
        for d, t in zip(dims, types, strict=True)
        if isinstance(t, str)
        and t in TENSOR_TYPES
        and isinstance(d, list)
        and all(isinstance(x, int) for x in d)
    ]
    iterations = _iterations(args, types, concrete)
    if len(tensors) < 2 or iterations <= 0:
        return 0.0
    (first_elements, first_size), (last_elements, _) = tensors[0], tensors[-1]
    if last_elements >= iterations or first_elements < iterations:
        return 0.0
    return float(iterations * first_size)
