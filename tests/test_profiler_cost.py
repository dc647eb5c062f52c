"""The profiler's own cost: markers time the steps a capture does not record, and the simulator
scales the profiled CPU times to those unprofiled medians (hand-worked factors)."""

from __future__ import annotations

import time

import numpy as np
import pandas as pd
import pytest
import torch

import archsim
from archsim.capture.unprofiled import STEP_KEY, timing_unprofiled_steps
from archsim.sim.profiler_cost import MIN_STEPS, profiler_scale, without_profiler_cost
from archsim.trace.format import Trace


def test_markers_time_only_unprofiled_steps_and_sum_repeated_phases():
    with timing_unprofiled_steps() as times:
        for _ in range(3):
            with archsim.step("actor", actor=0, batch_size=2):
                for _ in range(2):  # two envs per actor step: one figure per step, summed
                    with archsim.phase("env_step"):
                        torch.ones(64).sum()
        with torch.profiler.profile(), archsim.step("actor", actor=0), archsim.phase("env_step"):
            torch.ones(64).sum()  # recorded by the profiler: not an unprofiled sample
        with archsim.phase("act"):
            pass  # outside any step: nothing to add it to
        try:
            with archsim.step("learner"):
                raise RuntimeError("interrupted")
        except RuntimeError:
            pass  # an interrupted step is not a sample
    assert {key: len(v) for key, v in times.samples.items()} == {
        ("actor", STEP_KEY): 3,
        ("actor", "env_step"): 3,
    }
    summary = times.summary()
    assert summary["actor"]["env_step"]["steps"] == 3
    assert 0 < summary["actor"]["env_step"]["median_us"] <= summary["actor"][STEP_KEY]["median_us"]
    # outside a capture the markers are the shared no-op again
    assert archsim.step("actor") is archsim.phase("act")


def profiled_trace(act_cpu_us: list[float], unprofiled: dict) -> Trace:
    n = len(act_cpu_us)
    steps = pd.DataFrame(
        {
            "step_id": np.arange(n),
            "role": "actor",
            "dur_us": 5000.0,
            "cpu_us": [a + 1000.0 for a in act_cpu_us],
            "act_us": 4000.0,
            "act_cpu_us": act_cpu_us,
            "env_step_cpu_us": 1000.0,
        }
    )
    meta = {"capture": {"unprofiled_cpu_us": unprofiled}}
    return Trace(meta=meta, ops=pd.DataFrame({"op_id": []}), steps=steps)


def test_profiled_cpu_is_scaled_to_the_unprofiled_median():
    # profiled act medians 1,500 us, unprofiled 1,000 us over 50 steps: factor 2/3. The step as a
    # whole: profiled 2,500, unprofiled 2,000: 0.8. env_step's unprofiled median is higher than its
    # profiled one (noise): left alone. replay_insert has no profiled column: nothing to scale.
    act = [1400.0, 1500.0, 1600.0] * 4
    unprofiled = {
        "actor": {
            "act": {"median_us": 1000.0, "steps": 50},
            STEP_KEY: {"median_us": 2000.0, "steps": 50},
            "env_step": {"median_us": 1200.0, "steps": 50},
            "replay_insert": {"median_us": 10.0, "steps": 50},
        }
    }
    trace = profiled_trace(act, unprofiled)
    assert profiler_scale(trace) == {
        ("actor", "act_cpu_us"): pytest.approx(2 / 3),
        ("actor", "cpu_us"): pytest.approx(0.8),
    }
    out = without_profiler_cost(trace)
    assert out.steps["act_cpu_us"].tolist() == pytest.approx([a * 2 / 3 for a in act])
    assert out.steps["cpu_us"].tolist() == pytest.approx([(a + 1000.0) * 0.8 for a in act])
    assert out.steps["env_step_cpu_us"].tolist() == [1000.0] * len(act)
    assert out.steps["act_us"].tolist() == [4000.0] * len(act)  # wall time is not touched
    assert trace.steps["act_cpu_us"].tolist() == act  # the input trace is unchanged


def test_the_mean_is_used_where_the_capture_stored_it():
    # profiled act: mean 1,500 us; the unprofiled steps' mean 900 (median 1,000): factor 0.6, the
    # statistic the simulator charges (the mean of CPU time)
    act = [1400.0, 1500.0, 1600.0] * 4
    unprofiled = {"actor": {"act": {"median_us": 1000.0, "mean_us": 900.0, "steps": 10}}}
    assert profiler_scale(profiled_trace(act, unprofiled)) == {
        ("actor", "act_cpu_us"): pytest.approx(0.6)
    }


def test_summary_holds_median_and_mean():
    with timing_unprofiled_steps() as times:
        for spin_ms in (1, 1, 4):
            with archsim.step("learner"):
                deadline = time.thread_time() + spin_ms / 1000
                while time.thread_time() < deadline:
                    pass
    figures = times.summary()["learner"][STEP_KEY]
    assert figures["steps"] == 3
    assert figures["mean_us"] > figures["median_us"] >= 1000.0  # one 4 ms step pulls the mean up


def test_too_few_samples_or_no_figures_leave_the_trace_alone():
    few = {"actor": {"act": {"median_us": 1000.0, "steps": MIN_STEPS - 1}}}
    trace = profiled_trace([1500.0] * 12, few)
    assert profiler_scale(trace) == {}
    assert without_profiler_cost(trace) is trace
    short = profiled_trace(
        [1500.0] * (MIN_STEPS - 1), {"actor": {"act": {"median_us": 1.0, "steps": 99}}}
    )
    assert profiler_scale(short) == {}
    bare = Trace(meta={}, ops=pd.DataFrame({"op_id": []}), steps=pd.DataFrame({"step_id": []}))
    assert without_profiler_cost(bare) is bare
