"""``archsim capture run`` of programs that start worker processes: each worker captures itself, the
traces are merged with the program's, and no worker outlives the capture."""

from __future__ import annotations

import json
import multiprocessing
import os
import subprocess
import sys
import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.capture_toy import TOY_ENV
from tests.conftest import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "dqn_single_file.py"
# A short schedule: windows of 6 steps from 3 steps after the first optimizer step.
SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]

# A toy program: 2 environments in worker processes (AsyncVectorEnv with the given start method), an
# acting forward per step, a training step every 2 steps; or a worker that never ends ("spin") or
# that is killed ("kill") beside a loop stepping an environment in the program's own process.
WORKERS_TOY = (
    textwrap.dedent(
        """
    import os, signal, sys
    import multiprocessing
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    def spin(go, done):
        # steps on after the program's training; 500 steps once told to: a recorded window
        env = ToyEnv()
        while not go.is_set():
            env.step(0)
        for _ in range(500):
            env.step(0)
        done.set()
        while True:
            env.step(0)

    def die():
        env = ToyEnv()
        for _ in range(50):
            env.step(0)
        os.kill(os.getpid(), signal.SIGKILL)

    def train(net, opt, obs):
        loss = net(torch.as_tensor(obs).reshape(-1, 4).repeat(4, 1)).pow(2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()

    def main():
        mode, steps = sys.argv[1], int(sys.argv[2])
        daemon = sys.argv[3:] != ["no-daemon"]
        torch.manual_seed(0)
        net = torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        fork = multiprocessing.get_context("fork")
        go, done = fork.Event(), fork.Event()
        if mode in ("spin", "kill", "raise"):
            worker = fork.Process(
                target=die if mode == "kill" else spin,
                args=() if mode == "kill" else (go, done),
                daemon=daemon,
            )
            worker.start()
            print("worker pid", worker.pid, flush=True)
            envs = gym.vector.SyncVectorEnv([ToyEnv])
        else:
            envs = gym.vector.AsyncVectorEnv([ToyEnv, ToyEnv], context=mode)
        obs, _ = envs.reset(seed=0)
        for t in range(steps):
            with torch.no_grad():
                actions = net(torch.as_tensor(obs)).argmax(1).numpy()
            obs, *_ = envs.step(actions)
            if t >= 4 and t % 2 == 0:
                train(net, opt, obs)
        envs.close()
        if mode == "raise":
            raise RuntimeError("the program failed")
        if mode == "spin":
            go.set()
            done.wait(60)

    if __name__ == "__main__":
        main()
    """
    )
)


def _capture(tmp_path, *program: str) -> tuple[int, str]:
    out = tmp_path / "cap"
    return main(["capture", "run", "--out", str(out), *SCHEDULE, "--", *program]), str(out)


def _toy(tmp_path):
    script = tmp_path / "workers_toy.py"
    script.write_text(WORKERS_TOY)
    return str(script)


def _no_worker_left() -> bool:
    """No process this test process started is still running (multiprocessing tracks every one,
    forkserver's too; a pid could be reused by another program on a busy machine)."""
    return multiprocessing.active_children() == []


def _alive(pid: int) -> bool:
    """Whether a process with this pid exists (the capture's own child, seconds after it ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _steps_by_pid(trace) -> tuple[dict, dict]:
    steps = trace.steps
    actor, learner = steps[steps["role"] == "actor"], steps[steps["role"] == "learner"]
    return actor.groupby("pid").size().to_dict(), learner.groupby("pid").size().to_dict()


@pytest.mark.slow
def test_async_vector_env_example_is_captured_per_process_and_simulates(tmp_path, capsys):
    """The single-file DQN with AsyncVectorEnv (fork): every worker's env steps are actor steps on
    its own pid, learner steps are the program's own, and ``simulate --hw local`` runs the merged
    trace as the program ran: one loop whose env step waits for the workers (--loop sequential)."""
    args = ["--total-timesteps", "120", "--learning-starts", "40", "--num-envs", "2"]
    args += ["--async-envs", "--torch-threads", "1"]
    code, out = _capture(tmp_path, str(EXAMPLE), *args)
    assert code == 0
    assert "merged the traces of 2 worker process(es)" in capsys.readouterr().err
    trace = load(out)
    processes = trace.meta["capture"]["processes"]
    parent = [p["pid"] for p in processes if p["role"] == "learner"]
    workers = [p["pid"] for p in processes if p["role"] == "actor"]
    assert parent == [os.getpid()] and len(workers) == 2
    assert all(p["complete"] and p["exitcode"] == 0 for p in processes if p["role"] == "actor")
    actor, learner = _steps_by_pid(trace)
    assert set(learner) == {os.getpid()}
    assert set(workers) <= set(actor)  # every worker's env steps are in the recorded windows
    steps = trace.steps
    worker_rows = steps[steps["pid"].isin(workers)]
    assert worker_rows["env_step_us"].notna().all() and (worker_rows["batch_size"] == 1).all()
    assert sorted(worker_rows["actor"].unique()) == [1, 2]
    assert _no_worker_left()
    sim = tmp_path / "sim"
    assert main(["simulate", out, "--hw", "local", "--out", str(sim)]) == 0
    metrics = json.loads((sim / "metrics.json").read_text())
    assert metrics["env_steps_per_s"] > 0
    assert metrics["loop"] == "sequential" and metrics["path"] == "sequential"


@pytest.mark.parametrize("context", ["spawn", "forkserver"])
def test_spawned_workers_capture_themselves(tmp_path, context):
    """spawn and forkserver children start a fresh interpreter: the wrapped target brings the
    capture with it (pickled), and each worker's steps land on its own pid."""
    code, out = _capture(tmp_path, _toy(tmp_path), context, "40")
    assert code == 0
    trace = load(out)
    workers = [p["pid"] for p in trace.meta["capture"]["processes"] if p["role"] == "actor"]
    actor, learner = _steps_by_pid(trace)
    assert len(workers) == 2 and set(workers) <= set(actor)
    assert set(learner) == {os.getpid()}


@pytest.mark.parametrize("daemon", ["daemon", "no-daemon"])
def test_a_worker_that_never_exits_is_stopped_and_its_partial_trace_merged(tmp_path, daemon):
    """A daemon worker is stopped at once, as Python's exit would; another after JOIN_TIMEOUT_S.

    The capture runs in a fresh interpreter, as the CLI does: forked from this test process, which
    holds threads of earlier tests (torch, Dask), a worker could inherit a lock held by one of them
    and hang in its profiler, which is the fork hazard of the program, not of the capture."""
    out = tmp_path / "cap"
    run = (
        "import sys; from archsim.capture import child_capture; child_capture.JOIN_TIMEOUT_S = 0.5; "
        "from archsim.cli import main; sys.exit(main(sys.argv[1:]))"
    )
    argv = ["capture", "run", "--out", str(out), *SCHEDULE, "--", _toy(tmp_path), "spin", "40"]
    done = subprocess.run(
        [sys.executable, "-c", run, *argv, daemon],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    pid = int(done.stdout.split("worker pid ")[1].split()[0])
    assert not _alive(pid)
    assert (
        f"archsim: note: capture run: worker 1 (pid {pid})'s trace is partial (terminated by "
        "archsim after the program ended); merged as is"
    ) in done.stderr.splitlines()
    trace = load(out)
    (worker,) = [p for p in trace.meta["capture"]["processes"] if p["role"] == "actor"]
    assert worker["pid"] == pid and worker["complete"] is False
    actor, _ = _steps_by_pid(trace)
    assert actor.get(pid, 0) > 0


def test_a_killed_worker_is_named_and_the_rest_is_kept(tmp_path, capsys):
    code, out = _capture(tmp_path, _toy(tmp_path), "kill", "40")
    assert code == 0
    printed = capsys.readouterr()
    pid = int(printed.out.split("worker pid ")[1].split()[0])
    assert (
        f"archsim: note: capture run: worker 1 (pid {pid}) exited with code -9 and wrote no "
        "trace (killed?)"
    ) in printed.err.splitlines()
    actor, learner = _steps_by_pid(load(out))
    assert set(actor) == set(learner) == {os.getpid()}


@pytest.mark.slow
def test_stable_baselines3_subproc_vec_env_is_captured_per_process(tmp_path, capsys):
    """SB3's DQN on a SubprocVecEnv (forkserver): the worker's env steps are on its own pid. The
    program never closes its env (as SB3 programs often do not), so the daemon worker is stopped
    when the program ends and its partial trace is merged with a note."""
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is an optional example")
    script = PROJECT_ROOT / "examples" / "sb3_dqn.py"
    args = ["--subproc", "--total-timesteps", "120", "--learning-starts", "40"]
    code, out = _capture(tmp_path, str(script), *args, "--torch-threads", "1")
    assert code == 0
    assert "merged as is" in capsys.readouterr().err
    trace = load(out)
    (worker,) = [p["pid"] for p in trace.meta["capture"]["processes"] if p["role"] == "actor"]
    actor, learner = _steps_by_pid(trace)
    assert worker in actor and set(learner) == {os.getpid()}
    assert _no_worker_left()


def test_a_failing_program_leaves_no_worker_running(tmp_path, capsys):
    code, out = _capture(tmp_path, _toy(tmp_path), "raise", "40")
    assert code == 2
    assert capsys.readouterr().err.splitlines()[-1] == (
        "archsim: error: capture run: workers_toy raised RuntimeError (traceback above); "
        "nothing was saved"
    )
    assert _no_worker_left()
    assert not (tmp_path / "cap").exists()


def test_a_patched_method_of_a_program_class_binds_as_the_patch_and_pickles_as_the_original():
    """cloudpickle sends a program's own classes to spawned workers by value, dict included: the
    patch (whose closure holds unpicklable profiler records; a lock here) travels as the original."""
    import subprocess
    import sys
    import threading

    import cloudpickle

    from archsim.capture.patches import Patches

    def step(self, action):
        return ["original", action]

    cls = type("ProgramEnv", (), {"step": step, "__module__": "__main__"})
    lock, calls = threading.Lock(), []

    def patched(self, action):
        with lock:
            calls.append(action)
        return step(self, action)

    patches = Patches()
    patches.set(cls, "step", patched)
    assert cls().step(3) == ["original", 3] and calls == [3]
    payload = cloudpickle.dumps(cls)
    with pytest.raises(TypeError):  # what the patch alone would do
        cloudpickle.dumps(patched)
    child = subprocess.run(
        [
            sys.executable,
            "-c",
            "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read())().step(4))",
        ],
        input=payload,
        capture_output=True,
        cwd=PROJECT_ROOT,
        check=True,
    )
    assert child.stdout.decode().strip() == "['original', 4]" and calls == [3]
    patches.undo()
    assert cls.__dict__["step"] is step
