"""capture run's markers' own CPU: measured in the process (archsim.capture.marker_cost) and taken
out of each step by simulate (archsim.sim.marker_cost), hand-worked."""

from __future__ import annotations

import copy

import pandas as pd
import pytest
import torch

from archsim.capture.auto_markers import active_marker
from archsim.capture.marker_cost import measure_marker_cost
from archsim.sim.config import LOOP_TRACE, SimConfig
from archsim.sim.marker_cost import marker_cost, without_marker_cost
from archsim.sim.run import simulate
from archsim.trace.format import Trace
from archsim.trace.info import format_summary, summarize
from tests.test_sim_sequential_workers import _cpu_hw

ACTOR_US, ACTOR_GAP_US, ACTOR_PHASES_US = 300.0, 50.0, 200.0  # env_step 100 + act 100
LEARNER_US, LEARNER_GAP_US, LEARNER_PHASES_US = 1000.0, 40.0, 800.0  # train_forward
COST = {"actor": {"step_us": 30.0, "gap_us": 20.0}, "learner": {"step_us": 100.0, "gap_us": 10.0}}


def _trace(cost: dict | None = None, iterations: int = 16) -> Trace:
    """A one-thread loop: an actor step every iteration, a learner step every second one."""
    rows = []
    for i in range(iterations):
        rows.append(
            {"role": "actor", "actor": 0, "pid": 1, "tid": 1, "batch_size": 1, "dur_us": 400.0,
             "cpu_us": ACTOR_US, "gap_cpu_us": ACTOR_GAP_US, "env_step_us": 120.0,
             "env_step_cpu_us": 100.0, "act_us": 120.0, "act_cpu_us": 100.0}
        )  # fmt: skip
        if i % 2 == 0:
            rows.append(
                {"role": "learner", "actor": -1, "pid": 1, "tid": 1, "batch_size": 32,
                 "dur_us": 1200.0, "cpu_us": LEARNER_US, "gap_cpu_us": LEARNER_GAP_US,
                 "train_forward_us": 900.0, "train_forward_cpu_us": LEARNER_PHASES_US}
            )  # fmt: skip
    meta = {"capture": {"marker_cpu_us": cost}} if cost is not None else {}
    return Trace(meta=meta, ops=pd.DataFrame(), steps=pd.DataFrame(rows))


def _env_steps_per_s(trace: Trace) -> float:
    result = simulate(trace, _cpu_hw(), SimConfig(loop=LOOP_TRACE))
    assert result.engine == "sequential"
    return result.metrics["env_steps_per_s"]


def test_the_calibration_measures_a_positive_bounded_cost_in_thread_cpu_time():
    """The default clock is the thread's. Bounds: a marker path is Python bookkeeping and CPU clock
    reads, 5-50 us a step on the development VM; 2 ms would be a measurement of something else."""
    cost = measure_marker_cost(iterations=100, repeats=1)
    assert set(cost) == {"actor", "learner"}
    for figures in cost.values():
        assert 0 < figures["step_us"] < 2000 and 0 < figures["gap_us"] < 2000
    # every patch is undone: the calibration leaves no marker behind for the program's
    assert active_marker() is None
    assert not hasattr(torch.nn.Module.__call__, "__wrapped__")


def test_a_trace_with_the_field_simulates_faster_by_the_figures():
    """Per env step without the field: actor 300 + 50, half a learner step (1000 + 40) / 2, 870 us.
    With it: actor 270 + 30, learner (900 + 30) / 2, 765 us: 1e6/765 instead of 1e6/870."""
    assert _env_steps_per_s(_trace()) == pytest.approx(1e6 / 870)
    assert _env_steps_per_s(_trace(COST)) == pytest.approx(1e6 / 765)


def test_a_step_keeps_its_phases_cpu_and_a_gap_never_goes_below_zero():
    cost = {"actor": {"step_us": 500.0, "gap_us": 80.0}}
    steps = without_marker_cost(_trace(cost)).steps
    actor = steps[steps["role"] == "actor"]
    assert (actor["cpu_us"] == ACTOR_PHASES_US).all() and (actor["gap_cpu_us"] == 0.0).all()
    learner = steps[steps["role"] == "learner"]
    assert (learner["cpu_us"] == LEARNER_US).all()  # no figures for the learner: unchanged


def test_a_trace_without_the_field_is_left_as_it_was():
    trace = _trace()
    assert without_marker_cost(trace) is trace
    zero = _trace({"actor": {"step_us": 0.0, "gap_us": -3.0}})  # nothing positive to take out
    assert marker_cost(zero) == {} and without_marker_cost(zero) is zero
    original = copy.deepcopy(_trace(COST).steps)
    corrected = _trace(COST)
    without_marker_cost(corrected)
    pd.testing.assert_frame_equal(corrected.steps, original)  # a copy: the trace is not changed


def test_trace_info_says_what_is_taken_out():
    text = format_summary(summarize(_trace(COST)))
    assert "actor 30.0 us a step + 20.0 us before it" in text
    assert "learner 100.0 us a step + 10.0 us before it" in text
    assert "capture markers" not in format_summary(summarize(_trace()))
