"""Frames/s the PROFILED baseline run itself achieved, read from its trace's steps table.

Comparing it with the unprofiled measurement of the same configuration splits a baseline's error
into the capture's own overhead (profiled vs unprofiled run) and the model's error (prediction vs
the profiled run whose phase times it was given).
"""

from __future__ import annotations

import math

from archsim.validate.measure import FRAMESKIP


def capture_frames_per_s(trace: object, workload: str) -> float:
    """DQN: one thread runs actor and learner steps in turn, so a recorded step's wall time is the
    sum of the recorded step durations (4 frames per actor step). R2D2: every process records the
    first half of its run, so actor steps x envs per step over the span of actor step starts."""
    steps = trace.steps
    actors = steps[steps["role"] == "actor"]
    if len(actors) < 2:
        return math.nan
    if workload == "dqn":
        busy_s = steps.loc[steps["role"].isin(("actor", "learner")), "dur_us"].sum() * 1e-6
        return FRAMESKIP * len(actors) / busy_s
    span_s = (actors["start_us"].max() - actors["start_us"].min()) * 1e-6
    # each actor step before the last start is complete within the span; batch_size = envs stepped
    env_steps = actors["batch_size"].sum() - actors["batch_size"].iloc[-1]
    return FRAMESKIP * float(env_steps) / span_s
