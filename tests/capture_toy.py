"""The toy training loop the `archsim capture run` tests capture, and what they check around it."""

from __future__ import annotations

import multiprocessing.process as mp_process
import textwrap
from pathlib import Path

import gymnasium
import torch
from torch.optim import optimizer as torch_optimizer

# The toy programs' environment: fixed observations, reward 1, never done (source text, dedented).
TOY_ENV = textwrap.dedent(
    """
    class ToyEnv(gym.Env):
        observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        action_space = gym.spaces.Discrete(2)

        def reset(self, seed=None, options=None):
            return np.zeros(4, np.float32), {}

        def step(self, action):
            return np.full(4, 0.5, np.float32), 1.0, False, False, {}
    """
)

# A toy loop in the usual order: act (no_grad, batch of one), env step, insert; train every 2 steps.
TOY = (
    textwrap.dedent(
        """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    def preprocess(obs):
        return torch.as_tensor(obs)

    class Buffer:
        def __init__(self):
            self.items = []

        def add(self, x):
            self.items.append(x)

        def sample(self, n):
            return torch.stack(self.items[-n:])

    steps, train = int(sys.argv[1]), sys.argv[2] == "train"
    torch.manual_seed(0)
    env, net = ToyEnv(), torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU(), torch.nn.Linear(8, 2))
    opt = torch.optim.Adam(net.parameters())
    buf = Buffer()
    obs, _ = env.reset()
    for t in range(steps):
        with torch.no_grad():
            action = int(net(torch.as_tensor(obs)).argmax())
        obs, reward, terminated, truncated, _ = env.step(action)
        buf.add(preprocess(obs))
        if train and t >= 8 and t % 2 == 0:
            loss = net(buf.sample(8)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    print("toy done", steps)
    """
    )
)


def patch_points() -> dict[str, object]:
    """Every attribute capture run patches, as it is outside a capture."""
    points = {
        "Module.__call__": torch.nn.Module.__dict__["__call__"],
        "Tensor.backward": torch.Tensor.__dict__["backward"],
        "autograd.backward": torch.autograd.backward,
        "BaseProcess.start": mp_process.BaseProcess.__dict__["start"],
        "Env.__init_subclass__": gymnasium.Env.__dict__.get("__init_subclass__"),
        "VectorEnv.__init_subclass__": gymnasium.vector.VectorEnv.__dict__.get("__init_subclass__"),
        "SyncVectorEnv.step": gymnasium.vector.SyncVectorEnv.__dict__["step"],
        "Wrapper.step": gymnasium.Wrapper.__dict__["step"],
        "Wrapper.reset": gymnasium.Wrapper.__dict__["reset"],
        "optimizer pre hooks": len(torch_optimizer._global_optimizer_pre_hooks),
        "optimizer post hooks": len(torch_optimizer._global_optimizer_post_hooks),
    }
    return points


def toy_script(tmp_path: Path) -> Path:
    script = tmp_path / "toy_loop.py"
    script.write_text(TOY)
    return script


def one_error_line(capsys) -> str:
    lines = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: ")
    return lines[0]
