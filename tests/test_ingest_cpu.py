"""Ingest a CPU-only trace captured here with the real torch.profiler around a real Nature-DQN
network and a real gymnasium environment, with archsim phase/step markers."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.profiler import ProfilerActivity, profile, record_function

from archsim.cli import main
from archsim.trace import load, save
from archsim.trace.flops import is_metadata_op
from archsim.trace.ingest import ingest
from archsim.trace.schema import ACTOR_PHASES, LEARNER_PHASES

N_ACTIONS = 6
ACTOR_STEPS = 3
LEARNER_STEPS = 2
LEARNER_BATCH = 4
# Nature DQN forward at 84x84x4 (REFERENCE.md): 18.7 MFLOP (convs 6.55 + 5.31 + 3.61 M, fc 3.21 M).
NATURE_DQN_FORWARD_FLOPS = 18.7e6


def nature_dqn() -> torch.nn.Module:
    return torch.nn.Sequential(
        torch.nn.Conv2d(4, 32, 8, stride=4),
        torch.nn.ReLU(),
        torch.nn.Conv2d(32, 64, 4, stride=2),
        torch.nn.ReLU(),
        torch.nn.Conv2d(64, 64, 3, stride=1),
        torch.nn.ReLU(),
        torch.nn.Flatten(),
        torch.nn.Linear(3136, 512),
        torch.nn.ReLU(),
        torch.nn.Linear(512, N_ACTIONS),
    )


def capture_cpu_trace(path) -> None:
    """Profile a few real actor and learner steps with the agreed archsim markers."""
    torch.manual_seed(0)
    net, target = nature_dqn(), nature_dqn()
    optimizer = torch.optim.RMSprop(net.parameters(), lr=2.5e-4)  # REFERENCE.md: RMSProp 2.5e-4
    env = gym.make("CartPole-v1")
    env.reset(seed=0)
    frames = torch.zeros(ACTOR_STEPS, 4, 84, 84, dtype=torch.uint8)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for i in range(ACTOR_STEPS):
            with record_function("archsim::actor_step#actor=0,batch_size=1"):
                with record_function("archsim::env_step"):
                    env.step(env.action_space.sample())
                with record_function("archsim::preprocess"):
                    obs = frames[i : i + 1].float().div_(255.0)
                with record_function("archsim::act"), torch.no_grad():
                    int(net(obs).argmax())
                with record_function("archsim::replay_insert"):
                    frames[i].copy_(frames[(i + 1) % ACTOR_STEPS])
        for _ in range(LEARNER_STEPS):
            with record_function(f"archsim::learner_step#batch_size={LEARNER_BATCH}"):
                with record_function("archsim::replay_sample"):
                    idx = torch.randint(0, ACTOR_STEPS, (LEARNER_BATCH,))
                    batch = frames[idx].float() / 255.0
                with record_function("archsim::train_forward"):
                    q = net(batch).max(dim=1).values
                    with torch.no_grad():
                        q_next = target(batch).max(dim=1).values
                    loss = torch.nn.functional.smooth_l1_loss(q, 0.99 * q_next)
                with record_function("archsim::train_backward"):
                    optimizer.zero_grad()
                    loss.backward()
                with record_function("archsim::optimizer_step"):
                    optimizer.step()
    prof.export_chrome_trace(str(path))


@pytest.fixture(scope="module")
def cpu_trace_path(tmp_path_factory):
    path = tmp_path_factory.mktemp("cpu") / "dqn_cpu_trace.json"
    capture_cpu_trace(path)
    return path


@pytest.fixture(scope="module")
def cpu_trace(cpu_trace_path):
    return ingest(cpu_trace_path, {"workload": {"name": "dqn-test"}})


def test_steps_table_from_markers(cpu_trace):
    steps = cpu_trace.steps
    actors, learners = steps[steps["role"] == "actor"], steps[steps["role"] == "learner"]
    assert len(actors) == ACTOR_STEPS and len(learners) == LEARNER_STEPS
    assert (actors["actor"] == 0).all() and (actors["batch_size"] == 1).all()
    assert (learners["batch_size"] == LEARNER_BATCH).all() and (learners["actor"] == -1).all()
    assert steps["step_id"].tolist() == list(range(len(steps)))
    for phase in ACTOR_PHASES:
        column = f"{phase}_us"
        if phase in ("inference_wait", "display"):  # not marked in this loop
            assert actors[column].isna().all()
            continue
        assert (actors[column] > 0).all() and learners[column].isna().all()
    for phase in ("replay_sample", "train_forward", "train_backward", "optimizer_step"):
        assert (learners[f"{phase}_us"] > 0).all() and actors[f"{phase}_us"].isna().all()
    # Phases nest inside their step, so their durations add up to no more than the step's.
    phase_cols = [f"{p}_us" for p in (*ACTOR_PHASES, *LEARNER_PHASES)]
    assert (steps[phase_cols].sum(axis=1) <= steps["dur_us"] + 1e-6).all()
    assert cpu_trace.meta["ingest"]["n_steps"] == ACTOR_STEPS + LEARNER_STEPS


def test_cpu_ops_are_disjoint_compute_ops_with_phases(cpu_trace):
    ops = cpu_trace.ops
    assert set(ops["kind"]) == {"cpu"} and (ops["device"] == -1).all()
    assert not ops["name"].map(is_metadata_op).any()  # views/empty/reshape are left out
    assert (ops["launch_op"] == ops["name"]).all()
    # Kept ops never contain one another on a thread: summing their time counts nothing twice.
    for _, group in ops.groupby(["pid", "tid"]):
        group = group.sort_values("start_us")
        ends = (group["start_us"] + group["dur_us"]).to_numpy()
        assert (group["start_us"].to_numpy()[1:] >= ends[:-1] - 1e-3).all()
    # Every op here ran inside a marked phase, and its step is a step of the matching role.
    assert "other" not in set(ops["phase"])
    roles = cpu_trace.steps.set_index("step_id")["role"]
    act_roles = set(roles[ops.loc[ops["phase"] == "act", "step_id"]])
    train_roles = set(roles[ops.loc[ops["phase"] == "train_backward", "step_id"]])
    assert act_roles == {"actor"} and train_roles == {"learner"}
    assert cpu_trace.meta["ingest"]["ops_without_formula"] == int((~ops["has_formula"]).sum())
    assert cpu_trace.meta["source"]["device"] == "cpu"
    assert cpu_trace.meta["workload"]["name"] == "dqn-test"  # caller meta wins over the file name


def test_forward_flops_match_the_published_nature_dqn_count(cpu_trace):
    ops = cpu_trace.ops
    act = ops[(ops["phase"] == "act") & ops["op_class"].isin(["conv", "gemm"])]
    assert set(act["op_class"]) == {"conv", "gemm"} and (act["flops"] > 0).all()
    per_step = act["flops"].sum() / ACTOR_STEPS
    assert per_step == pytest.approx(NATURE_DQN_FORWARD_FLOPS, rel=0.01)
    # The learner's forward runs the online and the target net at batch 4: exactly 8x the
    # per-sample conv + GEMM work (formulas are linear in batch).
    fwd = ops[(ops["phase"] == "train_forward") & ops["op_class"].isin(["conv", "gemm"])]
    assert fwd["flops"].sum() / LEARNER_STEPS == pytest.approx(2 * LEARNER_BATCH * per_step)
    backward_conv = ops[(ops["phase"] == "train_backward") & (ops["op_class"] == "conv")]
    assert len(backward_conv) == 3 * LEARNER_STEPS and (backward_conv["flops"] > 0).all()


def test_cpu_trace_round_trips(cpu_trace, tmp_path):
    save(cpu_trace, tmp_path / "t")
    again = load(tmp_path / "t")
    assert again == cpu_trace
    assert np.array_equal(again.ops["flops"].to_numpy(), cpu_trace.ops["flops"].to_numpy())


def test_cli_ingest_then_trace_info(cpu_trace_path, tmp_path, capsys):
    out = tmp_path / "trace"
    assert main(["ingest", str(cpu_trace_path), "--out", str(out), "--name", "dqn"]) == 0
    assert ", 5 steps," in capsys.readouterr().out  # 3 actor + 2 learner steps
    assert load(out).meta["workload"]["name"] == "dqn"
    assert main(["trace", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "actor steps: 3" in text and "learner steps: 2" in text
    for phase in ("env_step", "act", "train_forward", "optimizer_step"):
        assert phase in text
    assert "device cpu" in text


def test_legacy_trace_with_markers_filed_as_operators(cpu_trace_path, cpu_trace, tmp_path):
    # PyTorch 1.8-era traces filed record_function ranges under "Operator" like every op.
    doc = json.loads(cpu_trace_path.read_text())
    for event in doc["traceEvents"]:
        if event.get("cat") in ("cpu_op", "user_annotation"):
            event["cat"] = "Operator"
    legacy = tmp_path / "legacy.json"
    legacy.write_text(json.dumps(doc))
    again = ingest(legacy, {"workload": {"name": "dqn-test"}})
    assert again.steps.equals(cpu_trace.steps)
    assert again.ops.equals(cpu_trace.ops)
