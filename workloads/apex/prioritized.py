"""Prioritized transition replay as Ape-X keeps it (Horgan et al. 2018): proportional sampling over a
sum-tree with importance weights (Schaul et al. 2016, Sec. 3.3-3.4), priority exponent alpha 0.6 and
importance exponent beta 0.4 (Horgan et al. 2018, Appendix: "alpha = 0.6, beta = 0.4"), priorities set
by whoever inserts (the actors' own |TD| errors) and updated by the learner; FIFO eviction.

The sum-tree is the R2D2 workload's (workloads/r2d2/replay.py); the weights are normalised by the
batch's largest, as there (workloads/r2d2/priority.py).
"""

from __future__ import annotations

import numpy as np

from workloads.r2d2.priority import PRIORITY_FLOOR, importance_weights
from workloads.r2d2.replay import SumTree

PRIORITY_EXPONENT = 0.6  # alpha, Horgan et al. 2018, Appendix
IMPORTANCE_EXPONENT = 0.4  # beta, Horgan et al. 2018, Appendix


def proportional_indices(tree: SumTree, uniforms: np.ndarray, size: int) -> np.ndarray:
    """Stratified proportional sampling: draw k of B falls in [k, k+1) * total / B at the position
    ``uniforms[k]`` in [0, 1) of its stratum; the leaf whose cumulative interval holds it."""
    uniforms = np.asarray(uniforms, dtype=np.float64)
    batch = len(uniforms)
    masses = (np.arange(batch) + uniforms) * (tree.total / batch)
    return np.minimum(tree.find(masses), size - 1)


class TransitionReplay:
    """Fixed-capacity n-step transitions (obs, action, return, discount, next obs) with priorities."""

    def __init__(
        self,
        capacity: int,
        obs_shape: tuple[int, ...],
        alpha: float = PRIORITY_EXPONENT,
        beta: float = IMPORTANCE_EXPONENT,
        seed: int = 0,
    ):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity, self.alpha, self.beta = capacity, alpha, beta
        self.obs = np.zeros((capacity, *obs_shape), dtype=np.uint8)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.returns = np.zeros(capacity, dtype=np.float32)
        self.discounts = np.zeros(capacity, dtype=np.float32)
        self.tree = SumTree(capacity)
        self.size = 0
        self.next_index = 0
        self.inserted = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(
        self,
        obs: np.ndarray,
        actions: np.ndarray,
        returns: np.ndarray,
        discounts: np.ndarray,
        next_obs: np.ndarray,
        priorities: np.ndarray,
    ) -> np.ndarray:
        """Insert a batch (oldest slots overwritten); returns the slots written."""
        n = len(actions)
        slots = (self.next_index + np.arange(n)) % self.capacity
        self.obs[slots] = obs
        self.next_obs[slots] = next_obs
        self.actions[slots] = actions
        self.returns[slots] = returns
        self.discounts[slots] = discounts
        self.tree.update(slots, self._scaled(priorities))
        self.next_index = int((self.next_index + n) % self.capacity)
        self.size = min(self.size + n, self.capacity)
        self.inserted += n
        return slots

    def _scaled(self, priorities: np.ndarray) -> np.ndarray:
        p = np.maximum(np.abs(np.asarray(priorities, dtype=np.float64)), PRIORITY_FLOOR)
        return np.power(p, self.alpha)

    def sample(
        self, batch_size: int, uniforms: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """(indices, importance weights) of a prioritized batch; ``uniforms`` (one per draw, in
        [0, 1)) replace the generator's draws (tests work them by hand)."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay")
        if uniforms is None:
            uniforms = self.rng.random(batch_size)
        indices = proportional_indices(self.tree, uniforms, self.size)
        probs = self.tree.leaf(indices) / self.tree.total
        return indices, importance_weights(probs, self.size, self.beta).astype(np.float32)

    def batch(self, indices: np.ndarray) -> tuple[np.ndarray, ...]:
        """(obs, actions, returns, discounts, next_obs) of ``indices``."""
        return (
            self.obs[indices],
            self.actions[indices],
            self.returns[indices],
            self.discounts[indices],
            self.next_obs[indices],
        )

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        self.tree.update(np.asarray(indices), self._scaled(priorities))
