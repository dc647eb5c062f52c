"""ALE Pong with the DQN preprocessing of Mnih et al. (2015), done by hand so each part can be timed.

The phases are split on purpose: :meth:`AtariEnv.step_frames` is the emulator work (``env_step``), and
:class:`FramePreprocessor` turns the last two raw frames into the 84x84x4 uint8 stack (``preprocess``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from workloads.dqn.settings import ENV_ID

# Nature DQN (Mnih et al. 2015, "Methods: preprocessing" and Extended Data Table 1): action repeat 4,
# max over the last two raw frames, 84x84 luminance, history of 4 frames, up to 30 no-ops at the start.
FRAME_SKIP = 4
FRAME_SIZE = 84
STACK_SIZE = 4
NOOP_MAX = 30
# ALE v5 default (Machado et al. 2018): repeat the previous action with probability 0.25.
STICKY_ACTION_PROB = 0.25


def area_resize_matrix(in_size: int, out_size: int) -> np.ndarray:
    """(out_size, in_size) weights that average each output pixel's input span (like INTER_AREA).

    Output pixel i covers input interval [i*s, (i+1)*s) with s = in_size/out_size; partly covered input
    pixels get fractional weight. Each row sums to 1, so a constant image stays constant.
    """
    scale = in_size / out_size
    weights = np.zeros((out_size, in_size), dtype=np.float32)
    for i in range(out_size):
        lo, hi = i * scale, (i + 1) * scale
        for j in range(int(np.floor(lo)), min(int(np.ceil(hi)), in_size)):
            overlap = min(hi, j + 1) - max(lo, j)
            if overlap > 0:
                weights[i, j] = overlap / scale
    return weights


def sparse_weights(dense: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (out, K), of the K non-zero input taps of every output pixel.

    An area resize touches at most ceil(scale) + 1 inputs per output, so a gather and a weighted sum
    replace the dense matrix product: no BLAS call, whose worker threads spin on a busy machine (the
    dense version took 20 ms per frame here under load instead of 0.1 ms).
    """
    taps = int((dense > 0).sum(axis=1).max())
    indices = np.zeros((dense.shape[0], taps), dtype=np.intp)
    weights = np.zeros((dense.shape[0], taps), dtype=np.float32)
    for i, row in enumerate(dense):
        nonzero = np.flatnonzero(row)
        indices[i, : len(nonzero)] = nonzero
        weights[i, : len(nonzero)] = row[nonzero]
    return indices, weights


def area_resize(image: np.ndarray, rows: tuple, cols: tuple) -> np.ndarray:
    """Resize a 2-D float32 image with the (indices, weights) taps of :func:`sparse_weights`."""
    row_idx, row_w = rows
    col_idx, col_w = cols
    tall = np.einsum("okc,ok->oc", image[row_idx], row_w)  # (out_rows, in_cols)
    return np.einsum("rok,ok->ro", tall[:, col_idx], col_w)  # (out_rows, out_cols)


class FramePreprocessor:
    """Max of the last two gray frames -> area resize to 84x84 -> uint8 -> push onto a 4-frame stack."""

    def __init__(self, raw_shape: tuple[int, int], size: int = FRAME_SIZE, stack: int = STACK_SIZE):
        self._rows = sparse_weights(area_resize_matrix(raw_shape[0], size))
        self._cols = sparse_weights(area_resize_matrix(raw_shape[1], size))
        self.stack = np.zeros((stack, size, size), dtype=np.uint8)

    def frame(self, last: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """One 84x84 uint8 frame from the last two raw gray frames (the max removes Atari flicker)."""
        pooled = np.maximum(last, previous).astype(np.float32)
        resized = area_resize(pooled, self._rows, self._cols)
        return np.clip(np.rint(resized), 0, 255).astype(np.uint8)

    def reset(self, last: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """Start of an episode: fill the whole stack with the first frame."""
        self.stack[:] = self.frame(last, previous)
        return self.stack.copy()

    def push(self, last: np.ndarray, previous: np.ndarray) -> np.ndarray:
        """Shift the stack one frame and append the new one; returns a copy (the agent's observation)."""
        self.stack[:-1] = self.stack[1:]
        self.stack[-1] = self.frame(last, previous)
        return self.stack.copy()


@dataclass
class FrameStep:
    """What the emulator returned for one agent step (FRAME_SKIP emulator frames)."""

    last: np.ndarray
    previous: np.ndarray
    reward: float
    terminated: bool
    truncated: bool


class AtariEnv:
    """Gymnasium ALE env at frameskip 1 (grayscale); repeats each action itself, keeping the last two frames."""

    def __init__(self, env_id: str = ENV_ID, seed: int = 0, frame_skip: int = FRAME_SKIP):
        import ale_py
        import gymnasium

        # ALE prints a two-line banner to stderr from C++ in every process that makes an env; with
        # it, an archsim error is no longer the one line on stderr. Errors still get through.
        ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
        gymnasium.register_envs(ale_py)
        self.env = gymnasium.make(
            env_id,
            obs_type="grayscale",
            frameskip=1,
            repeat_action_probability=STICKY_ACTION_PROB,
        )
        self.frame_skip = frame_skip
        self.num_actions = int(self.env.action_space.n)
        self.rng = np.random.default_rng(seed)
        self._seed = seed
        self._first_reset = True

    @property
    def raw_shape(self) -> tuple[int, int]:
        return tuple(self.env.observation_space.shape[:2])

    def reset(self) -> FrameStep:
        """New episode with a random number (1..NOOP_MAX) of no-op frames, as in Nature DQN."""
        seed = self._seed if self._first_reset else None
        self._first_reset = False
        obs, _ = self.env.reset(seed=seed)
        previous = obs
        for _ in range(int(self.rng.integers(1, NOOP_MAX + 1))):
            previous = obs
            obs, _, terminated, truncated, _ = self.env.step(0)
            if terminated or truncated:
                obs, _ = self.env.reset()
                previous = obs
        return FrameStep(obs, previous, 0.0, False, False)

    def step_frames(self, action: int) -> FrameStep:
        """Repeat ``action`` for frame_skip frames; sum the reward; keep the last two raw frames."""
        total = 0.0
        previous = last = None
        terminated = truncated = False
        for _ in range(self.frame_skip):
            previous = last
            last, reward, terminated, truncated, _ = self.env.step(action)
            total += float(reward)
            if terminated or truncated:
                break
        if previous is None:
            previous = last
        return FrameStep(last, previous, total, terminated, truncated)

    @property
    def screen_shape(self) -> tuple[int, int]:
        """(height, width) of the emulator's screen."""
        return self.raw_shape

    def screen_rgb(self) -> np.ndarray:
        """The emulator's current screen in colour, (height, width, 3) uint8: what a display shows."""
        return self.env.unwrapped.ale.getScreenRGB()

    def close(self) -> None:
        self.env.close()
