"""DQN acting and learning, split into the pieces that run.py times as separate phases.

Hyper-parameters are those of Mnih et al. 2015, Extended Data Table 1 (also REFERENCE.md "Nature DQN"),
except the ones a short capture must shrink (learn start, target period); those keep the full value in
the option help.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from workloads.dqn.model import NatureDQN
from workloads.dqn.replay import ReplayBatch
from workloads.dqn.settings import EPS_DECAY_STEPS, EPS_END, EPS_START

# Mnih et al. 2015, Extended Data Table 1.
GAMMA = 0.99  # discount factor
LEARNING_RATE = 2.5e-4
# DeepMind's RMSProp (Extended Data Table 1; dqn/NeuralQLearner.lua): squared-gradient momentum 0.95,
# min squared gradient 0.01, and it subtracts the mean gradient squared (centered).
RMSPROP_ALPHA = 0.95
RMSPROP_EPS = 0.01


def epsilon_at(step: int, learn_start: int, decay_steps: int = EPS_DECAY_STEPS) -> float:
    """Linear anneal from EPS_START to EPS_END over ``decay_steps`` agent steps after ``learn_start``.

    Same rule as DeepMind's NeuralQLearner: exploration stays at 1.0 while the replay fills.
    """
    progress = max(0, step - learn_start) / decay_steps
    return EPS_END + (EPS_START - EPS_END) * max(0.0, 1.0 - progress)


def td_targets(
    rewards: torch.Tensor, dones: torch.Tensor, next_q_target: torch.Tensor, gamma: float = GAMMA
) -> torch.Tensor:
    """One-step Q-learning targets r + gamma * (1 - done) * max_a' Q_target(s', a')."""
    return rewards + gamma * (1.0 - dones) * next_q_target.max(dim=1).values


def huber_loss(q_taken: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Mean Huber loss (delta 1): the Nature paper's error clipping to [-1, 1] as a loss."""
    return F.smooth_l1_loss(q_taken, targets, beta=1.0)


@dataclass
class LearnerConfig:
    num_actions: int
    device: str = "cpu"
    gamma: float = GAMMA
    learning_rate: float = LEARNING_RATE
    target_period: int = 10_000  # learner updates between target syncs (Nature: 10,000)
    conv_impl: str = "cudnn"  # settings.CONV_IMPLS: library convolutions or unfold + GEMM


class DqnLearner:
    """Online and target Nature-DQN networks, RMSProp, and the pieces of one training step."""

    def __init__(self, config: LearnerConfig, seed: int = 0):
        torch.manual_seed(seed)
        self.config = config
        self.device = torch.device(config.device)
        self.online = NatureDQN(config.num_actions, conv_impl=config.conv_impl).to(self.device)
        self.target = NatureDQN(config.num_actions, conv_impl=config.conv_impl).to(self.device)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)
        self.optimizer = torch.optim.RMSprop(
            self.online.parameters(),
            lr=config.learning_rate,
            alpha=RMSPROP_ALPHA,
            eps=RMSPROP_EPS,
            centered=True,
        )
        self.updates = 0
        self.rng = np.random.default_rng(seed)

    # --- acting -------------------------------------------------------------------------------
    @torch.no_grad()
    def q_values(self, obs: np.ndarray) -> torch.Tensor:
        """Q-values for one observation (4, 84, 84) uint8."""
        frames = torch.from_numpy(obs).to(self.device).unsqueeze(0)
        return self.online(frames)[0]

    def act(self, obs: np.ndarray, epsilon: float) -> int:
        """Epsilon-greedy. The forward pass always runs (the Nature agent logs the max Q, and a steady-
        state actor at epsilon 0.1 runs it on 90% of steps), so the act phase costs what it would."""
        greedy = int(self.q_values(obs).argmax().item())
        if self.rng.random() < epsilon:
            return int(self.rng.integers(self.config.num_actions))
        return greedy

    # --- one training step, in phases ------------------------------------------------------------
    def to_tensors(self, batch: ReplayBatch) -> tuple[torch.Tensor, ...]:
        return tuple(
            torch.from_numpy(a).to(self.device)
            for a in (batch.obs, batch.actions, batch.rewards, batch.dones, batch.next_obs)
        )

    def forward_loss(self, tensors: tuple[torch.Tensor, ...]) -> torch.Tensor:
        obs, actions, rewards, dones, next_obs = tensors
        with torch.no_grad():
            targets = td_targets(rewards, dones, self.target(next_obs), self.config.gamma)
        q_taken = self.online(obs).gather(1, actions.unsqueeze(1)).squeeze(1)
        return huber_loss(q_taken, targets)

    def backward(self, loss: torch.Tensor) -> None:
        self.optimizer.zero_grad(set_to_none=True)
        loss.backward()

    def optimizer_step(self) -> None:
        self.optimizer.step()
        self.updates += 1

    def target_sync_due(self) -> bool:
        return self.updates % self.config.target_period == 0

    def sync_target(self) -> None:
        self.target.load_state_dict(self.online.state_dict())
