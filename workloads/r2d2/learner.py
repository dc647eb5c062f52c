"""One R2D2 training step (Kapturowski et al. 2019, Sec. 2-3): burn-in the LSTM from the stored state
without gradients, unroll the rest, n-step double-Q loss on rescaled targets weighted by importance
sampling, new sequence priorities, and a target-network copy every ``target_update_period`` updates.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses

import numpy as np
import torch

from archsim.capture.markers import phase
from workloads.r2d2.config import R2D2Config
from workloads.r2d2.model import R2D2Net
from workloads.r2d2.nstep import double_q_bootstrap, nstep_targets
from workloads.r2d2.priority import sequence_priority


@dataclasses.dataclass
class TrainResult:
    loss: float
    priorities: np.ndarray  # [B] new priority of each sampled sequence
    target_synced: bool


def batch_to_tensors(batch: dict[str, np.ndarray], stack: int) -> dict[str, torch.Tensor]:
    """Replay arrays -> tensors; frames [B, T+S-1, H, W] become stacks [B, T, S, H, W] (a view)."""
    frames = torch.from_numpy(batch["frames"])
    obs = frames.unfold(1, stack, 1).permute(0, 1, 4, 2, 3)
    out = {k: torch.from_numpy(v) for k, v in batch.items() if k != "frames"}
    out["obs"] = obs
    return out


def td_errors(
    online: R2D2Net, target: R2D2Net, data: dict[str, torch.Tensor], cfg: R2D2Config
) -> tuple[torch.Tensor, torch.Tensor]:
    """TD errors on the steps after burn-in, and the mask of steps that get a loss: [B, T - burn_in].

    Only the online unroll after burn-in keeps gradients; the burn-in prefix just produces the state.
    """
    b = cfg.burn_in
    state = (data["h0"], data["c0"])
    obs, prev_a, prev_r = data["obs"], data["prev_actions"], data["prev_rewards"]
    with torch.no_grad():
        _, online_state = online(obs[:, :b], prev_a[:, :b], prev_r[:, :b], state)
        q_target, _ = target(obs, prev_a, prev_r, state)
    q_online, _ = online(obs[:, b:], prev_a[:, b:], prev_r[:, b:], online_state)
    q_target = q_target[:, b:]
    bootstrap = double_q_bootstrap(q_online.detach(), q_target)
    targets, has_target = nstep_targets(
        data["rewards"][:, b:],
        data["dones"][:, b:],
        bootstrap,
        n=cfg.n_step,
        gamma=cfg.discount,
        rescale=True,
        eps=cfg.rescale_eps,
    )
    q_taken = q_online.gather(-1, data["actions"][:, b:].unsqueeze(-1)).squeeze(-1)
    mask = has_target & data["valid"][:, b:]
    return q_taken - targets.detach(), mask


class Learner:
    """Owns the online/target networks and the optimizer; :meth:`train_step` is one update."""

    def __init__(self, cfg: R2D2Config, num_actions: int, seed: int = 0):
        torch.manual_seed(seed)
        self.cfg = cfg
        self.online = R2D2Net(num_actions, cfg.frame_stack, cfg.lstm_size)
        self.target = copy.deepcopy(self.online).requires_grad_(False)
        self.optimizer = torch.optim.Adam(
            self.online.parameters(), lr=cfg.learning_rate, eps=cfg.adam_eps
        )
        self.updates = 0
        # The SEED learner process sets a lock here so inference never reads half-updated weights.
        self.params_lock: contextlib.AbstractContextManager = contextlib.nullcontext()

    def train_step(self, batch: dict[str, np.ndarray], weights: np.ndarray) -> TrainResult:
        with phase("train_forward"):
            data = batch_to_tensors(batch, self.cfg.frame_stack)
            td, mask = td_errors(self.online, self.target, data, self.cfg)
            mask_f = mask.float()
            per_seq = (0.5 * td.pow(2) * mask_f).sum(1) / mask_f.sum(1).clamp(min=1.0)
            loss = (torch.from_numpy(weights) * per_seq).mean()
        with phase("train_backward"):
            self.optimizer.zero_grad(set_to_none=True)
            loss.backward()
        with phase("optimizer_step"), self.params_lock:
            self.optimizer.step()
        with phase("priority_update"):
            priorities = sequence_priority(td.detach().abs(), mask, self.cfg.priority_eta).numpy()
        self.updates += 1
        synced = self.updates % self.cfg.target_update_period == 0
        if synced:
            with phase("target_sync"):
                self.target.load_state_dict(self.online.state_dict())
        return TrainResult(float(loss.detach()), priorities, synced)
