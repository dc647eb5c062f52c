"""CPU work of a trace's recorded steps and phases: thread CPU time where the trace has it, wall time
otherwise.

A profiled phase's wall time holds its thread's waits as well as its work: a lock held by another
thread (the R2D2 learner's params lock), the GIL, a run queue on a busy core. The simulator models
those waits itself (its CPU threads, its queues), so it must be given work, not waits. Captures made
with archsim's markers record both (``<phase>_cpu_us``, ``cpu_us``); older traces and foreign ones
only the wall time, which then stands in for the work, row by row.
"""

from __future__ import annotations

import pandas as pd


def phase_work_us(rows: pd.DataFrame, phase: str) -> pd.Series:
    """Per row: ``<phase>_cpu_us`` where recorded, else ``<phase>_us`` (NaN where neither)."""
    wall = rows[f"{phase}_us"] if f"{phase}_us" in rows else pd.Series(float("nan"), rows.index)
    cpu_column = f"{phase}_cpu_us"
    if cpu_column not in rows:
        return wall.astype(float)
    return rows[cpu_column].astype(float).fillna(wall.astype(float))


def phases_work_us(rows: pd.DataFrame, phases: tuple[str, ...] | list[str]) -> pd.Series:
    """Per row: the work of ``phases`` summed (a phase missing from a row counts 0)."""
    total = pd.Series(0.0, index=rows.index)
    for phase in phases:
        total = total + phase_work_us(rows, phase).fillna(0.0)
    return total


def step_work_us(rows: pd.DataFrame) -> pd.Series:
    """Per row: the step's own ``cpu_us`` where recorded, else its wall ``dur_us``."""
    wall = rows["dur_us"].astype(float)
    if "cpu_us" not in rows:
        return wall
    return rows["cpu_us"].astype(float).fillna(wall)


def has_cpu_time(rows: pd.DataFrame, phase: str | None = None) -> bool:
    """True when some row records CPU time (of ``phase``, or of the whole step)."""
    column = "cpu_us" if phase is None else f"{phase}_cpu_us"
    return column in rows and bool(rows[column].notna().any())


def typical_us(values: pd.Series, cpu_time: bool) -> float:
    """One figure for "work per step" in a throughput model (NaN rows skipped; NaN when none).

    CPU time: the mean. A thread's throughput is steps / total work, and CPU time holds no
    descheduling, so its tail is real work: cold caches after a context switch, an allocator or a
    garbage collection now and then (the 2x4 R2D2 capture of 2026-11-22: inference batches at
    median 6.13 ms and mean 7.24 ms of CPU, learner steps at 75.7 and 82.3 ms). Wall time: the
    median, since a shared capture box descheduled some steps for tens of milliseconds, which the
    simulator models itself.
    """
    present = values.dropna()
    if present.empty:
        return float("nan")
    return float(present.mean() if cpu_time else present.median())


def whole_steps(steps: pd.DataFrame) -> pd.DataFrame:
    """The steps whose marker closed while the profiler recorded: in a trace with CPU time, a step
    without its ``cpu_us`` (recorded as the marker closes) was cut by the end of recording, and its
    phases after the cut are missing. Traces without CPU time are returned as they are."""
    if "cpu_us" not in steps or not steps["cpu_us"].notna().any():
        return steps
    return steps[steps["cpu_us"].notna()]
