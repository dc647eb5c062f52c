"""``archsim capture run`` on strangers' off-policy scripts (round 2), checked against what each script
counted itself: an endless ``while True`` loop stopped once its windows are recorded, a replay
sampled through a DataLoader with worker processes under bf16 autocast and gradient accumulation,
and a CleanRL-style SAC with three optimizers. The on-policy ones: tests/test_strangers_round2.py."""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.capture.role_schedule import RoleSchedule
from archsim.capture.session import CaptureSchedule
from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

# A loop with no end, as people write them to stop with Ctrl-C: its settings read from a file beside
# it (through __file__), a print every step, acting under inference_mode, a manual reset at each
# episode's end, a batch of 16 every 2 env steps; KeyboardInterrupt saves a checkpoint.
FOREVER = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import gymnasium as gym
    import numpy as np
    import torch

    HERE = Path(__file__).resolve().parent
    cfg = dict(line.split("=") for line in (HERE / "forever.cfg").read_text().split())
    torch.set_num_threads(1)
    env = gym.make(sys.argv[1])
    q = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    obs, _ = env.reset(seed=0)
    buf, t, updates, episodes = [], 0, 0, 0
    try:
        while True:
            with torch.inference_mode():
                a = int(q(torch.as_tensor(obs)).argmax())
            nobs, r, term, trunc, _ = env.step(a)
            buf.append(obs)
            obs, t = nobs, t + 1
            if term or trunc:
                obs, episodes = env.reset()[0], episodes + 1
            print(f"step {t} reward {r}")
            if t > 20 and t % 2 == 0:
                o = torch.as_tensor(np.array([buf[i] for i in np.random.randint(t, size=16)]))
                loss = q(o).pow(2).mean()
                opt.zero_grad(); loss.backward(); opt.step(); updates += 1
    except KeyboardInterrupt:
        torch.save(q.state_dict(), HERE / "checkpoint.pt")
    finally:
        env.close()
        print(f"COUNTS env_steps={t} updates={updates} episodes={episodes}")
    """
)


def test_an_endless_loop_is_stopped_once_its_windows_are_recorded(tmp_path, capsys):
    """``while True`` could only be captured by a Ctrl-C the program caught; --stop-when-recorded
    ends it at its first step after the last window (2 of 6 from step 3): its ``finally`` runs,
    its KeyboardInterrupt handler does not, and the trace is saved with the counts of the steps it
    ran. The episode's reset after its last step (CartPole episodes of about 20 steps) is env work
    of that step: it opened an actor step of its own, counting 403 actor steps for 382 env steps."""
    (tmp_path / "forever.cfg").write_text("unused=1\n")
    script = _script(tmp_path, FOREVER, "forever.py")
    out = tmp_path / "cap"
    schedule = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]
    argv = ["capture", "run", "--out", str(out), *schedule, "--stop-when-recorded"]
    assert main([*argv, "--", script, "CartPole-v1"]) == 0
    printed = capsys.readouterr()
    did = _counts(printed.out)
    assert did["episodes"] >= 1 and not (tmp_path / "checkpoint.pt").exists()
    assert "stopped forever at its step 19 after its first optimizer step" in printed.err
    counts = load(out).meta["workload"]["settings"]["counts"]
    assert counts["stopped_when_recorded"] and counts["ticks"] == 19
    assert counts["env_steps"] == counts["actor_steps"] == did["env_steps"]
    assert counts["learner_steps"] == did["updates"]
    assert load(out).meta["workload"]["samples_per_insert"] == 8.0  # 16 every 2 env steps
    assert main([*argv, "--repeat", "0", "--force", "--", script, "CartPole-v1"]) == 2
    assert capsys.readouterr().err.strip() == (
        "archsim: error: capture run: --stop-when-recorded needs --repeat N > 0 (--repeat 0 "
        "records until the program ends)"
    )


@settings(max_examples=50)
@given(
    wait=st.integers(0, 6),
    warmup=st.integers(1, 2),
    active=st.integers(1, 5),
    repeat=st.integers(0, 3),
    roles=st.lists(st.sampled_from(["actor", "learner", "learner"]), max_size=80),
)
def test_a_finished_schedule_records_nothing_more(wait, warmup, active, repeat, roles):
    """Invariant of --stop-when-recorded: once RoleSchedule says it has finished, it stays so and
    every later step is NONE (stopping there loses no window), every window it opened has been
    saved, and with ``repeat`` 0 it never finishes."""
    schedule = CaptureSchedule(skip_first=1, wait=wait, warmup=warmup, active=active, repeat=repeat)
    state = {"role": None}
    sched = RoleSchedule(schedule, lambda: state["role"])
    actions, finished = [sched(0).name], []
    for step, role in enumerate(roles, start=1):
        state["role"] = role
        actions.append(sched(step).name)
        finished.append(sched.finished())
    if True in finished:
        first = finished.index(True)
        assert all(finished[first:]) and repeat > 0
        assert set(actions[first + 1 :]) == {"NONE"}
        opened = [a for a in actions[: first + 2] if a.startswith("RECORD")]
        assert opened and opened[-1] == "RECORD_AND_SAVE" and actions[first] == "RECORD_AND_SAVE"


# An off-policy loop that samples its replay through a DataLoader(num_workers=2) (2 forked workers
# per update), trains under CPU bf16 autocast, accumulates 4 micro-batches of 8 per optimizer step,
# and acts under inference_mode with torch.set_num_threads(1). argv: env steps.
DATALOADER = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import torch
    from torch.utils.data import DataLoader, Dataset

    class Replay(Dataset):
        def __init__(self):
            self.obs = []
        def __len__(self):
            return len(self.obs)
        def __getitem__(self, i):
            return torch.as_tensor(self.obs[i])

    if __name__ == "__main__":
        torch.set_num_threads(1)
        env = gym.make("CartPole-v1")
        net = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.ReLU(), torch.nn.Linear(64, 2))
        opt = torch.optim.Adam(net.parameters(), lr=1e-3)
        rb, (obs, _) = Replay(), env.reset(seed=0)
        env_steps = updates = micro = 0
        for t in range(int(sys.argv[1])):
            with torch.inference_mode():
                a = int(net(torch.as_tensor(obs)).argmax())
            obs2, r, term, trunc, _ = env.step(a)
            rb.obs.append(obs)
            obs, env_steps = (env.reset()[0] if term or trunc else obs2), env_steps + 1
            if t >= 32 and t % 16 == 0:
                loader = DataLoader(rb, batch_size=8, shuffle=True, num_workers=2)
                opt.zero_grad()
                for i, batch in enumerate(loader):
                    with torch.autocast("cpu", dtype=torch.bfloat16):
                        loss = net(batch).float().pow(2).mean() / 4
                    loss.backward()
                    micro += 1
                    if i == 3:
                        break
                opt.step()
                updates += 1
        print(f"COUNTS env_steps={env_steps} updates={updates} micro={micro}")
    """
)


def test_dataloader_workers_bf16_autocast_and_gradient_accumulation(tmp_path, capsys):
    """3 updates of 4 accumulated micro-batches: 3 learner steps (not 12), their train ops in bf16.
    The DataLoader's 6 forked workers are counted but not captured, and named in no note: each
    started a profiler of its own and was named "forked while the parent's profiler was recording"
    (22 note lines for 11 updates). A learner step's batch is the sum of its 4 micro-batches of 8
    (it was the first forward's, 8: a quarter of what the loop draws)."""
    script = _script(tmp_path, DATALOADER, "dl_amp.py")
    out = tmp_path / "cap"
    schedule = ["--wait", "2", "--warmup", "1", "--active", "20", "--repeat", "1"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", script, "80"]) == 0
    printed = capsys.readouterr()
    did = _counts(printed.out)
    assert (did["updates"], did["micro"]) == (3, 12)
    assert "archsim: note" not in printed.err
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["env_steps"], counts["learner_steps"]) == (did["env_steps"], did["updates"])
    assert counts["worker_processes"] == 2 * did["updates"]
    assert "processes" not in trace.meta["capture"]  # the program's process only
    learner = trace.steps[trace.steps.role == "learner"]
    assert len(learner) == 1 and learner.train_backward_us.notna().all()
    assert set(learner.batch_size) == {32} and counts["samples"] == 32 * did["updates"]
    train = trace.ops[trace.ops.step_id.isin(learner.step_id)]
    matmuls = train[train.name.astype(str).isin(["aten::addmm", "aten::mm"])]
    assert len(matmuls) and set(matmuls.dtype.astype(str)) == {"bfloat16"}


# CleanRL-style SAC on Pendulum (Haarnoja et al. 2018): continuous actions from a squashed Gaussian,
# twin critics with target networks (Polyak), and three optimizers: critics every env step, the
# actor and the temperature twice every other step (delayed policy updates). argv: env steps.
SAC = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 64), nn.ReLU(), nn.Linear(64, o))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(3, 2)

        def forward(self, x):
            mean, log_std = self.net(x).chunk(2, -1)
            normal = torch.distributions.Normal(mean, log_std.clamp(-5, 2).exp())
            u = normal.rsample()
            logp = (normal.log_prob(u) - torch.log(1 - torch.tanh(u) ** 2 + 1e-6)).sum(-1, True)
            return 2 * torch.tanh(u), logp

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(4, 1)

        def forward(self, x, a):
            return self.net(torch.cat([x, a], 1))

    envs = gym.vector.SyncVectorEnv([lambda: gym.make("Pendulum-v1")])
    actor, q1, q2, t1, t2 = Actor(), Q(), Q(), Q(), Q()
    t1.load_state_dict(q1.state_dict()); t2.load_state_dict(q2.state_dict())
    q_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=1e-3)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=3e-4)
    log_alpha = torch.zeros(1, requires_grad=True)
    a_opt = torch.optim.Adam([log_alpha], lr=1e-3)
    n = int(sys.argv[1])
    O, A, R, N = np.zeros((n, 3), "f"), np.zeros((n, 1), "f"), np.zeros(n, "f"), np.zeros((n, 3), "f")
    obs, _ = envs.reset(seed=1)
    c = dict(env_steps=0, q=0, pi=0, alpha=0)
    for t in range(n):
        if t < 10:
            act = np.array([envs.single_action_space.sample()])
        else:
            act = actor(torch.Tensor(obs))[0].detach().numpy()
        nobs, r, term, trunc, _ = envs.step(act)
        O[t], A[t], R[t], N[t], obs = obs[0], act[0], r[0], nobs[0], nobs
        c["env_steps"] += 1
        if t > 10:
            i = np.random.randint(0, t + 1, 32)
            o, a, r, no = (torch.as_tensor(x[i]) for x in (O, A, R, N))
            alpha = log_alpha.exp().item()
            with torch.no_grad():
                na, nlogp = actor(no)
                y = r + 0.99 * (torch.min(t1(no, na), t2(no, na)).view(-1) - alpha * nlogp.view(-1))
            q_loss = ((q1(o, a).view(-1) - y) ** 2).mean() + ((q2(o, a).view(-1) - y) ** 2).mean()
            q_opt.zero_grad(); q_loss.backward(); q_opt.step(); c["q"] += 1
            if t % 2 == 0:
                for _ in range(2):
                    pa, logp = actor(o)
                    pi_loss = (alpha * logp - torch.min(q1(o, pa), q2(o, pa))).mean()
                    pi_opt.zero_grad(); pi_loss.backward(); pi_opt.step(); c["pi"] += 1
                    with torch.no_grad():
                        _, logp = actor(o)
                    a_loss = (-log_alpha.exp() * (logp + -1.0)).mean()
                    a_opt.zero_grad(); a_loss.backward(); a_opt.step(); c["alpha"] += 1
            with torch.no_grad():
                for net, tgt in ((q1, t1), (q2, t2)):
                    for p, tp in zip(net.parameters(), tgt.parameters()):
                        tp.mul_(0.995).add_(0.005 * p)
    print("COUNTS " + " ".join(f"{k}={v}" for k, v in c.items()))
    """
)


def test_sac_with_three_optimizers_counts_one_update_per_draw(tmp_path, capsys):
    """40 Pendulum steps: critics trained at steps 11..39 (29), actor and temperature twice at
    the even ones from 12 (28 each), all on the minibatch drawn for the critics. Every env step is
    an actor step of batch 1 (the squashed Gaussian's forward is ``act``), every draw one learner
    step of the sampled 32 whatever number of optimizers stepped on it (it was one per
    Optimizer.step, 96 samples per transition): from env step 12 on, 28 transitions and 28 updates
    of 32, 32 per transition. The Polyak update, under no_grad and with no forward, is no step of
    its own."""
    script = _script(tmp_path, SAC, "sac_pendulum.py")
    out = tmp_path / "cap"
    schedule = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "2"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", script, "40"]) == 0
    did = _counts(capsys.readouterr().out)
    assert (did["env_steps"], did["q"], did["pi"], did["alpha"]) == (40, 29, 28, 28)
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert counts["env_steps"] == counts["actor_steps"] == did["env_steps"]
    assert counts["learner_steps"] == did["q"]
    steps = trace.steps
    assert set(steps[steps.role == "learner"].batch_size) == {32}
    actor = steps[steps.role == "actor"]
    assert set(actor.batch_size) == {1} and actor.act_us.notna().all()
    assert trace.meta["workload"]["samples_per_insert"] == 28 * 32 / 28
