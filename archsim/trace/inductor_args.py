"""Bytes TorchInductor's Triton kernels read, and write back in place, from their recorded calls.

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

Reads (:func:`read_bytes`, every Triton kernel: ``poi``, ``red``, ``per``): a kernel of N
iterations (xnumel x ynumel x r0_numel ...) loads each buffer through ``tl.load(in_ptr0 + (index),
mask)``, one element per iteration for each distinct index expression (the kernel's loads are
common-subexpression-eliminated per buffer and index: ``TritonKernel.load`` through ``self.cse``),
and a fused graph indexes a buffer at one expression unless it reads it twice (a stencil, a concat
of halves). A tensor larger than N, the source of a slice or crop (SD3.5's [1, 36864, 2432]
position table, of which a 64 x 64 crop of 4,096 rows is read), is then read N elements deep, not in
full: each tensor is counted min(its elements, N) x element size. The count of trailing iteration
scalars is one per ``[XYZ]BLOCK`` and ``R<n>_BLOCK`` in ``kernel_kwargs``, plus r0_numel for a
persistent reduction (``triton_per_``: its R0_BLOCK is a constexpr, not a launch kwarg).

A compiled graph's wrapper op is not a kernel's call. AOTAutograd runs the whole compiled forward
(backward) graph inside one ``torch.autograd.Function``, ``class CompiledFunction``
(torch/_functorch/aot_autograd.py; _aot_autograd/runtime_wrappers.py later), whose
``forward(ctx, *deduped_flat_tensor_args)`` calls ``compiled_fw`` and whose autograd node is
``CompiledFunctionBackward``: the profiler records the graph's inputs (forward: every flattened
input; backward: the grad outputs only, not the saved tensors the graph reads) as that op's
``Input Dims``. Where the graph's kernels have no recorded call of their own (PyTorch 2.0's
``triton__0d1d2d...`` kernels, and CUDA-graph replays: ``cudaGraphLaunch`` under the wrapper),
they inherit those shapes, and split by launch size they are no kernel's reads. On
a100_80gb_train_prewindow a one-block ``triton__0d1d23d`` of 128 threads under a
``CompiledFunctionBackward`` of one [4096, 2862] fp32 tangent was handed its 46.9 MB (3 us
measured: 15.6 TB/s, 7.7 times the A100 80GB's 2,039 GB/s of HBM, NVIDIA A100 datasheet), a
16-block ``triton__0d1d2d`` 24.4 MB (2.5 us), a ``gemv2T_kernel_val`` 167 MB (6 us), the
44,768-block ``triton__0d1d2d3d4d5d6d`` 1.12 GB (321 us: 3.5 TB/s). Which inputs each kernel
reads, and how deep, the record does not say, so :func:`read_bytes` gives none (0.0) for the
wrapper's kernels, and the kernel model infers their bytes from their launch as for any kernel
without shapes (archsim.perf.blocks.estimate_work_from_launch). A kernel of such a graph that
loops (a reduction over rows its grid does not show) is then under-priced, as every reduction
inferred from its grid is.
"""

from __future__ import annotations

import math
import re
from typing import Any

from archsim.trace.flops.args import TENSOR_TYPES
from archsim.trace.kineto import op_shapes

POINTWISE_PREFIX = "triton_poi_"
# AOTAutograd's wrapper of a compiled graph and its autograd node (module docstring).
GRAPH_WRAPPER_OPS = frozenset({"CompiledFunction", "CompiledFunctionBackward"})
PERSISTENT_PREFIX = "triton_per_"
TRITON_PREFIXES = (POINTWISE_PREFIX, "triton_red_", PERSISTENT_PREFIX)
# One iteration count per tiled axis: XBLOCK, YBLOCK, ZBLOCK (and a looped reduction's R0_BLOCK,
# R1_BLOCK) in the kernel's launch kwargs.
_BLOCK_AXIS = re.compile(r"\b(?:[XYZ]|R\d_)BLOCK=")


def _iterations(
    args: dict[str, Any], types: list[Any], concrete: list[Any], persistent: bool = False
) -> int:
    """xnumel x ynumel x ... (x r0_numel) from the trailing Concrete Inputs, 0 when not recorded.
    The count of axes is ``kernel_kwargs``' XBLOCK/YBLOCK/ZBLOCK/R<n>_BLOCK where the trace keeps
    it (plus r0_numel for a ``persistent`` reduction); else only a pointwise kernel with exactly one
    scalar argument is read (its xnumel: a tiled kernel has two counts and a dynamic-shape kernel
    size variables ``ks*`` besides, which the values alone cannot tell apart)."""
    axes = len(_BLOCK_AXIS.findall(str(args.get("kernel_kwargs", "")))) + int(persistent)
    if "kernel_kwargs" not in args:
        one = sum(1 for t in types if t == "Scalar") == 1
        axes = 1 if one and not persistent else 0
    if axes == 0 or len(concrete) < axes:
        return 0
    try:
        counts = [int(str(c)) for c in concrete[-axes:]]
    except ValueError:
        return 0
    return math.prod(counts) if all(c > 0 for c in counts) else 0


def _tensors_and_iterations(
    name: str, args: dict[str, Any]
) -> tuple[list[tuple[int, int]], int] | None:
    """((elements, bytes per element) of each tensor argument, iterations) of a Triton kernel's
    recorded call, or None when the record is malformed."""
    if not isinstance(args, dict):
        return None
    dims, types, concrete = op_shapes(args)
    if not isinstance(dims, list) or not isinstance(types, list) or not isinstance(concrete, list):
        return None
    if not (len(dims) == len(types) == len(concrete)):
        return None
    tensors = [
        (math.prod(d), TENSOR_TYPES[t][1])
        for d, t in zip(dims, types, strict=True)
        if isinstance(t, str)
        and t in TENSOR_TYPES
        and isinstance(d, list)
        and all(isinstance(x, int) for x in d)
    ]
    persistent = str(name).startswith(PERSISTENT_PREFIX)
    return tensors, _iterations(args, types, concrete, persistent)


def read_bytes(name: str, args: dict[str, Any]) -> float | None:
    """Bytes a Triton kernel (``triton_poi_``/``triton_red_``/``triton_per_``) reads: each tensor
    argument min(its elements, iterations) x element size (module docstring); 0.0 for a compiled
    graph's wrapper op (GRAPH_WRAPPER_OPS: its shapes are the graph's inputs, no kernel's reads:
    none known, inferred from the launch downstream); None for other ops or when the iterations
    are not recorded (then every tensor counts in full)."""
    if str(name) in GRAPH_WRAPPER_OPS:
        return 0.0
    if not str(name).startswith(TRITON_PREFIXES):
        return None
    found = _tensors_and_iterations(name, args)
    if found is None or found[1] <= 0:
        return None
    tensors, iterations = found
    return float(sum(min(elements, iterations) * size for elements, size in tensors))


def inplace_written_bytes(name: str, args: dict[str, Any]) -> float:
    """Bytes the Triton pointwise kernel ``name`` provably stores into its first tensor argument (an
    ``in_out_ptr``; see module docstring), or 0.0."""
    if not str(name).startswith(POINTWISE_PREFIX):
        return 0.0
    found = _tensors_and_iterations(name, args)
    if found is None:
        return 0.0
    tensors, iterations = found
    if len(tensors) < 2 or iterations <= 0:
        return 0.0
    (first_elements, first_size), (last_elements, _) = tensors[0], tensors[-1]
    if last_elements >= iterations or first_elements < iterations:
        return 0.0
    return float(iterations * first_size)
