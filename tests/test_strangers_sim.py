"""Simulating traces of loops written the way users write them (archsim.sim.sequential): an
on-policy loop's actor steps that step no environment (A2C's bootstrap value forward after each
rollout, captured by ``capture run`` as an actor step with an ``act`` and no ``env_step``)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from archsim.hw import load_hw
from archsim.sim.config import SimConfig
from archsim.sim.profiler_cost import without_profiler_cost
from archsim.sim.run import simulate
from archsim.sim.step_work import whole_steps
from archsim.trace import load

DQN = Path(__file__).resolve().parents[1] / "traces" / "dqn-pong-cpu"
UPDATES_PER_STEP = 8.0 / 32  # the bundled DQN: a batch of 32 every 4 env steps


def _mean_work_s(trace, role: str) -> float:
    """Mean CPU seconds of a step of ``role`` and the loop code before it, profiler cost out."""
    steps = whole_steps(without_profiler_cost(trace).steps)
    rows = steps[steps["role"] == role]
    return float((rows["cpu_us"] + rows["gap_cpu_us"].fillna(0.0)).mean()) * 1e-6


def _without_env_step(trace, every: int):
    """``trace`` with every ``every``-th actor step made an act-only step (no env_step phase)."""
    steps = trace.steps.copy()
    rows = steps.index[steps["role"] == "actor"][::every]
    steps.loc[rows, ["env_step_us", "env_step_cpu_us"]] = np.nan
    return dataclasses.replace(trace, steps=steps)


@pytest.mark.parametrize("every", [1_000_000, 4, 2])
def test_actor_steps_without_an_env_step_are_work_of_the_env_steps(every):
    """On a CPU-only target an env step costs the actor steps' total work over the steps that
    stepped an env, plus its share of updates: the mean actor step over the share of them with an
    env step. Counted as env steps themselves (as they were), an A2C capture with a bootstrap act
    after every 5 env steps was simulated 13% faster than its work allows (SB3 A2C on CartPole:
    2,085 env steps/s on --hw local against 1,850 with them counted as work)."""
    trace = _without_env_step(load(DQN), every)
    hw = load_hw("dgx1-v100").model_copy(update={"gpu": None})
    m = simulate(trace, hw, SimConfig(loop="sequential")).metrics
    steps = whole_steps(without_profiler_cost(trace).steps)
    actor = steps[steps["role"] == "actor"]
    share = float(actor["env_step_us"].notna().mean())
    assert share == pytest.approx(1.0 - 1.0 / every, abs=0.05)
    per_env_step = _mean_work_s(trace, "actor") / share + UPDATES_PER_STEP * _mean_work_s(
        trace, "learner"
    )
    assert m["env_steps_per_s"] == pytest.approx(hw.cpu.thread_speed_rel / per_env_step, rel=1e-6)


def test_act_only_steps_never_speed_the_loop_up():
    """Turning some env steps into act-only steps (the same work, fewer env steps) can only lower
    the env steps per second, on a GPU target too (their act forward is priced per env step)."""
    hw = load_hw("dgx1-v100")
    base = simulate(load(DQN), hw, SimConfig(loop="sequential")).metrics["env_steps_per_s"]
    fewer = simulate(_without_env_step(load(DQN), 3), hw, SimConfig(loop="sequential")).metrics
    assert fewer["env_steps_per_s"] < base
