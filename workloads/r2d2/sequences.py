"""Cut one environment's stream of steps into fixed-length, overlapping sequences with their stored
initial recurrent state (Kapturowski et al. 2019, Sec. 3: "stored state" strategy; sequences of
m = 80 overlapping by 40, never crossing episode boundaries).

The first ``burn_in`` steps of a sequence only warm up the LSTM from the stored state; they get no loss.
"""

from __future__ import annotations

import dataclasses

import numpy as np


@dataclasses.dataclass
class Sequence:
    """One replay item: ``length`` steps (zero-padded past ``valid``) and the LSTM state before step 0."""

    frames: (
        np.ndarray
    )  # [T + S - 1, H, W] uint8: the S-1 frames before step 0, then each step's newest
    actions: np.ndarray  # [T] int64, action taken at each step
    rewards: np.ndarray  # [T] float32, reward after each step's action
    dones: np.ndarray  # [T] float32, 1 where that step ended the episode
    valid: np.ndarray  # [T] bool, False on padding after the episode's last step
    prev_actions: np.ndarray  # [T] int64, action before each step (LSTM input, Sec. 2 of the paper)
    prev_rewards: np.ndarray  # [T] float32, reward before each step (LSTM input)
    h0: np.ndarray  # [lstm] float32
    c0: np.ndarray  # [lstm] float32
    start: int  # index of step 0 in the env's episode (for tests and debugging)


def window_starts(n_steps: int, length: int, overlap: int) -> list[int]:
    """Start indices of the sequences cut from a finished stream of ``n_steps`` steps.

    Windows start every ``length - overlap`` steps; a final partial window is kept (padded) only if it
    holds steps not already covered by an earlier window.
    """
    stride = length - overlap
    if stride <= 0:
        raise ValueError(f"overlap {overlap} must be smaller than the sequence length {length}")
    starts = []
    start = 0
    covered = 0
    while covered < n_steps:
        starts.append(start)
        covered = min(start + length, n_steps)
        start += stride
    return starts


def burn_in_mask(length: int, burn_in: int) -> np.ndarray:
    """True on the steps that get a loss (the ones after the burn-in prefix)."""
    if not 0 <= burn_in < length:
        raise ValueError(f"burn-in {burn_in} must be in [0, {length})")
    mask = np.ones(length, dtype=bool)
    mask[:burn_in] = False
    return mask


class SequenceBuilder:
    """Accumulates one environment's steps and emits sequences as soon as each window is full.

    Call :meth:`add` once per step with the LSTM state *before* that step; it returns the sequences
    completed by this step (a full window every ``length - overlap`` steps; on episode end the last
    partial window, padded). Memory stays bounded by one window.
    """

    def __init__(self, length: int, overlap: int, obs_shape: tuple[int, int, int], lstm_size: int):
        """obs_shape = (S, H, W): a stack of S frames per step, newest last."""
        if not 0 <= overlap < length:
            raise ValueError(f"overlap {overlap} must be in [0, {length})")
        self.length = length
        self.overlap = overlap
        self.stride = length - overlap
        self.obs_shape = obs_shape
        self.lstm_size = lstm_size
        self._reset_episode()

    def _reset_episode(self) -> None:
        self._steps: list[tuple] = []  # (obs, action, reward, done, prev_action, prev_reward, h, c)
        self._first = 0  # episode index of self._steps[0]
        self._next_start = 0  # episode index where the next window starts
        self._covered = 0  # episode steps already inside an emitted window

    def add(
        self,
        obs: np.ndarray,
        action: int,
        reward: float,
        done: bool,
        prev_action: int,
        prev_reward: float,
        h: np.ndarray,
        c: np.ndarray,
    ) -> list[Sequence]:
        self._steps.append((obs, action, reward, done, prev_action, prev_reward, h, c))
        end = self._first + len(self._steps)  # episode index one past the newest step
        out = []
        if end - self._next_start == self.length:
            out.append(self._emit(self._next_start, end))
        if done:
            if self._covered < end:
                out.append(self._emit(self._next_start, end))
            self._reset_episode()
        return out

    def _emit(self, start: int, end: int) -> Sequence:
        rows = self._steps[start - self._first : end - self._first]
        n = len(rows)
        t = self.length
        seq = Sequence(
            frames=np.zeros((t + self.obs_shape[0] - 1, *self.obs_shape[1:]), dtype=np.uint8),
            actions=np.zeros(t, dtype=np.int64),
            rewards=np.zeros(t, dtype=np.float32),
            dones=np.zeros(t, dtype=np.float32),
            valid=np.zeros(t, dtype=bool),
            prev_actions=np.zeros(t, dtype=np.int64),
            prev_rewards=np.zeros(t, dtype=np.float32),
            h0=np.asarray(rows[0][6], dtype=np.float32),
            c0=np.asarray(rows[0][7], dtype=np.float32),
            start=start,
        )
        # Within an episode consecutive stacks shift by one frame, so a sequence stores each frame
        # once: 4x less replay memory than whole stacks (84x84 frame = 7,056 B, REFERENCE.md).
        seq.frames[: self.obs_shape[0]] = rows[0][0]
        for i, (obs, action, reward, done, prev_a, prev_r, _, _) in enumerate(rows):
            seq.frames[i + self.obs_shape[0] - 1] = obs[-1]
            seq.actions[i] = action
            seq.rewards[i] = reward
            seq.dones[i] = float(done)
            seq.prev_actions[i] = prev_a
            seq.prev_rewards[i] = prev_r
        seq.valid[:n] = True

        self._covered = end
        self._next_start = start + self.stride
        # Drop steps no later window needs.
        drop = self._next_start - self._first
        if drop > 0:
            del self._steps[:drop]
            self._first = self._next_start
        return seq


def stack_frames(frames: np.ndarray, stack: int) -> np.ndarray:
    """[..., T + S - 1, H, W] frames -> [..., T, S, H, W] stacks (a view, no copy)."""
    windows = np.lib.stride_tricks.sliding_window_view(frames, stack, axis=-3)
    # sliding_window_view puts the window axis last: [..., T, H, W, S] -> [..., T, S, H, W]
    return np.moveaxis(windows, -1, -3)
