"""Sequence priorities and prioritized-sampling arithmetic (Kapturowski et al. 2019, Sec. 2:
p = eta max_i |delta_i| + (1 - eta) mean |delta|, eta = 0.9, priority exponent 0.9; Schaul et al. 2016
for the sampling probabilities and importance-sampling weights).
"""

from __future__ import annotations

import numpy as np
import torch

PRIORITY_FLOOR = (
    1e-6  # keeps a zero-error sequence sampleable (Schaul et al. 2016, Sec. 3.3, "epsilon")
)


def sequence_priority(abs_td: torch.Tensor, mask: torch.Tensor, eta: float = 0.9) -> torch.Tensor:
    """eta * max + (1 - eta) * mean of |td| over the masked steps of each sequence: [B, T] -> [B]."""
    mask_f = mask.to(abs_td.dtype)
    count = mask_f.sum(dim=1).clamp(min=1.0)
    mean = (abs_td * mask_f).sum(dim=1) / count
    maxi = torch.where(mask, abs_td, torch.zeros_like(abs_td)).amax(dim=1)
    return eta * maxi + (1.0 - eta) * mean + PRIORITY_FLOOR


def sampling_probabilities(priorities: np.ndarray, exponent: float) -> np.ndarray:
    """P(i) = p_i^alpha / sum_k p_k^alpha."""
    scaled = np.power(priorities, exponent)
    return scaled / scaled.sum()


def importance_weights(probs: np.ndarray, size: int, beta: float) -> np.ndarray:
    """w_i = (N P(i))^-beta normalised by the largest weight in the batch (Schaul et al. 2016, Sec. 3.4)."""
    weights = np.power(size * probs, -beta)
    return weights / weights.max()
