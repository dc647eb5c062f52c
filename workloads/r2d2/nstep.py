"""n-step double-Q targets over a batch of sequences, with value rescaling (Kapturowski et al. 2019,
Sec. 2: "n-step double Q-learning ... with value function rescaling").

For step t with n-step window t..t+n-1:
    G_t = sum_{k<n} gamma^k r_{t+k} + gamma^n h^-1(Q_target(s_{t+n}, argmax_a Q_online(s_{t+n}, a)))
    target_t = h(G_t)
An episode end at step t+k (done_{t+k} = 1: the transition from t+k ended the episode) stops the sum
after r_{t+k} and drops the bootstrap. A target exists only if its window is complete inside the
sequence (t+n < T) or an episode end cuts it short; other steps are masked out of the loss.
"""

from __future__ import annotations

import torch

from workloads.r2d2.rescaling import DEFAULT_EPS, h, h_inv


def double_q_bootstrap(q_online: torch.Tensor, q_target: torch.Tensor) -> torch.Tensor:
    """Q_target(s, argmax_a Q_online(s, a)) for every step: [B, T, A] x2 -> [B, T]."""
    best = q_online.argmax(dim=-1, keepdim=True)
    return q_target.gather(-1, best).squeeze(-1)


def nstep_targets(
    rewards: torch.Tensor,
    dones: torch.Tensor,
    bootstrap: torch.Tensor,
    n: int,
    gamma: float,
    rescale: bool = True,
    eps: float = DEFAULT_EPS,
) -> tuple[torch.Tensor, torch.Tensor]:
    """n-step targets and their validity mask.

    rewards, dones: [B, T] (dones as 0/1 floats, done_t ends the episode after r_t);
    bootstrap: [B, T] value of each step's state in the network's (rescaled) output space, e.g. from
    :func:`double_q_bootstrap`. Returns (targets [B, T], has_target [B, T] bool).
    """
    if n < 1:
        raise ValueError(f"n-step must be >= 1, got {n}")
    batch, length = rewards.shape
    value = h_inv(bootstrap, eps) if rescale else bootstrap
    returns = torch.zeros_like(rewards)
    alive = torch.ones_like(rewards)  # 1 while no episode end has occurred inside the window
    ended = torch.zeros_like(rewards, dtype=torch.bool)
    for k in range(n):
        # Shift left by k: window step t+k for every t; beyond the sequence end contributes nothing.
        r_k = _shift_left(rewards, k)
        d_k = _shift_left(dones, k)
        returns = returns + alive * (gamma**k) * r_k
        ended = ended | ((alive > 0) & (d_k > 0))
        alive = alive * (1.0 - d_k)
    steps = torch.arange(length, device=rewards.device).expand(batch, length)
    window_complete = steps + n < length
    value_n = _shift_left(value, n)
    returns = returns + alive * (gamma**n) * value_n * window_complete
    has_target = window_complete | ended
    targets = h(returns, eps) if rescale else returns
    return targets, has_target


def _shift_left(x: torch.Tensor, k: int) -> torch.Tensor:
    """x[:, t + k] at position t, zero past the end."""
    if k == 0:
        return x
    out = torch.zeros_like(x)
    if k < x.shape[1]:
        out[:, :-k] = x[:, k:]
    return out
