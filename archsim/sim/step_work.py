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
