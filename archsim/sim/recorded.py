"""What a SEED-style trace (R2D2 with central inference, workloads/r2d2) records beyond ops: the
learner's own inference batches (steps rows with role "inference") and sequence-shaped learner ops.

- Recorded inference batches: their mean size (reported next to the simulated one) and the server's
  CPU cost per batch that is not the policy's ops: request handling, (de)serialisation, frame-stack
  and recurrent-state bookkeeping, replay insert = the batch's CPU time (its wall time in traces
  without CPU markers) minus its ops' time. Without a GPU the whole batch runs on the server thread:
  ``inference_batch_cpu_s`` gives its CPU time for every batch size, shaped by the capture's
  inference probe (batches of other sizes timed after the run) where it has one.
- Sequence learner ops: the torso runs on [batch x steps, ...] tensors (time folded into the batch);
  ``fold_sequence_dims`` rewrites such leading dimensions as [batch, steps x ...] (same element count)
  so that ``scale_ops_to_batch`` resizes them per sequence like the LSTM's [batch, steps, ...] inputs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from archsim.sim.step_work import has_cpu_time, step_work_us, typical_us
from archsim.trace.schema import PHASE_GROUPS


def recorded_inference_steps(trace) -> pd.DataFrame:
    """The trace's inference batch rows (role "inference"); empty for traces without them."""
    steps = trace.steps
    return steps[steps["role"] == "inference"]


def recorded_inference_batch_mean(trace) -> float | None:
    """Mean observations per recorded inference batch, or None when the trace has none."""
    rows = recorded_inference_steps(trace)
    if rows.empty:
        return None
    return float(np.maximum(rows["batch_size"].to_numpy(dtype=float), 1.0).mean())


def server_overhead_capture_s(trace) -> float:
    """Server CPU seconds per recorded inference batch outside the policy's ops (seconds of one
    capture-machine thread): request handling, bookkeeping, replay insert. Its typical value
    (``typical_us``: the mean of thread CPU time, the median of wall time, which also holds waits
    for the params lock and the GIL). 0 when the trace records no inference batches."""
    rows = recorded_inference_steps(trace)
    if rows.empty:
        return 0.0
    overhead_us = np.maximum(step_work_us(rows).to_numpy(dtype=float) - _ops_us(trace, rows), 0.0)
    return typical_us(pd.Series(overhead_us), has_cpu_time(rows)) * 1e-6


def server_request_cpu_s(trace) -> float | None:
    """Server CPU seconds per request spent between its batches (capture-machine thread): the
    select loop and reading each request off its socket, which the runtime does before a batch's
    step opens (``gap_cpu_us``, divided by the batch's requests = observations / envs per actor).
    None when the trace records no such figure or not its envs per actor."""
    rows = recorded_inference_steps(trace)
    settings = ((trace.meta or {}).get("workload") or {}).get("settings") or {}
    envs = settings.get("envs_per_actor")
    if rows.empty or "gap_cpu_us" not in rows or not envs or not rows["gap_cpu_us"].notna().any():
        return None
    requests = np.maximum(rows["batch_size"].to_numpy(dtype=float) / float(envs), 1.0)
    per_request = pd.Series(rows["gap_cpu_us"].to_numpy(dtype=float) / requests)
    return typical_us(per_request, cpu_time=True) * 1e-6


def _ops_us(trace, rows: pd.DataFrame) -> np.ndarray:
    """Measured time of the policy's ops inside each recorded inference batch of ``rows``."""
    ops = trace.ops[trace.ops["phase"].isin(PHASE_GROUPS["inference"])]
    ops_us = ops.groupby("step_id")["dur_us"].sum()
    return ops_us.reindex(rows["step_id"]).fillna(0.0).to_numpy(dtype=float)


def inference_batch_cpu_s(trace, max_batch: int) -> tuple[np.ndarray, np.ndarray] | None:
    """(CPU seconds of a whole recorded inference batch, of its policy ops alone), capture-machine
    thread, for batches of 0..max_batch observations on a server without a GPU: the whole batch is
    the forward pass, request handling and replay insert together. None when the trace records no
    inference batches.

    The level comes from the run's own batches: per recorded size, their typical CPU time
    (``typical_us``) and their ops' time. How it changes with the batch comes, in order of
    preference, from:

    - the capture's inference probe (``inference_probe``: the same server work timed at batch sizes
      1..32 after the run, workloads/r2d2/seed/probe.py), interpolated between its sizes and
      extrapolated past the largest along its last segment: cost(b) = probe(b) + the run's mean
      offset from the probe at its recorded sizes;
    - a least-squares line through the recorded sizes (weighted by how many batches had each),
      when the run had several;
    - otherwise the ops scale with the batch and the rest is fixed per batch.

    Not scaled per observation alone: on a CPU the R2D2 forward reads every weight once per batch
    (4.3 M parameters, REFERENCE.md), so a batch of 8 costs far less than twice a batch of 4.
    Everything is kept >= 0, and the ops never exceed the whole.
    """
    rows = recorded_inference_steps(trace)
    if rows.empty:
        return None
    cpu_time = has_cpu_time(rows)
    table = pd.DataFrame(
        {
            "size": np.maximum(rows["batch_size"].to_numpy(dtype=int), 1),
            "work": step_work_us(rows).to_numpy(dtype=float),
            "ops": _ops_us(trace, rows),
        }
    )
    groups = table.groupby("size")
    by_size = pd.DataFrame(
        {
            "work": groups["work"].agg(lambda v: typical_us(v, cpu_time)),
            "ops": groups["ops"].agg(lambda v: typical_us(v, cpu_time)),
            "n": groups.size(),
        }
    )
    sizes = np.arange(max_batch + 1, dtype=float)
    probe = inference_probe(trace)
    if probe is not None:
        work_us = _along_probe(by_size, "work", probe, "cpu_us", sizes)
        ops_us = _along_probe(by_size, "ops", probe, "act_cpu_us", sizes)
    elif len(by_size) >= 2:
        ops_us = _line_by_size(by_size, "ops", sizes)
        work_us = _line_by_size(by_size, "work", sizes)
    else:  # one size: its ops grow with the batch, the rest is per batch
        ops_us = _line_by_size(by_size, "ops", sizes)
        rest = max(float(by_size["work"].iloc[0] - by_size["ops"].iloc[0]), 0.0)
        work_us = rest + ops_us
    ops_us = np.minimum(ops_us, work_us)
    work_us[0] = ops_us[0] = 0.0
    return work_us * 1e-6, ops_us * 1e-6


def inference_probe(trace) -> pd.DataFrame | None:
    """The learner's inference probe (columns batch_size, cpu_us, act_cpu_us; ascending sizes), or
    None when the capture made none or it has fewer than two sizes."""
    processes = ((trace.meta or {}).get("capture") or {}).get("processes") or []
    for process in processes:
        if not isinstance(process, dict):
            continue
        probe = process.get("inference_probe")
        if process.get("role") == "learner" and probe:
            table = pd.DataFrame(probe).drop_duplicates("batch_size").sort_values("batch_size")
            if len(table) >= 2:
                return table.reset_index(drop=True)
    return None


def _along_probe(
    by_size: pd.DataFrame, column: str, probe: pd.DataFrame, probe_column: str, sizes: np.ndarray
) -> np.ndarray:
    """The probe's curve of ``probe_column`` at ``sizes``, shifted to the run's level: by the
    batch-weighted mean of (recorded ``column`` - probe) over the recorded sizes; kept >= 0."""
    curve_sizes = probe["batch_size"].to_numpy(dtype=float)
    curve = probe[probe_column].to_numpy(dtype=float)
    recorded = by_size.index.to_numpy(dtype=float)
    offset = np.average(
        by_size[column].to_numpy(dtype=float) - _interpolate(curve_sizes, curve, recorded),
        weights=by_size["n"].to_numpy(dtype=float),
    )
    return np.maximum(_interpolate(curve_sizes, curve, sizes) + offset, 0.0)


def _interpolate(xs: np.ndarray, ys: np.ndarray, at: np.ndarray) -> np.ndarray:
    """Piecewise-linear through (xs, ys); past either end along the nearest segment."""
    inside = np.interp(at, xs, ys)
    low_slope = (ys[1] - ys[0]) / (xs[1] - xs[0])
    high_slope = (ys[-1] - ys[-2]) / (xs[-1] - xs[-2])
    below = ys[0] + (at - xs[0]) * low_slope
    above = ys[-1] + (at - xs[-1]) * high_slope
    return np.where(at < xs[0], below, np.where(at > xs[-1], above, inside))


def _line_by_size(by_size: pd.DataFrame, column: str, sizes: np.ndarray) -> np.ndarray:
    """``column`` (per-size typical values, with counts ``n``) as a line in the batch size, evaluated at
    ``sizes``: weighted least squares, kept to a non-negative fixed part and slope; through the
    origin when only one size was recorded."""
    size = by_size.index.to_numpy(dtype=float)
    value, count = by_size[column].to_numpy(dtype=float), by_size["n"].to_numpy(dtype=float)
    if len(by_size) < 2:
        return value[0] / size[0] * sizes
    slope, intercept = np.polyfit(size, value, 1, w=np.sqrt(count))
    if slope < 0:  # noise: no growth with the batch, a fixed cost per batch
        slope, intercept = 0.0, float(np.average(value, weights=count))
    elif intercept < 0:  # all of it grows with the batch: a line through the origin
        slope, intercept = float(np.sum(count * size * value) / np.sum(count * size**2)), 0.0
    return intercept + slope * sizes


def sequence_settings(trace) -> tuple[int, int] | None:
    """(sequence_length, burn_in) of a recurrent trace (meta.workload.settings.r2d2), else None."""
    settings = ((trace.meta or {}).get("workload") or {}).get("settings") or {}
    r2d2 = settings.get("r2d2")
    if not isinstance(r2d2, dict) or "sequence_length" not in r2d2:
        return None
    return int(r2d2["sequence_length"]), int(r2d2.get("burn_in", 0))


def fold_sequence_dims(
    ops: pd.DataFrame, batch: np.ndarray, unrolls: tuple[int, ...]
) -> pd.DataFrame:
    """``ops`` with every input whose first dimension is batch x k (k in ``unrolls``, the steps of a
    sequence the learner unrolls at once) written as [batch, k x next dim, ...]: the same elements,
    now batch-major, so that resizing the batch of sequences resizes them too."""
    out = ops.copy()
    dims = out["input_dims"].astype("string").fillna("").to_numpy(dtype=object)
    folded = [_fold(text, int(b), unrolls) for text, b in zip(dims, batch, strict=True)]
    out["input_dims"] = folded
    return out


def _fold(text: str, batch: int, unrolls: tuple[int, ...]) -> str:
    if not text:
        return text
    try:
        shapes = json.loads(text)
    except ValueError:
        return text
    if not isinstance(shapes, list):
        return text
    leading = {batch * k: k for k in unrolls if k > 1}
    changed = False
    for i, shape in enumerate(shapes):
        if (
            isinstance(shape, list)
            and shape
            and all(isinstance(d, int) for d in shape)
            and shape[0] in leading
        ):
            k = leading[shape[0]]
            shapes[i] = [batch, k * shape[1], *shape[2:]] if len(shape) > 1 else [batch, k]
            changed = True
    return json.dumps(shapes, separators=(",", ":")) if changed else text
