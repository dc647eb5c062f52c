"""Unfold + GEMM versus library convolutions on one GPU: pure functions (issue 15 item 5).

Older frameworks (Torch7's SpatialConvolutionMM, Caffe's im2col path) ran a convolution as two
kernels: ``im2col`` copies every receptive field into a column buffer of ``C k^2 x OH OW`` per image
(k^2 / stride^2 times the input's size), then one GEMM multiplies the weights by it. A library
convolution (cuDNN's implicit GEMM, Chetlur et al. 2014, "cuDNN: Efficient Primitives for Deep
Learning", arXiv:1410.0759, section 3) forms the same matrix tiles on chip and never writes the
buffer. Both do the same FLOPs at the GEMM engine's achieved fraction (cuDNN's convolutions are
GEMMs: archsim.perf.efficiency), so the difference is DRAM traffic and one more kernel:

- library: ``max(F / (peak e_gemm), (input + weights + output) / (W e_dram))``, one kernel;
- unfold: im2col ``(input + buffer) / (W e_dram)`` then the GEMM ``max(F / (peak e_gemm),
  (buffer + weights + output) / (W e_dram))``, two kernels;

each kernel at least ``gpu.kernel_min_us``. This closed form is the per-layer what-if for a layer
list (docs/EMBEDDED.md). In the simulator, :func:`trace_with_conv_impl` (``archsim simulate
--conv-impl cudnn|unfold``) rewrites a trace's convolutions into the other implementation's ops
(archsim.perf.conv_rewrite), which the kernel model then prices op by op with these same fractions;
a trace captured with unfold is priced with its im2col writing the column buffer.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

FP32_BYTES = 4
IMPLS = ("cudnn", "unfold")


@dataclass(frozen=True)
class ConvLayer:
    """One 2-D convolution: input channels, square input side, output channels, kernel, stride."""

    in_channels: int
    in_side: int
    out_channels: int
    kernel: int
    stride: int

    @property
    def out_side(self) -> int:
        return (self.in_side - self.kernel) // self.stride + 1


# The Nature DQN's convolutions (Mnih et al. 2015, "Human-level control through deep reinforcement
# learning", Methods: 4x84x84 input; 32 8x8 stride 4; 64 4x4 stride 2; 64 3x3 stride 1).
NATURE_DQN_CONVS = (
    ConvLayer(4, 84, 32, 8, 4),
    ConvLayer(32, 20, 64, 4, 2),
    ConvLayer(64, 9, 64, 3, 1),
)


@dataclass(frozen=True)
class ConvCost:
    """Forward time of a layer (seconds), its DRAM bytes and its kernels."""

    seconds: float
    dram_bytes: float
    kernels: int


def conv_cost(layer: ConvLayer, batch: int, impl: str, hw) -> ConvCost:
    """Forward cost of ``layer`` at ``batch`` on ``hw``'s GPU as ``impl`` ("cudnn" or "unfold")."""
    from archsim.perf.efficiency import ACHIEVED, generation

    if impl not in IMPLS:
        raise ValueError(f"unknown conv implementation {impl!r} (expected cudnn or unfold)")
    if hw.gpu is None:
        raise ValueError("conv_cost needs a GPU")
    gpu = hw.gpu
    row = ACHIEVED.get(generation(gpu, hw.name), ACHIEVED["default"])
    bw = gpu.dram_bw_gbs * 1e9 * row.dram
    peak = gpu.fp32_peak_flops * row.gemm
    floor = gpu.kernel_min_us * 1e-6
    oh = layer.out_side
    taps = layer.in_channels * layer.kernel**2
    flops = 2.0 * batch * layer.out_channels * oh * oh * taps
    inp = batch * layer.in_channels * layer.in_side**2 * FP32_BYTES
    weights = layer.out_channels * taps * FP32_BYTES
    out = batch * layer.out_channels * oh * oh * FP32_BYTES
    if impl == "cudnn":
        moved = inp + weights + out
        return ConvCost(max(flops / peak, moved / bw, floor), moved, 1)
    buffer = batch * taps * oh * oh * FP32_BYTES
    im2col_s = max((inp + buffer) / bw, floor)
    gemm_s = max(flops / peak, (buffer + weights + out) / bw, floor)
    return ConvCost(im2col_s + gemm_s, inp + 2 * buffer + weights + out, 2)


def network_cost(layers, batch: int, impl: str, hw) -> ConvCost:
    """The layers' forward costs summed."""
    costs = [conv_cost(layer, batch, impl, hw) for layer in layers]
    return ConvCost(
        sum(c.seconds for c in costs),
        sum(c.dram_bytes for c in costs),
        sum(c.kernels for c in costs),
    )


def trace_with_conv_impl(trace, hw, conv_impl: str):
    """``trace`` with its convolutions as ``conv_impl`` ("trace": as captured; "cudnn" or "unfold":
    the what-if), priced on ``hw``'s GPU by the kernel model. One line for a what-if that cannot
    apply: no GPU to price kernels on, a GPU-captured trace (its measured kernels are not rewritten),
    or no convolution layers."""
    from archsim.errors import ArchsimError
    from archsim.perf.columns import MEASURED_KINDS
    from archsim.perf.conv_rewrite import (
        captured_impl,
        has_conv_layers,
        ops_as,
        with_im2col_buffers,
    )

    ops = trace.ops
    if ops is None or ops.empty or "name" not in ops:
        if conv_impl == "trace":
            return trace
        raise ArchsimError(f"--conv-impl {conv_impl}: the trace holds no ops to rewrite")
    captured = captured_impl(trace.meta, ops)
    gpu_captured = bool(ops["kind"].isin(MEASURED_KINDS).any())
    if conv_impl == "trace":
        # a GPU capture's im2col kernels carry their measured time: left as they are
        if captured != "unfold" or gpu_captured or not bool((ops["name"] == "aten::im2col").any()):
            return trace
        return dataclasses.replace(trace, ops=with_im2col_buffers(ops))
    if hw.gpu is None:
        raise ArchsimError(
            f"--conv-impl {conv_impl}: hardware config {hw.name} has no GPU; the CPU time of the "
            "captured convolutions is measured, not modelled, so only a GPU target can swap them"
        )
    if gpu_captured:
        raise ArchsimError(
            f"--conv-impl {conv_impl}: the trace was captured on a GPU; its measured kernels are "
            "not rewritten (capture with the workload's --conv-impl instead)"
        )
    if not has_conv_layers(ops):
        raise ArchsimError(
            f"--conv-impl {conv_impl}: the trace has no convolution layers (no conv2d ops with "
            "input shapes, no im2col + matmul pairs)"
        )
    return dataclasses.replace(trace, ops=ops_as(ops, captured, conv_impl))
