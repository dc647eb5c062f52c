"""``archsim capture run`` on strangers' scripts (round 6), each checked against what the script
counted itself: A3C / Hogwild! with the program's process training as one more worker, and
REINFORCE's whole-episode updates."""

from __future__ import annotations

import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]

# A3C as people write it (Mnih et al. 2016, Alg. S3): a shared actor-critic in shared memory
# (share_memory()), torch.multiprocessing workers that each sync a local copy, roll out up to
# t_max CartPole steps with grad on, and push their n-step actor-critic gradients to the shared
# model for the shared optimizer to step; the program's process runs one more worker itself.
# argv: worker processes, updates per worker, t_max, start method (spawn refuses the same, 20 s).
A3C = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import torch
    import torch.multiprocessing as mp
    import torch.nn as nn

    class AC(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.Tanh())
            self.pi, self.v = nn.Linear(32, 2), nn.Linear(32, 1)

        def forward(self, x):
            h = self.body(x)
            return self.pi(h), self.v(h)

    def train(rank, shared, n_updates, t_max, counter):
        torch.set_num_threads(1); torch.manual_seed(rank)
        opt = torch.optim.SGD(shared.parameters(), lr=1e-3)
        env, local = gym.make("CartPole-v1"), AC()
        obs, _ = env.reset(seed=rank)
        steps = 0
        for _ in range(n_updates):
            local.load_state_dict(shared.state_dict())
            logps, values, rewards, done = [], [], [], False
            for _ in range(t_max):
                logits, v = local(torch.as_tensor(obs).unsqueeze(0))
                dist = torch.distributions.Categorical(logits=logits)
                a = dist.sample()
                obs, r, term, trunc, _ = env.step(int(a)); steps += 1
                logps.append(dist.log_prob(a)); values.append(v.squeeze()); rewards.append(r)
                done = term or trunc
                if done:
                    obs, _ = env.reset()
                    break
            R = torch.zeros(()) if done else local(torch.as_tensor(obs)[None])[1].squeeze().detach()
            loss = 0
            for lp, v, r in zip(reversed(logps), reversed(values), reversed(rewards)):
                R = r + 0.99 * R
                loss = loss + 0.5 * (R - v).pow(2) - lp * (R - v).detach()
            opt.zero_grad(); loss.backward()
            for p, sp in zip(local.parameters(), shared.parameters()):
                sp._grad = p.grad
            opt.step()
        with counter.get_lock():
            counter.value += steps

    if __name__ == "__main__":
        workers, n_updates, t_max = map(int, sys.argv[1:4])
        # force: capture run runs the program in the test's process, where an earlier test's
        # multiprocessing use has already fixed the default context (RuntimeError otherwise)
        mp.set_start_method(sys.argv[4], force=True)
        shared = AC(); shared.share_memory()
        counter = mp.Value("i", 0)
        procs = [
            mp.Process(target=train, args=(r, shared, n_updates, t_max, counter))
            for r in range(workers)
        ]
        for p in procs:
            p.start()
        train(workers, shared, n_updates, t_max, counter)
        for p in procs:
            p.join()
        print(f"COUNTS env_steps={counter.value} updates={(workers + 1) * n_updates}")
    """
)


def test_a3c_whose_program_trains_beside_its_workers_is_refused(tmp_path, capsys):
    """1 forked worker and the program's own process each make 6 updates on a shared model: the
    capture kept the program's 6 updates as the learner and its pacing (1 sample per 4.4
    transitions, of its own env steps only) and dropped the worker's 6 from both, silently
    (captured: 206 actor steps, 40 learner steps of 120 updates with 2 workers). Refused in one
    line, as A3C workers whose program only waits are. (About 9 s wall at load 6, 5 s CPU.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, A3C, "a3c.py")
    assert (
        main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "1", "6", "5", "fork"])
        == 2
    )
    captured = capsys.readouterr()
    assert _counts(captured.out)["updates"] == 12
    assert captured.err.strip().splitlines()[-1] == (
        "archsim: error: capture run: a3c trained in its worker processes too (6 training passes "
        "there, 6 in its own process), and capture run records a learner in the program's own "
        "process only (A3C-style workers are not supported)"
    )
    assert not out.exists()


# REINFORCE (Williams 1992) on CartPole: one update per episode, of its whole length, with returns
# normalised; argv: stored-logp (each step's log-prob kept with its graph from the acting forward,
# as most tutorials write it) or rescored (act under no_grad, one batched forward on the
# episode's observations at its end), episodes.
REINFORCE = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    style, episodes = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1); torch.manual_seed(0)
    env = gym.make("CartPole-v1")
    pi = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
    opt = torch.optim.Adam(pi.parameters(), lr=1e-2)
    lengths = []
    for ep in range(episodes):
        obs, _ = env.reset(seed=ep)
        logps, rewards, O, A, done = [], [], [], [], False
        while not done:
            if style == "stored-logp":
                d = torch.distributions.Categorical(logits=pi(torch.as_tensor(obs)))
                a = d.sample(); logps.append(d.log_prob(a))
            else:
                with torch.no_grad():
                    a = torch.distributions.Categorical(logits=pi(torch.as_tensor(obs))).sample()
                O.append(obs); A.append(int(a))
            obs, r, term, trunc, _ = env.step(int(a))
            rewards.append(r); done = term or trunc
        G, ret = 0.0, []
        for r in reversed(rewards):
            G = r + 0.99 * G; ret.insert(0, G)
        ret = torch.tensor(ret); ret = (ret - ret.mean()) / (ret.std() + 1e-8)
        if style == "stored-logp":
            lp = torch.stack(logps)
        else:
            logits = pi(torch.as_tensor(np.array(O)))
            lp = torch.distributions.Categorical(logits=logits).log_prob(torch.tensor(A))
        loss = -(lp * ret).sum()
        opt.zero_grad(); loss.backward(); opt.step()
        lengths.append(len(rewards))
    print(f"COUNTS env_steps={sum(lengths)} updates={len(lengths)} first={lengths[0]} "
          f"last={lengths[-1]}")
    """
)


@pytest.mark.parametrize("style", ["stored-logp", "rescored"])
def test_reinforce_trains_each_episode_once(tmp_path, capsys, style):
    """8 episodes (253 env steps, the first 20 long, the last 14): 8 updates, each on its whole
    episode, so 1 sample per transition (233 after the first update, 233 samples), and a
    learner step's batch is its episode's length. Kept with its graph from the acting forwards
    (stored-logp), an update had read batch 1: 0.030 samples per transition. The windows wait
    200 steps so that the run ends in them (after them the markers' cost is timed on stretches
    run bare, whose samples are not counted). (About 1.5 s each.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, REINFORCE, "reinforce.py")
    schedule = ["--wait", "200", "--warmup", "1", "--active", "8", "--repeat", "1"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", script, style, "8"]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_steps": 253, "updates": 8, "first": 20, "last": 14}
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["env_steps"], counts["learner_steps"]) == (253, 8)
    assert (counts["samples"], counts["transitions_training"]) == (253, 253 - 20)
    assert workload["samples_per_insert"] == 1.0
    learner = trace.steps[trace.steps.role.astype(str) == "learner"]
    assert len(learner) and set(learner.batch_size) <= {37, 13, 25, 45, 85, 14}


# A2C (Mnih et al. 2016, synchronous) on 4 vector CartPoles: 5-step rollouts acting with grad on
# and keeping each step's log-prob and value with their graphs, one update of the n-step
# actor-critic loss per rollout. The bootstrap value of the next observation is computed with
# grad on and detached ("grad", as many tutorials write it) or under no_grad. argv: iterations,
# grad | nograd.
A2C = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import torch
    import torch.nn as nn

    iters, boot_grad = int(sys.argv[1]), sys.argv[2] == "grad"
    torch.set_num_threads(1); torch.manual_seed(0)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)

    class AC(nn.Module):
        def __init__(self):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(4, 32), nn.Tanh())
            self.pi, self.v = nn.Linear(32, 2), nn.Linear(32, 1)

        def forward(self, x):
            h = self.body(x)
            return self.pi(h), self.v(h).squeeze(-1)

    ac = AC()
    opt = torch.optim.RMSprop(ac.parameters(), lr=7e-4)
    obs, _ = envs.reset(seed=0)
    calls = 0
    for it in range(iters):
        lps, vs, rs, ms = [], [], [], []
        for _ in range(5):
            logits, v = ac(torch.as_tensor(obs))
            d = torch.distributions.Categorical(logits=logits)
            a = d.sample()
            obs, r, term, trunc, _ = envs.step(a.numpy()); calls += 1
            lps.append(d.log_prob(a)); vs.append(v)
            rs.append(torch.as_tensor(r, dtype=torch.float32))
            ms.append(torch.as_tensor(1.0 - (term | trunc), dtype=torch.float32))
        with torch.set_grad_enabled(boot_grad):
            R = ac(torch.as_tensor(obs))[1].detach()
        loss = 0
        for lp, v, r, m in zip(reversed(lps), reversed(vs), reversed(rs), reversed(ms)):
            R = r + 0.99 * R * m
            loss = loss + (0.5 * (R - v).pow(2) - lp * (R - v).detach()).mean()
        opt.zero_grad(); loss.backward(); opt.step()
    print(f"COUNTS env_calls={calls} transitions={calls * 4} updates={iters}")
    """
)


@pytest.mark.parametrize("bootstrap", ["grad", "nograd"])
def test_a2c_trains_its_rollout_with_its_graph(tmp_path, capsys, bootstrap):
    """8 rollouts of 5 steps of 4 CartPoles (160 transitions), one update each on its 20: 1
    sample per transition (140 after the first update), learner steps of batch 20, actor steps
    the 40 env steps and the 8 bootstrap forwards. Before: each update read batch 1 (0.05 samples
    per transition); with the bootstrap computed with grad on, each rollout's first acting forward
    was a train forward (an extra learner step of batch 4 that trained nothing, half of those
    recorded), and the bootstrap's 4 counted as samples of the update. (About 1-2 s each.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, A2C, "a2c.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "8", bootstrap]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_calls": 40, "transitions": 160, "updates": 8}
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["env_steps"], counts["transitions"], counts["actor_steps"]) == (40, 160, 48)
    assert (counts["learner_steps"], counts["samples"]) == (8, 160)
    assert counts["transitions_training"] == 140
    assert workload["samples_per_insert"] == 1.0
    steps = trace.steps
    assert set(steps[steps.role.astype(str) == "learner"].batch_size) == {20}
    assert set(steps[steps.role.astype(str) == "actor"].batch_size) == {4}
