"""A short real DQN capture on the CPU through the CLI, checked end to end (raw JSON and trace tables)."""

from __future__ import annotations

import gzip
import json
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from archsim.cli import main
from archsim.trace import load
from archsim.trace.schema import ACTOR_PHASES

STEPS = 60
LEARN_START = 32  # = the batch size, so training starts as soon as a batch can be sampled
# Record 0-based steps 17..56 in one window (skip 16, warm up 1 (step 16), record 40): learner steps
# run at t = 32, 36, ..., 56 (every 4 from learn start), so the window holds 7 of them, and with a
# target period of 3 updates two target syncs (after updates 3 and 6).
ARGS = [
    "capture", "dqn", "--steps", str(STEPS), "--learn-start", str(LEARN_START),
    "--target-period", "3", "--replay-capacity", "200", "--seed", "1",
    "--skip-first", "16", "--wait", "0", "--warmup", "1", "--active", "40", "--repeat", "1",
]  # fmt: skip


@pytest.fixture(scope="module")
def captured(tmp_path_factory):
    out = tmp_path_factory.mktemp("capture") / "dqn"
    assert main([*ARGS, "--out", str(out)]) == 0
    return out


def test_capture_writes_a_complete_trace_directory(captured):
    assert sorted(p.name for p in captured.iterdir()) == [
        "meta.yaml", "ops.parquet", "raw_trace.json.gz", "steps.parquet",
    ]  # fmt: skip
    meta = load(captured).meta
    assert meta["workload"]["name"] == "dqn"
    assert meta["workload"]["settings"]["learn_start"] == LEARN_START
    assert meta["workload"]["settings"]["steps"] == STEPS
    assert meta["source"]["device"] == "cpu" and meta["source"]["cpu_threads"] >= 1
    assert meta["source"]["cpu_model"]
    assert meta["capture"]["schedule"] == {
        "skip_first": 16, "wait": 0, "warmup": 1, "active": 40, "repeat": 1,
    }  # fmt: skip
    assert meta["capture"]["record_shapes"] is True and meta["torch_version"]
    # Steps outside the recorded window are timed without the profiler: the 16 skipped ones, the
    # warm-up step (torch's schedule only prepares the profiler then; recording starts with the
    # first active step) and the 3 after the window (57..59). None of them trains (learner steps run
    # at 32..56, all recorded), so only actor steps, each with all four of its phases.
    unprofiled = meta["capture"]["unprofiled_cpu_us"]
    assert list(unprofiled) == ["actor"]
    assert {name: figures["steps"] for name, figures in unprofiled["actor"].items()} == {
        "act": 20, "env_step": 20, "preprocess": 20, "replay_insert": 20, "step": 20,
    }  # fmt: skip
    assert 0 < unprofiled["actor"]["act"]["median_us"] < unprofiled["actor"]["step"]["median_us"]


def test_raw_trace_holds_the_markers(captured):
    with gzip.open(captured / "raw_trace.json.gz", "rt") as handle:
        events = json.load(handle)["traceEvents"]
    names = Counter(e["name"].split("#")[0] for e in events if e.get("cat") == "user_annotation")
    assert names["archsim::actor_step"] == 40  # every recorded step has one actor step
    assert names["archsim::learner_step"] == 7
    for phase in ACTOR_PHASES:
        # DQN acts locally: no central inference to wait for; display only with --display-every
        if phase not in ("inference_wait", "display"):
            assert names[f"archsim::{phase}"] >= 40
    assert names["archsim::target_sync"] == 2


def test_steps_table_has_actor_and_learner_steps_with_phases(captured):
    steps = load(captured).steps
    actor = steps[steps.role == "actor"]
    learner = steps[steps.role == "learner"]
    assert len(actor) == 40 and len(learner) == 7
    for column in ("env_step_us", "preprocess_us", "act_us", "replay_insert_us"):
        assert (actor[column] > 0).all(), column
    for column in (
        "replay_sample_us",
        "train_forward_us",
        "train_backward_us",
        "optimizer_step_us",
    ):
        assert (learner[column] > 0).all(), column
    assert learner["target_sync_us"].notna().sum() == 2
    assert (learner.batch_size == 32).all() and (actor.actor == 0).all()
    # phases nest inside their step
    phase_sum = actor[["env_step_us", "preprocess_us", "act_us", "replay_insert_us"]].sum(axis=1)
    assert (phase_sum <= actor.dur_us + 1e-6).all()
    # every recorded step and phase has its thread CPU time, never above its wall time (1 us slack:
    # two clocks read microseconds apart)
    for rows in (actor, learner):
        assert (rows["cpu_us"] > 0).all() and (rows["cpu_us"] <= rows["dur_us"] + 1.0).all()
    for column in ("env_step", "preprocess", "act", "replay_insert"):
        assert (actor[f"{column}_cpu_us"] <= actor[f"{column}_us"] + 1.0).all(), column


def test_ops_are_attributed_to_phases_and_steps(captured):
    ops = load(captured).ops
    phases = set(ops.phase)
    assert {"act", "train_forward", "train_backward", "optimizer_step"} <= phases
    assert (ops.kind == "cpu").all() and (ops.device == -1).all()
    assert (ops.step_id >= 0).mean() > 0.9
    assert np.isfinite(ops.dur_us).all()


def test_conv_ops_carry_flops(captured):
    # One act forward at 84x84x4 (2 FLOPs per multiply-add, bias not counted):
    # conv1 20*20*32 outputs x 4*8*8 MACs = 6,553,600; conv2 9*9*64 x 32*4*4 = 5,308,416;
    # conv3 7*7*64 x 64*3*3 = 3,612,672 -> 15,474,688 conv FLOPs per actor step.
    ops = load(captured).ops
    conv = ops[(ops.op_class == "conv") & (ops.phase == "act")]
    if conv.empty:
        pytest.skip("ingest does not yet list CPU convolution ops")
    per_step = conv.groupby("step_id").flops.sum()
    assert per_step.to_numpy() == pytest.approx(15_474_688, rel=0.01)


EXAMPLE = Path(__file__).resolve().parents[1] / "traces" / "dqn-pong-cpu"


def test_bundled_example_trace_is_small_and_complete():
    if not EXAMPLE.exists():
        pytest.skip(f"{EXAMPLE} is not in this checkout")
    assert sum(p.stat().st_size for p in EXAMPLE.iterdir()) < 2_000_000
    trace = load(EXAMPLE)
    roles = trace.steps.role.value_counts()
    assert roles["actor"] == 160 and roles["learner"] == 40  # 20 windows x 8 steps, 1 in 4 trains
    assert trace.meta["workload"]["name"] == "dqn" and trace.meta["capture"]["windows"] == 20
    assert {"act", "train_forward", "train_backward", "optimizer_step"} <= set(trace.ops.phase)
