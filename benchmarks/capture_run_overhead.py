"""What ``archsim capture run``'s patches cost: per loop iteration, and on the whole example program.

1. Micro: a toy loop iteration (outermost forward of a 3-layer MLP, a gymnasium env step through 3
   wrappers, a training step every 4 iterations) timed in CPU microseconds, plain and with the patches
   installed while no profiler records (as in the unrecorded steps of a capture, which also time
   their CPU for archsim.capture.unprofiled).
2. ``--example``: ``examples/dqn_single_file.py`` run plain and under ``archsim capture run`` (default
   schedule), each printing its own env steps per wall second and per CPU-second, over the whole run
   and from its learning start on (the loop only: the capture's ingest at the end is not in the
   program's figures). Rounds alternate.

    python benchmarks/capture_run_overhead.py
    python benchmarks/capture_run_overhead.py --example --total-timesteps 3000 --learning-starts 500
"""

from __future__ import annotations

import argparse
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import gymnasium as gym
import numpy as np
import torch

from archsim.capture.auto_markers import auto_markers
from archsim.capture.cpu_clock import process_cpu_time
from archsim.capture.unprofiled import timing_unprofiled_steps

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "examples" / "dqn_single_file.py"
_FIGURES = re.compile(r"SPS: ([\d.]+)\s+env steps per CPU-second: ([\d.]+)")


class _ToyEnv(gym.Env):
    observation_space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return np.zeros(4, np.float32), {}

    def step(self, action):
        return np.full(4, 0.5, np.float32), 1.0, False, False, {}


class _Layer(gym.Wrapper):
    def step(self, action):
        return self.env.step(action)


def _loop_cpu_us(iterations: int) -> float:
    """CPU microseconds per iteration of a toy RL loop."""
    torch.manual_seed(0)
    env = _Layer(_Layer(_Layer(_ToyEnv())))
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=1e-3)
    obs, _ = env.reset()
    batch = torch.zeros(8, 4)
    start = time.process_time_ns()
    for t in range(iterations):
        with torch.no_grad():
            action = int(net(torch.as_tensor(obs)).argmax())
        obs, *_ = env.step(action)
        if t % 4 == 0:
            loss = net(batch).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    return (time.process_time_ns() - start) / iterations / 1000.0


def micro(iterations: int, rounds: int) -> None:
    torch.set_num_threads(1)
    plain, patched = [], []
    for _ in range(rounds):
        plain.append(_loop_cpu_us(iterations))
        with process_cpu_time(), timing_unprofiled_steps(), auto_markers(lambda: None):
            patched.append(_loop_cpu_us(iterations))
    p, q = statistics.median(plain), statistics.median(patched)
    print(f"toy loop iteration, CPU us (median of {rounds} x {iterations} iterations):")
    print(f"  plain {p:.1f}   patched, no profiler recording {q:.1f}   (+{q - p:.1f} us)")


def _run(command: list[str]) -> list[tuple[float, float]]:
    """(env steps/s, env steps per CPU-second) of each throughput line the program printed."""
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT, check=True)
    figures = [(float(a), float(b)) for a, b in _FIGURES.findall(result.stdout)]
    if not figures:
        raise SystemExit(f"no throughput line in the output of {' '.join(command)}")
    return figures


def example(args: argparse.Namespace) -> None:
    program = [
        str(EXAMPLE),
        "--total-timesteps",
        str(args.total_timesteps),
        "--learning-starts",
        str(args.learning_starts),
        "--torch-threads",
        str(args.torch_threads),
    ]
    plain, captured = [], []
    for _ in range(args.rounds):
        plain.append(_run([sys.executable, *program]))
        with tempfile.TemporaryDirectory() as tmp:
            archsim = [sys.executable, "-m", "archsim", "capture", "run", "--out", f"{tmp}/t"]
            captured.append(_run([*archsim, "--", *program]))
    for line, span in enumerate(("whole run", "from learning start on")):
        for name, runs in (("plain", plain), ("captured", captured)):
            if all(len(r) > line for r in runs):
                sps = statistics.median(r[line][0] for r in runs)
                per_cpu = statistics.median(r[line][1] for r in runs)
                print(
                    f"{span:22s} {name:9s} env steps/s {sps:8.1f}   "
                    f"env steps per CPU-second {per_cpu:8.1f}   ({len(runs)} runs)"
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--example", action="store_true", help="also time the example program")
    parser.add_argument("--total-timesteps", type=int, default=3000)
    parser.add_argument("--learning-starts", type=int, default=500)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args()
    micro(args.iterations, args.rounds)
    if args.example:
        example(args)


if __name__ == "__main__":
    main()
