"""How far ``archsim simulate`` puts a captured CartPole DQN from the script's own rate, with ``capture
run``'s marker figures measured on the program's own steps (``meta.capture.marker_cost_in_program``,
archsim.capture.bare_stretches) and with the synthetic calibration alone in their place
(``meta.capture.marker_cpu_us_synthetic``, archsim.capture.marker_cost).

Rounds alternate in one process: the script plain (its own env steps per CPU-second from its first
update on), then captured (``capture run``'s capture_program, default schedule), then the trace
simulated on this machine (``--loop trace``) with either figure. The script is a class-based DQN
(n-step returns, Polyak and hard target updates, its own replay buffer) on gymnasium's CartPole-v1.

    python benchmarks/marker_cost_accuracy.py --rounds 4
    python benchmarks/marker_cost_accuracy.py --rounds 3 --train-every 1
"""

from __future__ import annotations

import argparse
import contextlib
import copy
import dataclasses
import io
import runpy
import statistics
import sys
import tempfile
from pathlib import Path

SCRIPT = '''\
"""A DQN whose loop lives in a Trainer class: a generator yields transitions, acting under
torch.inference_mode, a custom replay buffer class, 3-step returns, Polyak target updates and a hard
load_state_dict every 50 updates, argparse in __main__, sys.exit(0) at the end."""
import argparse
import collections
import sys
import time

import gymnasium as gym
import numpy as np
import torch
import torch.nn as nn


class Replay:
    def __init__(self, capacity, obs_dim):
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.act = np.zeros(capacity, np.int64)
        self.ret = np.zeros(capacity, np.float32)
        self.disc = np.zeros(capacity, np.float32)
        self.n = self.i = 0
        self.cap = capacity

    def push(self, o, a, r, no, d):
        self.obs[self.i], self.act[self.i], self.ret[self.i] = o, a, r
        self.next_obs[self.i], self.disc[self.i] = no, d
        self.i = (self.i + 1) % self.cap
        self.n = min(self.n + 1, self.cap)

    def sample(self, batch):
        j = np.random.randint(0, self.n, batch)
        return tuple(torch.as_tensor(x[j]) for x in (self.obs, self.act, self.ret, self.next_obs, self.disc))


class Trainer:
    def __init__(self, args):
        self.args = args
        self.env = gym.make("CartPole-v1")
        self.q = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
        self.target = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
        self.target.load_state_dict(self.q.state_dict())
        self.opt = torch.optim.Adam(self.q.parameters(), lr=1e-3)
        self.buffer = Replay(10_000, 4)
        self.c = collections.Counter()

    def transitions(self):
        """n-step transitions, one per env step once the window is full."""
        gamma, n = 0.99, self.args.n_step
        obs, _ = self.env.reset(seed=0)
        window = collections.deque(maxlen=n)
        while True:
            with torch.inference_mode():
                a = int(self.q(torch.as_tensor(obs)).argmax())
            if np.random.rand() < 0.1:
                a = self.env.action_space.sample()
            nobs, r, term, trunc, _ = self.env.step(a)
            self.c["env_steps"] += 1
            window.append((obs, a, r))
            if len(window) == n or term or trunc:
                ret = sum(gamma**k * x[2] for k, x in enumerate(window))
                o0, a0, _ = window[0]
                yield o0, a0, ret, nobs, 0.0 if term else gamma ** len(window)
            if term or trunc:
                window.clear()
                nobs, _ = self.env.reset()
            obs = nobs

    def update(self):
        o, a, ret, no, disc = self.buffer.sample(self.args.batch_size)
        with torch.no_grad():
            target = ret + disc * self.target(no).max(1).values
        q = self.q(o).gather(1, a[:, None]).squeeze(1)
        loss = nn.functional.smooth_l1_loss(q, target)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        self.opt.step()
        self.c["updates"] += 1
        self.c["samples"] += self.args.batch_size
        with torch.no_grad():
            for p, tp in zip(self.q.parameters(), self.target.parameters()):
                tp.mul_(1 - self.args.tau).add_(self.args.tau * p)
        if self.c["updates"] % 50 == 0:
            self.target.load_state_dict(self.q.state_dict())

    def train(self):
        t0 = time.process_time()
        for step, tr in enumerate(self.transitions()):
            self.buffer.push(*tr)
            if step >= self.args.learning_starts and step % self.args.train_every == 0:
                self.update()
                if self.c["updates"] == 1:  # the steady state: from the first update on
                    t1, e1, u1 = time.process_time(), self.c["env_steps"], 1
            if step + 1 >= self.args.total:
                break
        self.c["cpu_ms"] = int(1000 * (time.process_time() - t0))
        steady_s = time.process_time() - t1
        self.c["steady_env_steps_per_s"] = int((self.c["env_steps"] - e1) / steady_s)
        self.c["steady_updates_per_s"] = int((self.c["updates"] - u1) / steady_s)
        return self.c


if __name__ == "__main__":
    p = argparse.ArgumentParser()
    p.add_argument("--total", type=int, default=300)
    p.add_argument("--learning-starts", type=int, default=50)
    p.add_argument("--train-every", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--n-step", type=int, default=3)
    p.add_argument("--tau", type=float, default=0.005)
    args = p.parse_args()
    torch.manual_seed(0)
    np.random.seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(1)
    c = Trainer(args).train()
    print("COUNTS " + " ".join(f"{k}={v}" for k, v in sorted(c.items())))
    sys.exit(0)
'''


def _counts(text: str) -> dict[str, str]:
    line = next(x for x in text.splitlines() if x.startswith("COUNTS "))
    return dict(item.split("=") for item in line.split()[1:])


def _plain(script: Path, argv: list[str]) -> float:
    out = io.StringIO()
    saved = list(sys.argv)
    sys.argv = [str(script), *argv]
    try:
        with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
            runpy.run_path(str(script), run_name="__main__")
    finally:
        sys.argv = saved
    return float(_counts(out.getvalue())["steady_env_steps_per_s"])


def main() -> None:
    from archsim.capture.run_script import capture_program, parse_program
    from archsim.capture.session import DEFAULT_SCHEDULE
    from archsim.hw.local import detect_local
    from archsim.sim.config import LOOP_TRACE, SimConfig
    from archsim.sim.run import simulate

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--total", type=int, default=3000, help="the script's env steps")
    parser.add_argument("--train-every", type=int, default=2)
    args = parser.parse_args()
    hardware = detect_local()
    argv = ["--total", str(args.total), "--train-every", str(args.train_every)]

    def rate(trace) -> float:
        return simulate(trace, hardware, SimConfig(loop=LOOP_TRACE)).metrics["env_steps_per_s"]

    rows = []
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "cartpole_dqn.py"
        script.write_text(SCRIPT)
        for i in range(args.rounds):
            own = _plain(script, argv)
            quiet = io.StringIO()
            with contextlib.redirect_stdout(quiet), contextlib.redirect_stderr(io.StringIO()):
                trace, _ = capture_program(
                    parse_program([str(script), *argv]),
                    Path(folder) / f"t{i}",
                    schedule=DEFAULT_SCHEDULE,
                )
            measured = trace.meta["capture"].get("marker_cost_in_program") or {}
            meta = copy.deepcopy(trace.meta)
            capture = meta["capture"]
            capture["marker_cpu_us"] = capture.get(
                "marker_cpu_us_synthetic", capture["marker_cpu_us"]
            )
            synthetic, in_program = rate(dataclasses.replace(trace, meta=meta)), rate(trace)
            rows.append((100 * (synthetic / own - 1), 100 * (in_program / own - 1)))
            print(
                f"round {i}: script {own:.0f} env steps/CPU-s; simulated {synthetic:.0f} "
                f"({rows[-1][0]:+.1f}%) with the synthetic figures, {in_program:.0f} ({rows[-1][1]:+.1f}%) "
                f"with the in-program one: {measured.get('us_per_env_step')} us per env step "
                f"({measured.get('pairs')} pairs; synthetic {measured.get('synthetic_us_per_env_step')})",
                flush=True,
            )
    for k, name in enumerate(("synthetic figures", "in-program figure")):
        errors = [row[k] for row in rows]
        print(
            f"{name}: median {statistics.median(errors):+.1f}%, "
            f"{min(errors):+.1f}% to {max(errors):+.1f}%"
        )


if __name__ == "__main__":
    main()
