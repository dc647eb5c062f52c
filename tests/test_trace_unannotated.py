"""Unannotated traces (issue 13 item 3): a plain torch.profiler trace of a small DQN-like loop, made
here with torch on the CPU and no archsim markers, and the real fixtures with ProfilerStep windows.
Learner steps come from torch's optimizer records, the training forward from autograd's
forward/backward pairs, actor steps from ProfilerStep windows or gymnasium step calls."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import numpy as np
import pytest

from archsim.cli import main
from archsim.trace import save
from archsim.trace.info import format_summary, summarize
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

torch = pytest.importorskip("torch")

ITERATIONS = 9  # profiler schedule: 1 warmup window, then 8 recorded windows (iterations 1..8)
TRAIN_EVERY = 2  # train after iterations 1, 3, 5, 7: 4 recorded optimizer steps


def _dqn_like_trace(path: Path, with_stack: bool = False, gym_env: bool = False) -> Path:
    """Run a tiny DQN-like loop (act under no_grad, env step, train every 2nd step with Adam) under
    a plain torch.profiler with ProfilerStep windows, as a user would, and export the trace."""
    from torch import nn
    from torch.profiler import ProfilerActivity, profile, schedule

    torch.manual_seed(0)
    q = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    opt = torch.optim.Adam(q.parameters(), lr=1e-3)
    env = None
    if gym_env:
        gym = pytest.importorskip("gymnasium")
        env = gym.make("CartPole-v1")
        obs = torch.as_tensor(env.reset(seed=0)[0])
    else:
        obs = torch.zeros(4)
    replay = []
    with profile(
        activities=[ProfilerActivity.CPU],
        record_shapes=True,
        with_stack=with_stack,
        schedule=schedule(wait=0, warmup=1, active=ITERATIONS - 1, repeat=1),
        on_trace_ready=lambda p: p.export_chrome_trace(str(path)),
    ) as prof:
        for it in range(ITERATIONS):
            with torch.no_grad():
                action = int(q(obs.unsqueeze(0)).argmax())
            if env is not None:
                nxt, reward, term, trunc, _ = env.step(action)
                nxt = torch.as_tensor(env.reset()[0] if term or trunc else nxt)
            else:
                nxt, reward = torch.randn(4), 1.0
            replay.append((obs, action, float(reward)))
            obs = nxt
            if it % TRAIN_EVERY == 1:
                states = torch.stack([t[0] for t in replay])
                actions = torch.tensor([t[1] for t in replay])
                rewards = torch.tensor([t[2] for t in replay])
                pred = q(states).gather(1, actions[:, None]).squeeze(1)
                loss = ((pred - rewards) ** 2).mean()
                opt.zero_grad()
                loss.backward()
                opt.step()
            prof.step()
    return path


@pytest.fixture(scope="module")
def plain(tmp_path_factory):
    path = _dqn_like_trace(tmp_path_factory.mktemp("plain") / "dqn_plain.json")
    return path, ingest(path)


def _contained(inner_start, inner_end, outer_start, outer_end) -> bool:
    return bool(np.all((inner_start >= outer_start) & (inner_end <= outer_end + 1e-6)))


def test_plain_trace_learner_steps_end_at_optimizer_steps(plain):
    path, trace = plain
    events = json.loads(path.read_text())["traceEvents"]
    optimizer = sorted(
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("Optimizer.step#")
    )
    assert len(optimizer) == 4  # iterations 1, 3, 5, 7 of the recorded 1..8
    learner = trace.steps[trace.steps["role"] == "learner"].sort_values("start_us")
    assert len(learner) == 4
    ends = (learner["start_us"] + learner["dur_us"]).to_numpy()
    base = trace.meta["ingest"]["ts_rebased_by_us"]  # 0 here: a real clock
    assert base == 0
    np.testing.assert_allclose(ends, [end for _, end in optimizer], atol=1e-3)
    # forward, backward and optimizer phases each inside every step, in that order
    for col in ("train_forward_us", "train_backward_us", "optimizer_step_us"):
        assert (learner[col] > 0).all()
    assert (learner["train_forward_us"] + learner["train_backward_us"] <= learner["dur_us"]).all()
    rules = trace.meta["ingest"]["inferred_steps"]
    assert any(r.startswith("learner steps: one per outermost 'Optimizer.step#") for r in rules)


def test_plain_trace_training_forward_is_train_forward_and_acting_is_act(plain):
    _, trace = plain
    ops = trace.ops
    linear = ops[ops["name"] == "aten::linear"]
    # 2 linear layers per forward: 8 acting forwards (no_grad) and 4 training forwards
    assert (linear["phase"] == "act").sum() == 2 * 8
    assert (linear["phase"] == "train_forward").sum() == 2 * 4
    assert "train_forward" in set(ops["phase"])
    # What stays "other" is the loop's own glue, outside the network, backward and optimizer calls:
    # the action's argmax after each acting forward (8), the env-less loop's randn for the next
    # observation (8) and the loss's gradient seed before each backward (4). Counted, not timed:
    # these ops last microseconds, so their share of the time is whatever the scheduler made it.
    other = ops.loc[ops["phase"] == "other", "name"].value_counts().to_dict()
    assert other == {"aten::argmax": 8, "aten::normal_": 8, "aten::ones_like": 4}


def test_plain_trace_actor_steps_tile_the_windows_outside_learning(plain):
    _, trace = plain
    steps = trace.steps
    actor = steps[steps["role"] == "actor"].sort_values("start_us")
    learner = steps[steps["role"] == "learner"]
    assert len(actor) == 8  # one per recorded ProfilerStep window
    # env_step is the rest of the actor step after act (no event records the environment)
    np.testing.assert_allclose(actor["env_step_us"] + actor["act_us"], actor["dur_us"])
    assert (actor["act_us"] > 0).all() and (actor["env_step_us"] >= 0).all()
    a_start, a_end = actor["start_us"].to_numpy(), (actor["start_us"] + actor["dur_us"]).to_numpy()
    for s, e in zip(learner["start_us"], learner["start_us"] + learner["dur_us"], strict=True):
        assert not np.any((a_start < e) & (a_end > s)), "actor and learner steps overlap"


def test_plain_trace_simulates_and_info_names_the_rules(plain, tmp_path, capsys):
    _, trace = plain
    out = save(trace, tmp_path / "plain")
    text = format_summary(summarize(trace))
    assert "inferred actor steps: ProfilerStep#N windows" in text
    assert "inferred learner steps: one per outermost" in text
    assert main(["simulate", str(out), "--hw", "local", "--out", str(tmp_path / "sim")]) == 0
    metrics = json.loads((tmp_path / "sim" / "metrics.json").read_text())
    assert metrics  # the run wrote its metrics


def test_rules_without_optimizer_annotations(plain, tmp_path):
    """ProfilerStep windows holding a backward pass, then bare backward passes, find the same 4."""
    path, _ = plain
    doc = json.loads(path.read_text())
    events = doc["traceEvents"]
    no_opt = [e for e in events if not str(e.get("name", "")).startswith("Optimizer.")]
    (tmp_path / "no_opt.json").write_text(json.dumps({**doc, "traceEvents": no_opt}))
    by_window = ingest(tmp_path / "no_opt.json")
    assert (by_window.steps["role"] == "learner").sum() == 4
    assert any(
        "ProfilerStep#N windows that hold a backward pass" in r
        for r in by_window.meta["ingest"]["inferred_steps"]
    )
    bare = [e for e in no_opt if not str(e.get("name", "")).startswith("ProfilerStep#")]
    (tmp_path / "bare.json").write_text(json.dumps({**doc, "traceEvents": bare}))
    passes = ingest(tmp_path / "bare.json")
    learner = passes.steps[passes.steps["role"] == "learner"]
    assert len(learner) == 4
    assert (learner["train_forward_us"] > 0).all() and (learner["train_backward_us"] > 0).all()
    assert any("one per backward pass" in r for r in passes.meta["ingest"]["inferred_steps"])


def test_gymnasium_env_steps_with_stack(tmp_path):
    path = _dqn_like_trace(tmp_path / "gym.json", with_stack=True, gym_env=True)
    trace = ingest(path)
    actor = trace.steps[trace.steps["role"] == "actor"]
    assert len(actor) == 8  # one outermost gymnasium step call per recorded iteration
    assert (actor["env_step_us"] > 0).all() and (actor["act_us"] > 0).all()
    assert any(
        r.startswith("actor steps: gymnasium") for r in trace.meta["ingest"]["inferred_steps"]
    )


# Outermost Optimizer.step annotations, counted in the raw files (v100 nests each one twice).
FIXTURE_LEARNER_STEPS = {"v100_cnn_ddp_train": 5, "a100_train_shapes": 6, "rtx2080ti_mlp_train": 40}


@pytest.mark.parametrize("name", sorted(FIXTURE_LEARNER_STEPS))
def test_fixture_learner_steps(name, tmp_path, capsys):
    path = kineto_fixture(f"{name}.json.gz")
    trace = ingest(path)
    learner = trace.steps[trace.steps["role"] == "learner"]
    assert len(learner) == FIXTURE_LEARNER_STEPS[name]
    assert (trace.steps["role"] == "actor").sum() == 0  # training benchmarks: no acting
    ops = trace.ops
    assert ops.loc[ops["phase"] == "train_forward", "dur_us"].sum() > 0
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    windows = [
        (e["ts"], e["ts"] + e["dur"])
        for e in events
        if e.get("ph") == "X" and str(e.get("name", "")).startswith("ProfilerStep#")
    ]
    if windows:  # each learner step lies within one ProfilerStep window (one iteration each)
        starts = learner["start_us"].to_numpy() + trace.meta["ingest"]["ts_rebased_by_us"]
        ends = starts + learner["dur_us"].to_numpy()
        for s, e in zip(starts, ends, strict=True):
            assert any(ws - 1e-3 <= s and e <= we + 1e-3 for ws, we in windows)
    # simulate says in one line what the trace lacks (no acting, so no env_step times)
    out = save(trace, tmp_path / name)
    assert main(["simulate", str(out), "--hw", "local", "--out", str(tmp_path / "sim")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no actor steps" in err[0]
