"""``archsim capture run`` on strangers' scripts (round 3), each checked against what the script
counted itself: gradient accumulation (a learner step's batch is the sum of its micro-batches).
Ctrl-C and loops that swallow BaseException: tests/test_strangers_round3_stop.py."""

from __future__ import annotations

import textwrap

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

# A DQN-style loop that accumulates MICRO micro-batches of 8 per optimizer step, its TD target from
# the same net on the next observations with grad on and .detach() (not no_grad), as many simple
# DQN scripts write it. argv: env steps, micro-batches per update.
ACCUMULATE = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch

    torch.set_num_threads(1)
    env = gym.make("CartPole-v1")
    q = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.SGD(q.parameters(), lr=1e-3)
    n, micro = int(sys.argv[1]), int(sys.argv[2])
    O, N = np.zeros((n, 4), "f"), np.zeros((n, 4), "f")
    obs, _ = env.reset(seed=0)
    c = dict(env_steps=0, updates=0, micro=0, samples=0)
    for t in range(n):
        with torch.no_grad():
            a = int(q(torch.as_tensor(obs)).argmax())
        nobs, r, term, trunc, _ = env.step(a)
        O[t], N[t] = obs, nobs
        obs = env.reset()[0] if term or trunc else nobs
        c["env_steps"] += 1
        if t >= 16 and t % 2 == 0:
            opt.zero_grad()
            for _ in range(micro):
                i = np.random.randint(0, t + 1, 8)
                target = q(torch.as_tensor(N[i])).max(1)[0].detach()
                loss = (q(torch.as_tensor(O[i])).max(1)[0] - 0.99 * target).pow(2).mean() / micro
                loss.backward()
                c["micro"] += 1
                c["samples"] += 8
            opt.step()
            c["updates"] += 1
    print("COUNTS " + " ".join(f"{k}={v}" for k, v in c.items()))
    """
)


def test_gradient_accumulation_sums_the_micro_batches(tmp_path, capsys):
    """4 micro-batches of 8 per optimizer step: every learner step's batch is 32 (it was the first
    forward's, 8), and the pacing is the samples the loop drew: 32 every 2 env steps, about 16 per
    transition. The target forward on the same 8 next observations (grad on, detached) is not
    counted again: a backward's samples are its largest grad-on forward's, not their sum. With one
    micro-batch the same loop records batch 8, about 4 per transition. (About 2.5 s.)"""
    script = _script(tmp_path, ACCUMULATE, "dqn_accumulate.py")
    schedule = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]
    for micro, batch in ((4, 32), (1, 8)):
        out = tmp_path / f"cap{micro}"
        argv = ["capture", "run", "--out", str(out), *schedule, "--", script, "60", str(micro)]
        assert main(argv) == 0
        did = _counts(capsys.readouterr().out)
        assert did["micro"] == micro * did["updates"]
        trace = load(out)
        counts = trace.meta["workload"]["settings"]["counts"]
        assert counts["learner_steps"] == did["updates"]
        assert counts["samples"] == did["samples"] == batch * did["updates"]
        learner = trace.steps[trace.steps.role == "learner"]
        assert len(learner) and set(learner.batch_size) == {batch}
        # from the env step after the first update (at t=16) on: 43 transitions, every later update
        spi = (did["updates"] - 1) * batch / (did["env_steps"] - 17)
        assert trace.meta["workload"]["samples_per_insert"] == spi
