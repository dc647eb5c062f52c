"""Take ``capture run``'s own markers' CPU out of a trace's steps, as measured in the captured process.

``capture run`` times, in the program's own process before it starts, the CPU its patched calls and
step bookkeeping add to one actor step and one learner step, inside the step and between steps
(``meta.capture.marker_cpu_us``: ``{role: {"step_us", "gap_us"}}``, archsim.capture.marker_cost;
the step parts scaled to the cost measured on the program's own steps when the run went on long
enough after its last window, archsim.capture.bare_stretches).
That CPU is archsim's, not the program's: each step of a role loses ``step_us`` from its ``cpu_us``
and ``gap_us`` from its ``gap_cpu_us``, after the profiler's cost is out (archsim.sim.profiler_cost:
the unprofiled steps it scales to still ran the markers). A step's CPU never drops below the CPU of
the phases it holds (their own marker cost is small, a few us, and is left in), a gap never below
zero. Traces without the field (older captures, bundled workloads, foreign traces) are unchanged.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from archsim.trace.schema import PHASES

META_KEY = "marker_cpu_us"


def marker_cost(trace) -> dict[str, dict[str, float]]:
    """{role: {"step_us", "gap_us"}} the capture measured, positive figures only; empty if none."""
    capture = (trace.meta or {}).get("capture") or {}
    found: dict[str, dict[str, float]] = {}
    for role, figures in (capture.get(META_KEY) or {}).items():
        kept = {k: float(v) for k, v in (figures or {}).items() if k in ("step_us", "gap_us")}
        kept = {k: v for k, v in kept.items() if v > 0}
        if kept:
            found[role] = kept
    return found


def without_marker_cost(trace):
    """``trace`` with each step's markers' CPU taken out (a copy); the same object when the trace
    carries no figures."""
    cost = marker_cost(trace)
    steps = trace.steps
    if not cost or "role" not in steps:
        return trace
    steps = steps.copy()
    phase_columns = [f"{p}_cpu_us" for p in PHASES if f"{p}_cpu_us" in steps]
    for role, figures in cost.items():
        rows = (steps["role"] == role).to_numpy()
        if not rows.any():
            continue
        if "cpu_us" in steps and figures.get("step_us"):
            cpu = steps.loc[rows, "cpu_us"].to_numpy(dtype=float)
            inside = steps.loc[rows, phase_columns].to_numpy(dtype=float)
            floor = np.nansum(inside, axis=1) if phase_columns else np.zeros(len(cpu))
            # a cut step's NaN stays NaN (np.maximum keeps it); never below its own phases' CPU
            steps.loc[rows, "cpu_us"] = np.maximum(cpu - figures["step_us"], floor)
        if "gap_cpu_us" in steps and figures.get("gap_us"):
            gap = steps.loc[rows, "gap_cpu_us"].to_numpy(dtype=float)
            steps.loc[rows, "gap_cpu_us"] = np.maximum(gap - figures["gap_us"], 0.0)
    return dataclasses.replace(trace, steps=steps)
