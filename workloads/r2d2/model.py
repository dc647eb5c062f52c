"""The R2D2 network (Kapturowski et al. 2019, Sec. 2 and Appendix): the Nature-DQN conv torso, a
512-unit fully connected layer, an LSTM of 512 whose input also carries the previous action (one-hot)
and previous reward, and dueling value/advantage heads (Wang et al. 2016) of 512 hidden units each.

Parameter count: with the full Atari action set (18 actions) this gives 4,359,347 parameters
(:func:`parameter_count_breakdown`), matching REFERENCE.md's 4.36 M. Pong's minimal action set (6)
gives 12 x 513 = 6,156 fewer in the advantage head and 12 x 4 x 512 = 24,576 fewer LSTM input weights.
"""

from __future__ import annotations

import torch
from torch import nn

FRAME_SIZE = 84  # 84x84 grayscale frames (REFERENCE.md, RL workloads)
TORSO_FC = 512  # Nature DQN fc 3136-512 (REFERENCE.md)
HEAD_HIDDEN = 512  # dueling heads of 512 hidden units (Kapturowski et al. 2019, Appendix)

LSTMState = tuple[torch.Tensor, torch.Tensor]


class R2D2Net(nn.Module):
    def __init__(self, num_actions: int, frame_stack: int = 4, lstm_size: int = 512):
        super().__init__()
        self.num_actions = num_actions
        self.lstm_size = lstm_size
        # Nature DQN: conv 32x8x8/4, conv 64x4x4/2, conv 64x3x3/1, fc 3136-512 (REFERENCE.md).
        self.torso = nn.Sequential(
            nn.Conv2d(frame_stack, 32, kernel_size=8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, kernel_size=4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, kernel_size=3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(64 * 7 * 7, TORSO_FC),
            nn.ReLU(),
        )
        self.lstm = nn.LSTM(TORSO_FC + num_actions + 1, lstm_size, batch_first=True)
        self.value = nn.Sequential(
            nn.Linear(lstm_size, HEAD_HIDDEN), nn.ReLU(), nn.Linear(HEAD_HIDDEN, 1)
        )
        self.advantage = nn.Sequential(
            nn.Linear(lstm_size, HEAD_HIDDEN), nn.ReLU(), nn.Linear(HEAD_HIDDEN, num_actions)
        )

    def initial_state(self, batch: int) -> LSTMState:
        zeros = torch.zeros(batch, self.lstm_size)
        return zeros, zeros.clone()

    def forward(
        self,
        obs: torch.Tensor,
        prev_actions: torch.Tensor,
        prev_rewards: torch.Tensor,
        state: LSTMState,
    ) -> tuple[torch.Tensor, LSTMState]:
        """obs [B, T, S, 84, 84] uint8, prev_actions [B, T] int, prev_rewards [B, T] float,
        state (h, c) each [B, L] -> (q [B, T, A], new state)."""
        batch, steps = obs.shape[:2]
        x = obs.reshape(batch * steps, *obs.shape[2:]).float() / 255.0
        features = self.torso(x).reshape(batch, steps, TORSO_FC)
        one_hot = nn.functional.one_hot(prev_actions, self.num_actions).float()
        lstm_in = torch.cat([features, one_hot, prev_rewards.unsqueeze(-1).float()], dim=-1)
        h0, c0 = state
        out, (h, c) = self.lstm(lstm_in, (h0.unsqueeze(0), c0.unsqueeze(0)))
        value = self.value(out)
        advantage = self.advantage(out)
        q = value + advantage - advantage.mean(dim=-1, keepdim=True)
        return q, (h.squeeze(0), c.squeeze(0))


def parameter_count_breakdown(num_actions: int, frame_stack: int = 4, lstm_size: int = 512) -> dict:
    """Parameters per part of the network, counted from a real instance."""
    net = R2D2Net(num_actions, frame_stack, lstm_size)
    parts = {
        "torso": net.torso,
        "lstm": net.lstm,
        "value_head": net.value,
        "advantage_head": net.advantage,
    }
    counts = {name: sum(p.numel() for p in m.parameters()) for name, m in parts.items()}
    counts["total"] = sum(counts.values())
    return counts
