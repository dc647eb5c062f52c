"""``archsim capture run`` stopped by the user (round 3): a real Ctrl-C (SIGINT to a real capture
process) keeps what was recorded."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

from archsim.trace.format import load
from tests.test_strangers_round2 import _script

# An endless CartPole loop, stopped with Ctrl-C (which it does not catch). It writes the file
# argv[1] once it has run argv[2] updates (0: it never trains; the file comes after 5 env steps).
ENDLESS = textwrap.dedent(
    """
    import sys
    from pathlib import Path
    import gymnasium as gym
    import numpy as np
    import torch

    torch.set_num_threads(1)
    ready, ready_after = Path(sys.argv[1]), int(sys.argv[2])
    env = gym.make("CartPole-v1")
    q = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    obs, _ = env.reset(seed=0)
    buf, t, updates = [], 0, 0
    while True:
        with torch.no_grad():
            a = int(q(torch.as_tensor(obs)).argmax())
        nobs, r, term, trunc, _ = env.step(a)
        buf.append(obs)
        obs, t = (env.reset()[0] if term or trunc else nobs), t + 1
        if ready_after and t > 8:
            o = torch.as_tensor(np.array([buf[i] for i in np.random.randint(t, size=16)]))
            loss = q(o).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); updates += 1
        if not ready.exists() and (updates >= ready_after if ready_after else t >= 5):
            ready.write_text("go")
    """
)
# Far past the first windows (wait 1, warmup 1, active 4: windows end at learner steps 7, 13...).
READY_AFTER_UPDATES = 40


def _capture_interrupted(tmp_path, ready_after: int) -> tuple[int, str, object]:
    """Run a capture of ENDLESS in a process of its own, send it SIGINT once the program has written
    its ready file (polled: no fixed sleep decides it), and return (exit status, stderr, out dir)."""
    script = _script(tmp_path, ENDLESS, "endless.py")
    ready, out = tmp_path / "ready", tmp_path / "cap"
    schedule = ["--wait", "1", "--warmup", "1", "--active", "4", "--repeat", "0"]
    command = [sys.executable, "-m", "archsim", "capture", "run", "--out", str(out), *schedule]
    command += ["--device", "cpu", "--", script, str(ready), str(ready_after)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    try:
        deadline = time.monotonic() + 240
        while not ready.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert ready.exists(), proc.communicate(timeout=60)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return proc.returncode, err, out


def test_ctrl_c_keeps_the_recorded_windows(tmp_path):
    """SIGINT after 40 updates: exit 130, one line saying it stopped early and how many steps it
    kept, and the trace of every recorded window; a step the Ctrl-C cut (when it landed in a
    window) has no CPU time, so the simulator drops it. It saved nothing before (exit 130,
    'interrupted'). (About 3 s of CPU.)"""
    status, err, out = _capture_interrupted(tmp_path, READY_AFTER_UPDATES)
    lines = err.strip().splitlines()
    assert status == 130, err
    assert len(lines) == 1 and lines[0].startswith(
        "archsim: capture run: endless stopped early by Ctrl-C after "
    )
    trace = load(out)
    steps = trace.steps
    whole = steps[steps.cpu_us.notna()]
    assert len(steps) - len(whole) <= 1  # at most the one step the Ctrl-C cut
    roles = whole.role.astype(str).value_counts()
    assert roles["actor"] >= 4 and roles["learner"] >= 4
    assert (
        f"kept {len(whole)} recorded steps ({roles['actor']} actor, {roles['learner']} learner"
        in lines[0]
    )
    counts = trace.meta["workload"]["settings"]["counts"]
    assert counts["interrupted"] and counts["learner_steps"] >= READY_AFTER_UPDATES


def test_ctrl_c_before_anything_was_recorded_saves_nothing_and_says_so(tmp_path):
    """SIGINT before the program's first optimizer step: exit 2, one line, no output folder."""
    status, err, out = _capture_interrupted(tmp_path, 0)
    assert status == 2, err
    assert err.strip() == (
        "archsim: error: capture run: stopped by Ctrl-C with nothing to keep, so nothing was "
        "saved: endless made no optimizer step (torch.optim.Optimizer.step), so it has no "
        "learner step to record; run it long enough to train"
    )
    assert not out.exists()


# An endless loop whose every step is wrapped in a catch-all, as in scripts that must survive a bad
# episode: argv[1] chooses ``except BaseException: continue`` or a bare ``except: pass``.
SWALLOWS = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch

    torch.set_num_threads(1)
    env = gym.make("CartPole-v1")
    q = torch.nn.Sequential(torch.nn.Linear(4, 32), torch.nn.ReLU(), torch.nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    state = dict(obs=env.reset(seed=0)[0], t=0, updates=0, caught=0)
    buf = []

    def step():
        with torch.no_grad():
            a = int(q(torch.as_tensor(state["obs"])).argmax())
        nobs, r, term, trunc, _ = env.step(a)
        buf.append(state["obs"])
        state["obs"] = env.reset()[0] if term or trunc else nobs
        state["t"] += 1
        if state["t"] > 8:
            o = torch.as_tensor(np.array([buf[i] for i in np.random.randint(len(buf), size=16)]))
            loss = q(o).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step(); state["updates"] += 1

    try:
        while True:
            if sys.argv[1] == "continue":
                try:
                    step()
                except BaseException:
                    state["caught"] += 1
                    continue
            else:
                try:
                    step()
                except:
                    pass
    finally:
        print("COUNTS " + " ".join(f"{k}={v}" for k, v in state.items() if k != "obs"))
    """
)


def test_stop_when_recorded_ends_a_loop_that_catches_base_exception(tmp_path, capsys):
    """--stop-when-recorded raises at a step boundary; a loop that catches it and goes on gets it
    again at its next line, in its handler, where its own ``try`` cannot catch it: the program
    ends, its ``finally`` runs, the trace is saved (it ran forever before). (About 2 s.)"""
    from archsim.cli import main
    from tests.test_strangers_round2 import _counts

    script = _script(tmp_path, SWALLOWS, "swallows.py")
    schedule = ["--wait", "1", "--warmup", "1", "--active", "4", "--repeat", "2"]
    for how in ("continue", "pass"):
        out = tmp_path / how
        argv = ["capture", "run", "--out", str(out), *schedule, "--stop-when-recorded"]
        assert main([*argv, "--", script, how]) == 0
        printed = capsys.readouterr()
        did = _counts(printed.out)
        assert did["caught"] == (1 if how == "continue" else 0)
        counts = load(out).meta["workload"]["settings"]["counts"]
        assert counts["stopped_when_recorded"] and counts["learner_steps"] == did["updates"]
        assert counts["env_steps"] == did["t"]
