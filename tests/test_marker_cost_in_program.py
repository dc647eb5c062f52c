"""The markers' cost measured on the program's own steps (archsim.capture.bare_stretches): marked
and bare stretches alternate on a real marked loop, and the figure scales the calibration."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from archsim.capture import unprofiled
from archsim.capture.auto_markers import auto_markers
from archsim.capture.bare_stretches import (
    MIN_PAIRS,
    BareStretches,
    in_program_cost,
    store_in_program_cost,
)
from archsim.capture.unprofiled import GAP_KEY, STEP_KEY

CALIBRATED = {
    "actor": {"step_us": 10.0, "gap_us": 5.0},
    "learner": {"step_us": 40.0, "gap_us": 4.0},
}


class _NoopEnv(gymnasium.Env):
    observation_space = gymnasium.spaces.Box(-1.0, 1.0, (4,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def step(self, action):
        return np.zeros(4, np.float32), 0.0, False, False, {}

    def reset(self, *, seed=None, options=None):
        return np.zeros(4, np.float32), {}


def _run_loop(env_steps: int, stretch: int) -> tuple[BareStretches, object, dict]:
    """A DQN-shaped loop, marked, bare stretches from its first env step: an acting forward and
    an env step every iteration, an update (forward on 32 rows, backward, SGD step) every second."""
    env, net = _NoopEnv(), torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.0)
    obs, batch = torch.zeros(1, 4), torch.zeros(32, 4)
    stretches = BareStretches(lambda: True, env_steps=stretch)
    with (
        unprofiled.timing_unprofiled_steps(gaps=True) as times,
        auto_markers(lambda: None, bare=stretches) as marker,
    ):
        for i in range(env_steps):
            with torch.no_grad():
                net(obs)
            env.step(0)
            if i % 2:
                net(batch + i).sum().backward()  # a new draw each update
                optimizer.step()
        counts = marker.counts
    assert marker._depth == 0  # a bare stretch cut by the end is closed
    return stretches, counts, times.summary()


def test_bare_stretches_alternate_count_as_marked_and_hold_no_steps():
    """47 env steps, stretches of 4, updates after odd env steps. The pairs start at the first env
    step after an optimizer step (2); then 4 marked (3-6), 4 bare (7-10), ..., six marked stretches
    (to 43-46) and five bare. Every env step and update counts (the bare ones' updates from their
    optimizer steps, 1 a learner step here); only the marked ones are steps, timed: 27 actor steps
    and 13 updates. (About 0.3 s of CPU, plus torch._dynamo's first import by the SGD step when no
    test before made it.)"""
    stretches, counts, summary = _run_loop(47, 4)
    assert len(stretches.marked_us) == 6 and len(stretches.bare_us) == 5
    assert stretches.bare_env_steps == 20
    assert counts.env_steps == counts.transitions == counts.actor_steps == 47
    assert counts.learner_steps == counts.optimizer_steps == 23 and counts.samples == 23 * 32
    assert summary["actor"][STEP_KEY]["steps"] == 27 and summary["learner"][STEP_KEY]["steps"] == 13
    assert stretches.marked_steps == [(4, 2)] * 6
    # no gap spans a bare stretch: the first step and the first after each stretch have none
    timed = summary["actor"][STEP_KEY]["steps"] + summary["learner"][STEP_KEY]["steps"]
    gaps = summary["actor"][GAP_KEY]["steps"] + summary["learner"][GAP_KEY]["steps"]
    assert gaps == timed - 1 - 5


def test_nothing_goes_bare_until_asked():
    env, net = _NoopEnv(), torch.nn.Linear(4, 2)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.0)
    stretches = BareStretches(lambda: False, env_steps=2)
    with auto_markers(lambda: None, bare=stretches) as marker:
        for i in range(20):
            net(torch.zeros(1, 4))
            env.step(0)
            net(torch.full((32, 4), float(i))).sum().backward()
            optimizer.step()
    assert marker.counts.env_steps == 20 and marker.counts.learner_steps == 20
    assert stretches.bare_env_steps == 0
    assert stretches.marked_us == [] and in_program_cost(stretches, CALIBRATED) is None


def _stretches(marked: list[float], bare: list[float], steps: tuple[int, int]) -> BareStretches:
    stretches = BareStretches(lambda: True, env_steps=10)
    stretches.marked_us, stretches.bare_us = marked, bare
    stretches.marked_steps = [steps] * len(marked)
    stretches.bare_env_steps = 10 * len(bare)
    return stretches


def test_the_step_figures_take_the_measured_cost_less_the_gaps_worked_by_hand():
    """Differences 100, 120, 110 (and an unpaired marked stretch): median 110 us per env step.
    Per env step the calibration holds 10 + 0.5 x 40 = 30 us inside steps and 5 + 0.5 x 4 = 7
    between them (10 actor, 5 learner steps a 10-env-step stretch). The gaps keep 7; the steps
    take 103: scale 103 / 30."""
    stretches = _stretches([400.0, 420.0, 410.0, 999.0], [300.0, 300.0, 300.0], (10, 5))
    cost = in_program_cost(stretches, CALIBRATED)
    assert cost["us_per_env_step"] == 110.0 and cost["pairs"] == 3
    assert cost["synthetic_us_per_env_step"] == 37.0
    assert cost["spread_us"] == [100.0, 120.0]
    assert cost["step_scale"] == pytest.approx(103 / 30, abs=1e-4)
    figures = cost["marker_cpu_us"]
    assert figures["actor"] == {"step_us": pytest.approx(10 * 103 / 30, abs=1e-3), "gap_us": 5.0}
    assert figures["learner"]["step_us"] == pytest.approx(40 * 103 / 30, abs=1e-3)
    per_env_step = sum(figures["actor"].values()) + 0.5 * sum(figures["learner"].values())
    assert per_env_step == pytest.approx(110.0, abs=1e-2)


def test_a_cost_below_the_gaps_takes_nothing_from_the_steps_and_too_few_pairs_change_nothing():
    cheap = in_program_cost(_stretches([303.0] * 3, [300.0] * 3, (10, 5)), CALIBRATED)
    assert cheap["step_scale"] == 0.0 and cheap["marker_cpu_us"]["actor"]["step_us"] == 0.0
    meta = {"marker_cpu_us": CALIBRATED}
    few = _stretches([400.0] * (MIN_PAIRS - 1), [300.0] * (MIN_PAIRS - 1), (10, 5))
    store_in_program_cost(meta, few)
    assert meta == {"marker_cpu_us": CALIBRATED}
    store_in_program_cost(meta, _stretches([400.0] * 3, [300.0] * 3, (10, 5)))
    assert meta["marker_cpu_us_synthetic"] == CALIBRATED
    assert meta["marker_cost_in_program"]["us_per_env_step"] == 100.0
    assert meta["marker_cpu_us"]["actor"]["gap_us"] == 5.0


def test_capture_run_measures_the_markers_on_the_program_and_keeps_its_counts(tmp_path, capsys):
    """The toy loop, 800 env steps, one window of 4 steps: after it, 64-step stretches alternate
    to the end (at least 3 pairs). The step figures are the calibration's scaled, the gaps its own;
    the pacing counts are the program's as without bare stretches: updates at even t >= 8 train on
    8 rows, samples from t = 10 on (395 updates) per transition from t = 9 on (791). (About 1 s of
    CPU.)"""
    from archsim.cli import main
    from archsim.trace.format import load
    from tests.capture_toy import toy_script

    out = tmp_path / "trace"
    schedule = ["--wait", "1", "--warmup", "1", "--active", "4", "--repeat", "1"]
    args = [str(toy_script(tmp_path)), "800", "train"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", *args]) == 0
    assert "ran unmarked" in capsys.readouterr().err
    trace = load(out)
    capture = trace.meta["capture"]
    cost = capture["marker_cost_in_program"]
    assert cost["pairs"] >= MIN_PAIRS and cost["bare_env_steps"] % 64 == 0
    synthetic, scaled = capture["marker_cpu_us_synthetic"], capture["marker_cpu_us"]
    for role in ("actor", "learner"):
        assert scaled[role]["gap_us"] == synthetic[role]["gap_us"]
        expected = synthetic[role]["step_us"] * cost["step_scale"]
        assert scaled[role]["step_us"] == pytest.approx(expected, rel=1e-3, abs=1e-3)
    assert trace.meta["workload"]["samples_per_insert"] == pytest.approx(395 * 8 / 791)
