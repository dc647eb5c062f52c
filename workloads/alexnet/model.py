"""AlexNet in plain torch, layer for layer as torchvision's ``alexnet`` (torchvision is not installable
here, so the definition is written out).

Sources: Krizhevsky, Sutskever, Hinton, "ImageNet Classification with Deep Convolutional Neural
Networks", NIPS 2012 (the architecture), and torchvision/models/alexnet.py (the single-GPU variant with
64/192/384/256/256 conv channels that every framework benchmark uses; 61,100,840 parameters).
"""

from __future__ import annotations

import torch
from torch import nn

IMAGE_SIZE = 224  # torchvision's AlexNet input: 3 x 224 x 224
NUM_CLASSES = 1000  # ImageNet-1k
POOLED_SIZE = 6  # AdaptiveAvgPool2d((6, 6)) output side; 256 * 6 * 6 = 9216 classifier inputs


class AlexNet(nn.Module):
    """torchvision's AlexNet: five convs with three max-pools, then three fully connected layers."""

    def __init__(self, num_classes: int = NUM_CLASSES, dropout: float = 0.5) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 64, kernel_size=11, stride=4, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(64, 192, kernel_size=5, padding=2),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
            nn.Conv2d(192, 384, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(384, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.Conv2d(256, 256, kernel_size=3, padding=1),
            nn.ReLU(inplace=True),
            nn.MaxPool2d(kernel_size=3, stride=2),
        )
        self.avgpool = nn.AdaptiveAvgPool2d((POOLED_SIZE, POOLED_SIZE))
        self.classifier = nn.Sequential(
            nn.Dropout(p=dropout),
            nn.Linear(256 * POOLED_SIZE * POOLED_SIZE, 4096),
            nn.ReLU(inplace=True),
            nn.Dropout(p=dropout),
            nn.Linear(4096, 4096),
            nn.ReLU(inplace=True),
            nn.Linear(4096, num_classes),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.features(x)
        x = self.avgpool(x)
        x = torch.flatten(x, 1)
        return self.classifier(x)


def build_alexnet(dtype: torch.dtype = torch.float32, seed: int = 0) -> AlexNet:
    """A randomly initialised AlexNet in eval mode (dropout off), ready for inference.

    Weights are random on purpose: inference time does not depend on their values.
    """
    torch.manual_seed(seed)
    return AlexNet().to(dtype=dtype).eval()


def random_images(
    batch_size: int, dtype: torch.dtype = torch.float32, seed: int = 0
) -> torch.Tensor:
    """A batch of random 3 x 224 x 224 'images' (values only matter for numerics, not for time)."""
    generator = torch.Generator().manual_seed(seed)
    images = torch.randn(batch_size, 3, IMAGE_SIZE, IMAGE_SIZE, generator=generator)
    return images.to(dtype)
