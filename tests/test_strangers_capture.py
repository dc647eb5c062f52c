"""``archsim capture run`` on loops written the way users write them, not like the bundled workloads:
actors in their own ``multiprocessing.Process`` (spawn) sending observations to a learner that never
steps an environment itself, a program that ends with ``sys.exit("message")``."""

from __future__ import annotations

import json
import textwrap

from archsim.cli import main
from archsim.trace.format import load
from tests.capture_toy import TOY_ENV

# Windows of 6 steps from 3 steps after the first optimizer step, twice.
SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]

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


def _script(tmp_path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


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
