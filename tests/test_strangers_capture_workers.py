"""``archsim capture run`` on programs whose actors or trainers live in worker processes, written
the way users write them: actors in their own ``multiprocessing.Process`` (spawn) feeding a learner
that never steps an environment, rollouts in a spawn ``Pool``, A3C-style workers that train."""

from __future__ import annotations

import json
import os
import signal
import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.capture_toy import TOY_ENV
from tests.test_strangers_capture import SCHEDULE, _script

# Ape-X-like: actor processes act and step their env and put observations on a bounded queue; the
# program's own process only trains (it never steps an environment). argv: updates, ahead, where
# ``ahead`` = "ahead" lets the actor finish all its steps before the learner starts.
ACTORS_TOY = (
    textwrap.dedent(
        """
    import multiprocessing as mp
    import queue
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    def actor(q, stop, steps):
        env, net = ToyEnv(), torch.nn.Linear(4, 2)
        obs, _ = env.reset()
        t = 0
        while not stop.is_set() and t < steps:
            with torch.no_grad():
                action = int(net(torch.as_tensor(obs)).argmax())
            obs, *_ = env.step(action)
            t += 1
            try:
                q.put(obs, timeout=0.05)
            except queue.Full:
                pass

    def main():
        updates, ahead = int(sys.argv[1]), sys.argv[2] == "ahead"
        ctx = mp.get_context("spawn")
        q, stop = ctx.Queue(maxsize=0 if ahead else 2), ctx.Event()
        proc = ctx.Process(target=actor, args=(q, stop, 20 if ahead else 10**9))
        proc.start()
        if ahead:
            proc.join()
        net = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        seen = []
        for _ in range(updates):
            seen.append(q.get(timeout=60) if not ahead or not q.empty() else seen[-1])
            batch = torch.as_tensor(np.stack(seen[-8:]))
            loss = net(batch).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
        stop.set()
        proc.join()
        sys.exit(0)

    if __name__ == "__main__":
        main()
    """
    )
)


def test_actors_in_their_own_processes_feed_a_learner_that_steps_no_env(tmp_path, capsys):
    """The program's process only trains; its one spawned actor process steps the environment. The
    capture is not refused for 'stepped no gymnasium environment' (it was, before the workers' env
    steps were counted), the actor's steps are on the worker's pid, the learner's on the program's,
    the pacing comes from the worker's transitions, and the trace simulates."""
    out = tmp_path / "cap"
    script = _script(tmp_path, ACTORS_TOY, "actors_toy.py")
    code = main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "60", "paced"])
    assert code == 0
    printed = capsys.readouterr().out
    trace = load(out)
    processes = trace.meta["capture"]["processes"]
    worker = [p["pid"] for p in processes if p["role"] == "actor"]
    parent = [p["pid"] for p in processes if p["role"] == "learner"]
    steps = trace.steps
    assert len(worker) == 1 and set(steps[steps["role"] == "actor"]["pid"]) == set(worker)
    assert set(steps[steps["role"] == "learner"]["pid"]) == set(parent)
    workload = trace.meta["workload"]
    run_actor_steps = workload["settings"]["worker_counts"]["actor_steps"]
    assert run_actor_steps >= 60  # the learner took 60 observations, one per actor step
    assert f"captured actors_toy: {run_actor_steps} actor steps, 60 learner steps" in printed
    # 8 samples per update over the worker's transitions from the first optimizer step on
    assert 0 < workload["samples_per_insert"] <= 8.0
    assert "its worker processes step its environments" in workload["frames_per_env_step_source"]
    sim = tmp_path / "sim"
    assert main(["simulate", str(out), "--hw", "local", "--out", str(sim)]) == 0
    metrics = json.loads((sim / "metrics.json").read_text())
    assert metrics["env_steps_per_s"] > 0 and metrics["learner_updates_per_s"] > 0


def test_actors_that_finish_before_training_are_counted_in_the_refusal(tmp_path, capsys):
    """An actor process that ran all its steps before the first optimizer step has no recorded
    window: the one-line refusal counts its 20 actor steps (it said 0 before), nothing is written."""
    out = tmp_path / "cap"
    script = _script(tmp_path, ACTORS_TOY, "actors_toy.py")
    code = main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "30", "ahead"])
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1] == (
        "archsim: error: capture run: the recorded windows hold 0 actor and 12 learner steps "
        "(of 20 and 30 run); simulate needs both: record more steps per window (--active) or run "
        "the program longer"
    )
    assert not out.exists()


# The imports and toy env the Pool and A3C programs below share.
WORKER_TOY_HEADER = (
    textwrap.dedent(
        """
    import multiprocessing as mp
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
)


# Parallel rollouts in a multiprocessing Pool (spawn): the program's process maps a rollout
# function over the pool's workers each iteration and trains on what they return.
POOL_TOY = WORKER_TOY_HEADER + textwrap.dedent(
    """

    def rollout(seed):
        env, net = ToyEnv(), torch.nn.Linear(4, 2)
        obs, _ = env.reset(seed=seed)
        out = []
        for _ in range(20):
            with torch.no_grad():
                action = int(net(torch.as_tensor(obs)).argmax())
            obs, *_ = env.step(action)
            out.append(obs)
        return np.stack(out)

    if __name__ == "__main__":
        net = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        with mp.get_context("spawn").Pool(1) as pool:  # __exit__ terminates the worker (SIGTERM)
            for it in range(10):
                data = torch.as_tensor(np.concatenate(pool.map(rollout, [it])))
                for mb in data.split(10):
                    loss = net(mb).pow(2).mean()
                    opt.zero_grad()
                    loss.backward()
                    opt.step()
    """
)


def test_pool_rollout_workers_are_captured_and_exit_quietly(tmp_path, capsys):
    """A Pool's workers step the environments: they are captured like any worker process. A
    worker's SIGTERM after its target ended (a Pool's terminate, then archsim's after the program
    ended) cut its export, left a traceback on stderr and was named "its schedule recorded no
    window" (CartPole rollouts in a Pool(2), --wait 5)."""
    script = _script(tmp_path, POOL_TOY, "pool_toy.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script]) == 0
    err = capsys.readouterr().err
    assert "Traceback" not in err and "merged the traces of 1 worker process(es)" in err
    trace = load(out)
    (worker,) = [p for p in trace.meta["capture"]["processes"] if p["role"] == "actor"]
    # the pool's exit ends its worker with a sentinel task or, if it is still busy, a SIGTERM
    assert worker["traced"] and worker["error"] in (None, "terminated by its program (SIGTERM)")
    steps = trace.steps
    assert set(steps[steps["role"] == "actor"]["pid"]) == {worker["pid"]}
    assert len(steps[steps["role"] == "learner"]) == 12  # 2 windows of 6 in the program's process


def test_a_sigterm_once_the_target_has_ended_is_held_not_raised():
    """While a worker exports its windows (its target has returned or was terminated), a further
    SIGTERM is held: raised there it cut the export (the Pool case above)."""
    import sys

    from archsim.capture.child_capture import _Terminated, _TermSignal

    term = _TermSignal()
    with pytest.raises(_Terminated):
        term.on_signal(15, sys._getframe())
    term.exporting = True
    term.on_signal(15, sys._getframe())
    assert term.pending


def _sigterm_as_the_sidecar_is_written() -> None:
    """A worker's target that makes its own process's SIGTERM land as its sidecar is written: where
    a Pool's terminate landed, under load, in a worker that took its exit sentinel and exported."""
    from archsim.capture import child_capture

    write = child_capture._write_json

    def write_after_sigterm(path, data):
        os.kill(os.getpid(), signal.SIGTERM)
        write(path, data)

    child_capture._write_json = write_after_sigterm


def test_a_sigterm_as_the_sidecar_is_written_is_held_until_it_is_on_disk(tmp_path):
    """The capture's SIGTERM handler stays until the sidecar is on disk: it was put back before the
    write, and a Pool's terminate landing between killed the worker (exit -15) with no sidecar, so
    the Pool test above was refused for "stepped no gymnasium environment" (1 of about 30 runs at
    load 4.5; every run once the write was slowed by 1 s and the terminate by 0.5 s)."""
    import multiprocessing as mp

    from archsim.capture.child_capture import ChildCapture, ChildSettings, part_paths
    from archsim.capture.session import CaptureSchedule

    settings = ChildSettings(str(tmp_path), CaptureSchedule().as_dict())
    target = ChildCapture(_sigterm_as_the_sidecar_is_written, settings, 1)
    process = mp.get_context("fork").Process(target=target)
    process.start()
    process.join(60)
    assert process.exitcode == 0  # the held SIGTERM is not raised once the target has ended
    sidecar = json.loads(part_paths(tmp_path, 1)[1].read_text())
    assert sidecar["complete"] and sidecar["counts"]["env_steps"] == 0


# A3C-style: worker processes act, step and train a shared model; the program's process only waits.
A3C_TOY = WORKER_TOY_HEADER + textwrap.dedent(
    """

    def worker(updates):
        env, net = ToyEnv(), torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        obs, _ = env.reset()
        for _ in range(updates):
            loss = net(torch.as_tensor(obs)).pow(2).mean()
            obs, *_ = env.step(0)
            opt.zero_grad()
            loss.backward()
            opt.step()

    if __name__ == "__main__":
        proc = mp.get_context("spawn").Process(target=worker, args=(7,))
        proc.start()
        proc.join()
    """
)


def test_training_only_in_worker_processes_is_named(tmp_path, capsys):
    """Workers that train (A3C) while the program's process only waits: the refusal said the
    program "made no optimizer step ... run it long enough to train"."""
    script = _script(tmp_path, A3C_TOY, "a3c.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script]) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "archsim: error: capture run: a3c trained in its worker processes (7 training passes "
        "there, none in its own process), and capture run records a learner in the program's own "
        "process only (A3C-style workers are not supported)"
    )
    assert not out.exists()
