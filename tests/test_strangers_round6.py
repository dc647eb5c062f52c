"""``archsim capture run`` on strangers' scripts (round 6), each checked against what the script
counted itself: A3C / Hogwild! with the program's process training as one more worker."""

from __future__ import annotations

import textwrap

from archsim.cli import main
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
        mp.set_start_method(sys.argv[4])
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
