"""The Nature DQN network (Mnih et al. 2015; REFERENCE.md "Nature DQN")."""

from __future__ import annotations

import torch
from torch import nn

# Layer sizes from REFERENCE.md / Mnih et al. 2015 ("Methods: model architecture"):
# conv 32x8x8 stride 4, conv 64x4x4 stride 2, conv 64x3x3 stride 1, fc 3136->512, fc 512->actions.
CONV_LAYERS = ((32, 8, 4), (64, 4, 2), (64, 3, 1))  # (out channels, kernel, stride)
HIDDEN_UNITS = 512
# 84x84 input: (84-8)/4+1 = 20; (20-4)/2+1 = 9; (9-3)/1+1 = 7 -> 64*7*7 = 3136 features.
FLAT_FEATURES = 64 * 7 * 7
PIXEL_SCALE = 255.0  # uint8 frames -> [0, 1]


class NatureDQN(nn.Module):
    """Q-network: uint8 (N, 4, 84, 84) frames in, (N, actions) Q-values out."""

    def __init__(self, num_actions: int, in_frames: int = 4):
        super().__init__()
        layers: list[nn.Module] = []
        channels = in_frames
        for out_channels, kernel, stride in CONV_LAYERS:
            layers += [nn.Conv2d(channels, out_channels, kernel, stride), nn.ReLU()]
            channels = out_channels
        self.torso = nn.Sequential(*layers, nn.Flatten())
        self.head = nn.Sequential(
            nn.Linear(FLAT_FEATURES, HIDDEN_UNITS), nn.ReLU(), nn.Linear(HIDDEN_UNITS, num_actions)
        )

    def forward(self, frames: torch.Tensor) -> torch.Tensor:
        return self.head(self.torso(frames.float() / PIXEL_SCALE))
