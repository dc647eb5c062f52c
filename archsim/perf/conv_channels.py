"""Zero-padded channels of tensor-core convolutions: the work a kernel does beyond the op's FLOPs.

Tensor-core convolution kernels load their activations and filters in vectors of N channels and
need the channel count to be a multiple of N (8 for FP16/BF16, 4 for TF32: NVIDIA, "Convolutional
Layers User's Guide", section "Channels In and Out"). For other counts cuDNN (7.6.3 and later)
pads the channels with zeros so that the convolution still runs on tensor cores (same guide: "the
convolution dimensions will automatically be padded where necessary to leverage Tensor Cores").
The kernel then multiplies the zeros too: its reduction depth is C_pad x prod(kernel), not
C x prod(kernel), and it reads the padded activations and filters that cuDNN's layout transform
wrote. CUTLASS-generated cuDNN kernels state N in their name (``..._nhwc_align8``).

So for a forward convolution whose kernel runs on tensor cores and names ``align<N>`` (N > 1),
with C input channels (``Input Dims`` [N, C, spatial...] and filters [C_out, C, kernel...]) not a
multiple of N:

    C_pad = ceil(C / N) x N,   FLOPs x C_pad / C,   extra bytes = (C_pad / C - 1) x (input + filter)

Worked example (fixture h100_timesformer_inference, TimeSformer's patch embedding): cudnn_convolution
of [128, 3, 224, 224] by [768, 3, 16, 16], stride 16, bf16, launches
``cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8``. C = 3, N = 8, C_pad = 8:
FLOPs 2 x 128 x 768 x 14 x 14 x 3 x 256 = 29.6 G become 78.9 G (x 8/3), and the kernel reads
(8/3 - 1) x (19.27 M + 0.59 M) x 2 B = 66.2 MB more. The trace confirms the padding: the
``nchwToNhwcKernel`` before it runs 1,568 x 256 threads per image = 224 x 224 x 8 elements.

Grouped convolutions (filters with fewer channels than the input) and ops with no ``align<N>`` in
the kernel name are left at factor 1 (no evidence of the padding there). Pure functions.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from archsim.perf.blocks import element_bytes
from archsim.perf.columns import parsed_input_dims, strings
from archsim.trace.flops.conv import FORWARD_CONV_OPS

ALIGN_PATTERN = re.compile(r"_align(\d+)")


def padded_channels(channels: int, align: int) -> int:
    """Channels rounded up to a multiple of the kernel's vector width ``align``."""
    return math.ceil(channels / align) * align


def _pad_of(name: str, input_dims: str) -> tuple[float, float] | None:
    """(FLOP factor, extra elements read) of one forward conv kernel, or None when not padded."""
    match = ALIGN_PATTERN.search(name)
    if match is None or int(match.group(1)) <= 1:
        return None
    dims = parsed_input_dims(input_dims)
    if len(dims) < 2:
        return None
    x, w = dims[0], dims[1]
    shapes_ok = all(
        isinstance(s, list) and len(s) >= 3 and all(isinstance(d, int) and d > 0 for d in s)
        for s in (x, w)
    )
    if not shapes_ok or len(x) != len(w) or x[1] != w[1]:
        return None  # not a recorded forward conv, or grouped
    channels = x[1]
    padded = padded_channels(channels, int(match.group(1)))
    if padded == channels:
        return None
    extra = (padded / channels - 1.0) * (math.prod(x) + math.prod(w))
    return padded / channels, extra


def channel_padding(ops: pd.DataFrame, tensor: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(FLOP factor >= 1, extra DRAM bytes >= 0) per op: zero-padded input channels of forward
    convolutions on tensor cores (``tensor``: archsim.perf.math_units.math_units) whose kernel names its
    vector width (see module docstring); (1, 0) for every other op."""
    factor = np.ones(len(ops))
    extra = np.zeros(len(ops))
    conv = (strings(ops, "op_class") == "conv").to_numpy(dtype=bool)
    forward = strings(ops, "launch_op").isin(FORWARD_CONV_OPS).to_numpy(dtype=bool)
    wanted = conv & forward & np.asarray(tensor, dtype=bool)
    if not wanted.any():
        return factor, extra
    names = strings(ops, "name").to_numpy(dtype=object)
    dims = strings(ops, "input_dims").to_numpy(dtype=object)
    size = element_bytes(strings(ops, "dtype"))
    cache: dict[tuple[str, str], tuple[float, float] | None] = {}
    for i in np.flatnonzero(wanted):
        key = (names[i], dims[i])
        if key not in cache:
            cache[key] = _pad_of(names[i], dims[i])
        pad = cache[key]
        if pad is not None:
            factor[i] = pad[0]
            extra[i] = pad[1] * size[i]
    return factor, extra


__all__ = ["ALIGN_PATTERN", "channel_padding", "padded_channels"]
