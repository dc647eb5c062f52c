"""``archsim capture run`` on strangers' scripts (round 4), each checked against what the script counted
itself: a DQN whose loop lives in a class (a generator of 3-step transitions, acting under
``inference_mode``, its own replay class, Polyak and hard ``load_state_dict`` target updates,
argparse under ``__main__``, ``sys.exit(0)``), a Dict observation, a ``torch.jit.script``ed
Q-network. Stable-Baselines3, actor threads and an evaluation env: test_strangers_round4_loops.py; the
gaps between steps: test_strangers_round4_gaps.py.
"""

from __future__ import annotations

import json
import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]

# The loop in a Trainer class: transitions() is a generator (3-step returns, acting under
# inference_mode), update() samples the script's own Replay class, bootstraps from a target net
# under no_grad, then Polyak-averages it and copies it whole every 20 updates. It prints what it did,
# and env steps at its first update (the steady state's start).
TRAINER = textwrap.dedent(
    """
    import argparse, collections, sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    class Replay:
        def __init__(self, capacity):
            self.obs, self.nxt = np.zeros((capacity, 4), "f"), np.zeros((capacity, 4), "f")
            self.act, self.ret, self.disc = np.zeros(capacity, "i8"), *np.zeros((2, capacity), "f")
            self.n = self.i = 0
            self.cap = capacity

        def push(self, o, a, r, no, d):
            self.obs[self.i], self.act[self.i], self.ret[self.i] = o, a, r
            self.nxt[self.i], self.disc[self.i] = no, d
            self.i, self.n = (self.i + 1) % self.cap, min(self.n + 1, self.cap)

        def sample(self, batch):
            j = np.random.randint(0, self.n, batch)
            return tuple(torch.as_tensor(x[j]) for x in (self.obs, self.act, self.ret, self.nxt,
                                                          self.disc))

    def mlp():
        return nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))

    class Trainer:
        def __init__(self, args):
            self.args, self.env = args, gym.make("CartPole-v1")
            self.env.action_space.seed(0)
            self.q, self.target = mlp(), mlp()
            self.target.load_state_dict(self.q.state_dict())
            self.opt = torch.optim.Adam(self.q.parameters(), lr=1e-3)
            self.buffer, self.c = Replay(10_000), collections.Counter()

        def transitions(self, n=3, gamma=0.99):
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
                    yield window[0][0], window[0][1], ret, nobs, 0.0 if term else gamma**len(window)
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
            with torch.no_grad():
                for p, tp in zip(self.q.parameters(), self.target.parameters()):
                    tp.mul_(0.995).add_(0.005 * p)
            if self.c["updates"] % 20 == 0:
                self.target.load_state_dict(self.q.state_dict())

        def train(self):
            for step, transition in enumerate(self.transitions()):
                self.buffer.push(*transition)
                if step >= self.args.learning_starts and step % 2 == 0:
                    self.update()
                    if self.c["updates"] == 1:
                        self.c["env_steps_at_first_update"] = self.c["env_steps"]
                if step + 1 >= self.args.total:
                    return self.c

    if __name__ == "__main__":
        p = argparse.ArgumentParser()
        p.add_argument("--total", type=int, default=120)
        p.add_argument("--learning-starts", type=int, default=30)
        p.add_argument("--batch-size", type=int, default=32)
        args = p.parse_args()
        torch.manual_seed(0)
        np.random.seed(0)
        torch.use_deterministic_algorithms(True)
        torch.set_num_threads(1)
        c = Trainer(args).train()
        print("COUNTS " + " ".join(f"{k}={v}" for k, v in sorted(c.items())))
        sys.exit(0)
    """
)


def test_a_class_based_n_step_dqn_with_polyak_targets(tmp_path, capsys):
    """120 transitions of 3-step returns (more env steps: the first 2 of each episode yield none),
    an update of 32 every 2 transitions from the 30th: every count is the script's own, acting under
    inference_mode and the target net's no_grad forward at 32 make no actor steps, the learner batch
    is 32 and the pacing is the samples after the first update over the env steps after it. The
    capture also times the CPU between unprofiled steps of both roles, and simulate runs the
    updates per env step that pacing says. (About 2 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, TRAINER, "dqn_trainer.py")
    argv = ["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "--batch-size", "32"]
    assert main(argv) == 0  # its sys.exit(0)
    did = _counts(capsys.readouterr().out)
    assert did["updates"] == 45  # steps 30, 32, ..., 118
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert counts["env_steps"] == counts["transitions"] == counts["actor_steps"] == did["env_steps"]
    assert (counts["learner_steps"], counts["samples"]) == (45, 45 * 32)
    steady = did["env_steps"] - did["env_steps_at_first_update"]
    assert workload["samples_per_insert"] == pytest.approx(44 * 32 / steady)
    steps = trace.steps
    assert set(steps[steps.role == "actor"].batch_size) == {1}
    assert set(steps[steps.role == "learner"].batch_size) == {32}
    unprofiled = trace.meta["capture"]["unprofiled_cpu_us"]
    assert unprofiled["actor"]["gap"]["steps"] > 0 and unprofiled["learner"]["gap"]["steps"] > 0
    sim = tmp_path / "sim"
    assert main(["simulate", str(out), "--hw", "local", "--out", str(sim)]) == 0
    metrics = json.loads((sim / "metrics.json").read_text())
    assert metrics["learner_updates_per_s"] == pytest.approx(
        metrics["env_steps_per_s"] * workload["samples_per_insert"] / 32
    )


# A Q-network over a Dict observation (gymnasium's Dict space, as SB3's MultiInputPolicy takes):
# its forward gets a dict of tensors, no tensor argument. argv: env steps.
DICT_OBS = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    box = gym.spaces.Box(-10, 10, (2,))
    space = gym.spaces.Dict({"pos": box, "vel": box})
    env = gym.wrappers.TransformObservation(
        gym.make("CartPole-v1"), lambda o: {"pos": o[:2], "vel": o[2:]}, space)

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.pos, self.vel, self.head = nn.Linear(2, 16), nn.Linear(2, 16), nn.Linear(32, 2)

        def forward(self, obs):
            x = torch.cat([self.pos(obs["pos"]), self.vel(obs["vel"])], -1)
            return self.head(torch.relu(x))

    torch.set_num_threads(1)
    q = Q()
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    n = int(sys.argv[1])
    P, V = np.zeros((n, 2), "f"), np.zeros((n, 2), "f")
    obs, _ = env.reset(seed=0)
    env_steps = updates = samples = 0
    for t in range(n):
        with torch.no_grad():
            a = int(q({k: torch.as_tensor(v)[None] for k, v in obs.items()}).argmax())
        P[t], V[t] = obs["pos"], obs["vel"]
        obs, r, term, trunc, _ = env.step(a)
        env_steps += 1
        if term or trunc:
            obs, _ = env.reset()
        if t >= 16:
            i = np.random.randint(0, t, 24)
            loss = q({"pos": torch.as_tensor(P[i]), "vel": torch.as_tensor(V[i])}).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            updates, samples = updates + 1, samples + 24
    print(f"COUNTS env_steps={env_steps} updates={updates} samples={samples}")
    """
)


def test_a_dict_observation_reads_its_batch_from_the_dict(tmp_path, capsys):
    """60 env steps, an update of 24 after each from the 17th: the learner batch is 24, not 1 (the
    forward had no tensor argument: 44 samples for 1,056, pacing 1 for 24); acting on a dict of
    [1, 2] tensors is batch 1. (About 1.5 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, DICT_OBS, "dqn_dict_obs.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "60"]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_steps": 60, "updates": 44, "samples": 44 * 24}
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["learner_steps"], counts["samples"]) == (44, did["samples"])
    assert trace.meta["workload"]["samples_per_insert"] == 24.0  # 43 x 24 over 43 env steps
    steps = trace.steps
    assert set(steps[steps.role == "learner"].batch_size) == {24}
    assert set(steps[steps.role == "actor"].batch_size) == {1}


# A TorchScript Q-network (torch.jit.script): its submodules run inside TorchScript, not through
# nn.Module.__call__. argv: env steps.
SCRIPTED = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    torch.set_num_threads(1)
    net = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
    q = torch.jit.script(net)
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    n = int(sys.argv[1])
    O, A = np.zeros((n, 4), "f"), np.zeros(n, "i8")
    env_steps = updates = 0
    for t in range(n):
        with torch.no_grad():
            a = int(q(torch.as_tensor(obs)[None]).argmax())
        O[t], A[t] = obs, a
        obs, r, term, trunc, _ = env.step(a)
        obs = env.reset()[0] if term or trunc else obs
        env_steps += 1
        if t >= 20:
            i = np.random.randint(0, t, 16)
            qa = q(torch.as_tensor(O[i])).gather(1, torch.as_tensor(A[i])[:, None])
            loss = qa.pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); updates += 1
    print(f"COUNTS env_steps={env_steps} updates={updates}")
    """
)


def test_a_torchscript_q_network_is_marked_like_an_eager_one(tmp_path, capsys):
    """40 env steps, an update of 16 after each from the 21st: 40 actor steps of batch 1, 20
    learner steps of 16, pacing 16. (About 1.5 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, SCRIPTED, "dqn_jit.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "40"]) == 0
    assert _counts(capsys.readouterr().out) == {"env_steps": 40, "updates": 20}
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["actor_steps"], counts["learner_steps"], counts["samples"]) == (40, 20, 320)
    assert trace.meta["workload"]["samples_per_insert"] == 16.0
    steps = trace.steps
    assert set(steps[steps.role == "learner"].batch_size) == {16}
    assert steps[steps.role == "learner"].train_backward_us.notna().all()
