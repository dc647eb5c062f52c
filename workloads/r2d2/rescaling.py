"""Invertible value rescaling h and its inverse (Pohlen et al. 2018, "Observe and Look Further",
arXiv:1805.11593, Sec. 3.2 and Proposition A.2; used by R2D2, Kapturowski et al. 2019, Sec. 2).

R2D2 trains Q on h(target) and bootstraps through h^-1, so rewards of very different scales share one
network without clipping.
"""

from __future__ import annotations

import torch

DEFAULT_EPS = 1e-3  # REFERENCE.md (R2D2): h(x) = sign(x)(sqrt(|x|+1)-1) + 1e-3 x


def h(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x."""
    return torch.sign(x) * (torch.sqrt(torch.abs(x) + 1.0) - 1.0) + eps * x


def h_inv(x: torch.Tensor, eps: float = DEFAULT_EPS) -> torch.Tensor:
    """Closed-form inverse (Pohlen et al. 2018, Prop. A.2):
    h^-1(x) = sign(x) (((sqrt(1 + 4 eps (|x| + 1 + eps)) - 1) / (2 eps))^2 - 1).

    Derivation: for x >= 0 put u = sqrt(y + 1), then x = u - 1 + eps (u^2 - 1), a quadratic
    eps u^2 + u - (1 + eps + x) = 0 whose positive root is the fraction above; y = u^2 - 1.
    Computed in the rationalised form (sqrt(a) - 1) / (2 eps) = 2 c / (sqrt(a) + 1) with
    c = |x| + 1 + eps and a = 1 + 4 eps c: same value, no cancellation in float32.
    """
    c = torch.abs(x) + 1.0 + eps
    root = 2.0 * c / (torch.sqrt(1.0 + 4.0 * eps * c) + 1.0)
    return torch.sign(x) * (root * root - 1.0)
