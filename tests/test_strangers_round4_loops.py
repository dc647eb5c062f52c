"""``archsim capture run`` on strangers' scripts (round 4, second part), each checked against what the
script counted itself: Stable-Baselines3's PPO and A2C, a program whose environments step on actor
threads, and a DQN that evaluates on a separate env between updates. The first part (a class-based DQN,
a Dict observation, a TorchScript Q-network): test_strangers_round4.py.
"""

from __future__ import annotations

import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script
from tests.test_strangers_round4 import SCHEDULE

# Stable-Baselines3's own PPO and A2C on 2 CartPoles (DummyVecEnv): argv: algorithm, timesteps.
SB3 = textwrap.dedent(
    """
    import sys
    import torch
    from stable_baselines3 import A2C, PPO
    from stable_baselines3.common.env_util import make_vec_env

    torch.set_num_threads(1)
    env = make_vec_env("CartPole-v1", n_envs=2, seed=0)
    if sys.argv[1] == "ppo":
        model = PPO("MlpPolicy", env, n_steps=32, batch_size=16, n_epochs=2, seed=0, device="cpu")
    else:
        model = A2C("MlpPolicy", env, n_steps=5, seed=0, device="cpu")
    model.learn(total_timesteps=int(sys.argv[2]))
    print(f"COUNTS timesteps={model.num_timesteps}")
    """
)


@pytest.mark.parametrize(
    ("algo", "timesteps", "expected"),
    [
        # 2 rollouts of 32 steps of 2 envs (64 env steps, 128 transitions), each trained 2 epochs
        # of 4 minibatches of 16: 16 learner steps, 256 samples, 2 per transition; one value
        # forward per rollout for its bootstrap (66 actor steps)
        ("ppo", 128, dict(actors=66, learners=16, batch=16, samples=256, spi=2.0)),
        # 5 rollouts of 5 steps of 2 envs, one update of all 10 transitions each
        ("a2c", 50, dict(actors=30, learners=5, batch=10, samples=50, spi=1.0)),
    ],
)
def test_stable_baselines3_ppo_and_a2c(tmp_path, capsys, algo, timesteps, expected):
    """SB3's PPO and A2C (their train() calls policy.evaluate_actions, no module's __call__ of the
    policy itself): counts worked out by hand from n_steps, n_envs, batch_size and n_epochs.
    (About 2 s each.)"""
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "cap"
    script = _script(tmp_path, SB3, f"sb3_{algo}.py")
    argv = ["capture", "run", "--out", str(out), *SCHEDULE, "--", script, algo, str(timesteps)]
    assert main(argv) == 0
    assert _counts(capsys.readouterr().out) == {"timesteps": timesteps}
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["env_steps"], counts["transitions"]) == (timesteps // 2, timesteps)
    assert (counts["actor_steps"], counts["learner_steps"]) == (
        expected["actors"],
        expected["learners"],
    )
    assert counts["samples"] == expected["samples"]
    assert trace.meta["workload"]["samples_per_insert"] == expected["spi"]
    steps = trace.steps
    assert set(steps[steps.role == "learner"].batch_size) == {expected["batch"]}
    assert set(steps[steps.role == "actor"].batch_size) == {2}


# An actor thread steps its own CartPole and queues observations; the program's thread only trains
# (a threaded Ape-X-like loop). argv: updates.
ACTOR_THREADS = textwrap.dedent(
    """
    import queue, sys, threading, time
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    torch.set_num_threads(1)
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    data, stop = queue.Queue(), threading.Event()

    def actor(seed):
        env = gym.make("CartPole-v1")
        obs, _ = env.reset(seed=seed)
        while not stop.is_set():
            with torch.no_grad():
                a = int(q(torch.as_tensor(obs)).argmax())
            nobs, r, term, trunc, _ = env.step(a)
            data.put(obs)
            obs = env.reset()[0] if term or trunc else nobs
            time.sleep(0.001)  # paced (a free-running thread starves the learner of the GIL)

    thread = threading.Thread(target=actor, args=(0,))
    thread.start()
    buf = []
    for _ in range(int(sys.argv[1])):
        buf.append(data.get())
        x = torch.as_tensor(np.array([buf[i] for i in np.random.randint(len(buf), size=8)]))
        loss = q(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
    stop.set()
    thread.join()
    """
)


def test_actor_threads_are_named_not_called_envless(tmp_path, capsys):
    """An actor on a thread of its own: capture run marks the program's thread only, and said the
    program "stepped no gymnasium environment" though its thread had stepped hundreds. (About 1 s.)"""
    script = _script(tmp_path, ACTOR_THREADS, "actor_threads.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, "20"]) == 2
    assert capsys.readouterr().err.strip() == (
        "archsim: error: capture run: actor_threads stepped its environments on 1 other thread(s) "
        "only (actor threads), and capture run marks the thread that runs the program only: step "
        "them in it, or in worker processes (multiprocessing), which are captured per process"
    )
    assert not out.exists()


# A DQN on a SyncVectorEnv of 4 CartPoles that evaluates greedily on a separate single CartPole
# (up to 10 steps) every 10 updates, as training loops with an eval env do. argv: vector steps.
EVALUATES = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    torch.set_num_threads(1)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1") for _ in range(4)])
    eval_env = gym.make("CartPole-v1")
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    c = dict(train_calls=0, eval_steps=0, updates=0)

    def evaluate():
        o, _ = eval_env.reset(seed=1)
        for _ in range(10):
            with torch.no_grad():
                a = int(q(torch.as_tensor(o)).argmax())
            o, r, term, trunc, _ = eval_env.step(a)
            c["eval_steps"] += 1
            if term or trunc:
                break

    obs, _ = envs.reset(seed=0)
    buf = []
    for t in range(int(sys.argv[1])):
        with torch.no_grad():
            a = q(torch.as_tensor(obs)).argmax(1).numpy()
        nobs, r, term, trunc, _ = envs.step(a)
        c["train_calls"] += 1
        buf.extend(obs)
        obs = nobs
        if t >= 8:
            x = torch.as_tensor(np.array([buf[i] for i in np.random.randint(len(buf), size=32)]))
            loss = q(x).pow(2).mean(); opt.zero_grad(); loss.backward(); opt.step()
            c["updates"] += 1
            if c["updates"] % 10 == 0:
                evaluate()
    print("COUNTS " + " ".join(f"{k}={v}" for k, v in c.items()))
    """
)


def test_acting_after_an_evaluation_env_is_acting(tmp_path, capsys):
    """The vector env's acting forward at 4, right after an evaluation on a single env (whose batch
    of 1 was the last env's), was a train forward: it opened learner steps of batch 4 that trained
    nothing. Every learner step is now an update of 32; the evaluation's env steps are actor steps
    and transitions like the training env's (README: they dilute the pacing). (About 1.5 s.)"""
    out = tmp_path / "cap"
    script = _script(tmp_path, EVALUATES, "dqn_evaluates.py")
    schedule = ["--wait", "2", "--warmup", "1", "--active", "40", "--repeat", "1"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", script, "40"]) == 0
    did = _counts(capsys.readouterr().out)
    assert (did["train_calls"], did["updates"]) == (40, 32)
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert counts["learner_steps"] == did["updates"]
    assert counts["env_steps"] == counts["actor_steps"] == 40 + did["eval_steps"]
    assert counts["transitions"] == 4 * 40 + did["eval_steps"]
    steps = trace.steps
    learner = steps[steps.role == "learner"]
    assert len(learner) and set(learner.batch_size) == {32}
    assert learner.train_backward_us.notna().all()
    assert set(steps[steps.role == "actor"].batch_size) == {1, 4}
