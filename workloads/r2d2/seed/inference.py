"""Central inference state (SEED RL): the learner keeps every environment's frame stack, LSTM state,
previous action/reward and partial sequence, so actors only ship one new frame per step.
"""

from __future__ import annotations

import numpy as np
import torch

from workloads.r2d2.config import R2D2Config
from workloads.r2d2.model import R2D2Net
from workloads.r2d2.sequences import Sequence, SequenceBuilder

# Ape-X exploration (Horgan et al. 2018, Sec. 4; reused by R2D2, Kapturowski et al. 2019, Sec. 2):
# env i of N acts epsilon-greedily with eps_i = 0.4 ** (1 + 7 i / (N - 1)).
APEX_EPS_BASE = 0.4
APEX_EPS_ALPHA = 7.0


def apex_epsilons(n: int) -> np.ndarray:
    if n == 1:
        return np.array([APEX_EPS_BASE])
    return APEX_EPS_BASE ** (1.0 + APEX_EPS_ALPHA * np.arange(n) / (n - 1))


class EnvStates:
    """Per-environment recurrent state and sequence cutting for ``total_envs`` environments."""

    def __init__(
        self,
        total_envs: int,
        cfg: R2D2Config,
        frame_shape: tuple[int, int],
        seed: int = 0,
        epsilons: np.ndarray | None = None,
    ):
        """``epsilons``: per-env exploration (default: Ape-X epsilons over these envs)."""
        self.cfg = cfg
        stack = cfg.frame_stack
        self.stacks = np.zeros((total_envs, stack, *frame_shape), dtype=np.uint8)
        self.h = torch.zeros(total_envs, cfg.lstm_size)
        self.c = torch.zeros(total_envs, cfg.lstm_size)
        self.prev_actions = np.zeros(total_envs, dtype=np.int64)
        self.prev_rewards = np.zeros(total_envs, dtype=np.float32)
        self.started = np.zeros(total_envs, dtype=bool)
        self.pending: list[tuple | None] = [None] * total_envs
        self.builders = [
            SequenceBuilder(
                cfg.sequence_length, cfg.sequence_overlap, (stack, *frame_shape), cfg.lstm_size
            )
            for _ in range(total_envs)
        ]
        self.epsilons = apex_epsilons(total_envs) if epsilons is None else np.asarray(epsilons)
        self.rng = np.random.default_rng(seed)
        self.env_steps = 0

    def observe(
        self, env_ids: np.ndarray, frames: np.ndarray, rewards: np.ndarray, dones: np.ndarray
    ) -> list[Sequence]:
        """Record the outcome of each env's previous step and push its new frame; returns the
        sequences this completed. ``dones[i]``: the previous step ended the episode and ``frames[i]``
        is the first frame of a new one."""
        completed: list[Sequence] = []
        for env, frame, reward, done in zip(env_ids, frames, rewards, dones, strict=True):
            pending = self.pending[env]
            if pending is not None:
                stack, action, prev_a, prev_r, h, c = pending
                completed += self.builders[env].add(
                    stack, action, float(reward), bool(done), prev_a, prev_r, h, c
                )
                self.env_steps += 1
            if done or not self.started[env]:
                # new episode: empty history, zero LSTM state, stack filled with the first frame
                self.stacks[env] = frame
                self.h[env] = 0.0
                self.c[env] = 0.0
                self.prev_actions[env] = 0
                self.prev_rewards[env] = 0.0
                self.started[env] = True
            else:
                self.stacks[env, :-1] = self.stacks[env, 1:]
                self.stacks[env, -1] = frame
                self.prev_actions[env] = pending[1]
                self.prev_rewards[env] = reward
        return completed

    @torch.no_grad()
    def act(self, model: R2D2Net, env_ids: np.ndarray) -> np.ndarray:
        """One batched forward step for ``env_ids``; epsilon-greedy actions; LSTM states advance."""
        ids = torch.as_tensor(env_ids)
        obs = torch.from_numpy(self.stacks[env_ids]).unsqueeze(1)
        prev_a = torch.from_numpy(self.prev_actions[env_ids]).unsqueeze(1)
        prev_r = torch.from_numpy(self.prev_rewards[env_ids]).unsqueeze(1)
        h_before, c_before = self.h[ids], self.c[ids]
        q, (h, c) = model(obs, prev_a, prev_r, (h_before, c_before))
        greedy = q[:, 0].argmax(dim=-1).numpy()
        explore = self.rng.random(len(env_ids)) < self.epsilons[env_ids]
        random_actions = self.rng.integers(0, model.num_actions, len(env_ids))
        actions = np.where(explore, random_actions, greedy)
        for i, env in enumerate(env_ids):
            self.pending[env] = (
                self.stacks[env].copy(),
                int(actions[i]),
                int(self.prev_actions[env]),
                float(self.prev_rewards[env]),
                h_before[i].numpy().copy(),
                c_before[i].numpy().copy(),
            )
        self.h[ids] = h
        self.c[ids] = c
        return actions
