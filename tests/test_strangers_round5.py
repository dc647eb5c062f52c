"""``archsim capture run`` on strangers' scripts (round 5), each checked against what the script
counted itself: a loop that runs its own ``torch.profiler`` (refused in one line: torch runs one
profiler per process, and the program's had taken archsim's windows over), and a hand-written
environment that is no gymnasium ``Env`` (marked with ``--phase-fn ...=env_step``, counted as a
gymnasium env's steps are; unmarked, a note says what its actor steps are)."""

from __future__ import annotations

import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]

# A CartPole DQN-like loop that profiles itself the three ways people do: a scheduled
# torch.profiler.profile around the loop, an explicit prof.start(), the legacy autograd profiler.
# argv: how it profiles, env steps.
OWN_PROFILER = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.profiler import profile, schedule, record_function, ProfilerActivity

    how, n = sys.argv[1], int(sys.argv[2])
    torch.set_num_threads(1)
    env = gym.make("CartPole-v1")
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    O = np.zeros((n, 4), "f")
    if how == "scheduled":
        prof = profile(activities=[ProfilerActivity.CPU], schedule=schedule(wait=1, warmup=1, active=3))
        prof.__enter__()
    elif how == "start":
        prof = profile(activities=[ProfilerActivity.CPU])
        prof.start()
    elif how == "legacy":
        torch.autograd.profiler.profile().__enter__()
    else:  # "off": a disabled legacy profile and record_function labels start no profiler
        torch.autograd.profiler.profile(enabled=False).__enter__()
    obs, _ = env.reset(seed=0)
    env_steps = updates = 0
    for t in range(n):
        with torch.no_grad(), record_function("act"):
            a = int(q(torch.as_tensor(obs)).argmax())
        O[t] = obs
        obs, r, term, trunc, _ = env.step(a)
        env_steps += 1
        if term or trunc:
            obs, _ = env.reset()
        if t >= 8:
            i = np.random.randint(0, t, 16)
            with record_function("update"):
                loss = q(torch.as_tensor(O[i])).pow(2).mean()
                opt.zero_grad(); loss.backward(); opt.step()
            updates += 1
        if how == "scheduled":
            prof.step()
    print(f"COUNTS env_steps={env_steps} updates={updates}")
    """
)


@pytest.mark.parametrize(
    ("how", "line", "what"),
    [
        ("scheduled", 17, "torch.profiler.profile"),
        ("start", 20, "torch.profiler.profile"),
        ("legacy", 22, "torch.autograd.profiler.profile"),
    ],
)
def test_a_program_that_runs_its_own_profiler_is_refused_in_one_line(
    tmp_path, capsys, how, line, what
):
    """Its profiler had taken archsim's over: the 8-step window came back with 3 actor and 2
    learner steps, 110 ops and no FLOPs, and the capture said nothing. Now the program stops at its
    profiler's start, in one line naming the line, exit status 2, nothing saved. (About 0.5 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, OWN_PROFILER, "own_profiler.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, how, "40"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        f"archsim: error: capture run: the program starts its own {what} (own_profiler.py:{line}), "
        "but torch runs one profiler per process and archsim's is recording: run the program "
        "without its profiler (record_function labels may stay)"
    )
    assert not out.exists()


def test_record_function_labels_and_a_disabled_profiler_are_captured(tmp_path, capsys):
    """What starts no profiler is left alone: every count is the script's, every op has its
    shapes (FLOPs), and the window holds its 8 steps. (About 1.5 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, OWN_PROFILER, "own_profiler.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "off", "40"]) == 0
    did = _counts(capsys.readouterr().out)
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["env_steps"], counts["learner_steps"]) == (did["env_steps"], did["updates"])
    assert len(trace.steps) == 8
    train = trace.ops[trace.ops.phase.astype(str) == "train_forward"]
    assert len(train) and (train.flops > 0).any()


# A hand-written corridor, no gymnasium: its class has reset/step and nothing else. Epsilon-greedy
# acting skips the forward on random steps. argv: env steps.
CORRIDOR = textwrap.dedent(
    """
    import sys
    import numpy as np
    import torch
    import torch.nn as nn

    class Corridor:
        def __init__(self, n=10):
            self.n = n
        def reset(self):
            self.pos = 0
            return self._obs()
        def _obs(self):
            o = np.zeros(self.n, "f"); o[self.pos] = 1; return o
        def step(self, a):
            self.pos = max(0, min(self.n - 1, self.pos + (1 if a else -1)))
            done = self.pos == self.n - 1
            return self._obs(), float(done), done

    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)
    env = Corridor()
    q = nn.Sequential(nn.Linear(10, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.SGD(q.parameters(), lr=1e-2)
    n = int(sys.argv[1])
    O = np.zeros((n, 10), "f")
    obs = env.reset()
    env_steps = acted = updates = 0
    for t in range(n):
        if np.random.rand() > 0.3:
            with torch.no_grad():
                a = int(q(torch.as_tensor(obs)).argmax())
            acted += 1
        else:
            a = np.random.randint(2)
        O[t] = obs
        obs, r, done = env.step(a)
        env_steps += 1
        if done:
            obs = env.reset()
        if t >= 10:
            i = np.random.randint(0, t, 16)
            loss = q(torch.as_tensor(O[i])).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); updates += 1
    print(f"COUNTS env_steps={env_steps} acted={acted} updates={updates}")
    """
)


def test_a_hand_written_env_marked_as_env_step_counts_as_a_gymnasium_one(tmp_path, capsys):
    """``--phase-fn __main__:Corridor.step=env_step``: the marked step counted no env step, so the
    replay fill's 11 steps merged into one actor step (50 of 60) and the pacing was unknown. Now
    each is an actor step and a transition, and the pacing is the script's: an update of 16 per
    env step (49 x 16 samples over the 49 env steps from the first update on). Unmarked, a note
    says its actor steps are counted by its acting forwards. (About 1.6 s.)"""
    script = _script(tmp_path, CORRIDOR, "corridor.py")
    marked = ["--phase-fn", "__main__:Corridor.step=env_step"]
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, *marked, "--", script, "60"]) == 0
    did = _counts(capsys.readouterr().out)
    assert (did["env_steps"], did["updates"]) == (60, 50)
    workload = load(out).meta["workload"]
    counts = workload["settings"]["counts"]
    assert counts["env_steps"] == counts["transitions"] == counts["actor_steps"] == 60
    assert (counts["learner_steps"], counts["samples"]) == (50, 50 * 16)
    assert workload["samples_per_insert"] == 16.0
    assert "Corridor is not an ALE AtariEnv" in workload["frames_per_env_step_source"]

    plain = tmp_path / "plain"
    assert main(["capture", "run", "--out", str(plain), *SCHEDULE, "--", script, "60"]) == 0
    captured = capsys.readouterr()
    did = _counts(captured.out)
    workload = load(plain).meta["workload"]
    actor_steps = workload["settings"]["counts"]["actor_steps"]
    assert actor_steps < did["acted"] < 60  # the fill's forwards are one step: nothing stepped it
    assert "samples_per_insert" not in workload
    assert (
        f"capture run: corridor stepped no gymnasium environment: its {actor_steps} actor steps "
        "are counted by its acting forwards, not its env steps"
    ) in captured.err


# N CartPoles in a Python list, no vector env: one forward acts for all of them on their stacked
# observations (batch N), then each is stepped in turn. argv: iterations.
ENV_LIST = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)
    N = 4
    envs = [gym.make("CartPole-v1") for _ in range(N)]
    obs = np.stack([e.reset(seed=i)[0] for i, e in enumerate(envs)])
    q = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    n = int(sys.argv[1])
    O = np.zeros((n * N, 4), "f"); k = 0
    env_steps = acted = updates = 0
    for t in range(n):
        with torch.no_grad():
            acts = q(torch.as_tensor(obs)).argmax(1).numpy()
        acted += 1
        O[k:k + N] = obs; k += N
        nxt = []
        for e, a in zip(envs, acts):
            o, r, term, trunc, _ = e.step(int(a)); env_steps += 1
            nxt.append(e.reset()[0] if term or trunc else o)
        obs = np.stack(nxt)
        if t >= 5:
            i = np.random.randint(0, k, 32)
            loss = q(torch.as_tensor(O[i])).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); updates += 1
    print(f"COUNTS env_steps={env_steps} acted={acted} updates={updates}")
    """
)


def test_acting_for_a_list_of_envs_at_once_is_acting(tmp_path, capsys):
    """The batch-4 forward was no environment's batch, so it was a train forward: it opened learner
    steps of batch 4 that trained nothing (one of the two recorded) and the actor steps had no
    ``act``. Now 4 distinct envs stepped between two forwards make 4 an acting batch: every
    recorded learner step is an update of 32, the acting is in the actor steps (one in 4, the
    first of each round), and the counts and pacing are the script's. (About 1 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, ENV_LIST, "env_list.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "40"]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_steps": 160, "acted": 40, "updates": 35}
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert counts["env_steps"] == counts["transitions"] == counts["actor_steps"] == 160
    assert (counts["learner_steps"], counts["samples"]) == (35, 35 * 32)
    assert workload["samples_per_insert"] == 32 / 4  # 34 x 32 samples over 136 transitions
    steps, ops = trace.steps, trace.ops
    learner = steps[steps.role.astype(str) == "learner"]
    assert set(learner.batch_size) == {32} and (learner.optimizer_step_us > 0).all()
    acting = ops[ops.phase.astype(str) == "act"]
    assert set(steps.set_index("step_id").loc[acting.step_id.unique(), "role"]) == {"actor"}


# A DQN-like update written as a closure handed to optimizer.step (as LBFGS needs, and any torch
# optimizer takes). argv: optimizer (adam, lbfgs), env steps.
CLOSURE = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)
    env = gym.make("CartPole-v1")
    q = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
    if sys.argv[1] == "lbfgs":
        opt = torch.optim.LBFGS(q.parameters(), lr=0.1, max_iter=4)
    else:
        opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    n = int(sys.argv[2])
    O = np.zeros((n, 4), "f")
    obs, _ = env.reset(seed=0)
    env_steps = updates = evaluations = 0
    for t in range(n):
        with torch.no_grad():
            a = int(q(torch.as_tensor(obs)).argmax())
        O[t] = obs
        obs, r, term, trunc, _ = env.step(a); env_steps += 1
        if term or trunc:
            obs, _ = env.reset()
        if t >= 8:
            x = torch.as_tensor(O[np.random.randint(0, t, 32)])
            def closure():
                global evaluations
                opt.zero_grad()
                loss = q(x).pow(2).mean()
                loss.backward()
                evaluations += 1
                return loss
            opt.step(closure); updates += 1
    print(f"COUNTS env_steps={env_steps} updates={updates} evaluations={evaluations}")
    """
)


@pytest.mark.parametrize("optimizer", ["adam", "lbfgs"])
def test_an_update_in_an_optimizer_closure_is_a_train_forward_and_backward(
    tmp_path, capsys, optimizer
):
    """``opt.step(closure)``: the closure's forward and backward ran inside the optimizer step,
    unmarked, so the update of 32 was all optimizer_step at batch 1 (pacing 1 sample per
    transition for the script's 32). Now they are the update's train_forward and train_backward
    and its batch is 32; LBFGS evaluates the closure up to 5 times a step (max_iter 4) on the same
    32 samples, which count once. (About 1 s each.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, CLOSURE, "closure_update.py")
    assert (
        main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, optimizer, "40"]) == 0
    )
    did = _counts(capsys.readouterr().out)
    assert (did["env_steps"], did["updates"]) == (40, 32)
    assert did["evaluations"] > 32 if optimizer == "lbfgs" else did["evaluations"] == 32
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["learner_steps"], counts["samples"]) == (32, 32 * 32)
    assert workload["samples_per_insert"] == 32.0
    learner = trace.steps[trace.steps.role.astype(str) == "learner"]
    assert set(learner.batch_size) == {32}
    for phase in ("train_forward", "train_backward", "optimizer_step"):
        assert (learner[f"{phase}_cpu_us"] > 0).all(), phase


# DQfD-style: pre-train on demonstrations (no env step yet), then act and fine-tune online with
# an update of 32 every 4 env steps. argv: pre-training updates, env steps.
PRETRAIN = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)
    env = gym.make("CartPole-v1")
    q = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    demos = np.random.randn(500, 4).astype("f")
    pre, n = int(sys.argv[1]), int(sys.argv[2])
    pre_updates = updates = env_steps = 0
    for _ in range(pre):
        x = torch.as_tensor(demos[np.random.randint(0, 500, 64)])
        loss = q(x).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step(); pre_updates += 1
    O = np.zeros((n, 4), "f")
    obs, _ = env.reset(seed=0)
    for t in range(n):
        with torch.no_grad():
            a = int(q(torch.as_tensor(obs)).argmax())
        O[t] = obs
        obs, r, term, trunc, _ = env.step(a); env_steps += 1
        if term or trunc:
            obs, _ = env.reset()
        if t % 4 == 0:
            x = torch.as_tensor(O[np.random.randint(0, t + 1, 32)])
            loss = q(x).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); updates += 1
    print(f"COUNTS pre_updates={pre_updates} env_steps={env_steps} updates={updates}")
    """
)


def test_pre_training_before_the_loop_acts_is_not_its_pacing_or_its_windows(tmp_path, capsys):
    """100 updates of 64 on demonstrations, then 60 env steps with an update of 32 every 4th: the
    schedule started at the first pre-training update, so the window held pre-training updates of
    64 only, and the pacing counted their samples (102.4 per transition on 200 + 200, not 8). Now
    the schedule starts at the first update after the loop acts (t=0), and the pacing is the 14
    updates of 32 from t=4 over the 59 env steps after it, and the learner's unprofiled step times
    are the loop's updates only. A program that only pre-trains is
    refused for having no actor step, not told it made no optimizer step. (About 1.5 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, PRETRAIN, "dqfd.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "100", "60"]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"pre_updates": 100, "env_steps": 60, "updates": 15}
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["learner_steps"], counts["samples"]) == (115, 100 * 64 + 15 * 32)
    assert workload["samples_per_insert"] == pytest.approx(14 * 32 / 59)
    learner = trace.steps[trace.steps.role.astype(str) == "learner"]
    assert len(learner) and set(learner.batch_size) == {32}
    # the CPU times of unprofiled learner steps, which simulate scales the recorded ones to: the
    # loop's 15 updates less those recorded, not the 100 pre-training ones as well
    unprofiled = trace.meta["capture"]["unprofiled_cpu_us"]["learner"]["step"]["steps"]
    assert unprofiled == 15 - len(learner)

    offline = tmp_path / "offline"
    assert main(["capture", "run", "--out", str(offline), *SCHEDULE, "--", script, "50", "0"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "archsim: error: capture run: dqfd stepped no gymnasium environment and ran no acting "
        "forward pass, so it has no actor step; mark its env step with "
        "--phase-fn MODULE:QUALNAME=env_step"
    )
