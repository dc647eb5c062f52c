"""The DQN training loop with archsim phase and step markers. No CLI here: a notebook can call it.

One agent step = one actor step (act, env_step, display every ``display_every`` steps when set,
preprocess, replay_insert) and, every ``train_every``
steps once ``learn_start`` transitions are stored, one learner step (replay_sample, train_forward,
train_backward, optimizer_step, target_sync when due).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from archsim.capture.markers import phase, step
from workloads.dqn.env import AtariEnv, FramePreprocessor
from workloads.dqn.learner import DqnLearner, LearnerConfig, epsilon_at
from workloads.dqn.replay import ReplayBuffer
from workloads.dqn.settings import DqnConfig

if TYPE_CHECKING:
    from workloads.dqn.display import GameDisplay


@dataclasses.dataclass
class DqnRunStats:
    steps: int = 0
    learner_updates: int = 0
    target_syncs: int = 0
    episodes: int = 0
    episode_returns: list[float] = dataclasses.field(default_factory=list)
    last_loss: float = float("nan")
    wall_s: float = 0.0
    cpu_s: float = 0.0  # process CPU time: on a shared machine it is steadier than wall time
    display: dict[str, object] = dataclasses.field(default_factory=dict)  # GameDisplay.cost()

    @property
    def steps_per_cpu_s(self) -> float:
        return self.steps / self.cpu_s if self.cpu_s > 0 else float("nan")

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.wall_s if self.wall_s > 0 else float("nan")


def train_due(t: int, config: DqnConfig) -> bool:
    """Whether agent step ``t`` (0-based) ends with a learner step."""
    return t >= config.learn_start and t % config.train_every == 0


def run_dqn(
    config: DqnConfig,
    steps: int,
    on_step: Callable[[], None] | None = None,
    progress: bool = False,
) -> DqnRunStats:
    """Run ``steps`` agent steps; call ``on_step()`` after each (e.g. a capture handle's ``step``)."""
    import torch

    threads_before = torch.get_num_threads()
    torch.set_num_threads(config.torch_threads)
    try:
        return _run(config, steps, on_step, progress)
    finally:
        torch.set_num_threads(threads_before)  # a notebook's own thread setting survives the run


def _run(
    config: DqnConfig,
    steps: int,
    on_step: Callable[[], None] | None,
    progress: bool,
) -> DqnRunStats:
    env = AtariEnv(config.env_id, seed=config.seed)
    pre = FramePreprocessor(env.raw_shape)
    learner = DqnLearner(
        LearnerConfig(
            env.num_actions,
            config.device,
            target_period=config.target_period,
            conv_impl=config.conv_impl,
        ),
        seed=config.seed,
    )
    replay = ReplayBuffer(config.replay_capacity, pre.stack.shape, seed=config.seed)
    display = None
    if config.display_every is not None:
        from workloads.dqn.display import GameDisplay

        display = GameDisplay(config.display_every, env.screen_shape)
    try:
        return _loop(config, steps, on_step, progress, env, pre, learner, replay, display)
    finally:
        if display is not None:
            display.close()
        env.close()


def _loop(
    config: DqnConfig,
    steps: int,
    on_step: Callable[[], None] | None,
    progress: bool,
    env: AtariEnv,
    pre: FramePreprocessor,
    learner: DqnLearner,
    replay: ReplayBuffer,
    display: GameDisplay | None,
) -> DqnRunStats:
    import torch
    from tqdm import tqdm

    stats = DqnRunStats()
    first = env.reset()
    obs = pre.reset(first.last, first.previous)
    episode_return = 0.0
    start = time.perf_counter()
    start_cpu = time.process_time()
    for t in tqdm(range(steps), desc="dqn steps", unit="step", disable=None if progress else True):
        with step("actor", actor=0, batch_size=1):
            with phase("act"):
                action = learner.act(obs, epsilon_at(t, config.learn_start, config.eps_decay_steps))
            with phase("env_step"):
                frames = env.step_frames(action)
            if display is not None and display.due(t):
                with phase("display"):
                    display.draw(env.screen_rgb())
            with phase("preprocess"):
                next_obs = pre.push(frames.last, frames.previous)
            with phase("replay_insert"):
                # Nature DQN clips rewards to [-1, 1]; a truncated episode is not a terminal state
                replay.add(obs, action, float(np.sign(frames.reward)), frames.terminated, next_obs)
            episode_return += frames.reward
            obs = next_obs
            if frames.terminated or frames.truncated:
                stats.episodes += 1
                stats.episode_returns.append(episode_return)
                episode_return = 0.0
                with phase("env_step"):
                    first = env.reset()
                with phase("preprocess"):
                    obs = pre.reset(first.last, first.previous)
        if train_due(t, config) and len(replay) >= config.batch_size:
            with step("learner", batch_size=config.batch_size):
                with phase("replay_sample"):
                    tensors = learner.to_tensors(replay.sample(config.batch_size))
                with phase("train_forward"):
                    loss = learner.forward_loss(tensors)
                with phase("train_backward"):
                    learner.backward(loss)
                with phase("optimizer_step"):
                    learner.optimizer_step()
                if learner.target_sync_due():
                    with phase("target_sync"):
                        learner.sync_target()
                    stats.target_syncs += 1
            stats.last_loss = float(loss.detach())
        stats.steps += 1
        if on_step is not None:
            on_step()
    if config.device.startswith("cuda"):
        torch.cuda.synchronize()
    stats.wall_s = time.perf_counter() - start
    stats.cpu_s = time.process_time() - start_cpu
    stats.learner_updates = learner.updates
    if display is not None:
        stats.display = display.cost()
    return stats
