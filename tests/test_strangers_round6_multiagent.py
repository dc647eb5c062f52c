"""``archsim capture run`` on multi-agent scripts (round 6): two policies acting on one gymnasium
env with Tuple observation and action spaces, each trained DQN-style on its own draws, or
self-play against a frozen copy refreshed by ``load_state_dict``; checked against the script's own
counts and the pacing worked out by hand."""

from __future__ import annotations

import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]

# argv: env steps, two (both agents learn) | selfplay (agent 1 is agent 0's frozen copy, refreshed
# every 20 steps). From t = 8, every 4th step each learning agent draws 32 of its own observations.
MULTI_AGENT = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn
    from gymnasium import spaces

    n, style = int(sys.argv[1]), sys.argv[2]
    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)


    class TwoCarts(gym.Env):
        # two agents, each balancing its own CartPole

        def __init__(self):
            self.a, self.b = gym.make("CartPole-v1"), gym.make("CartPole-v1")
            self.observation_space = spaces.Tuple((self.a.observation_space, self.b.observation_space))
            self.action_space = spaces.Tuple((self.a.action_space, self.b.action_space))

        def reset(self, seed=None, options=None):
            return (self.a.reset(seed=seed)[0], self.b.reset(seed=None if seed is None else seed + 1)[0]), {}

        def step(self, action):
            oa, ra, ta, ua, _ = self.a.step(int(action[0]))
            ob, rb, tb, ub, _ = self.b.step(int(action[1]))
            return (oa, ob), ra + rb, ta or tb, ua or ub, {}


    env = TwoCarts()
    qs = [nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2)) for _ in range(2)]
    if style == "selfplay":   # agent 1 is a frozen copy of agent 0, refreshed every 20 steps
        opts = [torch.optim.Adam(qs[0].parameters(), lr=1e-3)]
    else:
        opts = [torch.optim.Adam(q.parameters(), lr=1e-3) for q in qs]
    O = np.zeros((n, 2, 4), "f")
    obs, _ = env.reset(seed=0)
    updates = 0
    for t in range(n):
        with torch.no_grad():
            acts = [int(q(torch.as_tensor(o)).argmax()) for q, o in zip(qs, obs)]
        O[t] = np.stack(obs)
        obs, r, term, trunc, _ = env.step(tuple(acts))
        if term or trunc:
            obs, _ = env.reset()
        if t >= 8 and t % 4 == 0:
            for i, opt in enumerate(opts):
                x = torch.as_tensor(O[np.random.randint(0, t + 1, 32), i])
                loss = qs[i](x).pow(2).mean()
                opt.zero_grad(); loss.backward(); opt.step(); updates += 1
        if style == "selfplay" and t % 20 == 0:
            qs[1].load_state_dict(qs[0].state_dict())
    print(f"COUNTS env_steps={n} updates={updates}")
    """
)


@pytest.mark.parametrize(("style", "learners"), [("two", 2), ("selfplay", 1)])
def test_agents_sharing_one_env_are_paced_per_joint_transition(tmp_path, capsys, style, learners):
    """60 joint steps, a round of updates at t = 8, 12, ..., 56 (13): one update of 32 per
    learning agent a round, each on its own draw, so 26 learner steps (two learners) or 13
    (self-play), and the pacing counts each agent's 32 per joint transition: 12 rounds x 32 x
    learners over the 51 env steps after the first update (15.1 or 7.5). Both acting forwards of
    a step are its act (60 actor steps, batch 1). (About 1 s each.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, MULTI_AGENT, "marl.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "60", style]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_steps": 60, "updates": 13 * learners}
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["env_steps"], counts["actor_steps"], counts["transitions"]) == (60, 60, 60)
    assert (counts["learner_steps"], counts["optimizer_steps"]) == (13 * learners, 13 * learners)
    assert counts["samples"] == 13 * learners * 32
    assert workload["samples_per_insert"] == pytest.approx(12 * 32 * learners / 51)
    steps = trace.steps
    assert set(steps[steps.role.astype(str) == "learner"].batch_size) == {32}
    assert set(steps[steps.role.astype(str) == "actor"].batch_size) == {1}
