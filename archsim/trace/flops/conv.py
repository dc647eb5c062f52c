"""Convolution formulas (forward, transposed, backward): 2 FLOPs per multiply-add.

2021-era traces (PyTorch 1.8-1.10) record stride/padding/dilation as ``GenericList`` without
values (no ``Concrete Inputs``), so a forward convolution's output size cannot be computed from its
own arguments; ingest then passes the output shape it read from the matching autograd node
(``CudnnConvolutionBackward``'s recorded grad_output, same ``Sequence number``) as
``OpArgs.output_shape``. The legacy backward entry point ``cudnn_convolution_backward`` records
(input, grad_output, weight), which is all its cost needs.
"""

from __future__ import annotations

import math
from typing import Any

from archsim.trace.flops.args import Formula, OpArgs, Tensor, is_ints

# Positions of (stride, padding, dilation, groups, transposed) in each convolution entry point's
# schema (native_functions.yaml). Input is arg 0 and weight arg 1 everywhere.
_CONV_ARGS: dict[str, tuple[int, int, int, int | None, int | None]] = {
    "conv1d": (3, 4, 5, 6, None),
    "conv2d": (3, 4, 5, 6, None),
    "conv3d": (3, 4, 5, 6, None),
    "convolution": (3, 4, 5, 8, 6),
    "_convolution": (3, 4, 5, 8, 6),
    "mkldnn_convolution": (4, 3, 5, 6, None),
    "cudnn_convolution": (3, 2, 4, 5, None),
    "miopen_convolution": (4, 3, 5, 6, None),
    "_slow_conv2d_forward": (4, 5, None, None, None),
    "thnn_conv2d": (4, 5, None, None, None),
}
# Launching-op names of forward convolutions (input arg 0, weight arg 1), as kernels record them.
FORWARD_CONV_OPS: frozenset[str] = frozenset(f"aten::{name}" for name in _CONV_ARGS)


def _seq(value: Any, n: int, default: int) -> list[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return [value] * n
    if is_ints(value) and len(value) in (1, n):
        return list(value) * (n // len(value))
    return [default] * n


def _conv(name: str) -> Formula:
    stride_i, pad_i, dil_i, groups_i, transposed_i = _CONV_ARGS[name]

    def formula(args: OpArgs) -> tuple[float, float, float] | None:
        x, w = args.tensor(0), args.tensor(1)
        if x is None or w is None or len(x.shape) < 3 or len(x.shape) != len(w.shape):
            return None
        spatial = len(x.shape) - 2
        stride = args.value(stride_i)
        if stride is None:
            return _conv_from_output(args, x, w)
        stride = _seq(stride, spatial, 1)
        padding = _seq(args.value(pad_i), spatial, 0)
        dilation = _seq(args.value(dil_i) if dil_i is not None else None, spatial, 1)
        transposed = bool(args.value(transposed_i)) if transposed_i is not None else False
        n = x.shape[0]
        kernel = w.shape[2:]
        if transposed:
            # Each input element scatters into a (C_out/groups x kernel) patch: weight [C_in, C_out/g, k..]
            flops = 2.0 * n * math.prod(x.shape[2:]) * math.prod(w.shape)
            out_numel = (
                n
                * w.shape[1]
                * math.prod(
                    (i - 1) * s - 2 * p + d * (k - 1) + 1
                    for i, s, p, d, k in zip(
                        x.shape[2:], stride, padding, dilation, kernel, strict=True
                    )
                )
            )
            return flops, args.read_bytes(), out_numel * args.itemsize
        out_spatial = [
            (i + 2 * p - d * (k - 1) - 1) // s + 1
            for i, s, p, d, k in zip(x.shape[2:], stride, padding, dilation, kernel, strict=True)
        ]
        if min(out_spatial) <= 0:
            return None
        c_out, c_in_per_group = w.shape[0], w.shape[1]
        out_numel = n * c_out * math.prod(out_spatial)
        # MACs: every output element sums C_in/groups x prod(kernel) products.
        flops = 2.0 * out_numel * c_in_per_group * math.prod(kernel)
        has_bias = name not in ("cudnn_convolution",) and args.tensor(2) is not None
        if has_bias:
            flops += out_numel
        return flops, args.read_bytes(), out_numel * args.itemsize

    return formula


def _conv_from_output(args: OpArgs, x: Tensor, w: Tensor) -> tuple[float, float, float] | None:
    """Forward convolution whose output shape [N, C_out, *spatial] came from outside its arguments
    (legacy traces): every output element sums C_in/groups x prod(kernel) products, as in _conv."""
    out = args.output_shape
    if out is None or len(out) != len(x.shape) or out[0] != x.shape[0] or out[1] != w.shape[0]:
        return None  # without the stride (no Concrete Inputs) the output size is unknown
    out_numel = math.prod(out)
    flops = 2.0 * out_numel * w.shape[1] * math.prod(w.shape[2:])
    return flops, args.read_bytes(), out_numel * args.itemsize


def _legacy_cudnn_conv_backward(args: OpArgs) -> tuple[float, float, float] | None:
    """PyTorch 1.8-1.10 ``cudnn_convolution_backward(self, grad_output, weight, padding, stride,
    dilation, groups, benchmark, deterministic, allow_tf32, output_mask[2])``: grad_input and
    grad_weight each cost the forward's MACs (grad_output elements x C_in/groups x prod(kernel)),
    2 FLOPs per MAC; no bias term (cuDNN adds it separately). output_mask is not recorded in these
    traces: both gradients are counted, as for every non-input layer."""
    x, go, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if x is None or go is None or w is None or len(go.shape) < 3 or len(w.shape) != len(go.shape):
        return None
    macs = go.numel * w.shape[1] * math.prod(w.shape[2:])
    mask = args.value(10)
    mask = list(mask) if isinstance(mask, list | tuple) and len(mask) == 2 else [True, True]
    flops = 2.0 * macs * (int(bool(mask[0])) + int(bool(mask[1])))
    written = (x.nbytes if mask[0] else 0) + (w.nbytes if mask[1] else 0)
    return flops, args.read_bytes(), float(written)


def _conv_backward(args: OpArgs) -> tuple[float, float, float] | None:
    """convolution_backward(grad_output, input, weight, bias_sizes, stride, padding, dilation,
    transposed, output_padding, groups, output_mask): grad_input and grad_weight each cost the
    forward's MACs; grad_bias one add per grad_output element."""
    go, x, w = args.tensor(0), args.tensor(1), args.tensor(2)
    if go is None or x is None or w is None or len(go.shape) < 3:
        return None
    if bool(args.value(7, False)):
        macs = go.shape[0] * math.prod(x.shape[2:]) * math.prod(w.shape)  # transposed
    else:
        macs = go.numel * w.shape[1] * math.prod(w.shape[2:])
    mask = args.value(10)
    mask = list(mask) if isinstance(mask, list | tuple) and len(mask) == 3 else [True] * 3
    flops = 2.0 * macs * (int(bool(mask[0])) + int(bool(mask[1]))) + (go.numel if mask[2] else 0)
    written = (x.nbytes if mask[0] else 0) + (w.nbytes if mask[1] else 0)
    return flops, args.read_bytes(), float(written)


FORMULAS: dict[str, tuple[str, Formula]] = {
    **{name: ("conv", _conv(name)) for name in _CONV_ARGS},
    "convolution_backward": ("conv", _conv_backward),
    "cudnn_convolution_backward": ("conv", _legacy_cudnn_conv_backward),
}
