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
