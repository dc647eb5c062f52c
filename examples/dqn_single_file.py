"""Single-file DQN on Atari Pong, in the style of CleanRL's dqn_atari.py (Huang et al. 2022, JMLR 23(274)).

A plain program that knows nothing of archsim: a gymnasium vector env on ALE Pong (ale_py), the
Stable-Baselines3 Atari wrapper stack written out here (no-op reset, max-and-skip frameskip 4,
episodic life, fire reset, 84x84 grey warp, reward clipping, 4-frame stack), its own replay buffer,
the Nature-DQN network (Mnih et al. 2015), Adam, a training step every 4 env steps and a periodic
target-network sync. Capture it unmodified:

    archsim capture run --out runs/dqn -- examples/dqn_single_file.py --total-timesteps 3000 \\
        --learning-starts 500

It prints its own throughput at the end (env steps per second of wall time and per CPU-second of the
process), over the whole run and from the learning start on (the steady state: acting and training).
"""

from __future__ import annotations

import argparse
import random
import resource
import time

import ale_py
import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F  # noqa: N812 (the usual spelling)

gym.register_envs(ale_py)


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="PongNoFrameskip-v4")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=10_000_000)
    p.add_argument("--learning-rate", type=float, default=1e-4)
    p.add_argument("--num-envs", type=int, default=1)
    p.add_argument(
        "--async-envs",
        action="store_true",
        help="step the environments in worker processes (gymnasium AsyncVectorEnv)",
    )
    # CleanRL's default is 1,000,000; each stored transition here takes 2 x 28 KB (obs and next obs)
    p.add_argument("--buffer-size", type=int, default=10_000)
    p.add_argument("--gamma", type=float, default=0.99)
    p.add_argument("--target-network-frequency", type=int, default=1000)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--start-e", type=float, default=1.0)
    p.add_argument("--end-e", type=float, default=0.01)
    p.add_argument("--exploration-fraction", type=float, default=0.10)
    p.add_argument("--learning-starts", type=int, default=80_000)
    p.add_argument("--train-frequency", type=int, default=4)
    p.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    p.add_argument("--cuda", action=argparse.BooleanOptionalAction, default=True)
    return p.parse_args()


# ---- SB3-style Atari wrappers (stable_baselines3/common/atari_wrappers.py) -----------------------
class NoopResetEnv(gym.Wrapper):
    def __init__(self, env: gym.Env, noop_max: int = 30) -> None:
        super().__init__(env)
        self.noop_max = noop_max

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        for _ in range(self.unwrapped.np_random.integers(1, self.noop_max + 1)):
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        return obs, info


class MaxAndSkipEnv(gym.Wrapper):
    def __init__(self, env: gym.Env, skip: int = 4) -> None:
        super().__init__(env)
        self._buffer = np.zeros((2, *env.observation_space.shape), dtype=np.uint8)
        self._skip = skip

    def step(self, action):
        total_reward, terminated, truncated, info = 0.0, False, False, {}
        for i in range(self._skip):
            obs, reward, terminated, truncated, info = self.env.step(action)
            if i >= self._skip - 2:
                self._buffer[i - (self._skip - 2)] = obs
            total_reward += float(reward)
            if terminated or truncated:
                break
        return self._buffer.max(axis=0), total_reward, terminated, truncated, info


class EpisodicLifeEnv(gym.Wrapper):
    def __init__(self, env: gym.Env) -> None:
        super().__init__(env)
        self.lives, self.was_real_done = 0, True

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.was_real_done = terminated or truncated
        lives = self.unwrapped.ale.lives()
        if 0 < lives < self.lives:
            terminated = True
        self.lives = lives
        return obs, reward, terminated, truncated, info

    def reset(self, **kwargs):
        if self.was_real_done:
            obs, info = self.env.reset(**kwargs)
        else:
            obs, _, terminated, truncated, info = self.env.step(0)
            if terminated or truncated:
                obs, info = self.env.reset(**kwargs)
        self.lives = self.unwrapped.ale.lives()
        return obs, info


class FireResetEnv(gym.Wrapper):
    def reset(self, **kwargs):
        self.env.reset(**kwargs)
        obs, _, terminated, truncated, info = self.env.step(1)
        if terminated or truncated:
            obs, info = self.env.reset(**kwargs)
        return obs, info


def area_resize(image: np.ndarray, size: int, axis: int) -> np.ndarray:
    """Average ``image`` over ``size`` equal spans of ``axis`` (cv2.INTER_AREA's box filter).

    Span i covers [i*s, (i+1)*s) with s = n/size; partly covered pixels count by the part covered.
    A prefix sum interpolated at the span edges gives each span's sum: no BLAS call, so numpy's
    OpenBLAS threads (which spin after a matrix product) stay idle.
    """
    n = image.shape[axis]
    prefix = np.concatenate([np.zeros_like(image.take([0], axis)), image.cumsum(axis)], axis)
    edges = np.arange(size + 1) * (n / size)
    low = np.minimum(edges.astype(np.int64), n - 1)
    frac = (edges - low).reshape([-1 if a == axis else 1 for a in range(image.ndim)])
    at_edges = prefix.take(low, axis) + frac * (prefix.take(low + 1, axis) - prefix.take(low, axis))
    return np.diff(at_edges, axis=axis) / (n / size)


class WarpFrame(gym.ObservationWrapper):
    """Grey (ITU-R 601 luma, as cv2.COLOR_RGB2GRAY) and area-resized to 84x84 (as cv2.INTER_AREA)."""

    def __init__(self, env: gym.Env, size: int = 84) -> None:
        super().__init__(env)
        self.size = size
        self.observation_space = gym.spaces.Box(0, 255, (size, size), np.uint8)

    def observation(self, frame):
        rgb = frame.astype(np.float32)
        grey = 0.299 * rgb[..., 0] + 0.587 * rgb[..., 1] + 0.114 * rgb[..., 2]
        small = area_resize(area_resize(grey, self.size, 0), self.size, 1)
        return np.clip(small.round(), 0, 255).astype(np.uint8)


class ClipRewardEnv(gym.RewardWrapper):
    def reward(self, reward):
        return float(np.sign(reward))


class FrameStack(gym.Wrapper):
    def __init__(self, env: gym.Env, k: int = 4) -> None:
        super().__init__(env)
        self.frames = np.zeros((k, *env.observation_space.shape), dtype=np.uint8)
        self.observation_space = gym.spaces.Box(0, 255, self.frames.shape, np.uint8)

    def reset(self, **kwargs):
        obs, info = self.env.reset(**kwargs)
        self.frames[:] = obs
        return self.frames.copy(), info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        self.frames = np.roll(self.frames, -1, axis=0)
        self.frames[-1] = obs
        return self.frames.copy(), reward, terminated, truncated, info


def make_env(env_id: str, seed: int):
    def thunk():
        env = gym.make(env_id)
        env = gym.wrappers.RecordEpisodeStatistics(env)
        env = NoopResetEnv(env, noop_max=30)
        env = MaxAndSkipEnv(env, skip=4)
        env = EpisodicLifeEnv(env)
        if "FIRE" in env.unwrapped.get_action_meanings():
            env = FireResetEnv(env)
        env = ClipRewardEnv(env)
        env = WarpFrame(env)
        env = FrameStack(env, 4)
        env.action_space.seed(seed)
        return env

    return thunk


# ---- replay buffer, network -----------------------------------------------------------------------
class ReplayBuffer:
    def __init__(self, capacity: int, obs_shape: tuple[int, ...], device: torch.device) -> None:
        self.obs = np.zeros((capacity, *obs_shape), dtype=np.uint8)
        self.next_obs = np.zeros((capacity, *obs_shape), dtype=np.uint8)
        self.actions = np.zeros(capacity, dtype=np.int64)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.dones = np.zeros(capacity, dtype=np.float32)
        self.capacity, self.pos, self.full, self.device = capacity, 0, False, device

    def add(self, obs, next_obs, actions, rewards, dones) -> None:
        for i in range(len(obs)):
            self.obs[self.pos], self.next_obs[self.pos] = obs[i], next_obs[i]
            self.actions[self.pos], self.rewards[self.pos] = actions[i], rewards[i]
            self.dones[self.pos] = dones[i]
            self.pos = (self.pos + 1) % self.capacity
            self.full = self.full or self.pos == 0

    def sample(self, batch_size: int):
        idx = np.random.randint(0, self.capacity if self.full else self.pos, size=batch_size)
        to = lambda x: torch.as_tensor(x[idx], device=self.device)  # noqa: E731
        return to(self.obs), to(self.actions), to(self.rewards), to(self.dones), to(self.next_obs)


class QNetwork(nn.Module):
    def __init__(self, n_actions: int) -> None:
        super().__init__()
        self.network = nn.Sequential(
            nn.Conv2d(4, 32, 8, stride=4),
            nn.ReLU(),
            nn.Conv2d(32, 64, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(64, 64, 3, stride=1),
            nn.ReLU(),
            nn.Flatten(),
            nn.Linear(3136, 512),
            nn.ReLU(),
            nn.Linear(512, n_actions),
        )

    def forward(self, x):
        return self.network(x / 255.0)


def linear_schedule(start_e: float, end_e: float, duration: int, t: int) -> float:
    return max(end_e, start_e + (end_e - start_e) * t / duration)


def main() -> None:
    args = parse_args()
    random.seed(args.seed)
    np.random.seed(args.seed)
    torch.manual_seed(args.seed)
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    vector_env = gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv
    envs = vector_env([make_env(args.env_id, args.seed + i) for i in range(args.num_envs)])
    q_network = QNetwork(envs.single_action_space.n).to(device)
    optimizer = torch.optim.Adam(q_network.parameters(), lr=args.learning_rate)
    target_network = QNetwork(envs.single_action_space.n).to(device)
    target_network.load_state_dict(q_network.state_dict())
    rb = ReplayBuffer(args.buffer_size, envs.single_observation_space.shape, device)

    start, start_cpu = time.perf_counter(), time.process_time()
    obs, _ = envs.reset(seed=args.seed)
    done_before = np.zeros(args.num_envs, dtype=bool)  # gymnasium 1.x resets on the next step
    for global_step in range(args.total_timesteps):
        epsilon = linear_schedule(
            args.start_e,
            args.end_e,
            int(args.exploration_fraction * args.total_timesteps),
            global_step,
        )
        if random.random() < epsilon:
            actions = np.array([envs.single_action_space.sample() for _ in range(args.num_envs)])
        else:
            q_values = q_network(torch.Tensor(obs).to(device))
            actions = torch.argmax(q_values, dim=1).cpu().numpy()

        next_obs, rewards, terminations, truncations, infos = envs.step(actions)
        keep = ~done_before  # a step that only reset the env is not a transition
        if keep.any():
            rb.add(obs[keep], next_obs[keep], actions[keep], rewards[keep], terminations[keep])
        done_before = terminations | truncations
        obs = next_obs

        if global_step == args.learning_starts:  # the steady state (training) starts here
            train_start, train_start_cpu = time.perf_counter(), time.process_time()
        if global_step > args.learning_starts and global_step % args.train_frequency == 0:
            b_obs, b_actions, b_rewards, b_dones, b_next_obs = rb.sample(args.batch_size)
            with torch.no_grad():
                target_max, _ = target_network(b_next_obs).max(dim=1)
                td_target = b_rewards + args.gamma * target_max * (1 - b_dones)
            old_val = q_network(b_obs).gather(1, b_actions.unsqueeze(1)).squeeze()
            loss = F.mse_loss(td_target, old_val)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        if global_step % args.target_network_frequency == 0:
            target_network.load_state_dict(q_network.state_dict())

    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    steps = args.total_timesteps * args.num_envs
    print(
        f"env steps: {steps}  wall: {wall_s:.2f} s  CPU: {cpu_s:.2f} s  "
        f"SPS: {steps / wall_s:.1f}  env steps per CPU-second: {steps / cpu_s:.1f}"
    )
    if args.learning_starts < args.total_timesteps:
        trained = (args.total_timesteps - args.learning_starts) * args.num_envs
        wall_s, cpu_s = time.perf_counter() - train_start, time.process_time() - train_start_cpu
        print(
            f"from learning start on: env steps: {trained}  wall: {wall_s:.2f} s  CPU: {cpu_s:.2f} s"
            f"  SPS: {trained / wall_s:.1f}  env steps per CPU-second: {trained / cpu_s:.1f}"
        )
    envs.close()
    if args.async_envs:  # the figures above are this process's CPU; the workers' is their own
        children = resource.getrusage(resource.RUSAGE_CHILDREN)  # reaped by close()
        print(f"worker processes: CPU: {children.ru_utime + children.ru_stime:.2f} s")


if __name__ == "__main__":
    main()
