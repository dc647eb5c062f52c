"""Stable-Baselines3 DQN on Atari Pong, as an SB3 user writes it (Raffin et al. 2021, JMLR 22(268)).

Needs ``pip install stable-baselines3`` (or ``pip install -e ".[examples]"``). SB3's own Atari wrappers
need OpenCV; the same wrapper stack, written without it, is taken from dqn_single_file.py beside this
file. Nothing here knows of archsim; capture it unmodified:

    archsim capture run --out runs/sb3 -- examples/sb3_dqn.py --total-timesteps 3000 --learning-starts 500
"""

from __future__ import annotations

import argparse
import time

import torch
from dqn_single_file import make_env
from stable_baselines3 import DQN
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import DummyVecEnv, SubprocVecEnv


class TrainingStart(BaseCallback):
    """Notes the wall and CPU clocks when the env step count reaches ``at`` (training starts)."""

    def __init__(self, at: int) -> None:
        super().__init__()
        self.at, self.wall_s, self.cpu_s = at, 0.0, 0.0

    def _on_step(self) -> bool:
        if self.num_timesteps == self.at:
            self.wall_s, self.cpu_s = time.perf_counter(), time.process_time()
        return True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--env-id", default="PongNoFrameskip-v4")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--total-timesteps", type=int, default=10_000_000)
    p.add_argument("--learning-starts", type=int, default=100_000)
    p.add_argument("--buffer-size", type=int, default=10_000)  # rl-zoo's Atari DQN: 100,000
    p.add_argument("--torch-threads", type=int, default=0, help="0: torch's default")
    p.add_argument(
        "--subproc", action="store_true", help="step the env in a worker process (SubprocVecEnv)"
    )
    args = p.parse_args()
    if args.torch_threads > 0:
        torch.set_num_threads(args.torch_threads)

    env = (SubprocVecEnv if args.subproc else DummyVecEnv)([make_env(args.env_id, args.seed)])
    # rl-baselines3-zoo hyperparams/dqn.yml (atari): lr 1e-4, batch 32, train_freq 4,
    # target_update_interval 1000, exploration_fraction 0.1, exploration_final_eps 0.01
    model = DQN(
        "CnnPolicy",
        env,
        learning_rate=1e-4,
        buffer_size=args.buffer_size,
        learning_starts=args.learning_starts,
        batch_size=32,
        train_freq=4,
        gradient_steps=1,
        target_update_interval=1000,
        exploration_fraction=0.1,
        exploration_final_eps=0.01,
        optimize_memory_usage=False,
        seed=args.seed,
        device="auto",
    )
    start, start_cpu = time.perf_counter(), time.process_time()
    training = TrainingStart(args.learning_starts)
    model.learn(total_timesteps=args.total_timesteps, callback=training)
    wall_s, cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
    steps = args.total_timesteps
    print(
        f"env steps: {steps}  wall: {wall_s:.2f} s  CPU: {cpu_s:.2f} s  "
        f"SPS: {steps / wall_s:.1f}  env steps per CPU-second: {steps / cpu_s:.1f}"
    )
    if 0 < args.learning_starts < steps:
        trained = steps - args.learning_starts
        wall_s, cpu_s = time.perf_counter() - training.wall_s, time.process_time() - training.cpu_s
        print(
            f"from learning start on: env steps: {trained}  wall: {wall_s:.2f} s  CPU: {cpu_s:.2f} s"
            f"  SPS: {trained / wall_s:.1f}  env steps per CPU-second: {trained / cpu_s:.1f}"
        )


if __name__ == "__main__":
    main()
