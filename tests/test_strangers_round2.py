"""``archsim capture run`` on more strangers' RL scripts, written the way RL people write them
(CleanRL-style single files on real gymnasium environments), each checked against what the script
itself counted: a PPO with GAE, minibatch epochs, ``clip_grad_norm_`` and learning-rate annealing
over a ``SyncVectorEnv`` or an ``AsyncVectorEnv`` (subprocess envs). Off-policy and endless loops:
tests/test_strangers_round2_offpolicy.py."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load

# CleanRL's ppo.py cut down to what shapes its loop (Huang et al. 2022, JMLR 23(274)): dataclass args
# through argparse, RecordEpisodeStatistics, a rollout of NUM_STEPS vector steps acting under
# no_grad, a bootstrap value, GAE, EPOCHS x MINIBATCHES updates with clip_grad_norm_ and an annealed
# learning rate. It prints what it did: COUNTS env_calls=... transitions=... updates=...
PPO = textwrap.dedent(
    """
    import argparse, dataclasses
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn
    from torch.distributions.categorical import Categorical

    @dataclasses.dataclass
    class Args:
        num_envs: int = 4
        num_steps: int = 16
        iterations: int = 4
        update_epochs: int = 2
        num_minibatches: int = 4
        learning_rate: float = 2.5e-4
        async_envs: int = 0

    class Agent(nn.Module):
        def __init__(self, envs):
            super().__init__()
            n = int(np.prod(envs.single_observation_space.shape))
            self.critic = nn.Sequential(nn.Linear(n, 64), nn.Tanh(), nn.Linear(64, 1))
            self.actor = nn.Sequential(nn.Linear(n, 64), nn.Tanh(),
                                       nn.Linear(64, envs.single_action_space.n))

        def get_action_and_value(self, x, action=None):
            probs = Categorical(logits=self.actor(x))
            action = probs.sample() if action is None else action
            return action, probs.log_prob(action), probs.entropy(), self.critic(x)

    if __name__ == "__main__":
        p = argparse.ArgumentParser()
        for f in dataclasses.fields(Args):
            p.add_argument("--" + f.name.replace("_", "-"), type=type(f.default), default=f.default)
        args = Args(**vars(p.parse_args()))
        torch.manual_seed(1)
        torch.backends.cudnn.deterministic = True
        make = lambda: gym.wrappers.RecordEpisodeStatistics(gym.make("CartPole-v1"))
        vec = gym.vector.AsyncVectorEnv if args.async_envs else gym.vector.SyncVectorEnv
        envs = vec([make for _ in range(args.num_envs)])
        agent = Agent(envs)
        optimizer = torch.optim.Adam(agent.parameters(), lr=args.learning_rate, eps=1e-5)
        shape = (args.num_steps, args.num_envs)
        obs = torch.zeros(shape + envs.single_observation_space.shape)
        actions, logprobs, rewards, dones, values = (torch.zeros(shape) for _ in range(5))
        batch = args.num_envs * args.num_steps
        minibatch = batch // args.num_minibatches
        env_calls = transitions = updates = 0
        next_obs = torch.Tensor(envs.reset(seed=1)[0])
        next_done = torch.zeros(args.num_envs)
        for iteration in range(args.iterations):
            optimizer.param_groups[0]["lr"] = (1 - iteration / args.iterations) * args.learning_rate
            for step in range(args.num_steps):
                obs[step], dones[step] = next_obs, next_done
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                values[step], actions[step], logprobs[step] = value.flatten(), action, logprob
                next_obs, reward, term, trunc, infos = envs.step(action.numpy())
                env_calls, transitions = env_calls + 1, transitions + args.num_envs
                rewards[step] = torch.tensor(reward)
                next_obs = torch.Tensor(next_obs)
                next_done = torch.Tensor(np.logical_or(term, trunc))
            with torch.no_grad():
                next_value = agent.critic(next_obs).reshape(1, -1)
                advantages, lastgaelam = torch.zeros_like(rewards), 0
                for t in reversed(range(args.num_steps)):
                    nonterminal = 1.0 - (next_done if t == args.num_steps - 1 else dones[t + 1])
                    nextvalues = next_value if t == args.num_steps - 1 else values[t + 1]
                    delta = rewards[t] + 0.99 * nextvalues * nonterminal - values[t]
                    advantages[t] = lastgaelam = delta + 0.99 * 0.95 * nonterminal * lastgaelam
                returns = advantages + values
            b_obs, b_act = obs.reshape(batch, -1), actions.reshape(-1)
            b_logp, b_adv, b_ret = logprobs.reshape(-1), advantages.reshape(-1), returns.reshape(-1)
            inds = np.arange(batch)
            for epoch in range(args.update_epochs):
                np.random.shuffle(inds)
                for start in range(0, batch, minibatch):
                    mb = inds[start:start + minibatch]
                    _, newlogp, entropy, newvalue = agent.get_action_and_value(b_obs[mb], b_act[mb])
                    ratio = (newlogp - b_logp[mb]).exp()
                    adv = (b_adv[mb] - b_adv[mb].mean()) / (b_adv[mb].std() + 1e-8)
                    pg = torch.max(-adv * ratio, -adv * torch.clamp(ratio, 0.8, 1.2)).mean()
                    v_loss = 0.5 * ((newvalue.view(-1) - b_ret[mb]) ** 2).mean()
                    loss = pg - 0.01 * entropy.mean() + 0.5 * v_loss
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), 0.5)
                    optimizer.step()
                    updates += 1
        envs.close()
        print(f"COUNTS env_calls={env_calls} transitions={transitions} updates={updates}")
    """
)


def _script(tmp_path, text: str, name: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def _counts(printed: str) -> dict[str, int]:
    """What the script counted itself (its ``COUNTS k=v ...`` line)."""
    (line,) = [x for x in printed.splitlines() if x.startswith("COUNTS ")]
    return {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", line)}


def test_cleanrl_ppo_counts_and_pacing_match_what_the_script_did(tmp_path, capsys):
    """4 iterations of 16 steps of 4 CartPoles, then 2 epochs of 4 minibatches of 16: the capture's
    env steps, transitions and updates are the script's own, and the pacing is 2 samples per
    transition, each transition trained on once per epoch. It was 2.58: samples counted from the
    first optimizer step on took in the rest of the first burst (31 x 16 samples), whose rollout
    came before it (3 x 64 transitions)."""
    out = tmp_path / "cap"
    script = _script(tmp_path, PPO, "ppo_cleanrl.py")
    assert main(["capture", "run", "--out", str(out), "--", script]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_calls": 64, "transitions": 256, "updates": 32}
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert (counts["env_steps"], counts["transitions"]) == (did["env_calls"], did["transitions"])
    assert counts["learner_steps"] == did["updates"]
    assert counts["actor_steps"] == 64 + 4  # and one bootstrap value forward per rollout
    assert trace.meta["workload"]["samples_per_insert"] == 2.0  # update_epochs
    steps = trace.steps
    assert set(steps[steps.role == "learner"].batch_size) == {16}  # the minibatch
    assert set(steps[steps.role == "actor"].batch_size) == {4}  # the vector env's
    sim = tmp_path / "sim"
    assert main(["simulate", str(out), "--hw", "local", "--out", str(sim)]) == 0
    metrics = json.loads((sim / "metrics.json").read_text())
    assert metrics["samples_per_insert"] == 2.0
    # 2 updates of 16 samples per 16 transitions: 1 update per 4-env vector step
    assert metrics["learner_updates_per_s"] == pytest.approx(metrics["env_steps_per_s"] / 8)


def test_async_vector_env_workers_without_a_window_are_refused(tmp_path, capsys):
    """PPO on an AsyncVectorEnv of 2 CartPoles for 4 iterations of 16 steps: the program's windows
    get an extra window at its first update burst, but its env workers count their schedule in their
    own env steps (48 after the first optimizer step, against step 63 of the default schedule) and
    record none. The capture was saved with a note, and simulate priced each env step at the
    program's send/receive alone; now one line and nothing written."""
    out = tmp_path / "cap"
    script = _script(tmp_path, PPO, "ppo_async.py")
    argv = ["--", script, "--num-envs", "2", "--async-envs", "1"]
    assert main(["capture", "run", "--out", str(out), *argv]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert re.fullmatch(
        r"archsim: error: capture run: ppo_async's vector env stepped its environments in 2 worker "
        r"process\(es\), and none recorded a window: each ran at most \d+ env steps after the first "
        r"optimizer step, and the schedule records from step 63 on; without them the trace holds "
        r"no env work: run it longer or lower --wait/--warmup",
        err[-1],
    )
    assert not out.exists()  # with --wait 10 they record and are merged (test_capture_run_workers)


def test_a_ppo_minibatch_the_size_of_the_vector_env_is_trained_not_acted(tmp_path, capsys):
    """Minibatches of 4 from 4 envs (16 per epoch): a grad-on forward at the env's batch with no
    learner step open was ``act``, so every minibatch's forward opened an actor step (192 actor steps
    for 64 env steps in 4 iterations), its learner steps had batch 1 and the pacing read 0.5. A
    module whose such forward was followed by a backward trains at that batch: only the first
    minibatch of the run is taken for acting (it joins the bootstrap's actor step)."""
    out = tmp_path / "cap"
    script = _script(tmp_path, PPO, "ppo_small_minibatch.py")
    argv = ["--", script, "--iterations", "2", "--num-minibatches", "16"]
    schedule = ["--wait", "30", "--warmup", "1", "--active", "8", "--repeat", "1"]
    assert main(["capture", "run", "--out", str(out), *schedule, *argv]) == 0
    did = _counts(capsys.readouterr().out)
    assert did == {"env_calls": 32, "transitions": 128, "updates": 64}
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert counts["actor_steps"] == did["env_calls"] + 2  # and the bootstrap values
    assert counts["learner_steps"] == did["updates"]
    assert trace.meta["workload"]["samples_per_insert"] == 2.0
    steps = trace.steps
    learner = steps[steps.role == "learner"]
    assert set(learner.batch_size) == {4} and learner.train_forward_us.notna().all()
    acted = steps[(steps.role == "actor") & steps.env_step_us.isna()]
    assert len(acted) <= 1  # the bootstrap value's step, when a window holds it


# An Atari PPO-like loop on real ALE Pong: 2 v5 envs (frameskip 4, sticky actions) in a
# SyncVectorEnv through gymnasium's own wrappers (RecordEpisodeStatistics, a 2x downsample,
# FrameStackObservation of 4), a Nature-style CNN whose LazyLinear is sized by a probe forward
# before training, rollouts of 8 steps and minibatches of 8. argv: iterations.
ATARI = textwrap.dedent(
    """
    import sys
    import ale_py
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    gym.register_envs(ale_py)

    def make():
        env = gym.make("ALE/Pong-v5", obs_type="grayscale")
        env = gym.wrappers.RecordEpisodeStatistics(env)
        space = gym.spaces.Box(0, 255, (105, 80), np.uint8)
        env = gym.wrappers.TransformObservation(env, lambda o: o[::2, ::2], space)
        return gym.wrappers.FrameStackObservation(env, 4)

    if __name__ == "__main__":
        envs = gym.vector.SyncVectorEnv([make, make])
        net = nn.Sequential(nn.Conv2d(4, 16, 8, 4), nn.ReLU(), nn.Conv2d(16, 32, 4, 2), nn.ReLU(),
                            nn.Flatten(), nn.LazyLinear(envs.single_action_space.n))
        obs, _ = envs.reset(seed=0)
        with torch.no_grad():  # size the LazyLinear: a forward that trains nothing
            net(torch.zeros((1,) + envs.single_observation_space.shape))
        opt = torch.optim.Adam(net.parameters(), lr=2.5e-4)
        env_calls = updates = 0
        for _ in range(int(sys.argv[1])):
            rollout = []
            for _ in range(8):
                with torch.no_grad():
                    action = net(torch.as_tensor(obs, dtype=torch.float32) / 255.0).argmax(1)
                obs, *_ = envs.step(action.numpy())
                rollout.append(obs)
                env_calls += 1
            data = torch.as_tensor(np.concatenate(rollout), dtype=torch.float32) / 255.0
            for mb in data.split(8):
                loss = net(mb).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                nn.utils.clip_grad_norm_(net.parameters(), 0.5)
                opt.step()
                updates += 1
        print(f"COUNTS env_calls={env_calls} updates={updates}")
    """
)


def test_atari_pong_vector_env_counts_frames_and_no_probe_update(tmp_path, capsys):
    """3 iterations on 2 Pongs: 24 vector steps, 48 transitions, 192 emulator frames (frameskip 4
    of the v5 env, read through gymnasium's wrappers), 6 updates of 8. The LazyLinear's probe
    forward (batch 1 against the env's 2: ``train_forward``) was counted as a learner step though
    it trains nothing: "7 learner steps" for 6; a learner step counts when it runs a backward or an
    optimizer step."""
    out = tmp_path / "cap"
    script = _script(tmp_path, ATARI, "pong_ppo.py")
    schedule = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", script, "3"]) == 0
    printed = capsys.readouterr().out
    did = _counts(printed)
    assert did == {"env_calls": 24, "updates": 6}
    assert "captured pong_ppo: 24 actor steps, 6 learner steps" in printed
    workload = load(out).meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["env_steps"], counts["transitions"], counts["frames"]) == (24, 48, 192)
    assert (counts["learner_steps"], counts["samples"]) == (6, 48)
    assert workload["frames_per_env_step"] == 4.0
    assert workload["samples_per_insert"] == 1.0  # 16 samples per rollout of 16 transitions


def test_vector_envs_without_sub_envs_say_where_they_step():
    """A vector env with no sub-env to read was said to step "in worker processes": gymnasium's
    CartPoleVectorEnv (``gym.make_vec``'s default for CartPole) steps in this process, and ale_py's
    AtariVectorEnv (make_vec's for ALE ids, C++ threads here) has the frameskip of its spec."""
    import ale_py
    import gymnasium as gym

    from archsim.capture.frameskip import IN_WORKERS, env_frameskip

    gym.register_envs(ale_py)
    cartpole = env_frameskip(gym.make_vec("CartPole-v1", num_envs=2))
    assert cartpole.frames_per_env_step is None and IN_WORKERS not in cartpole.source
    assert "CartPoleVectorEnv steps its environments itself" in cartpole.source
    pong = gym.make_vec("ALE/Pong-v5", num_envs=2, frameskip=3)
    wrapped = gym.wrappers.vector.RecordEpisodeStatistics(pong)
    assert env_frameskip(wrapped).frames_per_env_step == 3.0
    assert env_frameskip(pong).source == "ale_py AtariVectorEnv frameskip 3 (its make_vec spec)"
    pong.close()


def test_atari_vector_env_capture_reads_its_frameskip(tmp_path, capsys):
    """The Atari loop above on ``gym.make_vec("ALE/Pong-v5", num_envs=2)`` (84x84 stacks of 4):
    4 frames per env step, where the capture said 1 "in worker processes"."""
    text = ATARI.replace(
        "envs = gym.vector.SyncVectorEnv([make, make])",
        'envs = gym.make_vec("ALE/Pong-v5", num_envs=2)',
    )
    assert text != ATARI
    out = tmp_path / "cap"
    script = _script(tmp_path, text, "pong_make_vec.py")
    schedule = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", script, "2"]) == 0
    assert _counts(capsys.readouterr().out) == {"env_calls": 16, "updates": 4}
    workload = load(out).meta["workload"]
    assert workload["frames_per_env_step"] == 4.0
    assert workload["settings"]["counts"]["transitions"] == 32
