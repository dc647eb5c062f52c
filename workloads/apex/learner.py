"""The Ape-X learner: double-Q n-step DQN on prioritized batches, priority updates, parameters on demand.

Ape-X DQN (Horgan et al. 2018, Sec. 4 and Appendix): n-step returns bootstrapped with double Q-learning
(the online network picks the next action, the target network values it), a Huber loss weighted by the
importance weights, the new priorities |TD| sent back, centered RMSProp at learning rate 0.00025/4 and
gradient norms clipped to 40, the target copied every 2,500 batches. The network is the Nature DQN
(workloads/dqn/model.py); Ape-X adds a dueling head, left out here (one 512->actions layer less).
"""

from __future__ import annotations

import threading

import numpy as np
import torch
import torch.nn.functional as F

from archsim.capture.markers import phase
from workloads.dqn.learner import RMSPROP_ALPHA, RMSPROP_EPS
from workloads.dqn.model import NatureDQN

LEARNING_RATE = 0.00025 / 4  # Horgan et al. 2018, Appendix
GRAD_NORM_CLIP = 40.0  # Horgan et al. 2018, Appendix


class ApexLearner:
    """Online and target Nature-DQN networks; :meth:`train` is one learner step's work after sampling."""

    def __init__(self, num_actions: int, target_period: int, seed: int = 0):
        torch.manual_seed(seed)
        self.online = NatureDQN(num_actions)
        self.target = NatureDQN(num_actions)
        self.target.load_state_dict(self.online.state_dict())
        self.target.requires_grad_(False)
        self.optimizer = torch.optim.RMSprop(
            self.online.parameters(),
            lr=LEARNING_RATE,
            alpha=RMSPROP_ALPHA,
            eps=RMSPROP_EPS,
            centered=True,
        )
        self.target_period = target_period
        self.updates = 0
        self.lock = threading.Lock()  # optimizer step vs. parameter snapshots served to actors

    def param_arrays(self) -> list[np.ndarray]:
        """The online network's tensors in state_dict order, as the actors load them."""
        with self.lock:
            return [t.detach().numpy().copy() for t in self.online.state_dict().values()]

    def train(
        self,
        weights: np.ndarray,
        obs: np.ndarray,
        actions: np.ndarray,
        returns: np.ndarray,
        discounts: np.ndarray,
        next_obs: np.ndarray,
    ) -> np.ndarray:
        """One update on a sampled batch; returns the new priorities |TD|."""
        with phase("train_forward"):
            obs_t, next_t = (
                torch.from_numpy(np.asarray(obs)),
                torch.from_numpy(np.asarray(next_obs)),
            )
            with torch.no_grad():
                next_actions = self.online(next_t).argmax(dim=1, keepdim=True)
                bootstrap = self.target(next_t).gather(1, next_actions).squeeze(1)
                targets = (
                    torch.from_numpy(np.asarray(returns))
                    + torch.from_numpy(np.asarray(discounts)) * bootstrap
                )
            taken = torch.from_numpy(np.asarray(actions, dtype=np.int64)).unsqueeze(1)
            q_taken = self.online(obs_t).gather(1, taken).squeeze(1)
            td = targets - q_taken
            per_sample = F.smooth_l1_loss(q_taken, targets, reduction="none", beta=1.0)
            loss = (torch.from_numpy(np.asarray(weights)) * per_sample).mean()
        with phase("train_backward"):
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with phase("optimizer_step"), self.lock:
            torch.nn.utils.clip_grad_norm_(self.online.parameters(), GRAD_NORM_CLIP)
            self.optimizer.step()
            self.updates += 1
        if self.updates % self.target_period == 0:
            with phase("target_sync"):
                self.target.load_state_dict(self.online.state_dict())
        return td.detach().abs().numpy().astype(np.float32)


def load_param_arrays(model: torch.nn.Module, arrays: list[np.ndarray]) -> None:
    """Load arrays received from the learner (state_dict order) into ``model``."""
    keys = list(model.state_dict())
    if len(arrays) != len(keys):
        raise ValueError(f"parameters: {len(arrays)} arrays, the network has {len(keys)} tensors")
    model.load_state_dict(
        {k: torch.from_numpy(np.array(a)) for k, a in zip(keys, arrays, strict=True)}
    )
