"""One learner step per update, one minibatch drawn, whatever number of optimizers step on it
(archsim.capture.learner_markers): real SAC and TD3 scripts captured end to end, and PPO, DQN,
gradient accumulation and an auxiliary loss's optimizer marked in process on real gymnasium envs."""

from __future__ import annotations

import textwrap
from types import SimpleNamespace

import gymnasium as gym
import numpy as np
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.capture.auto_markers import auto_markers
from archsim.cli import main
from archsim.sim.gpu_jobs import representative_ops
from archsim.trace.format import load
from archsim.trace.learner_batch import updates_differ
from archsim.trace.schema import PHASE_GROUPS
from tests.test_strangers_round2 import _counts, _script

# Twin-critic actor-critic on Pendulum, n env steps, an update of 32 from step 10 on: SAC steps its
# critics', actor's and temperature's optimizers on every draw (Haarnoja et al. 2018, Alg. 1);
# TD3 (argv[2] == "td3") its critics' every update and its actor's every second one on the same
# draw (Fujimoto et al. 2018, policy delay 2). argv: n, algorithm.
TWIN_CRITICS = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    def mlp(i, o):
        return nn.Sequential(nn.Linear(i, 32), nn.ReLU(), nn.Linear(32, o))

    class Actor(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(3, 2)

        def forward(self, x):
            mean, log_std = self.net(x).chunk(2, -1)
            normal = torch.distributions.Normal(mean, log_std.clamp(-5, 2).exp())
            u = normal.rsample()
            return 2 * torch.tanh(u), normal.log_prob(u).sum(-1, True)

    class Q(nn.Module):
        def __init__(self):
            super().__init__()
            self.net = mlp(4, 1)

        def forward(self, x, a):
            return self.net(torch.cat([x, a], 1))

    n, td3 = int(sys.argv[1]), sys.argv[2] == "td3"
    torch.manual_seed(0)
    env = gym.make("Pendulum-v1")
    actor, q1, q2 = Actor(), Q(), Q()
    q_opt = torch.optim.Adam([*q1.parameters(), *q2.parameters()], lr=1e-3)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    log_alpha = torch.zeros(1, requires_grad=True)
    a_opt = torch.optim.Adam([log_alpha], lr=1e-3)
    O, A, R, N = np.zeros((n, 3), "f"), np.zeros((n, 1), "f"), np.zeros(n, "f"), np.zeros((n, 3), "f")
    obs, _ = env.reset(seed=0)
    c = dict(env_steps=0, updates=0, q=0, pi=0, alpha=0)
    for t in range(n):
        with torch.no_grad():
            act = actor(torch.as_tensor(obs))[0].numpy()
        nobs, r, term, trunc, _ = env.step(act)
        O[t], A[t], R[t], N[t], obs = obs, act, r, nobs, nobs
        c["env_steps"] += 1
        if t < 10:
            continue
        i = np.random.randint(0, t + 1, 32)
        o, a, r, no = (torch.as_tensor(x[i]) for x in (O, A, R, N))
        c["updates"] += 1
        with torch.no_grad():
            na, nlogp = actor(no)
            y = r + 0.99 * torch.min(q1(no, na), q2(no, na)).view(-1)
        q_loss = ((q1(o, a).view(-1) - y) ** 2).mean() + ((q2(o, a).view(-1) - y) ** 2).mean()
        q_opt.zero_grad(); q_loss.backward(); q_opt.step(); c["q"] += 1
        if td3 and t % 2:
            continue
        pa, logp = actor(o)
        pi_loss = (log_alpha.exp().detach() * logp - q1(o, pa)).mean()
        pi_opt.zero_grad(); pi_loss.backward(); pi_opt.step(); c["pi"] += 1
        if not td3:
            a_loss = (-log_alpha.exp() * (logp.detach() - 1.0)).mean()
            a_opt.zero_grad(); a_loss.backward(); a_opt.step(); c["alpha"] += 1
    print("COUNTS " + " ".join(f"{k}={v}" for k, v in c.items()))
    """
)
_SCHEDULE = ["--wait", "1", "--warmup", "1", "--active", "6", "--repeat", "1"]


def _capture(tmp_path, capsys, algorithm: str, n: int):
    script = _script(tmp_path, TWIN_CRITICS, f"{algorithm}_pendulum.py")
    out = tmp_path / "cap"
    argv = ["capture", "run", "--out", str(out), *_SCHEDULE, "--", script, str(n), algorithm]
    assert main(argv) == 0
    return _counts(capsys.readouterr().out), load(out)


def _adam_params(trace, step_ids) -> list[int]:
    """Parameter tensors that Adam stepped in each of these steps: torch's single-tensor Adam (the
    CPU default) runs one ``addcdiv_`` per parameter tensor per step."""
    ops = trace.ops
    steps = ops.loc[ops["name"].astype(str) == "aten::addcdiv_", "step_id"]
    return [int((steps == step_id).sum()) for step_id in step_ids]


def test_sac_with_three_optimizers_reads_its_32_samples_per_transition(tmp_path, capsys):
    """30 env steps, an update at each of steps 10..29 (20 draws of 32, three optimizer steps
    each). Pacing from the first optimizer step on (step 10): transitions of steps 11..29 (19) and
    the updates after them (19 of 32): 32 samples per transition, the script's own replay ratio
    (it read 96 when every Optimizer.step was a learner step). Each recorded learner step holds
    its update's three optimizer steps, so its time is the whole update's: Adam on the critics'
    8 parameter tensors (2 nets of 2 Linear layers), the actor's 4 and log_alpha, 13."""
    did, trace = _capture(tmp_path, capsys, "sac", 30)
    assert (did["updates"], did["q"], did["pi"], did["alpha"]) == (20, 20, 20, 20)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert counts["learner_steps"] == did["updates"] and counts["samples"] == 32 * 20
    assert trace.meta["workload"]["samples_per_insert"] == 19 * 32 / 19
    learner = trace.steps[trace.steps.role == "learner"]
    assert len(learner) and set(learner.batch_size) == {32}
    assert set(_adam_params(trace, learner.step_id)) == {13}


def test_td3_with_policy_delay_2_is_one_update_per_draw(tmp_path, capsys):
    """TD3's critics step on every draw (20), its actor on those of the even steps 10..28 (10):
    20 updates of 32, 32 samples per transition; the recorded learner steps alternate the critics'
    optimizer step alone (Adam on 8 parameter tensors) and with the actor's (4 more) on the same
    draw."""
    did, trace = _capture(tmp_path, capsys, "td3", 30)
    assert (did["updates"], did["q"], did["pi"], did["alpha"]) == (20, 20, 10, 0)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert counts["learner_steps"] == did["updates"] and counts["samples"] == 32 * 20
    assert trace.meta["workload"]["samples_per_insert"] == 32.0
    learner = trace.steps[trace.steps.role == "learner"].sort_values("step_id")
    assert set(learner.batch_size) == {32}
    per_step = _adam_params(trace, learner.step_id)
    assert set(per_step) == {8, 12} and all(np.diff(per_step) != 0)
    # 30 optimizer steps for 20 updates: the updates differ by design, so the simulator's typical
    # learner step is the mean of every recorded one, not the modal (critic-only) ones
    assert (counts["optimizer_steps"], updates_differ(trace)) == (30, True)
    ops, n_steps, _ = representative_ops(trace, PHASE_GROUPS["train"], "learner", every_step=True)
    assert n_steps == len(learner) and set(ops.step_id) == set(learner.step_id)
    train = trace.ops[trace.ops.phase.isin(PHASE_GROUPS["train"])]
    assert len(ops) == train.step_id.isin(learner.step_id).sum()


def test_updates_differ_only_where_the_capture_counted_more_optimizer_steps():
    """Older traces (no optimizer_steps count), one optimizer per update and malformed counts keep
    the modal representative steps."""

    def trace(counts):
        return SimpleNamespace(meta={"workload": {"settings": {"counts": counts}}})

    assert updates_differ(trace({"optimizer_steps": 30, "learner_steps": 20}))
    assert not updates_differ(trace({"optimizer_steps": 20, "learner_steps": 20}))
    assert not updates_differ(trace({"learner_steps": 20}))
    assert not updates_differ(trace({"optimizer_steps": True, "learner_steps": 0}))
    assert not updates_differ(trace("20"))
    assert not updates_differ(SimpleNamespace(meta={}))


def _marked_loop(updates_per_rollout) -> tuple[int, int]:
    """(learner steps, samples) of a 4-CartPole loop marked in process (no profiler): 8 env steps
    of acting, then ``updates_per_rollout(net, opt, rollout_obs)``."""
    torch.manual_seed(0)
    envs = gym.vector.SyncVectorEnv([lambda: gym.make("CartPole-v1")] * 4)
    net = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.ReLU(), torch.nn.Linear(16, 2))
    opt = torch.optim.SGD(net.parameters(), lr=0.01)
    with auto_markers(lambda: None) as marker:
        obs, _ = envs.reset(seed=0)
        rollout = []
        for _ in range(8):
            with torch.no_grad():
                action = net(torch.as_tensor(obs)).argmax(1).numpy()
            rollout.append(obs)
            obs, *_ = envs.step(action)
        updates_per_rollout(net, opt, torch.as_tensor(np.concatenate(rollout)))
        envs.step(np.zeros(4, dtype=np.int64))
    return marker.counts.learner_steps, marker.counts.samples


def test_ppo_minibatches_are_one_update_each():
    """PPO: 2 epochs of 4 minibatches of 8 of the 32-transition rollout, one optimizer: 8 updates
    of 8, whether a minibatch is gathered (``b_obs[mb_inds]``, a copy) or sliced (a view of the
    rollout's storage at another offset)."""

    def ppo(net, opt, b_obs, sliced: bool):
        for _ in range(2):
            order = np.random.permutation(32)
            for start in range(0, 32, 8):
                mb = b_obs[start : start + 8] if sliced else b_obs[order[start : start + 8]]
                loss = net(mb).pow(2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()

    assert _marked_loop(lambda *a: ppo(*a, sliced=False)) == (8, 64)
    assert _marked_loop(lambda *a: ppo(*a, sliced=True)) == (8, 64)


def test_dqn_gradient_steps_accumulation_and_an_auxiliary_optimizer():
    """Two DQN gradient steps on two draws: 2 updates of 16. Four accumulated micro-batches of 8
    and one optimizer step: 1 update of 32. A main and an auxiliary loss's optimizer stepping in
    turn on each of 2 draws of 16: 2 updates of 16 (a new draw, not the second optimizer, ends
    one). An update that a new forward on the same draw goes on after its step (a second epoch on
    the whole rollout, Spinning Up's full-batch PPO) stays one update of 32: one draw."""

    def dqn(net, opt, b_obs):
        for _ in range(2):
            batch = b_obs[torch.randint(0, 32, (16,))]
            loss = net(batch).max(1).values.pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()

    def accumulate(net, opt, b_obs):
        opt.zero_grad()
        for start in range(0, 32, 8):
            net(b_obs[torch.arange(start, start + 8)]).pow(2).mean().backward()
        opt.step()

    aux_head = torch.nn.Linear(2, 1)
    aux_opt = torch.optim.SGD(aux_head.parameters(), lr=0.01)

    def auxiliary(net, opt, b_obs):
        for _ in range(2):
            batch = b_obs[torch.randint(0, 32, (16,))]
            out = net(batch)
            opt.zero_grad()
            out.pow(2).mean().backward()
            opt.step()
            aux_opt.zero_grad()
            aux_head(out.detach()).pow(2).mean().backward()
            aux_opt.step()

    def same_draw_twice(net, opt, b_obs):
        for _ in range(2):
            opt.zero_grad()
            net(b_obs).pow(2).mean().backward()
            opt.step()

    assert _marked_loop(dqn) == (2, 32)
    assert _marked_loop(accumulate) == (1, 32)
    assert _marked_loop(auxiliary) == (2, 32)
    assert _marked_loop(same_draw_twice) == (1, 32)


# Stable-Baselines3's SAC (argv: gradient steps per env step): each gradient step samples the
# replay buffer and steps the temperature's, critics' and actor's optimizers, in that order.
SB3_SAC = textwrap.dedent(
    """
    import sys
    import torch
    from stable_baselines3 import SAC

    torch.set_num_threads(1)
    model = SAC("MlpPolicy", "Pendulum-v1", batch_size=32, learning_starts=10,
                gradient_steps=int(sys.argv[1]), policy_kwargs=dict(net_arch=[32, 32]), seed=0)
    model.learn(total_timesteps=40)
    print(f"COUNTS updates={model._n_updates}")
    """
)


def test_stable_baselines3_sac_updates_are_its_gradient_steps(tmp_path, capsys):
    """SB3's SAC with 2 gradient steps per env step from step 10 on: 60 updates (its own
    ``_n_updates``) of 3 optimizer steps, 64 samples per transition. Its critics' target reads
    ``next_observations`` first after the temperature's step: that tensor came from the buffer's
    ``sample``, so it is the update's draw, not a new one."""
    script = _script(tmp_path, SB3_SAC, "sb3_sac.py")
    out = tmp_path / "cap"
    assert main(["capture", "run", "--out", str(out), *_SCHEDULE, "--", script, "2"]) == 0
    did = _counts(capsys.readouterr().out)
    trace = load(out)
    counts = trace.meta["workload"]["settings"]["counts"]
    assert did["updates"] == counts["learner_steps"] == 60
    assert counts["optimizer_steps"] == 3 * 60
    assert trace.meta["workload"]["samples_per_insert"] == 64.0


_ENV = gym.make("CartPole-v1")
_NETS = [torch.nn.Linear(4, 2) for _ in range(3)]
_OPTS = [torch.optim.SGD(net.parameters(), lr=0.01) for net in _NETS]


@settings(max_examples=25, deadline=None)
@given(
    st.lists(st.lists(st.lists(st.integers(0, 2), min_size=1, max_size=4), max_size=3), max_size=6)
)
def test_one_learner_step_per_draw_in_any_loop(loop):
    """Invariant over random loops: per env step, 0-3 draws of 8 samples, on each 1-4 optimizer
    steps of any of 3 optimizers (repeats included) on that draw. One learner step per draw, of 8
    samples, as many optimizer steps as the loop made, and one unprofiled learner step timed per
    draw."""
    from archsim.capture.unprofiled import STEP_KEY, timing_unprofiled_steps

    with timing_unprofiled_steps() as times, auto_markers(lambda: None) as marker:
        obs, _ = _ENV.reset(seed=0)
        for draws in loop:
            obs, *_ = _ENV.step(0)
            for optimizers in draws:
                batch = torch.randn(8, 4)
                for k in optimizers:
                    _OPTS[k].zero_grad()
                    _NETS[k](batch).pow(2).mean().backward()
                    _OPTS[k].step()
    n_draws = sum(len(draws) for draws in loop)
    assert (marker.counts.learner_steps, marker.counts.samples) == (n_draws, 8 * n_draws)
    assert marker.counts.optimizer_steps == sum(len(o) for draws in loop for o in draws)
    assert len(times.samples.get(("learner", STEP_KEY), [])) == n_draws
