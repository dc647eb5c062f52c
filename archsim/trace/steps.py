"""Phase and step markers -> the steps table, and each op's phase / step / ProfilerStep.

Markers (interfaces.md): ``archsim::<role>_step#k=v,...`` user annotations are steps;
``archsim::<phase>`` annotations nested in a step (same pid, time containment) add their duration to
the step's ``<phase>_us``. ``archsim::cpu#us=<x>`` annotations (thread CPU time, the last thing each
marker records before it closes) belong to the innermost step or phase marker on their thread that
contains their midpoint: they fill the step's ``cpu_us`` and add to its ``<phase>_cpu_us``.
``archsim::cpu_gap#us=<x>`` (the thread's CPU time since its previous recorded step) fills the
``gap_cpu_us`` of the step containing it. ``archsim::batch#n=<k>`` (recorded as a step closes, when
its batch was measured only then: ``capture run``'s gradient accumulation) sets that step's
``batch_size``. An op's phase is the innermost ``archsim::<phase>`` containing its anchor
(the launching runtime call for GPU work, the op itself on a CPU-only trace): same thread first,
otherwise the latest-starting one on the same process (autograd runs backward on its own thread).

Foreign traces (no archsim markers around an op) fall back to what torch itself records, on the same
thread: inside an ``Optimizer.step#...`` annotation -> ``optimizer_step``; inside an
``autograd::engine::evaluate_function: ...`` op (or a 2021 trace's bare autograd node:
infer_steps.backward_ops) -> ``train_backward``. Everything else is "other".
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError, where
from archsim.trace.infer_steps import backward_ops, residual_env_step
from archsim.trace.link import innermost_containing, latest_containing, thread_key
from archsim.trace.schema import PHASES, STEP_ROLES, STEPS_COLUMNS, UNKNOWN_PHASE, conform

MARKER_PREFIX = "archsim::"
_STEP_MARKER = re.compile(rf"^archsim::({'|'.join(STEP_ROLES)})_step(?:#(.*))?$")
_CPU_MARKER = re.compile(r"^archsim::cpu#us=(.*)$")
_GAP_CPU_MARKER = re.compile(r"^archsim::cpu_gap#us=(.*)$")
_BATCH_MARKER = re.compile(r"^archsim::batch#n=(.*)$")
_PROFILER_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_INT64_MAX = 2**63 - 1
STEP_INT_ATTRS = ("actor", "batch_size")
FOREIGN_OPTIMIZER_PREFIX = "Optimizer.step#"
FOREIGN_BACKWARD_PREFIX = "autograd::engine::evaluate_function"


def _parse_attrs(path: Path, name: str, text: str | None) -> dict[str, int]:
    attrs: dict[str, int] = {}
    if not text:
        return attrs
    for item in text.split(","):
        key, _, value = item.partition("=")
        key = key.strip()
        try:
            attrs[key] = int(value.strip())
        except ValueError:
            raise ArchsimError(
                where(path, f"step marker '{name}': attribute '{item}' is not key=integer")
            ) from None
    # A step batches at least one env / request / sample; an actor index is >= 0. A negative batch
    # would turn every throughput negative (images/s: -64,102.6), so it is refused here.
    low = {"batch_size": 1, "actor": -1}  # actor -1: not an actor step
    for key, value in attrs.items():
        if not low.get(key, -_INT64_MAX) <= value <= _INT64_MAX:
            raise ArchsimError(
                where(
                    path,
                    f"step marker '{name[:80]}': {key}={value} is out of range (expected an "
                    f"integer >= {low.get(key, -_INT64_MAX)})",
                )
            )
    return attrs


def has_step_markers(annotations: pd.DataFrame) -> bool:
    """True when the trace holds ``archsim::<role>_step`` markers (else steps may be inferred)."""
    return bool(annotations["name"].astype(str).str.match(_STEP_MARKER).any())


def build_steps(
    path: Path,
    annotations: pd.DataFrame,
    inferred: tuple[pd.DataFrame, pd.DataFrame] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """(steps table, phase intervals, number of unrecognised archsim:: markers).

    ``annotations`` are host-side user_annotation events (columns name, pid, tid, ts, dur, end).
    Phase intervals carry pid, tid, ts, end, phase and the step_id they fall in (-1 if none).
    ``inferred``: (step rows, phase intervals) of archsim.trace.infer_steps, used when the trace
    has no step markers.
    """
    names = annotations["name"].astype(str)
    marked = annotations[names.str.startswith(MARKER_PREFIX)]
    step_rows, phase_rows, cpu_rows, gap_rows, batch_rows, unknown = [], [], [], [], [], 0
    for name, pid, tid, ts, dur, end in zip(
        marked["name"],
        marked["pid"],
        marked["tid"],
        marked["ts"],
        marked["dur"],
        marked["end"],
        strict=True,
    ):
        step = _STEP_MARKER.match(name)
        if step:
            attrs = _parse_attrs(path, name, step.group(2))
            step_rows.append(
                {
                    "role": step.group(1),
                    "actor": attrs.get("actor", -1),
                    "batch_size": attrs.get("batch_size", 1),
                    "pid": pid,
                    "tid": tid,
                    "start_us": ts,
                    "dur_us": dur,
                    "end": end,
                }
            )
            continue
        cpu = _CPU_MARKER.match(name)
        if cpu:
            # its midpoint: its start may touch the end of the previous sibling marker and its end
            # the start of the next one (microsecond timestamps)
            t = ts + 0.5 * dur
            cpu_rows.append({"pid": pid, "tid": tid, "t": t, "cpu_us": _cpu_us(path, name, cpu)})
            continue
        gap = _GAP_CPU_MARKER.match(name)
        if gap:
            gap_rows.append(
                {"pid": pid, "tid": tid, "t": ts + 0.5 * dur, "cpu_us": _cpu_us(path, name, gap)}
            )
            continue
        batch = _BATCH_MARKER.match(name)
        if batch:
            n = _parse_attrs(path, name, f"batch_size={batch.group(1)}")["batch_size"]
            batch_rows.append({"pid": pid, "tid": tid, "t": ts + 0.5 * dur, "batch_size": n})
            continue
        phase = name[len(MARKER_PREFIX) :]
        if phase in PHASES:
            phase_rows.append({"phase": phase, "pid": pid, "tid": tid, "ts": ts, "end": end})
        else:
            unknown += 1
    used_inferred = not step_rows and inferred is not None and len(inferred[0]) > 0
    if used_inferred:
        step_rows = inferred[0].to_dict("records")
        phase_rows += inferred[1].to_dict("records")
    steps = pd.DataFrame(
        step_rows,
        columns=["role", "actor", "batch_size", "pid", "tid", "start_us", "dur_us", "end"],
    )
    steps = steps.sort_values(["start_us", "pid", "tid"], kind="stable").reset_index(drop=True)
    steps["step_id"] = np.arange(len(steps), dtype=np.int64)
    if batch_rows:  # a batch measured as its step closed (step_id is the row position)
        rows = pd.DataFrame(batch_rows)
        found = enclosing_step(steps, rows["pid"], rows["tid"], rows["t"])
        inside = found >= 0
        steps.loc[found[inside], "batch_size"] = rows["batch_size"].to_numpy()[inside]
    phases = pd.DataFrame(phase_rows, columns=["phase", "pid", "tid", "ts", "end"])
    phases["dur"] = phases["end"] - phases["ts"]
    phases["step_id"] = enclosing_step(steps, phases["pid"], phases["tid"], phases["ts"])
    cpu_rows = pd.DataFrame(cpu_rows, columns=["pid", "tid", "t", "cpu_us"])
    step_cpu, phases["cpu_us"] = _attach_cpu(steps, phases, cpu_rows)
    table = steps.drop(columns=["end"])
    table["cpu_us"] = step_cpu
    table["gap_cpu_us"] = _attach_gaps(steps, gap_rows)
    inside = phases[phases["step_id"] >= 0]
    if len(inside):
        sums = inside.pivot_table(index="step_id", columns="phase", values="dur", aggfunc="sum")
        for phase in sums.columns:
            table[f"{phase}_us"] = table["step_id"].map(sums[phase])
        timed = inside[inside["cpu_us"].notna()]
        if len(timed):
            cpu_sums = timed.pivot_table(
                index="step_id", columns="phase", values="cpu_us", aggfunc="sum"
            )
            for phase in cpu_sums.columns:
                table[f"{phase}_cpu_us"] = table["step_id"].map(cpu_sums[phase])
    table = conform(table, STEPS_COLUMNS)
    if used_inferred:
        table = residual_env_step(table)
    return table, phases, unknown


def _cpu_us(path: Path, name: str, match: re.Match) -> float:
    try:
        value = float(match.group(1))
    except ValueError:
        value = float("nan")
    if not 0 <= value < float("inf"):  # NaN, negative or infinite (us=1e400)
        raise ArchsimError(
            where(path, f"CPU-time marker '{name}': expected us=<finite number >= 0>")
        )
    return value


def _attach_gaps(steps: pd.DataFrame, gap_rows: list[dict]) -> np.ndarray:
    """CPU us each step's thread spent since its previous recorded step (NaN where not recorded)."""
    gaps = np.full(len(steps), np.nan)
    if not gap_rows:
        return gaps
    rows = pd.DataFrame(gap_rows)
    found = enclosing_step(steps, rows["pid"], rows["tid"], rows["t"])  # step_id = row position
    inside = found >= 0
    gaps[found[inside]] = rows["cpu_us"].to_numpy(float)[inside]
    return gaps


def _attach_cpu(
    steps: pd.DataFrame, phases: pd.DataFrame, cpu: pd.DataFrame
) -> tuple[np.ndarray, np.ndarray]:
    """(CPU us of each step, of each phase interval), NaN where none was recorded. Each CPU marker
    belongs to the innermost step or phase marker on its thread containing its midpoint (markers on
    one thread nest)."""
    n_steps = len(steps)
    step_cpu = np.full(n_steps, np.nan)
    phase_cpu = np.full(len(phases), np.nan)
    if cpu.empty:
        return step_cpu, phase_cpu
    pid = np.concatenate([steps["pid"].to_numpy(), phases["pid"].to_numpy()])
    tid = np.concatenate([steps["tid"].to_numpy(), phases["tid"].to_numpy()])
    start = np.concatenate([steps["start_us"].to_numpy(float), phases["ts"].to_numpy(float)])
    end = np.concatenate([steps["end"].to_numpy(float), phases["end"].to_numpy(float)])
    found = innermost_containing(
        thread_key(cpu["pid"].to_numpy(), cpu["tid"].to_numpy()),
        cpu["t"].to_numpy(float),
        thread_key(pid, tid),
        start,
        end,
    )
    values = cpu["cpu_us"].to_numpy(float)
    on_step = (found >= 0) & (found < n_steps)
    on_phase = found >= n_steps
    step_cpu[found[on_step]] = values[on_step]
    phase_cpu[found[on_phase] - n_steps] = values[on_phase]
    return step_cpu, phase_cpu


def _same_thread_then_process(
    intervals: pd.DataFrame, pid: pd.Series, tid: pd.Series, t: pd.Series, start_col: str
) -> np.ndarray:
    """Row position in ``intervals`` containing each (pid, tid, t): same thread innermost first,
    then the latest-starting one on the same pid; -1 if none."""
    pid, tid, t = np.asarray(pid), np.asarray(tid), np.asarray(t, dtype=np.float64)
    found = innermost_containing(
        thread_key(pid, tid),
        t,
        thread_key(intervals["pid"].to_numpy(), intervals["tid"].to_numpy()),
        intervals[start_col].to_numpy(),
        intervals["end"].to_numpy(),
    )
    missing = np.flatnonzero(found < 0)
    if len(missing):
        found[missing] = latest_containing(
            pid[missing],
            t[missing],
            intervals["pid"].to_numpy(),
            intervals[start_col].to_numpy(),
            intervals["end"].to_numpy(),
        )
    return found


def enclosing_step(steps: pd.DataFrame, pid: pd.Series, tid: pd.Series, t: pd.Series) -> np.ndarray:
    """step_id of the step containing each anchor (-1 outside every step)."""
    if len(steps) == 0 or len(t) == 0:
        return np.full(len(t), -1, dtype=np.int64)
    intervals = steps[["pid", "tid", "start_us"]].assign(end=steps["start_us"] + steps["dur_us"])
    pos = _same_thread_then_process(intervals, pid, tid, t, "start_us")
    ids = steps["step_id"].to_numpy()
    return np.where(pos >= 0, ids[np.maximum(pos, 0)], -1).astype(np.int64)


def assign_phases(
    phases: pd.DataFrame,
    annotations: pd.DataFrame,
    cpu_ops: pd.DataFrame,
    pid: np.ndarray,
    tid: np.ndarray,
    t: np.ndarray,
    valid: np.ndarray,
) -> np.ndarray:
    """Phase name for each anchor (pid, tid, t); anchors with ``valid`` False get "other"."""
    out = np.full(len(t), UNKNOWN_PHASE, dtype=object)
    idx = np.flatnonzero(valid)
    if len(idx) == 0:
        return out
    if len(phases):
        pos = _same_thread_then_process(phases, pid[idx], tid[idx], t[idx], "ts")
        names = phases["phase"].to_numpy()
        out[idx] = np.where(pos >= 0, names[np.maximum(pos, 0)], UNKNOWN_PHASE)
    left = idx[out[idx] == UNKNOWN_PHASE]
    if len(left) == 0:
        return out
    optimizer = annotations[annotations["name"].str.startswith(FOREIGN_OPTIMIZER_PREFIX)]
    fwd_tid = cpu_ops["fwd_tid"].to_numpy() if "fwd_tid" in cpu_ops else np.full(len(cpu_ops), -1)
    backward = cpu_ops[backward_ops(cpu_ops["name"], fwd_tid)]
    for intervals, phase in ((optimizer, "optimizer_step"), (backward, "train_backward")):
        if len(intervals) == 0 or len(left) == 0:
            continue
        pos = innermost_containing(
            thread_key(pid[left], tid[left]),
            t[left],
            thread_key(intervals["pid"].to_numpy(), intervals["tid"].to_numpy()),
            intervals["ts"].to_numpy(),
            intervals["end"].to_numpy(),
        )
        out[left[pos >= 0]] = phase
        left = left[pos < 0]
    return out


def assign_profiler_steps(
    annotations: pd.DataFrame,
    pid: np.ndarray,
    t: np.ndarray,
    valid: np.ndarray,
    path: Path | str = "trace",
) -> np.ndarray:
    """ProfilerStep#N number containing each anchor on the same process, -1 outside."""
    out = np.full(len(t), -1, dtype=np.int64)
    numbers = annotations["name"].str.extract(_PROFILER_STEP, expand=False)
    marks = annotations[numbers.notna()]
    idx = np.flatnonzero(valid)
    if len(marks) == 0 or len(idx) == 0:
        return out
    pos = latest_containing(
        pid[idx], t[idx], marks["pid"].to_numpy(), marks["ts"].to_numpy(), marks["end"].to_numpy()
    )
    values = [int(v) for v in numbers[numbers.notna()]]
    too_big = next((v for v in values if v > _INT64_MAX), None)
    if too_big is not None:
        raise ArchsimError(
            where(
                path,
                f"annotation 'ProfilerStep#{str(too_big)[:30]}...': step number out of range "
                "(expected an integer below 2^63)",
            )
        )
    nums = np.asarray(values, dtype=np.int64)
    out[idx] = np.where(pos >= 0, nums[np.maximum(pos, 0)], -1)
    return out
