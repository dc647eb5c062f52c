"""Markers -> steps table and op phases, on hand-laid intervals where the right answer is known:
overlapping actor steps of two threads of one process, and a phase recorded on another thread."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archsim.errors import ArchsimError
from archsim.trace.steps import assign_phases, build_steps, enclosing_step

PID = 10


def _annotations(rows: list[tuple[str, int, float, float]]) -> pd.DataFrame:
    """(name, tid, ts, dur) -> the user_annotation columns ingest passes to build_steps."""
    frame = pd.DataFrame(rows, columns=["name", "tid", "ts", "dur"])
    frame["pid"] = PID
    frame["end"] = frame["ts"] + frame["dur"]
    return frame


# Thread 1 runs actor 0's steps [0, 100) and [100, 200); thread 2 runs actor 1's step [50, 250),
# overlapping both. Thread 3 (like autograd's worker) records a train_backward phase at [120, 130).
ANNOTATIONS = _annotations(
    [
        ("archsim::actor_step#actor=0,batch_size=1", 1, 0.0, 100.0),
        ("archsim::env_step", 1, 10.0, 30.0),
        ("archsim::act", 1, 40.0, 20.0),
        ("archsim::actor_step#actor=0,batch_size=1", 1, 100.0, 100.0),
        ("archsim::env_step", 1, 110.0, 50.0),
        ("archsim::actor_step#actor=1,batch_size=8", 2, 50.0, 200.0),
        ("archsim::env_step", 2, 60.0, 70.0),
        ("archsim::env_step", 2, 140.0, 10.0),
        ("archsim::train_backward", 3, 120.0, 10.0),
        ("archsim::not_a_phase", 1, 20.0, 1.0),
        ("ProfilerStep#3", 1, 0.0, 300.0),
    ]
)


def test_steps_and_phase_sums_follow_their_own_thread():
    steps, phases, unknown = build_steps(Path("t.json"), ANNOTATIONS)
    assert unknown == 1  # archsim::not_a_phase
    assert steps["start_us"].tolist() == [0.0, 50.0, 100.0]  # step_id in start order
    assert steps["actor"].tolist() == [0, 1, 0] and steps["batch_size"].tolist() == [1, 8, 1]
    assert steps["tid"].tolist() == [1, 2, 1]
    # Actor 1's env_step phases (70 + 10) stay on its own step even though both of actor 0's steps
    # overlap them in time; actor 0's steps get 30 and 50.
    assert steps["env_step_us"].tolist() == [30.0, 80.0, 50.0]
    assert steps["act_us"].tolist()[0] == 20.0 and np.isnan(steps["act_us"].tolist()[1])
    # The train_backward phase on thread 3 has no step on its thread: the latest-starting step of
    # the process containing it is actor 0's second step (started at 100, after actor 1's at 50).
    assert steps["train_backward_us"].tolist()[2] == 10.0
    assert phases.loc[phases["phase"] == "train_backward", "step_id"].tolist() == [2]


def test_op_phases_same_thread_first_then_process():
    steps, phases, _ = build_steps(Path("t.json"), ANNOTATIONS)
    pid = np.full(4, PID)
    tid = np.array([2, 1, 3, 1])
    t = np.array([125.0, 125.0, 125.0, 5.0])
    cpu_ops = pd.DataFrame(columns=["name", "pid", "tid", "ts", "end"]).astype({"name": object})
    got = assign_phases(phases, ANNOTATIONS, cpu_ops, pid, tid, t, np.ones(4, dtype=bool))
    # t=125 on thread 2 is inside its env_step [60, 130); on thread 1 inside env_step [110, 160);
    # on thread 3 inside its own train_backward; t=5 on thread 1 is inside a step but no phase.
    assert got.tolist() == ["env_step", "env_step", "train_backward", "other"]
    step_ids = enclosing_step(steps, pid, tid, t)
    assert step_ids.tolist() == [1, 2, 2, 0]


def test_foreign_trace_rules_when_no_archsim_phase_applies():
    annotations = _annotations([("Optimizer.step#SGD.step", 1, 0.0, 10.0)])
    cpu_ops = pd.DataFrame(
        {
            "name": ["autograd::engine::evaluate_function: AddmmBackward0", "aten::mm"],
            "pid": [PID, PID],
            "tid": [7, 7],
            "ts": [20.0, 21.0],
            "end": [30.0, 25.0],
        }
    )
    _, phases, _ = build_steps(Path("t.json"), annotations)
    got = assign_phases(
        phases,
        annotations,
        cpu_ops,
        np.full(3, PID),
        np.array([1, 7, 1]),
        np.array([5.0, 22.0, 22.0]),
        np.ones(3, dtype=bool),
    )
    assert got.tolist() == ["optimizer_step", "train_backward", "other"]


def test_bad_step_attribute_names_the_marker():
    bad = _annotations([("archsim::actor_step#actor=three", 1, 0.0, 1.0)])
    with pytest.raises(
        ArchsimError, match=r"t.json: step marker 'archsim::actor_step#actor=three'"
    ):
        build_steps(Path("t.json"), bad)


def test_cpu_markers_fill_the_enclosing_step_and_phase():
    # Each marker's CPU figure is the last thing inside it. Timestamps touch: the second env step's
    # figure ends where inference_wait starts, and the step's own figure starts where
    # inference_wait ends; each still belongs to its own marker.
    rows = [
        ("archsim::actor_step#actor=0,batch_size=2", 1, 0.0, 100.0),
        ("archsim::env_step", 1, 10.0, 30.0),
        ("archsim::cpu#us=25.5", 1, 39.0, 1.0),
        ("archsim::env_step", 1, 50.0, 30.0),
        ("archsim::cpu#us=20", 1, 79.0, 1.0),
        ("archsim::inference_wait", 1, 80.0, 18.0),
        ("archsim::cpu#us=0.5", 1, 97.0, 1.0),
        ("archsim::cpu#us=60", 1, 98.0, 1.0),
        ("archsim::actor_step#actor=0,batch_size=2", 1, 100.0, 50.0),  # made without CPU markers
        ("archsim::env_step", 1, 110.0, 30.0),
    ]
    steps, phases, unknown = build_steps(Path("t.json"), _annotations(rows))
    assert unknown == 0
    assert steps["cpu_us"].tolist()[0] == 60.0 and np.isnan(steps["cpu_us"].tolist()[1])
    assert steps["env_step_cpu_us"].tolist()[0] == 45.5  # two env steps, summed like their walls
    assert steps["env_step_us"].tolist() == [60.0, 30.0]
    assert steps["inference_wait_cpu_us"].tolist()[0] == 0.5
    assert np.isnan(steps["env_step_cpu_us"].tolist()[1])


def test_gap_markers_fill_the_step_they_open():
    # the second step on thread 1 records 12.5 us of CPU since the first closed; thread 2's only
    # step has no earlier one, so no figure
    rows = [
        ("archsim::inference_step#batch_size=4", 1, 0.0, 100.0),
        ("archsim::inference_step#batch_size=4", 1, 150.0, 100.0),
        ("archsim::cpu_gap#us=12.5", 1, 150.0, 1.0),
        ("archsim::learner_step#batch_size=2", 2, 0.0, 300.0),
    ]
    steps, _, unknown = build_steps(Path("t.json"), _annotations(rows))
    assert unknown == 0
    inference = steps[steps.role == "inference"].sort_values("start_us")
    assert np.isnan(inference["gap_cpu_us"].iloc[0]) and inference["gap_cpu_us"].iloc[1] == 12.5
    assert np.isnan(steps[steps.role == "learner"]["gap_cpu_us"].iloc[0])


def test_a_cpu_marker_that_is_not_a_number_names_the_file():
    rows = [
        ("archsim::actor_step#actor=0", 1, 0.0, 10.0),
        ("archsim::cpu#us=lots", 1, 8.0, 1.0),
    ]
    with pytest.raises(ArchsimError, match=r"t\.json.*CPU-time marker 'archsim::cpu#us=lots'"):
        build_steps(Path("t.json"), _annotations(rows))
