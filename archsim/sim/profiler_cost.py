"""Take the profiler's own cost out of a trace's recorded CPU times.

A capture made with ``archsim.capture`` records, next to its profiled steps, the mean and median CPU
time per step of the steps it ran unprofiled (``meta.capture.unprofiled_cpu_us``, per role and phase;
see archsim.capture.unprofiled). A multi-process R2D2 capture records the first half of its run and
times the steps of the second half with the profiler stopped (workloads/r2d2/seed/profiling.py), so
the figures come from the same processes under the same load. For each (role, phase)
with both, the profiled ``<phase>_cpu_us`` (and the step's ``cpu_us``) are scaled by ``unprofiled
mean / profiled mean`` (medians for captures that stored no mean): the same work without the
profiler's bookkeeping. Ratios above 1 (noise: profiling never makes work cheaper) are not
applied, and a phase needs MIN_STEPS samples on each side. Traces without the figures (ingested
foreign traces, older multi-process captures) are left as they are.
"""

from __future__ import annotations

import dataclasses

from archsim.capture.unprofiled import STEP_KEY

# Samples needed on each side for a mean or median to mean something (a design choice: a profiled
# window is 8 steps, so this asks for at least one window of them).
MIN_STEPS = 8


def profiler_scale(trace) -> dict[tuple[str, str], float]:
    """{(role, cpu column): factor <= 1} for the columns to deflate; empty when nothing applies."""
    capture = (trace.meta or {}).get("capture") or {}
    unprofiled = capture.get("unprofiled_cpu_us") or {}
    steps = trace.steps
    scale: dict[tuple[str, str], float] = {}
    for role, phases in unprofiled.items():
        rows = steps[steps["role"] == role]
        for name, figures in (phases or {}).items():
            column = "cpu_us" if name == STEP_KEY else f"{name}_cpu_us"
            if column not in rows or int(figures.get("steps", 0)) < MIN_STEPS:
                continue
            profiled = rows[column].dropna()
            # the statistic the simulator charges (archsim.sim.step_work.typical_us: the mean of
            # CPU time); captures from before the mean was stored give medians only
            if "mean_us" in figures:
                unprofiled_us, profiled_us = float(figures["mean_us"]), float(profiled.mean())
            else:
                unprofiled_us, profiled_us = float(figures["median_us"]), float(profiled.median())
            if len(profiled) < MIN_STEPS or not profiled_us > 0:
                continue
            ratio = unprofiled_us / profiled_us
            if 0 < ratio < 1:
                scale[(role, column)] = ratio
    return scale


def without_profiler_cost(trace):
    """``trace`` with its steps' CPU columns scaled by :func:`profiler_scale` (a copy; the trace
    itself is not changed). The same object when nothing applies."""
    scale = profiler_scale(trace)
    if not scale:
        return trace
    steps = trace.steps.copy()
    for (role, column), factor in scale.items():
        rows = steps["role"] == role
        steps.loc[rows, column] = steps.loc[rows, column].to_numpy(dtype=float) * factor
    return dataclasses.replace(trace, steps=steps)
