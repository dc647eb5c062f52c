"""Prioritized sequence replay, preallocated (numpy arrays sized at construction, so memory use is
known up front) with proportional sampling through a sum-tree (Schaul et al. 2016, Sec. 3.3).

Sampling is O(batch log N); inserting overwrites the oldest sequence (FIFO, as in R2D2's replay).
New sequences enter with the largest priority seen so far, so each is sampled at least once soon.
"""

from __future__ import annotations

import numpy as np

from workloads.r2d2.priority import importance_weights
from workloads.r2d2.sequences import Sequence


class SumTree:
    """Binary tree over ``capacity`` leaves; each inner node holds the sum of its children."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.size_pow2 = 1 << max(0, (capacity - 1).bit_length())
        self.nodes = np.zeros(2 * self.size_pow2, dtype=np.float64)

    @property
    def total(self) -> float:
        return float(self.nodes[1])

    def update(self, indices: np.ndarray, values: np.ndarray) -> None:
        for index, value in zip(np.asarray(indices), np.asarray(values), strict=True):
            node = int(index) + self.size_pow2
            self.nodes[node] = value
            node //= 2
            while node >= 1:
                self.nodes[node] = self.nodes[2 * node] + self.nodes[2 * node + 1]
                node //= 2

    def leaf(self, indices: np.ndarray) -> np.ndarray:
        return self.nodes[np.asarray(indices) + self.size_pow2]

    def find(self, masses: np.ndarray) -> np.ndarray:
        """Leaf index whose cumulative-sum interval contains each mass (vectorised descent)."""
        nodes = np.ones(len(masses), dtype=np.int64)
        masses = np.array(masses, dtype=np.float64)
        while nodes[0] < self.size_pow2:
            left = 2 * nodes
            left_sum = self.nodes[left]
            go_right = masses >= left_sum
            masses = np.where(go_right, masses - left_sum, masses)
            nodes = np.where(go_right, left + 1, left)
        return np.minimum(nodes - self.size_pow2, self.capacity - 1)


class SequenceReplay:
    """Fixed-capacity store of :class:`Sequence` items with prioritized sampling."""

    def __init__(
        self,
        capacity: int,
        length: int,
        frame_shape: tuple[int, int],
        stack: int,
        lstm_size: int,
        priority_exponent: float,
        importance_exponent: float,
        seed: int = 0,
    ):
        if capacity < 1:
            raise ValueError(f"replay capacity must be >= 1, got {capacity}")
        self.capacity = capacity
        self.alpha = priority_exponent
        self.beta = importance_exponent
        self.frames = np.zeros((capacity, length + stack - 1, *frame_shape), dtype=np.uint8)
        self.actions = np.zeros((capacity, length), dtype=np.int64)
        self.rewards = np.zeros((capacity, length), dtype=np.float32)
        self.dones = np.zeros((capacity, length), dtype=np.float32)
        self.valid = np.zeros((capacity, length), dtype=bool)
        self.prev_actions = np.zeros((capacity, length), dtype=np.int64)
        self.prev_rewards = np.zeros((capacity, length), dtype=np.float32)
        self.h0 = np.zeros((capacity, lstm_size), dtype=np.float32)
        self.c0 = np.zeros((capacity, lstm_size), dtype=np.float32)
        self.tree = SumTree(capacity)
        self.size = 0
        self.next_index = 0
        self.max_priority = 1.0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(self, seq: Sequence, priority: float | None = None) -> int:
        i = self.next_index
        self.frames[i] = seq.frames
        self.actions[i] = seq.actions
        self.rewards[i] = seq.rewards
        self.dones[i] = seq.dones
        self.valid[i] = seq.valid
        self.prev_actions[i] = seq.prev_actions
        self.prev_rewards[i] = seq.prev_rewards
        self.h0[i] = seq.h0
        self.c0[i] = seq.c0
        p = self.max_priority if priority is None else priority
        self.tree.update(np.array([i]), np.array([p**self.alpha]))
        self.next_index = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return i

    def sample(self, batch_size: int) -> tuple[np.ndarray, np.ndarray]:
        """(indices, importance weights): stratified proportional sampling over the sum-tree."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay")
        total = self.tree.total
        bounds = np.linspace(0.0, total, batch_size + 1)
        masses = self.rng.uniform(bounds[:-1], bounds[1:])
        indices = np.minimum(self.tree.find(masses), self.size - 1)
        probs = self.tree.leaf(indices) / total
        return indices, importance_weights(probs, self.size, self.beta).astype(np.float32)

    def batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        return {
            "frames": self.frames[indices],
            "actions": self.actions[indices],
            "rewards": self.rewards[indices],
            "dones": self.dones[indices],
            "valid": self.valid[indices],
            "prev_actions": self.prev_actions[indices],
            "prev_rewards": self.prev_rewards[indices],
            "h0": self.h0[indices],
            "c0": self.c0[indices],
        }

    def update_priorities(self, indices: np.ndarray, priorities: np.ndarray) -> None:
        priorities = np.asarray(priorities, dtype=np.float64)
        self.max_priority = max(self.max_priority, float(priorities.max()))
        self.tree.update(indices, np.power(priorities, self.alpha))
