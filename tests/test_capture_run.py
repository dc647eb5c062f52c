"""``archsim capture run``: an unmodified program is marked, captured, checked, and left as it was."""

from __future__ import annotations

import hashlib
import sys

import gymnasium
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.trace.format import load
from tests.capture_toy import TOY, patch_points, toy_script
from tests.conftest import PROJECT_ROOT

EXAMPLE = PROJECT_ROOT / "examples" / "dqn_single_file.py"
# A short schedule: the first window opens 3 steps after the first optimizer step.
SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]


@pytest.mark.slow
def test_example_dqn_is_captured_unmodified(tmp_path):
    """The single-file DQN, run as is: actor steps with env_step and act, learner steps with the
    three training phases and the batch of 32; the script is byte for byte unchanged; nothing stays
    patched. Pacing golden: training runs at global steps > 60 that are multiples of 4 (64, ..., 196: 34),
    a batch of 32 each; after the first, steps 65..199 insert 135 transitions while 33 more
    learner steps (68, 72, ..., 196) sample 33 x 32 = 1056: 1056 / 135 samples per insert."""
    before = hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    patched = patch_points()
    argv, path = list(sys.argv), list(sys.path)
    out = tmp_path / "dqn"
    args = ["--total-timesteps", "200", "--learning-starts", "60", "--torch-threads", "1"]
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", str(EXAMPLE), *args]) == 0
    assert hashlib.sha256(EXAMPLE.read_bytes()).hexdigest() == before
    assert patch_points() == patched
    assert (sys.argv, sys.path) == (argv, path)
    trace = load(out)
    steps = trace.steps
    actor, learner = steps[steps["role"] == "actor"], steps[steps["role"] == "learner"]
    assert len(actor) > 0 and len(learner) > 0
    assert actor["env_step_us"].notna().all() and (actor["batch_size"] == 1).all()
    assert actor["act_us"].notna().any()  # epsilon is still high: some steps act at random
    for phase in ("train_forward", "train_backward", "optimizer_step"):
        assert learner[f"{phase}_us"].notna().all(), phase
        assert (learner[f"{phase}_cpu_us"] > 0).all(), phase
    assert (learner["batch_size"] == 32).all()
    assert (steps["cpu_us"] > 0).all()
    workload = trace.meta["workload"]
    assert workload["samples_per_insert"] == pytest.approx(1056 / 135)
    # read off the env's wrapper stack (archsim.capture.frameskip): ALE frameskip 1 x max-and-skip 4
    assert workload["frames_per_env_step"] == 4.0
    assert "MaxAndSkipEnv" in workload["frames_per_env_step_source"]
    assert workload["settings"]["counts"]["env_steps"] == 200
    assert workload["settings"]["counts"]["learner_steps"] == 34  # global steps 64, 68, ..., 196
    # the training forward lands in train_forward, not in "other"
    assert (trace.ops["phase"] == "train_forward").any()


def test_phase_fn_marks_named_functions_and_steps_follow_the_loop(tmp_path):
    script = toy_script(tmp_path)
    out = tmp_path / "toy"
    phase_fns = [
        "--phase-fn",
        "__main__:preprocess=preprocess",
        "--phase-fn",
        "__main__:Buffer.sample=replay_sample",
    ]
    patched = patch_points()
    args = ["capture", "run", "--out", str(out), *SCHEDULE, *phase_fns, "--"]
    assert main([*args, "python", str(script), "40", "train"]) == 0
    assert patch_points() == patched
    steps = load(out).steps
    actor, learner = steps[steps["role"] == "actor"], steps[steps["role"] == "learner"]
    assert actor["preprocess_us"].notna().all() and actor["act_us"].notna().all()
    assert learner["replay_sample_us"].notna().all()
    assert (learner["batch_size"] == 8).all()  # from the training forward's input
    # in loop order: every learner step starts after an actor step ended
    ordered = steps.sort_values("start_us")
    ends = ordered["start_us"] + ordered["dur_us"]
    assert (ordered["start_us"].to_numpy()[1:] >= ends.to_numpy()[:-1] - 1.0).all()


def test_module_form_runs_like_python_dash_m(tmp_path, monkeypatch):
    (tmp_path / "toy_pkg").mkdir()
    (tmp_path / "toy_pkg" / "__init__.py").write_text("")
    (tmp_path / "toy_pkg" / "loop.py").write_text(TOY)
    monkeypatch.chdir(tmp_path)
    out = tmp_path / "mod"
    assert (
        main(
            [
                "capture",
                "run",
                "--out",
                str(out),
                *SCHEDULE,
                "--",
                "-m",
                "toy_pkg.loop",
                "30",
                "train",
            ]
        )
        == 0
    )
    assert set(load(out).steps["role"]) == {"actor", "learner"}


@pytest.mark.slow
def test_stable_baselines3_dqn_is_captured_unmodified(tmp_path):
    """SB3's DQN: its DummyVecEnv steps are env steps, its ReplayBuffer add/sample are replay phases;
    SB3's classes are left as they were."""
    buffers = pytest.importorskip(
        "stable_baselines3.common.buffers", reason="stable-baselines3 is an optional example"
    )
    from stable_baselines3.common.vec_env.base_vec_env import VecEnv

    originals = (
        buffers.ReplayBuffer.__dict__["sample"],
        buffers.ReplayBuffer.__dict__["add"],
        VecEnv.__dict__["step"],
    )
    out = tmp_path / "sb3"
    script = PROJECT_ROOT / "examples" / "sb3_dqn.py"
    args = ["--total-timesteps", "120", "--learning-starts", "40", "--torch-threads", "1"]
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", str(script), *args]) == 0
    assert (
        buffers.ReplayBuffer.__dict__["sample"],
        buffers.ReplayBuffer.__dict__["add"],
        VecEnv.__dict__["step"],
    ) == originals
    assert "__init_subclass__" not in VecEnv.__dict__
    trace = load(out)
    steps = trace.steps
    actor, learner = steps[steps["role"] == "actor"], steps[steps["role"] == "learner"]
    assert actor["env_step_us"].notna().all() and actor["replay_insert_us"].notna().all()
    for phase in ("replay_sample", "train_forward", "train_backward", "optimizer_step"):
        assert learner[f"{phase}_us"].notna().all(), phase
    assert (learner["batch_size"] == 32).all()
    # SB3 collects 4 env steps, then trains once when num_timesteps > learning_starts: after env
    # steps 44, 48, ..., 120 (20 updates). After the first, env steps 45..120 insert 76 transitions
    # while 19 updates sample 19 x 32 = 608: 8 samples per insert.
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["env_steps"], counts["learner_steps"]) == (120, 20)
    assert trace.meta["workload"]["samples_per_insert"] == pytest.approx(608 / 76)


def test_the_schedule_counts_from_the_first_learner_step(tmp_path):
    """One window of 6 steps right after the first optimizer step (t = 8 in the toy loop, training
    every 2 steps) and one warmup step (actor t = 9): actor 10, learner 10, actor 11, 12, learner 12,
    actor 13: 4 + 2. Counted from the program's start, the window would hold acting steps only."""
    script = toy_script(tmp_path)
    out = tmp_path / "first"
    schedule = ["--wait", "0", "--warmup", "1", "--active", "6", "--repeat", "1"]
    assert (
        main(["capture", "run", "--out", str(out), *schedule, "--", str(script), "30", "train"])
        == 0
    )
    roles = load(out).steps["role"].astype(str).value_counts()
    assert (roles["actor"], roles["learner"]) == (4, 2)


def test_markers_read_the_whole_process_cpu_time():
    """A step whose work runs on another thread (as torch's intra-op threads do): the process clock
    sees that thread's CPU time, the thread clock of the marking thread does not."""
    import threading
    import time

    from archsim.capture import cpu_clock, markers, unprofiled

    def burn(spent: list[float]) -> None:
        start, x = time.thread_time_ns(), 0
        while time.thread_time_ns() - start < 50_000_000:  # 50 ms of this thread's CPU
            x += 1
        spent.append((time.thread_time_ns() - start) / 1000.0)

    def step_cpu_us() -> tuple[float, float]:
        spent: list[float] = []
        with unprofiled.timing_unprofiled_steps() as times, markers.step("actor", actor=0):
            worker = threading.Thread(target=burn, args=(spent,))
            worker.start()
            worker.join()
        return times.samples[("actor", unprofiled.STEP_KEY)][0], spent[0]

    assert cpu_clock.now_ns is time.thread_time_ns
    own_thread_us, burned_us = step_cpu_us()
    assert own_thread_us < 0.5 * burned_us
    with cpu_clock.process_cpu_time():
        process_us, burned_us = step_cpu_us()
    assert cpu_clock.now_ns is time.thread_time_ns
    assert process_us >= burned_us


def test_worker_processes_are_named_in_one_line(tmp_path, capsys):
    script = tmp_path / "workers.py"
    script.write_text(
        TOY.replace(
            "steps, train =",
            "import multiprocessing\n"
            "w = multiprocessing.get_context('fork').Process(target=print, args=('worker',))\n"
            "w.start(); w.join()\n"
            "steps, train =",
        )
    )
    out = tmp_path / "w"
    assert (
        main(["capture", "run", "--out", str(out), *SCHEDULE, "--", str(script), "30", "train"])
        == 0
    )
    notes = [line for line in capsys.readouterr().err.splitlines() if "worker" in line]
    assert notes == [
        "archsim: note: capture run: workers started 1 worker process(es); none has a trace of env "
        "steps, so only this process is in the trace"
    ]
    assert "processes" not in load(out).meta["capture"]  # the trace is this process's alone


class _ToyEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), float)
    action_space = gymnasium.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        return [0.0] * 4, {}

    def step(self, action):
        return [0.5] * 4, 1.0, False, False, {}


class _Wrapped(gymnasium.Wrapper):
    def step(self, action):
        return self.env.step(action)


_TOY_STEPS = (_ToyEnv.__dict__["step"], _Wrapped.__dict__["step"])


@settings(max_examples=20, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 2)), min_size=1, max_size=25))
def test_steps_follow_any_loop_order(iterations):
    """Invariant over random loops (act or not, one env step through a wrapper, 0-2 updates): one
    actor step per env step, one learner step per optimizer step, each timed once, and the schedule
    ticks once per step opened after the first optimizer step."""
    from archsim.capture.auto_markers import auto_markers
    from archsim.capture.unprofiled import STEP_KEY, timing_unprofiled_steps

    torch.manual_seed(0)
    env, net = _Wrapped(_ToyEnv()), torch.nn.Sequential(torch.nn.Linear(4, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    ticks: list[int] = []
    with timing_unprofiled_steps() as times, auto_markers(lambda: ticks.append(1)) as marker:
        env.reset()
        for act, updates in iterations:
            if act:
                with torch.no_grad():
                    net(torch.zeros(4))
            env.step(0)
            for _ in range(updates):
                loss = net(torch.zeros(8, 4)).sum()
                opt.zero_grad()
                loss.backward()
                opt.step()
    updates = sum(n for _, n in iterations)
    assert (marker.counts.actor_steps, marker.counts.env_steps) == (len(iterations),) * 2
    assert marker.counts.learner_steps == updates
    samples = {key: len(values) for key, values in times.samples.items()}
    assert samples[("actor", STEP_KEY)] == samples[("actor", "env_step")] == len(iterations)
    assert samples.get(("actor", "act"), 0) == sum(act for act, _ in iterations)
    assert samples.get(("learner", STEP_KEY), 0) == updates
    assert samples.get(("learner", "train_forward"), 0) == updates
    seen, expected_ticks = False, 0
    for _, n in iterations:
        expected_ticks += seen  # the actor step
        expected_ticks += max(0, n - (0 if seen else 1))  # learner steps after the first update
        seen = seen or n > 0
    assert len(ticks) == marker.counts.ticks == expected_ticks
    assert (_ToyEnv.__dict__["step"], _Wrapped.__dict__["step"]) == _TOY_STEPS
    assert "__init_subclass__" not in vars(gymnasium.Env)
