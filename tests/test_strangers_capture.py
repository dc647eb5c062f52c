"""``archsim capture run`` on loops written the way users write them, not like the bundled workloads:
actors in their own ``multiprocessing.Process`` (spawn) sending observations to a learner that never
steps an environment itself; an on-policy loop (PPO/A2C) whose long rollouts and short training
bursts fixed windows can miss. Worker-process programs: tests/test_strangers_capture_workers.py."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from archsim.capture.role_schedule import EXTRA_WINDOWS_UNBOUNDED, RoleSchedule
from archsim.capture.session import CaptureSchedule
from archsim.cli import main
from archsim.trace.format import load
from tests.capture_toy import TOY_ENV

# Windows of 6 steps from 3 steps after the first optimizer step, twice.
SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]


def _script(tmp_path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


# PPO-like: rollouts of ``rollout`` env steps (acting under no_grad, batch of one), then ``updates``
# minibatch updates on the rollout; argv: iterations, rollout, updates.
PPO_TOY = (
    textwrap.dedent(
        """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    if __name__ == "__main__":
        iterations, rollout, updates = (int(a) for a in sys.argv[1:4])
        env, net = ToyEnv(), torch.nn.Linear(4, 2)
        opt = torch.optim.Adam(net.parameters())
        obs, _ = env.reset()
        for _ in range(iterations):
            batch = []
            for _ in range(rollout):
                with torch.no_grad():
                    action = int(net(torch.as_tensor(obs)).argmax())
                obs, *_ = env.step(action)
                batch.append(obs)
            data = torch.as_tensor(np.stack(batch))
            for mb in data.split(len(batch) // updates):
                loss = net(mb).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
    """
    )
)


def test_a_ppo_loop_whose_windows_miss_its_training_bursts_gets_a_window_at_one(tmp_path, capsys):
    """Rollouts of 40 env steps, then 2 updates: the schedule's two windows (ticks 4-9 and 13-18
    after the first optimizer step) hold actor steps only, which was refused. The first learner
    step after them (the second iteration's) opens one extra window of 6 steps: its 2 updates and
    the next rollout's first 4 env steps."""
    out = tmp_path / "cap"
    script = _script(tmp_path, PPO_TOY, "ppo_toy.py")
    code = main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "3", "40", "2"])
    assert code == 0
    assert "1 extra window(s) of 6 steps" in capsys.readouterr().err
    trace = load(out)
    roles = trace.steps["role"].astype(str).value_counts().to_dict()
    assert roles == {"actor": 12 + 4, "learner": 2}
    assert trace.meta["capture"]["windows"] == 3
    learner = trace.steps[trace.steps["role"] == "learner"]
    assert (learner["batch_size"] == 20).all()  # minibatches of half the 40-step rollout


_VALID = {  # torch.profiler's transitions that neither warn nor lose a window
    ("NONE", "NONE"), ("NONE", "WARMUP"), ("NONE", "RECORD"), ("NONE", "RECORD_AND_SAVE"),
    ("WARMUP", "WARMUP"), ("WARMUP", "RECORD"), ("WARMUP", "RECORD_AND_SAVE"),
    ("RECORD", "RECORD"), ("RECORD", "RECORD_AND_SAVE"),
    ("RECORD_AND_SAVE", "NONE"), ("RECORD_AND_SAVE", "WARMUP"), ("RECORD_AND_SAVE", "RECORD"),
    ("RECORD_AND_SAVE", "RECORD_AND_SAVE"),
}  # fmt: skip


@pytest.mark.filterwarnings("ignore:Profiler won't be using warmup")
@given(
    wait=st.integers(0, 12),
    warmup=st.integers(0, 3),
    active=st.integers(1, 8),
    repeat=st.integers(0, 3),
    runs=st.lists(
        st.tuples(st.sampled_from(["actor", "learner"]), st.integers(1, 60)), max_size=12
    ),
)
def test_role_schedule_keeps_torch_transitions_valid_and_bounds_extra_windows(
    wait, warmup, active, repeat, runs
):
    """Any loop (runs of actor and learner steps): the actions are transitions torch accepts
    silently, every window that opens closes with RECORD_AND_SAVE unless the run ends inside it,
    extra windows are at most ``repeat`` (8 when 0), and once a role is recorded it stays so."""
    schedule = CaptureSchedule(skip_first=1, wait=wait, warmup=warmup, active=active, repeat=repeat)
    roles = [role for role, length in runs for _ in range(length)]
    state = {"role": None}
    sched = RoleSchedule(schedule, lambda: state["role"])
    actions = [sched(0).name]
    for step, role in enumerate(roles, start=1):
        state["role"] = role
        actions.append(sched(step).name)
    assert all(pair in _VALID for pair in zip(actions, actions[1:], strict=False))
    assert sched.extra_windows <= (repeat or EXTRA_WINDOWS_UNBOUNDED)
    recorded = {r for r, a in zip(roles, actions[1:], strict=True) if a.startswith("RECORD")}
    assert recorded == sched.recorded
    base = torch.profiler.schedule(
        skip_first=1, wait=wait, warmup=warmup, active=active, repeat=repeat
    )
    base_recorded = {r for i, r in enumerate(roles, 1) if base(i).name.startswith("RECORD")}
    assert base_recorded <= recorded  # the user's windows are all still recorded
    if len(base_recorded) == 1:  # the user's windows missed a role
        (seen,) = base_recorded
        ends = [i for i in range(1, len(roles) + 1) if base(i).name == "RECORD_AND_SAVE"]
        first_end = min(ends, default=len(roles))  # the run may end inside the first window
        missed = [
            i
            for i, r in enumerate(roles, 1)
            if i > first_end and r != seen and base(i).name == "NONE"
        ]
        if missed:  # a step of the missing role started where the user's schedule was idle
            assert recorded == {"actor", "learner"} and sched.extra_windows == 1


def test_sys_exit_with_a_message_is_status_1_and_the_message(tmp_path, capsys):
    """``sys.exit("message")`` exits with status 1 after printing it, as python does; the error
    said "exited with status config file missing"."""
    script = _script(tmp_path, "import sys\nsys.exit('config file missing')\n", "quits.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), "--", script]) == 2
    assert capsys.readouterr().err.strip() == (
        "archsim: error: capture run: quits exited with status 1: config file missing; "
        "nothing was saved"
    )
    assert not out.exists()


# A loop with a hand-written SGD update (no torch.optim): acts, steps, trains every 2 steps.
MANUAL_SGD_TOY = (
    textwrap.dedent(
        """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    def sgd_update(net, lr=0.01):
        with torch.no_grad():
            for p in net.parameters():
                p -= lr * p.grad
                p.grad = None

    if __name__ == "__main__":
        env, net = ToyEnv(), torch.nn.Linear(4, 2)
        obs, _ = env.reset()
        seen = []
        for t in range(int(sys.argv[1])):
            with torch.no_grad():
                action = int(net(torch.as_tensor(obs)).argmax())
            obs, *_ = env.step(action)
            seen.append(obs)
            if t >= 4 and t % 2 == 0:
                net(torch.as_tensor(np.stack(seen[-4:]))).pow(2).mean().backward()
                sgd_update(net)
    """
    )
)


def test_a_hand_written_update_is_named_and_can_be_marked_as_the_optimizer_step(tmp_path, capsys):
    """No torch.optim: the capture said "ran 0 steps after its first learner step ... run it
    longer", which running longer never fixes. It now names the missing optimizer step and the
    flag; with ``--phase-fn __main__:sgd_update=optimizer_step`` the update closes each learner
    step and starts the schedule as Optimizer.step does."""
    script = _script(tmp_path, MANUAL_SGD_TOY, "manual_sgd.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "40"]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "archsim: error: capture run: manual_sgd ran 18 training passes but no "
        "torch.optim.Optimizer.step, so its training never started for the schedule; mark its "
        "update function with --phase-fn MODULE:QUALNAME=optimizer_step"
    )
    assert not out.exists()
    marked = ["--phase-fn", "__main__:sgd_update=optimizer_step"]
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, *marked, "--", script, "40"]) == 0
    steps = load(out).steps
    learner = steps[steps["role"] == "learner"]
    assert len(learner) == 4  # every other step of 2 windows of 6
    assert learner["optimizer_step_us"].gt(0).all() and learner["train_backward_us"].gt(0).all()


# The program's thread acts and steps; a learner thread trains on what it is sent.
THREADED_TOY = (
    textwrap.dedent(
        """
    import queue
    import threading
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    def learn(q, net, updates):
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        for _ in range(updates):
            loss = net(torch.as_tensor(q.get()).reshape(1, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        env, net, q = ToyEnv(), torch.nn.Linear(4, 2), queue.Queue()
        thread = threading.Thread(target=learn, args=(q, net, 30))
        thread.start()
        obs, _ = env.reset()
        for _ in range(30):
            with torch.no_grad():
                action = int(net(torch.as_tensor(obs)).argmax())
            obs, *_ = env.step(action)
            q.put(obs)
        thread.join()
    """
    )
)


def test_a_learner_thread_is_named_not_called_untrained(tmp_path, capsys):
    """Training in a thread of its own: capture run marks the program's thread only, and said the
    program "made no optimizer step ... run it long enough to train" after 30 of them."""
    script = _script(tmp_path, THREADED_TOY, "threaded.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script]) == 2
    assert capsys.readouterr().err.strip() == (
        "archsim: error: capture run: threaded made 30 optimizer steps, all on another thread than "
        "the one that runs the program, and capture run marks that thread only: train in it "
        "(actors may run in worker processes)"
    )
    assert not out.exists()


def test_a_program_that_changes_directory_leaves_a_relative_out_where_it_was_asked(
    tmp_path, monkeypatch
):
    """``os.chdir`` in the program moved a relative ``--out`` into the program's new directory,
    while the summary line named it relative to where archsim was started."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "elsewhere").mkdir()
    text = "import os\nos.chdir('elsewhere')\n" + PPO_TOY
    script = _script(tmp_path, text, "moves.py")
    argv = ["capture", "run", "--out", "cap", "--wait", "1", "--warmup", "1", "--active", "20"]
    assert main([*argv, "--repeat", "1", "--", script, "2", "20", "2"]) == 0
    assert (tmp_path / "cap" / "meta.yaml").is_file()
    assert not (tmp_path / "elsewhere" / "cap").exists()
    assert Path.cwd() == tmp_path


@pytest.mark.parametrize("status", [0, 3])
def test_os_exit_ends_the_program_not_archsim(tmp_path, capsys, status):
    """``os._exit`` in the program ended archsim itself: status 0, nothing saved, no message, and
    the output's temporary folder left beside --out. Now it ends the program: 0 is success and the
    trace is saved, anything else one line; no temporary folder is left either way."""
    script = _script(tmp_path, PPO_TOY + f"\n    import os\n    os._exit({status})\n", "quits.py")
    out = tmp_path / "cap"
    argv = ["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "2", "20", "2"]
    code = main(argv)
    err = capsys.readouterr().err.strip().splitlines()
    if status == 0:
        assert code == 0 and (out / "meta.yaml").is_file()
        assert load(out).meta["workload"]["settings"]["counts"]["ended_by_os_exit"] is True
    else:
        assert code == 2 and not out.exists()
        assert err[-1] == (
            "archsim: error: capture run: quits ended with os._exit(3); nothing was saved"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        ["quits.py"] + ["cap"] * (not status)
    )
