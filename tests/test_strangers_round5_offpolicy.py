"""``archsim capture run`` on strangers' scripts (round 5, off-policy library loops), each checked
against what the script counted itself: Stable-Baselines3's TD3 (delayed actor) and DDPG, whose
actor update scores the actor with ``critic.q1_forward`` on a tensor made from the draw. The first
part: test_strangers_round5.py."""

from __future__ import annotations

import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script
from tests.test_strangers_round5 import SCHEDULE

# Stable-Baselines3's TD3 or DDPG on Pendulum: one gradient step per env step after 50 random ones.
# argv: algorithm, timesteps.
SB3_TD3 = textwrap.dedent(
    """
    import sys
    import torch
    from stable_baselines3 import DDPG, TD3

    torch.set_num_threads(1)
    algo = {"td3": TD3, "ddpg": DDPG}[sys.argv[1]]
    model = algo("MlpPolicy", "Pendulum-v1", learning_starts=50, batch_size=32, train_freq=1,
                 gradient_steps=1, policy_kwargs={"net_arch": [32, 32]}, seed=0, device="cpu")
    model.learn(total_timesteps=int(sys.argv[2]))
    print(f"COUNTS updates={model._n_updates} timesteps={model.num_timesteps}")
    """
)


@pytest.mark.parametrize(("algo", "optimizer_steps"), [("td3", 70 + 35), ("ddpg", 70 + 70)])
def test_stable_baselines3_td3_and_ddpg_actor_steps_are_part_of_the_update(
    tmp_path, capsys, algo, optimizer_steps
):
    """120 env steps, a gradient step of 32 on each of the 70 from the 51st: the actor's loss
    ``critic.q1_forward(obs, actor(obs))`` calls the critic's Q-net on ``cat([features, actions])``,
    a tensor no forward took, so each actor step was an update of its own (TD3: 105 learner steps
    and 48.2 samples per transition; DDPG: 140 and 2x). It is computed from the actor's output, so
    it is the same draw: 70 updates of 32, 32 samples per transition (69 x 32 over the 69 env
    steps after the first update). (About 2-4 s each.)"""
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "cap"
    script = _script(tmp_path, SB3_TD3, f"sb3_{algo}.py")
    argv = ["capture", "run", "--out", str(out), *SCHEDULE, "--", script, algo, "120"]
    assert main(argv) == 0
    assert _counts(capsys.readouterr().out) == {"updates": 70, "timesteps": 120}
    trace = load(out)
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert counts["env_steps"] == counts["actor_steps"] == 120
    assert (counts["learner_steps"], counts["samples"]) == (70, 70 * 32)
    assert counts["optimizer_steps"] == optimizer_steps
    assert workload["samples_per_insert"] == 32.0
    learner = trace.steps[trace.steps.role.astype(str) == "learner"]
    assert set(learner.batch_size) == {32} and learner.replay_sample_us.notna().all()


# Stable-Baselines3's DQN given a program's own buffer class (replay_buffer_class) whose sample()
# spends 2 ms of CPU, as a hand-written prioritized sampler may. argv: timesteps.
SB3_OWN_BUFFER = textwrap.dedent(
    """
    import sys, time
    import numpy as np
    import torch
    from stable_baselines3 import DQN
    from stable_baselines3.common.buffers import ReplayBuffer

    class RecentReplay(ReplayBuffer):
        calls = 0
        def sample(self, batch_size, env=None):
            RecentReplay.calls += 1
            t = time.process_time()
            while time.process_time() - t < 0.002:
                pass
            upper = self.buffer_size if self.full else self.pos
            inds = np.random.randint(upper // 2, upper, size=batch_size)
            return self._get_samples(inds, env=env)

    torch.set_num_threads(1)
    model = DQN("MlpPolicy", "CartPole-v1", learning_starts=50, batch_size=32, train_freq=4,
                gradient_steps=1, replay_buffer_class=RecentReplay, policy_kwargs={"net_arch": [32]},
                seed=0, device="cpu")
    model.learn(total_timesteps=int(sys.argv[1]))
    print(f"COUNTS updates={model._n_updates} sampled={RecentReplay.calls}")
    """
)


def test_a_library_buffer_subclass_sample_is_the_learners(tmp_path, capsys):
    """Only Stable-Baselines3's own buffer classes were marked: a subclass's own sample() (the
    program's, or SB3's HerReplayBuffer) ran unmarked, and its 2 ms of CPU went to the actor step
    before each update (2.5-2.8 ms of CPU against 0.4 for the others). Now it is the update's
    replay_sample. (About 2-5 s, SB3 import included.)"""
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "cap"
    script = _script(tmp_path, SB3_OWN_BUFFER, "sb3_own_buffer.py")
    argv = ["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "120"]
    assert main(argv) == 0
    did = _counts(capsys.readouterr().out)
    assert did["updates"] == did["sampled"] > 0
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["learner_steps"], counts["samples"]) == (did["updates"], did["updates"] * 32)
    steps = trace.steps
    learner, actor = (
        steps[steps.role.astype(str) == "learner"],
        steps[steps.role.astype(str) == "actor"],
    )
    assert len(learner) and (learner.replay_sample_cpu_us >= 2000).all()
    assert actor.cpu_us.median() < 2000
