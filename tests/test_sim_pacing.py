"""The learner's default pacing and the frames per env step come from the trace (issue 11 items 3
and 5): the trace's meta, the replay ratio the run achieves, ``--replay-ratio none``, frames."""

from __future__ import annotations

import copy
import csv
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.sim.config import SimConfig
from archsim.sim.knobs import KNOB_BY_NAME, parse_knob
from archsim.sim.run import simulate, simulate_system
from archsim.trace import save
from archsim.trace.info import format_summary, summarize
from archsim.trace.pacing import frames_per_env_step, replay_limit, samples_per_insert
from tests.test_sim_support import machine, service_times, tiny_trace

# Nature DQN trains a batch of 32 every 4 env steps (Mnih et al. 2015, Extended Data Table 1).
DQN_SETTINGS = {"batch_size": 32, "train_every": 4}
SIM_SECONDS = 0.5


def _with_workload(trace, workload: dict):
    meta = copy.deepcopy(trace.meta)
    meta["workload"] = workload
    return type(trace)(meta=meta, ops=trace.ops, steps=trace.steps)


def _dqn_trace(**extra):
    return _with_workload(tiny_trace(), {"name": "dqn", "settings": dict(DQN_SETTINGS), **extra})


def test_pacing_from_meta_worked_by_hand():
    # DQN: 32 samples every 4 env steps = 8 per transition.
    assert samples_per_insert({"workload": {"name": "dqn", "settings": DQN_SETTINGS}})[0] == 8.0
    # R2D2: 1 sequence sampled per sequence inserted, one sequence per 20 - 10 = 10 env steps.
    r2d2 = {
        "name": "r2d2",
        "settings": {"replay_ratio": 1.0, "r2d2": {"sequence_length": 20, "sequence_overlap": 10}},
    }
    assert samples_per_insert({"workload": r2d2})[0] == pytest.approx(0.1)
    # What a capture writes wins over the settings; nothing known: None (unpaced).
    explicit = {"name": "dqn", "settings": DQN_SETTINGS, "samples_per_insert": 2.5}
    assert samples_per_insert({"workload": explicit})[0] == 2.5
    assert samples_per_insert({"workload": {"name": "alexnet", "settings": {}}})[0] is None
    assert samples_per_insert({})[0] is None


def test_frames_per_env_step_from_meta_and_one_when_unknown():
    assert frames_per_env_step({"workload": {"frames_per_env_step": 4}})[0] == 4.0
    assert frames_per_env_step({"workload": {"settings": {"frame_skip": 3}}})[0] == 3.0
    assert frames_per_env_step({"workload": {"name": "tiny", "settings": {}}})[0] == 1.0
    assert frames_per_env_step(None)[0] == 1.0
    # a capture of a bundled ALE workload made before its meta said: its action repeat, 4
    assert frames_per_env_step({"workload": {"name": "r2d2", "settings": {}}})[0] == 4.0


@pytest.mark.parametrize(
    ("workload", "field"),
    [
        ({"samples_per_insert": 0}, "workload.samples_per_insert"),
        ({"samples_per_insert": "fast"}, "workload.samples_per_insert"),
        ({"frames_per_env_step": float("nan")}, "workload.frames_per_env_step"),
        ({"name": "dqn", "settings": {"batch_size": 32, "train_every": 0}}, "train_every"),
    ],
)
def test_bad_pacing_meta_is_one_line_naming_the_field(workload, field):
    with pytest.raises(ArchsimError) as err:
        samples_per_insert({"workload": workload})
        frames_per_env_step({"workload": workload})
    assert field in str(err.value) and "\n" not in str(err.value)


@pytest.mark.parametrize("inference", ["central", "local"])
def test_fast_learner_samples_the_workloads_ratio(inference):
    """With a learner faster than the workload needs, the default (the trace's pacing) holds it at 8
    samples per inserted transition; unpaced, the same learner samples more."""
    trace, hw = _dqn_trace(), load_hw("dgx1-v100")
    config = SimConfig(actors=1, inference=inference, sim_seconds=SIM_SECONDS)
    free = simulate(trace, hw, config.replace(replay_ratio=None)).metrics
    assert free["samples_per_insert"] > 8 * 1.5  # fast enough to need pacing
    paced = simulate(trace, hw, config)
    assert paced.config.replay_ratio == 8.0 and paced.notes == ()
    m = paced.metrics
    inserted = m["env_steps_per_s"] * SIM_SECONDS
    # The limiter keeps sampled - 8 x inserted within its slack (4 batches of 32); the window's
    # counts may also differ from the limiter's by one update in flight.
    slack = config.replay_slack_batches * 32 + 32
    assert abs(m["samples_per_insert"] - 8.0) <= slack / inserted
    assert m["samples_per_insert"] == pytest.approx(8.0, rel=0.05)


def test_replay_ratio_none_runs_unpaced_and_trace_default_without_pacing_notes(trace_dir, capsys):
    hw = load_hw("dgx1-v100")
    config = SimConfig(actors=4, sim_seconds=SIM_SECONDS)
    explicit = simulate(_dqn_trace(), hw, config.replace(replay_ratio=None))
    assert explicit.config.replay_ratio is None and explicit.notes == ()
    # A trace that does not say: unpaced, the same run as an explicit none, and one note.
    unknown = simulate(tiny_trace(), hw, config)
    assert unknown.config.replay_ratio is None and len(unknown.notes) == 1
    assert unknown.metrics == simulate(tiny_trace(), hw, config.replace(replay_ratio=None)).metrics
    # The CLI prints that note as one stderr line, and none for --replay-ratio none.
    for flag, notes in (([], 1), (["--replay-ratio", "none"], 0)):
        out = trace_dir.parent / f"run{len(flag)}"
        args = ["simulate", str(trace_dir), "--hw", "dgx1-v100", "--actors", "4"]
        assert main([*args, "--sim-seconds", "0.05", *flag, "--out", str(out)]) == 0
        err = capsys.readouterr().err.splitlines()
        assert len(err) == notes and all("unpaced" in line for line in err)
        assert json.loads((out / "metrics.json").read_text())["replay_ratio"] is None


def test_replay_ratio_knob_words():
    knob = KNOB_BY_NAME["replay_ratio"]
    assert parse_knob(knob, "trace") == "trace"
    assert parse_knob(knob, "none") is None
    assert parse_knob(knob, "8") == 8.0
    assert SimConfig().replay_ratio == "trace"
    for bad in ("fast", -1.0, 0.0, float("nan"), True):
        with pytest.raises(ArchsimError, match="--replay-ratio"):
            SimConfig(replay_ratio=bad)


@pytest.mark.parametrize(
    ("workload", "frames"),
    [
        ({"name": "dqn", "settings": DQN_SETTINGS, "frames_per_env_step": 3}, 3),
        ({"name": "dqn", "settings": DQN_SETTINGS}, 4),  # the bundled DQN's ALE action repeat
        ({"name": "cartpole", "settings": {}}, 1),  # a trace that does not say
    ],
)
def test_frames_are_env_steps_times_frames_per_env_step(workload, frames):
    trace = _with_workload(tiny_trace(), workload)
    config = SimConfig(actors=4, sim_seconds=SIM_SECONDS)
    m = simulate(trace, load_hw("dgx1-v100"), config).metrics
    assert m["env_steps_per_s"] > 0
    assert m["frames_per_s"] == frames * m["env_steps_per_s"]
    assert m["frames_per_joule"] == pytest.approx(
        m["frames_per_s"] * SIM_SECONDS / m["energy_j"], rel=1e-12
    )


def test_trace_info_says_pacing_and_frames(tmp_path):
    text = format_summary(summarize(_dqn_trace(frames_per_env_step=4)))
    assert "learner pacing: 8 samples per inserted transition" in text
    assert "frames per env step: 4" in text
    unknown = format_summary(summarize(tiny_trace()))
    assert "learner pacing: unknown, the simulator runs the learner unpaced" in unknown
    assert "frames per env step: 1 (not in the trace's meta" in unknown
    saved = save(_dqn_trace(), tmp_path / "dqn")
    assert main(["trace", "info", str(saved)]) == 0


def test_frames_source_says_why_when_the_capture_wrote_it():
    """capture run writes how it knew the frames per env step; trace info and the notes show it."""
    why = "ale_py AtariEnv frameskip 1 x MaxAndSkipEnv skip 4"
    meta = {"workload": {"frames_per_env_step": 4.0, "frames_per_env_step_source": why}}
    assert frames_per_env_step(meta) == (4.0, f"meta workload.frames_per_env_step: {why}")
    bare = {"workload": {"frames_per_env_step": 4.0}}
    assert frames_per_env_step(bare) == (4.0, "meta workload.frames_per_env_step")


@settings(max_examples=12, deadline=None)
@given(
    ratio=st.floats(min_value=0.5, max_value=16.0),
    actors=st.integers(min_value=1, max_value=4),
    inference=st.sampled_from(["central", "local"]),
)
def test_a_fast_learner_samples_exactly_the_ratio(ratio, actors, inference):
    """Invariant: with a learner that could sample far more (a 10 us step for 32 samples against
    250 us env steps), the achieved samples per inserted transition is the ratio, within what the
    limiter lets either side run ahead (its slack) plus one batch in flight and one request per
    actor not yet inserted."""
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=10e-6, inference_s=20e-6)
    cfg = SimConfig(
        actors=actors, inference=inference, inference_batch=1, replay_ratio=ratio, sim_seconds=0.1
    )
    m = simulate_system(times, machine(8), cfg, 32).metrics
    inserted = m["env_steps_per_s"] * cfg.sim_seconds
    sampled = 32 * m["learner_updates_per_s"] * cfg.sim_seconds
    # archsim.sim.run: the slack is 4 x max(learner batch, ratio x observations per insert (1))
    slack = cfg.replay_slack_batches * max(32, ratio)
    assert inserted > 100
    assert abs(sampled - ratio * inserted) <= slack + 32 + ratio * actors
    assert m["samples_per_insert"] == pytest.approx(sampled / inserted, rel=1e-9)


def test_sweep_rows_have_env_steps_beside_frames(tmp_path):
    trace = save(_dqn_trace(), tmp_path / "dqn")  # the bundled DQN: 4 frames per env step
    out = tmp_path / "sweep"
    args = ["sweep", str(trace), "--hw", "dgx1-v100", "--actors", "1,2", "--sim-seconds", "0.05"]
    assert main([*args, "--no-progress", "--out", str(out)]) == 0
    with open(out / "sweep.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 2
    for row in rows:
        assert float(row["env_steps_per_s"]) > 0
        assert float(row["frames_per_s"]) == 4 * float(row["env_steps_per_s"])


def test_replay_limit_from_the_trace():
    # The bundled R2D2 trainer waits for data, its actors never do; DQN's one loop holds both sides.
    assert replay_limit({"workload": {"name": "r2d2"}}) == "learner"
    assert replay_limit({"workload": {"name": "dqn"}}) == "both"
    assert replay_limit({"workload": {"name": "cartpole", "replay_limit": "learner"}}) == "learner"
    assert replay_limit({}) == "both"
    with pytest.raises(ArchsimError, match="workload.replay_limit"):
        replay_limit({"workload": {"replay_limit": "actors"}})
    # simulate resolves --replay-limit trace (the default) as it does the ratio; a given word stays
    trace = _with_workload(tiny_trace(), {"name": "r2d2", "samples_per_insert": 0.5})
    hw, config = load_hw("dgx1-v100"), SimConfig(actors=4, sim_seconds=SIM_SECONDS)
    result = simulate(trace, hw, config)
    assert result.config.replay_limit == "learner" and result.config.replay_ratio == 0.5
    assert result.metrics["replay_insert_wait_mean_us"] == 0.0  # actors never wait for the learner
    both = simulate(trace, hw, config.replace(replay_limit="both"))
    assert both.config.replay_limit == "both"
