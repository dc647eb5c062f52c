"""``archsim capture run`` on recurrent policies (round 6): a DRQN/R2D2-style LSTM or GRU Q-network
whose hidden state is carried across env steps, trained on sequence batches with burn-in (Kapturowski
et al. 2019), laid out time-first (``nn.LSTM``'s default ``[T, B, ...]``) or batch-first; each
capture checked against what the script counted itself and the pacing worked out by hand."""

from __future__ import annotations

import textwrap

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.test_strangers_round2 import _counts, _script

SCHEDULE = ["--wait", "2", "--warmup", "1", "--active", "8", "--repeat", "1"]

# argv: layout (time-first | batch-first), env steps, sequences per update B, trained length T,
# burn-in, vector envs (0: one gymnasium env), cell (lstm | gru). Acts on [1, N, 4] (time-first) or
# [N, 1, 4] with the hidden state carried (reset at an episode's end on a single env); from
# t >= burn-in + T, every 8th env step draws B sequences of burn-in + T steps, runs the burn-in
# under no_grad for the hidden state and trains on the T steps after it.
DRQN = textwrap.dedent(
    """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    import torch.nn as nn

    layout, cell = sys.argv[1], sys.argv[7]
    n, B, T, burn, N = map(int, sys.argv[2:7])
    bf = layout == "batch-first"
    torch.set_num_threads(1); torch.manual_seed(0); np.random.seed(0)

    class RecurrentQ(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc = nn.Linear(4, 32)
            self.rnn = (nn.LSTM if cell == "lstm" else nn.GRU)(32, 32, batch_first=bf)
            self.head = nn.Linear(32, 2)

        def forward(self, x, state=None):
            y, state = self.rnn(torch.relu(self.enc(x)), state)
            return self.head(y), state

    single = N == 0
    N = max(N, 1)
    env = gym.make("CartPole-v1") if single else gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * N
    )
    q = RecurrentQ()
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    L = burn + T
    O, A = np.zeros((n, N, 4), "f"), np.zeros((n, N), "i8")
    obs, _ = env.reset(seed=0)
    state, updates, sequences = None, 0, 0
    for t in range(n):
        with torch.no_grad():
            x = torch.as_tensor(obs).reshape((N, 1, 4) if bf else (1, N, 4))
            out, state = q(x, state)
            a = out.argmax(-1).reshape(N).numpy()
        O[t], A[t] = np.reshape(obs, (N, 4)), a
        obs, r, term, trunc, _ = env.step(int(a[0]) if single else a)
        if single and (term or trunc):
            obs, _ = env.reset(); state = None
        if t >= L and t % 8 == 0:
            starts, e = np.random.randint(0, t - L + 1, B), np.random.randint(0, N, B)
            idx = starts[None, :] + np.arange(L)[:, None]  # [L, B]
            seq, act = torch.as_tensor(O[idx, e]), torch.as_tensor(A[idx[burn:], e[None]])
            if bf:
                seq, act = seq.transpose(0, 1).contiguous(), act.T.contiguous()
            with torch.no_grad():  # burn-in: the hidden state only
                _, h = q(seq[:, :burn] if bf else seq[:burn])
            out, _ = q(seq[:, burn:] if bf else seq[burn:], h)
            loss = out.gather(-1, act.unsqueeze(-1)).pow(2).mean()
            opt.zero_grad(); loss.backward(); opt.step()
            updates += 1; sequences += B
    print(f"COUNTS env_calls={n} transitions={n * N} updates={updates} sequences={sequences}")
    """
)


def _capture(tmp_path, capsys, *argv: str):
    out = tmp_path / "cap"
    script = _script(tmp_path, DRQN, "drqn.py")
    assert main(["capture", "run", "--out", str(out), *SCHEDULE, "--", script, *argv]) == 0
    return _counts(capsys.readouterr().out), load(out)


@pytest.mark.parametrize(
    ("layout", "cell"), [("time-first", "lstm"), ("batch-first", "lstm"), ("time-first", "gru")]
)
def test_a_recurrent_q_network_trains_on_its_sequences_batch(tmp_path, capsys, layout, cell):
    """120 CartPole steps, an update of 16 sequences of 4 + 8 steps every 8th step from t = 16: 13
    updates. Time-first, the learner read batch 8 (T, the input's first dimension) and 8 samples
    an update: 0.93 sequences per transition, half the script's. Now batch 16 in either layout, and the pacing
    is the 12 updates after the first over the 103 env steps after it: 12 x 16 / 103 sequences
    per transition (the unit of the learner's batch, as R2D2's replay ratio). (About 2 s each, 7 s for the first at load 6.)"""
    did, trace = _capture(tmp_path, capsys, layout, "120", "16", "8", "4", "0", cell)
    assert did == {"env_calls": 120, "transitions": 120, "updates": 13, "sequences": 208}
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["env_steps"], counts["actor_steps"]) == (120, 120)  # no burn-in acted
    assert (counts["learner_steps"], counts["samples"]) == (13, did["sequences"])
    assert workload["samples_per_insert"] == pytest.approx(12 * 16 / 103)
    steps = trace.steps
    assert set(steps[steps.role.astype(str) == "learner"].batch_size) == {16}
    assert set(steps[steps.role.astype(str) == "actor"].batch_size) == {1}


def test_time_first_burn_in_on_vector_envs_is_not_acting(tmp_path, capsys):
    """4 vector CartPoles acting on [1, 4, 4], 60 env calls, 6 updates of 16 sequences with a
    burn-in of 4 steps: the burn-in's [4, 16, 4] had read batch 4, the envs', so each update
    acted once more (66 actor steps), and the updates counted 8 samples each (T) on learner steps
    of batch 1: 0.23 sequences per transition. Now the acting forwards read 4, the burn-in and
    the trained forward 16, and the pacing is 5 x 16 sequences over the 43 x 4 transitions after
    t = 16. (About 1.5 s.)"""
    did, trace = _capture(tmp_path, capsys, "time-first", "60", "16", "8", "4", "4", "lstm")
    assert did == {"env_calls": 60, "transitions": 240, "updates": 6, "sequences": 96}
    workload = trace.meta["workload"]
    counts = workload["settings"]["counts"]
    assert (counts["env_steps"], counts["actor_steps"], counts["transitions"]) == (60, 60, 240)
    assert (counts["learner_steps"], counts["samples"]) == (6, 96)
    assert workload["samples_per_insert"] == pytest.approx(5 * 16 / (43 * 4))
    steps = trace.steps
    assert set(steps[steps.role.astype(str) == "learner"].batch_size) == {16}
    assert set(steps[steps.role.astype(str) == "actor"].batch_size) == {4}
