"""Where an Ape-X run's CPU goes (issue 14 item 5): the actor step's CPU outside its phases charged
by the simulator when the capture fetches parameters inside the step, and the per-env-step split of
a capture's measured CPU (archsim.validate.apex_cpu), both against hand-worked cases."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.cpu_speed import phase_speed
from archsim.perf.network import stack_seconds_per_message
from archsim.sim.actor_work import (
    PARAM_FETCH_EVERY_ENV_STEPS,
    derive_actor_work,
    unphased_step_us,
)
from archsim.sim.config import SimConfig
from archsim.trace.format import Trace
from archsim.validate.apex_cpu import cpu_budget, unprofiled_means_us

LOCAL_PHASES = ["env_step", "preprocess", "act", "replay_insert"]


def _actor_steps(with_cpu: bool = True) -> pd.DataFrame:
    """Four actor steps: env 200, preprocess 100, act 500 us of CPU each; the last also inserts
    (400 us) and fetches parameters outside any phase, so its step takes 2,600 us against 1,000.
    Outside the phases: 200, 200, 200 and 1,400 us, a mean of 500."""
    rows = []
    for i in range(4):
        last = i == 3
        row = {"role": "actor", "actor": 0, "pid": 1, "tid": 1, "batch_size": 1,
               "dur_us": 3000.0, "env_step_us": 250.0, "preprocess_us": 120.0, "act_us": 600.0,
               "replay_insert_us": 450.0 if last else float("nan")}  # fmt: skip
        if with_cpu:
            row |= {"cpu_us": 2600.0 if last else 1000.0, "env_step_cpu_us": 200.0,
                    "preprocess_cpu_us": 100.0, "act_cpu_us": 500.0,
                    "replay_insert_cpu_us": 400.0 if last else float("nan")}  # fmt: skip
        rows.append(row)
    return pd.DataFrame(rows)


def _trace(settings: dict, with_cpu: bool = True) -> Trace:
    meta = {"workload": {"name": "apex", "settings": settings}}
    return Trace(meta=meta, ops=pd.DataFrame(), steps=_actor_steps(with_cpu))


def test_unphased_step_cpu_by_hand():
    assert unphased_step_us(_actor_steps(), LOCAL_PHASES) == pytest.approx(500.0)
    # a step without its own CPU (cut by the end of recording) is left out: 3 rows of 200
    steps = _actor_steps()
    steps.loc[3, "cpu_us"] = float("nan")
    assert unphased_step_us(steps, LOCAL_PHASES) == pytest.approx(200.0)
    # phases that hold more than their step (rounding) never make negative work
    steps["cpu_us"] = 700.0
    assert unphased_step_us(steps, LOCAL_PHASES) == 0.0
    assert unphased_step_us(_actor_steps(with_cpu=False), LOCAL_PHASES) == 0.0


def test_fetch_inside_the_step_replaces_the_modelled_copy():
    """Local inference: with ``param_fetch_frames`` in the settings (an Ape-X capture) each env
    step carries the recorded 500 us outside the phases, at the interpreter's speed, instead of one
    modelled parameter copy per PARAM_FETCH_EVERY_ENV_STEPS env steps."""
    hw = load_hw("local")
    config = SimConfig(inference="local")
    fetched = derive_actor_work(_trace({"param_fetch_frames": 400}), hw, config)
    modelled = derive_actor_work(_trace({}), hw, config)
    extra_s = 500e-6 * hw.cpu.thread_speed_rel / phase_speed(hw.cpu, "other")
    copy_s = modelled.param_copy_capture_s / PARAM_FETCH_EVERY_ENV_STEPS
    assert fetched.actor_step_cpu_s - modelled.actor_step_cpu_s == pytest.approx(
        [extra_s - copy_s] * 4
    )
    assert extra_s > copy_s > 0  # the recorded fetch costs more than the modelled copy


def test_without_step_cpu_the_modelled_copy_stays():
    hw = load_hw("local")
    config = SimConfig(inference="local")
    a = derive_actor_work(_trace({"param_fetch_frames": 400}, with_cpu=False), hw, config)
    b = derive_actor_work(_trace({}, with_cpu=False), hw, config)
    assert a.actor_step_cpu_s == pytest.approx(b.actor_step_cpu_s)


S = 1_000_000_000  # ns


def _capture(tmp_path, placement: str = "server", send_every: int | None = 16):
    """Two actors inserting 16 transitions unprofiled, actor-0 at 0, 1, 2 s and actor-1 at 0.5,
    1.5, 2.5 s: each 32 transitions over 2 s, so 32 env steps/s, and the window every actor is
    timed is 0.5 s to 2 s (48 env steps). In it: 3 inserts of 100 us replay work, a sample
    request (600 us), two priority updates (60 + 40 us) and a parameter request (960 us on the
    learner); the insert at 2 s is outside. The run's processes used 0.1 CPUs throughout."""
    settings = {"replay_placement": placement}
    if send_every is not None:
        settings["send_every"] = send_every
    proc = {"unprofiled_cpu_us": {}}
    actor = {"step": 1200, "env_step": 300, "preprocess": 100, "act": 600, "replay_insert": 1600}
    proc["unprofiled_cpu_us"]["actor"] = {k: {"steps": 10, "mean_us": v} for k, v in actor.items()}
    learner = {"unprofiled_cpu_us": {"learner": {"step": {"steps": 5, "mean_us": 40_000}}}}
    meta = {"workload": {"name": "apex", "settings": settings},
            "capture": {"processes": [proc, learner]}}  # fmt: skip
    (tmp_path / "meta.yaml").write_text(yaml.safe_dump(meta))
    rows = []
    for src, t in (("actor-0", 0), ("actor-1", 0.5), ("actor-0", 1), ("actor-1", 1.5),
                   ("actor-0", 2), ("actor-1", 2.5)):  # fmt: skip
        rows.append(("insert", src, "replay-0", 16, 100.0, t))
    rows += [("sample_request", "learner-0", "replay-0", 0, 600.0, 1.2)]
    rows += [("priority_update", "learner-0", "replay-0", 32, 60.0, 1.3)]
    rows += [("priority_update", "learner-0", "replay-0", 32, 40.0, 1.4)]
    rows += [("param_request", "actor-0", "learner-0", 0, 960.0, 0.8)]
    table = pd.DataFrame(
        [{"kind": k, "src": s, "dst": d, "bytes": 100, "items": n, "serialize_us": 1.0,
          "decode_us": 1.0, "server_cpu_us": c, "latency_us": 10.0, "round_trip_us": float("nan"),
          "sent_unix_ns": int(t * S), "profiled": False} for k, s, d, n, c, t in rows]
    )  # fmt: skip
    table.to_csv(tmp_path / "messages.csv", index=False)
    return [[0, 0.0, 0.0], [3 * S, 6.0, 0.3]]


def test_cpu_budget_by_hand(tmp_path):
    b = cpu_budget(tmp_path, _capture(tmp_path))
    assert b.window_s == pytest.approx(1.5)
    assert b.env_steps == pytest.approx(48.0)
    assert b.measured_us == pytest.approx(0.1 * 1.5e6 / 48)  # 3,125
    assert b.actor_phases_us == pytest.approx(300 + 100 + 600 + 1600 / 16)  # 1,100
    assert b.actor_unphased_us == pytest.approx(100.0)
    assert b.learner_us == pytest.approx(2 * 40_000 / 48)
    assert b.replay_us == pytest.approx((300 + 600 + 100) / 48)
    assert b.param_serve_us == pytest.approx(960 / 48)
    assert b.unaccounted_us == pytest.approx(3125 - 1100 - 100 - 80_000 / 48 - 1000 / 48 - 20)
    assert b.as_dict()["unaccounted_us"] == pytest.approx(b.unaccounted_us)


def test_cpu_budget_learner_placement_has_no_update_count(tmp_path):
    b = cpu_budget(tmp_path, _capture(tmp_path, placement="learner"))
    assert math.isnan(b.learner_us) and math.isnan(b.unaccounted_us)
    assert b.actor_phases_us == pytest.approx(1100.0)


def test_cpu_budget_bad_meta(tmp_path):
    with pytest.raises(ArchsimError, match="send_every"):
        cpu_budget(tmp_path, _capture(tmp_path, send_every=None))
    (tmp_path / "meta.yaml").write_text("{")
    with pytest.raises(ArchsimError, match="meta.yaml"):
        cpu_budget(tmp_path, [])


def test_unprofiled_means_weight_processes_by_steps():
    meta = {"capture": {"processes": [
        {"unprofiled_cpu_us": {"actor": {"step": {"steps": 30, "mean_us": 1000}}}},
        {"unprofiled_cpu_us": {"actor": {"step": {"steps": 10, "mean_us": 2000}}}},
        {"unprofiled_cpu_us": {"learner": {"step": {"steps": 5, "mean_us": 9}}}},
    ]}}  # fmt: skip
    assert unprofiled_means_us(meta, "actor") == {"step": pytest.approx(1250.0)}


@settings(max_examples=40, deadline=None)
@given(
    phases_us=st.lists(st.tuples(*[st.floats(0.0, 5_000.0)] * 4), min_size=1, max_size=12),
    outside_us=st.lists(st.floats(0.0, 20_000.0), min_size=12, max_size=12),
)
def test_fetch_in_step_charges_the_whole_recorded_step(phases_us, outside_us):
    """On ``--hw local`` (every speed 1) an actor whose fetch is inside its step is charged, on
    average, its whole recorded step CPU plus one send's stack work: nothing the step recorded is
    dropped, nothing is counted twice."""
    hw = load_hw("local")
    assert hw.cpu.thread_speed_rel == 1.0
    rows = []
    for (env, pre, act, ins), out in zip(phases_us, outside_us[: len(phases_us)], strict=True):
        rows.append({"role": "actor", "actor": 0, "pid": 1, "tid": 1, "batch_size": 1,
                     "dur_us": 1e5, "env_step_us": env, "preprocess_us": pre, "act_us": act,
                     "replay_insert_us": ins, "env_step_cpu_us": env, "preprocess_cpu_us": pre,
                     "act_cpu_us": act, "replay_insert_cpu_us": ins,
                     "cpu_us": env + pre + act + ins + out})  # fmt: skip
    steps = pd.DataFrame(rows)
    meta = {"workload": {"name": "apex", "settings": {"param_fetch_frames": 400}}}
    work = derive_actor_work(
        Trace(meta=meta, ops=pd.DataFrame(), steps=steps), hw, SimConfig(inference="local")
    )
    stack_s = stack_seconds_per_message(hw.network)
    assert work.actor_step_cpu_s.mean() == pytest.approx(
        steps["cpu_us"].mean() * 1e-6 + stack_s, rel=1e-9, abs=1e-12
    )
