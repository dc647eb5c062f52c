"""Bytes each kernel of a multi-kernel normalization op reads and writes, from the kernels' code.

Batch, layer, group and RMS norm launch a statistics (or weight-gradient) kernel that sweeps the
whole input, then an element-wise kernel that reads the input again and writes the output; their
backward reads grad_output and input in two kernels. Each of those kernels reads every tensor the op
reads, so the op's kernels together move more than the op's nominal bytes (archsim.trace.flops
counts each tensor once): the re-read is real DRAM traffic, and a launch-size share of the op's
bytes would price a statistics kernel at a third of what it reads. :func:`norm_split` gives each
kernel named in NORM_KERNEL_TRAFFIC what its code reads and writes:

reads:
- ``inputs``: every tensor the op reads (the op's ``bytes_read``): the kernel loops over the whole
  activation (and, in backward, grad_output), one block per row, channel or column strip; the op's
  few parameter tensors (weight, statistics) are counted with it whether or not this kernel reads
  them.
- ``partials``: what the op's kernel before it wrote as partial results (a two-stage reduction's
  second stage reads the first stage's per-block partials, not the input).
writes:
- ``output``: the op's output (the op's ``bytes_written``).
- ``rows``: ``values`` results per block (mean and rstd of a row, sum_dy and sum_dy_xmu of a channel).
- ``columns``: ``values`` results per x-thread of each block (a column's dgamma and dbeta, or per
  y-block partial sums of them): blocks x blockDim.x x ``values`` elements.

Sources (github.com/pytorch/pytorch, aten/src/ATen/native/cuda/; github.com/ROCm/MIOpen,
src/kernels/MIOpenBatchNormFwdTrainSpatial.cl):
- Normalization.cuh ``batch_norm_collect_statistics_kernel``: ``plane = blockIdx.x``, loops over every
  batch entry and position of its channel, writes the channel's mean and invstd;
  ``batch_norm_transform_input_kernel`` reads input, mean, invstd, weight, bias and writes output;
  ``batch_norm_backward_reduce_kernel`` reads grad_output and input per channel and writes sum_dy,
  sum_dy_xmu (and grad_weight, grad_bias: up to 4 per channel); ``batch_norm_backward_elemt_kernel``
  reads grad_output, input and the channel sums and writes grad_input; ``batch_norm_backward_kernel``
  does both in one kernel.
- layer_norm_kernel.cu ``RowwiseMomentsCUDAKernel`` (``i = blockIdx.x``; writes ``mean[i]``,
  ``rstd[i]``), ``LayerNormForwardCUDAKernel`` and ``vectorized_layer_norm_kernel`` (read X, write
  Y), ``layer_norm_grad_input_kernel(_vectorized)`` (``compute_gI``: read dY, X, gamma, write dX),
  ``GammaBetaBackwardSimpleCUDAKernel`` / ``GammaBetaBackwardCUDAKernel(_32x32)`` (thread ``j``
  loops over all M rows of dY and X, writes ``dg[j]``, ``db[j]``), ``cuComputePartGradGammaBeta``
  (reads dY and X, writes ``part_grad_gamma`` and ``part_grad_beta``, one row per blockIdx.y) and
  ``cuComputeGradGammaBeta`` (sums those partials into dgamma and dbeta).
- group_norm_kernel.cu ``RowwiseMomentsCUDAKernel`` (one block per (sample, group)),
  ``ComputeInternalGradientsCUDAKernel`` (``nc = blockIdx.x``: reads dY and X, writes ``ds[nc]``,
  ``db[nc]``), and the ``gpu_kernel`` calls of ``GroupNormKernelImplInternal`` (``[](T x, T_ACC a,
  T_ACC b)``: reads X, writes Y) and ``GroupNormBackwardKernelImplInternal`` (``[](T dy, T x, T_ACC
  c1, T_ACC c2, T_ACC c3)``: reads dY and X, writes dX; its ``[](T_ACC rstd, T gamma)`` forms c1
  over N x C only), told apart in the kernel name by their lambda's operand count.
- aiter's group norm (github.com/ROCm/aiter, csrc/kernels/groupnorm.cu, ``launchGroupNormKernel``:
  grid (gridx, N x groups) of 1024 threads): ``groupnorm_kernel_dispatch_up`` loops over its
  group's ``inner_size`` elements of x (4 per load when aligned) and writes a sum and a sum of
  squares per workgroup (``mean_acc[blockIdx.y*gridDim.x+blockIdx.x]``, ``square_mean_acc[...]``);
  ``groupnorm_kernel_dispatch_down`` reads its group's gridx partial pairs (a few KB, not counted),
  then x again, weight and bias per channel, and writes y: the input read twice over the op, as in
  PyTorch's two-kernel group norm.
- MIOpen's multi-kernel spatial batch norm: ``...MeanVariance`` reads its slice of the input and
  stashes a mean and variance per workgroup, ``...FinalMeanVariance`` reads those stashes and writes
  the channel's mean and inverse variance, ``...Norm`` reads the input and writes the output.

Kernels of such an op that the table does not name (parameter kernels of a few channels, running
statistics updates) move their own grid's elements, read once and written once
(ELEMENTS_PER_THREAD per thread, PyTorch's element-wise launch), as auxiliary kernels of a GEMM do.
"""

from __future__ import annotations

import re

import numpy as np

from archsim.perf.blocks import ELEMENTS_PER_THREAD

# PyTorch names a gpu_kernel by its lambda: "GroupNormKernelImplInternal<float>(...)::{lambda(float,
# float, float)#2}"; three or more operands mark the apply over the whole activation.
GROUP_NORM_APPLY = (
    r"GroupNorm(?:Backward)?KernelImplInternal<[^>]*>\([^)]*\)::\{lambda\((?:[\w:]+, ){2,}"
)
# (kernel-name pattern, reads, writes, values per row or column), first match wins; see the
# module docstring for each kernel's source.
NORM_KERNEL_TRAFFIC: tuple[tuple[str, str, str, int], ...] = (
    (r"batch_norm_collect_statistics_kernel", "inputs", "rows", 2),
    (r"batch_norm_transform_input_kernel", "inputs", "output", 0),
    (r"batch_norm_backward_reduce_kernel", "inputs", "rows", 4),
    (r"batch_norm_backward_elemt_kernel", "inputs", "output", 0),
    (r"batch_norm_backward_kernel", "inputs", "output", 0),
    (r"RowwiseMomentsCUDAKernel", "inputs", "rows", 2),
    (r"ComputeInternalGradientsCUDAKernel", "inputs", "rows", 2),
    # group norm's apply: a gpu_kernel lambda of 3+ operands (x, a, b forward; dy, x, c1-c3
    # backward) over the whole activation; its 2-operand one (rstd x gamma) covers N x C only
    (GROUP_NORM_APPLY, "inputs", "output", 0),
    (r"LayerNormForwardCUDAKernel|vectorized_layer_norm_kernel", "inputs", "output", 0),
    (r"layer_norm_grad_input_kernel", "inputs", "output", 0),
    # layer norm's, not group norm's GammaBetaBackwardCUDAKernel1/2 (a few channels' sums)
    (r"GammaBetaBackward(?:Simple)?CUDAKernel(?:_32x32)?<", "inputs", "columns", 2),
    (r"cuComputePartGradGammaBeta", "inputs", "columns", 2),
    (r"cuComputeGradGammaBeta", "partials", "columns", 2),
    (r"BatchNormFwdTrainSpatialMeanVariance", "inputs", "rows", 2),
    (r"BatchNormFwdTrainSpatialFinalMeanVariance", "partials", "rows", 2),
    (r"BatchNormFwdTrainSpatialNorm", "inputs", "output", 0),
    # aiter's group norm (csrc/kernels/groupnorm.cu): "up" sums its slice, "down" applies
    (r"groupnorm_kernel_dispatch_up<", "inputs", "rows", 2),
    (r"groupnorm_kernel_dispatch_down<", "inputs", "output", 0),
)
_COMPILED = tuple((re.compile(p), r, w, v) for p, r, w, v in NORM_KERNEL_TRAFFIC)


def kernel_traffic(name: str) -> tuple[str, str, int] | None:
    """(reads, writes, values) of a kernel named in NORM_KERNEL_TRAFFIC, or None."""
    for pattern, reads, writes, values in _COMPILED:
        if pattern.search(name):
            return reads, writes, values
    return None


def norm_split(
    names: list[str],
    blocks: np.ndarray,
    threads: np.ndarray,
    columns: np.ndarray,
    op_read: float,
    op_written: float,
    element: float,
) -> tuple[np.ndarray, np.ndarray] | None:
    """(bytes read, bytes written) of each kernel of one op, in launch order, or None when no kernel
    is named in NORM_KERNEL_TRAFFIC. ``columns``: blocks x blockDim.x of each launch; ``element``:
    bytes per element of the op's dtype (its statistics are counted in it too)."""
    roles = [kernel_traffic(name) for name in names]
    if all(role is None for role in roles):
        return None
    blocks = np.asarray(blocks, dtype=float)
    own = blocks * np.asarray(threads, dtype=float) * ELEMENTS_PER_THREAD * element
    read = np.minimum(own, op_read)
    written = np.minimum(own, op_written)
    per = {"rows": blocks, "columns": np.asarray(columns, dtype=float)}
    for i, role in enumerate(roles):
        if role is None:
            continue  # its own grid, set above
        reads, writes, values = role
        written[i] = op_written if writes == "output" else per[writes][i] * values * element
        if reads == "inputs":
            read[i] = op_read
        else:
            named = [j for j in range(i) if roles[j] is not None]
            read[i] = written[named[-1]] if named else read[i]
    return read, written


__all__ = ["GROUP_NORM_APPLY", "NORM_KERNEL_TRAFFIC", "kernel_traffic", "norm_split"]
