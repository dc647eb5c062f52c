"""The Nature DQN network (Mnih et al. 2015; REFERENCE.md "Nature DQN").

Its convolutions run one of two ways (``conv_impl``), with the same parameters:

- ``"cudnn"``: the library convolution, ``torch.nn.functional.conv2d`` (cuDNN on CUDA, torch's own
  kernels on CPU);
- ``"unfold"``: explicit im2col + matrix multiply (``torch.nn.functional.unfold``, a GEMM, a bias add
  and a reshape), as Torch7's ``nn.SpatialConvolutionMM`` did for the original DQN code.

One module with two forward paths, so switching the path changes the kernels, never the weights.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from workloads.dqn.settings import CONV_IMPLS

# Layer sizes from REFERENCE.md / Mnih et al. 2015 ("Methods: model architecture"):
# conv 32x8x8 stride 4, conv 64x4x4 stride 2, conv 64x3x3 stride 1, fc 3136->512, fc 512->actions.
CONV_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (out channels, kernel, stride)
HIDDEN_UNITS = 512
# 84x84 input: (84-8)/4+1 = 20; (20-4)/2+1 = 9; (9-3)/1+1 = 7 -> 64*7*7 = 3136 features.
FLAT_FEATURES = 64 * 7 * 7
PIXEL_SCALE = 255.0  # uint8 frames -> [0, 1]


def unfold_conv2d(
    x: torch.Tensor, weight: torch.Tensor, bias: torch.Tensor | None, stride: int
) -> torch.Tensor:
    """A no-padding, no-dilation convolution as im2col + GEMM (SpatialConvolutionMM's algorithm)."""
    n, _, height, width = x.shape
    out_channels, _, kh, kw = weight.shape
    cols = F.unfold(x, (kh, kw), stride=stride)  # (N, C*kh*kw, L): one column per output pixel
    out = weight.reshape(out_channels, -1) @ cols  # (N, out_channels, L)
    if bias is not None:
        out = out + bias.reshape(1, out_channels, 1)
    out_h = (height - kh) // stride + 1
    out_w = (width - kw) // stride + 1
    return out.reshape(n, out_channels, out_h, out_w)


class SwitchableConv2d(nn.Conv2d):
    """``nn.Conv2d`` (no padding) whose forward runs the library or the unfold+GEMM path."""

    def __init__(self, *args, conv_impl: str = "cudnn", **kwargs):
        super().__init__(*args, **kwargs)
        if conv_impl not in CONV_IMPLS:
            raise ValueError(f"conv_impl {conv_impl!r}: expected one of {', '.join(CONV_IMPLS)}")
        self.conv_impl = conv_impl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.conv_impl == "unfold":
            return unfold_conv2d(x, self.weight, self.bias, self.stride[0])
        return super().forward(x)


class NatureDQN(nn.Module):
    """Q-network: uint8 (N, 4, 84, 84) frames in, (N, actions) Q-values out."""

    def __init__(self, num_actions: int, in_frames: int = 4, conv_impl: str = "cudnn"):
        super().__init__()
        layers: list[nn.Module] = []
        channels = in_frames
        for out_channels, kernel, stride in CONV_LAYERS:
            conv = SwitchableConv2d(channels, out_channels, kernel, stride, conv_impl=conv_impl)
            layers += [conv, nn.ReLU()]
            channels = out_channels
        self.torso = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Sequential(
            nn.Linear(FLAT_FEATURES, HIDDEN_UNITS), nn.ReLU(), nn.Linear(HIDDEN_UNITS, num_actions)
        )

    def set_conv_impl(self, conv_impl: str) -> None:
        """Switch every convolution's forward path (weights untouched)."""
        if conv_impl not in CONV_IMPLS:
            raise ValueError(f"conv_impl {conv_impl!r}: expected one of {', '.join(CONV_IMPLS)}")
        for module in self.modules():
            if isinstance(module, SwitchableConv2d):
                module.conv_impl = conv_impl

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.head(self.torso(frames.float() / PIXEL_SCALE))
