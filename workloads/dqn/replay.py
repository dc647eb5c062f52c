"""Uniform experience replay in preallocated uint8 arrays (no per-transition allocation).

Each slot holds the 4-frame observation, the action, the clipped reward, the done flag and only the
newest frame of the next observation: the next stack is the current one shifted by a frame, so storing
it whole would double the memory (28,224 B + 7,056 B per slot instead of 2 x 28,224 B; REFERENCE.md).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class ReplayBatch:
    obs: np.ndarray  # (B, 4, 84, 84) uint8
    actions: np.ndarray  # (B,) int64
    rewards: np.ndarray  # (B,) float32
    dones: np.ndarray  # (B,) float32, 1.0 where the episode ended at this transition
    next_obs: np.ndarray  # (B, 4, 84, 84) uint8


class ReplayBuffer:
    """Ring buffer of ``capacity`` transitions; once full, the oldest slot is overwritten."""

    def __init__(self, capacity: int, obs_shape: tuple[int, ...], seed: int = 0):
        if capacity < 1:
            raise ValueError("replay capacity must be at least 1")
        self.capacity = capacity
        self.obs = np.zeros((capacity, *obs_shape), dtype=np.uint8)
        self.next_frame = np.zeros((capacity, *obs_shape[1:]), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.dones = np.zeros(capacity, dtype=np.float32)
        self.cursor = 0  # next slot to write
        self.size = 0
        self.rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self.size

    def add(
        self, obs: np.ndarray, action: int, reward: float, done: bool, next_obs: np.ndarray
    ) -> None:
        i = self.cursor
        self.obs[i] = obs
        self.next_frame[i] = next_obs[-1]
        self.actions[i] = action
        self.rewards[i] = reward
        self.dones[i] = float(done)
        self.cursor = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, batch_size: int) -> ReplayBatch:
        """``batch_size`` transitions uniformly at random (with replacement) from the filled slots."""
        if self.size == 0:
            raise ValueError("cannot sample from an empty replay buffer")
        idx = self.rng.integers(0, self.size, size=batch_size)
        obs = self.obs[idx]
        next_obs = np.concatenate([obs[:, 1:], self.next_frame[idx][:, None]], axis=1)
        return ReplayBatch(obs, self.actions[idx], self.rewards[idx], self.dones[idx], next_obs)
