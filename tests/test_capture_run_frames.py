"""``capture run`` records the emulator frames per env step its program's env says for sure
(archsim.capture.frameskip): the ALE env's frameskip times its skipping wrappers' skips, 1 with a
stated reason otherwise; so ``simulate`` prints frames/s = frames per env step x env steps/s."""

from __future__ import annotations

import json
import sys
import textwrap

import gymnasium as gym
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.capture.frameskip import IN_WORKERS, FrameSkip, env_frameskip, set_frames
from archsim.capture.merge import ProcessPart
from archsim.capture.worker_merge import workers_frames
from archsim.cli import main
from archsim.trace.format import load
from archsim.trace.pacing import frames_per_env_step
from tests.conftest import PROJECT_ROOT

ale_py = pytest.importorskip("ale_py", reason="ale-py provides the Atari envs of the examples")
gym.register_envs(ale_py)

EXAMPLES = PROJECT_ROOT / "examples"
SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]
SHORT = ["--total-timesteps", "120", "--learning-starts", "40", "--torch-threads", "1"]


@pytest.fixture(scope="module")
def make_env():
    """The single-file example's env factory (the SB3 Atari wrapper stack written out)."""
    sys.path.insert(0, str(EXAMPLES))
    try:
        from dqn_single_file import make_env
    finally:
        sys.path.remove(str(EXAMPLES))
    return make_env


class OwnStep(gym.Wrapper):
    """A wrapper with its own step: the capture cannot know how often it steps its inner env."""

    def step(self, action):
        return self.env.step(action)


def test_the_examples_wrapper_stack_is_4_frames_per_step(make_env):
    """PongNoFrameskip-v4: the AtariEnv skips nothing (frameskip 1), MaxAndSkipEnv repeats each
    action 4 times; every other wrapper of the stack steps once."""
    env = make_env("PongNoFrameskip-v4", 0)()
    skip = env_frameskip(env)
    assert skip == FrameSkip(4.0, "ale_py AtariEnv frameskip 1 x MaxAndSkipEnv skip 4")


def test_ale_v5_and_gymnasiums_skipping_wrappers():
    assert env_frameskip(gym.make("ALE/Pong-v5")).frames_per_env_step == 4.0  # v5 default
    inner = gym.make("PongNoFrameskip-v4")
    assert env_frameskip(gym.wrappers.MaxAndSkipObservation(inner, skip=3)).frames_per_env_step == 3
    repeat = gym.wrappers.RepeatAction(gym.make("ALE/Pong-v5", frameskip=2), num_repeats=3)
    assert env_frameskip(repeat).frames_per_env_step == 6.0  # 2 frames x 3 repeats


def test_atari_preprocessing_frame_skip():
    pytest.importorskip("cv2", reason="gymnasium's AtariPreprocessing needs opencv-python")
    env = gym.wrappers.AtariPreprocessing(gym.make("PongNoFrameskip-v4"), frame_skip=4)
    assert env_frameskip(env).frames_per_env_step == 4.0


def test_a_stochastic_frameskip_records_its_mean_and_says_so():
    """frameskip=(2, 5): AtariEnv.step draws numpy Generator.integers(2, 5), uniform on 2, 3, 4."""
    skip = env_frameskip(gym.make("ALE/Pong-v5", frameskip=(2, 5)))
    assert skip.frames_per_env_step == 3.0 and "stochastic" in skip.source


def test_an_unknown_wrapper_or_a_non_ale_env_leaves_1_with_a_note():
    unknown = env_frameskip(OwnStep(gym.make("ALE/Pong-v5")))
    assert unknown.frames_per_env_step is None and "OwnStep" in unknown.source
    cartpole = env_frameskip(gym.make("CartPole-v1"))
    assert cartpole.frames_per_env_step is None and "not an ALE AtariEnv" in cartpole.source
    workload: dict = {}
    set_frames(workload, unknown)
    assert workload["frames_per_env_step"] == 1.0
    assert workload["frames_per_env_step_source"].startswith("1 frame per env step: wrapper ")


def test_vector_envs_are_read_through_their_first_sub_env(make_env):
    sync = gym.vector.SyncVectorEnv([make_env("PongNoFrameskip-v4", i) for i in range(2)])
    assert env_frameskip(sync).frames_per_env_step == 4.0
    sb3 = pytest.importorskip("stable_baselines3.common.vec_env")
    vec = sb3.VecFrameStack(sb3.DummyVecEnv([make_env("PongNoFrameskip-v4", 0)]), n_stack=2)
    assert env_frameskip(vec).frames_per_env_step == 4.0


@given(
    st.one_of(st.none(), st.floats(0.5, 64.0), st.integers(1, 64)),
    st.text(min_size=1, max_size=40),
)
def test_what_the_capture_writes_is_what_the_simulator_reads(frames, source):
    """Round trip: the figure set_frames writes is the one archsim.trace.pacing reads back, and it
    is a positive number (1 when the env does not say)."""
    workload: dict = {}
    set_frames(workload, FrameSkip(frames, source))
    read, _ = frames_per_env_step({"workload": workload})
    assert read == (1.0 if frames is None else float(frames)) and read > 0
    assert source in workload["frames_per_env_step_source"]


def _part(index: int, frameskip: dict | None) -> ProcessPart:
    return ProcessPart("actor", index, 1000 + index, None, {"frameskip": frameskip})


def test_workers_frames_fill_the_parents_meta_only_when_they_agree():
    parent = {"frames_per_env_step": 1.0, "frames_per_env_step_source": f"1 ...: {IN_WORKERS}"}
    four = {"frames_per_env_step": 4.0, "source": "ale_py AtariEnv frameskip 4"}
    agreed = workers_frames(dict(parent), [_part(1, four), _part(2, four)])
    assert agreed["frames_per_env_step"] == 4.0
    assert "frameskip 4" in agreed["frames_per_env_step_source"]
    two = {"frames_per_env_step": 2.0, "source": "ale_py AtariEnv frameskip 2"}
    split = workers_frames(dict(parent), [_part(1, four), _part(2, two)])
    assert split["frames_per_env_step"] == 1.0
    assert "frameskip 2" in split["frames_per_env_step_source"]
    silent = workers_frames(dict(parent), [_part(1, None)])
    assert silent["frames_per_env_step"] == 1.0
    own = {"frames_per_env_step": 4.0, "frames_per_env_step_source": "ale_py AtariEnv frameskip 4"}
    assert workers_frames(dict(own), [_part(1, two)]) == own  # the parent's own env says


def _capture_and_simulate(tmp_path, script: str, *args: str) -> tuple[dict, dict]:
    out, sim = tmp_path / "cap", tmp_path / "sim"
    command = ["capture", "run", "--out", str(out), *SCHEDULE, "--", script, *args]
    assert main(command) == 0
    assert main(["simulate", str(out), "--hw", "local", "--out", str(sim)]) == 0
    return load(out).meta["workload"], json.loads((sim / "metrics.json").read_text())


def _assert_four_frames(workload: dict, metrics: dict) -> None:
    assert workload["frames_per_env_step"] == 4.0
    assert "MaxAndSkipEnv skip 4" in workload["frames_per_env_step_source"]
    assert metrics["env_steps_per_s"] > 0
    assert metrics["frames_per_s"] == pytest.approx(4 * metrics["env_steps_per_s"])


# An ALE env behind a wrapper with its own step (which could repeat it), in a loop that trains.
OWN_STEP_LOOP = textwrap.dedent(
    """
    import ale_py
    import gymnasium as gym
    import torch

    gym.register_envs(ale_py)

    class OwnStep(gym.Wrapper):
        def step(self, action):
            return self.env.step(action)

    env = OwnStep(gym.make("ALE/Pong-v5", obs_type="ram"))
    net = torch.nn.Linear(128, 6)
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    obs, _ = env.reset(seed=0)
    for t in range(40):
        with torch.no_grad():
            action = int(net(torch.as_tensor(obs, dtype=torch.float32)).argmax())
        obs, reward, terminated, truncated, _ = env.step(action)
        if t >= 4 and t % 2 == 0:
            opt.zero_grad()
            net(torch.as_tensor(obs, dtype=torch.float32)).pow(2).mean().backward()
            opt.step()
    """
)


def test_a_capture_behind_an_unknown_wrapper_says_1_and_why(tmp_path):
    script = tmp_path / "own_step.py"
    script.write_text(OWN_STEP_LOOP)
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", str(script)]) == 0
    workload = load(out).meta["workload"]
    assert workload["frames_per_env_step"] == 1.0
    assert "OwnStep has its own step" in workload["frames_per_env_step_source"]


@pytest.mark.slow
def test_single_file_dqn_capture_says_4_frames_per_env_step(tmp_path):
    _assert_four_frames(
        *_capture_and_simulate(tmp_path, str(EXAMPLES / "dqn_single_file.py"), *SHORT)
    )


@pytest.mark.slow
def test_async_vector_env_capture_takes_its_workers_frames(tmp_path):
    """AsyncVectorEnv: the parent cannot see its envs; each worker read its own and they agree."""
    args = [*SHORT, "--async-envs", "--num-envs", "2"]
    workload, metrics = _capture_and_simulate(tmp_path, str(EXAMPLES / "dqn_single_file.py"), *args)
    _assert_four_frames(workload, metrics)
    assert IN_WORKERS in workload["frames_per_env_step_source"]


@pytest.mark.slow
def test_stable_baselines3_dqn_capture_says_4_frames_per_env_step(tmp_path):
    pytest.importorskip("stable_baselines3", reason="stable-baselines3 is an optional example")
    _assert_four_frames(*_capture_and_simulate(tmp_path, str(EXAMPLES / "sb3_dqn.py"), *SHORT))
