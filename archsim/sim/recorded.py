"""What a SEED-style trace (R2D2 with central inference, workloads/r2d2) records beyond ops: the
learner's own inference batches (steps rows with role "inference") and sequence-shaped learner ops.

- Recorded inference batches: their mean size (reported next to the simulated one) and the server's
  CPU cost per batch that is not the policy's ops: request handling, (de)serialisation, frame-stack
  and recurrent-state bookkeeping, replay insert = the batch's CPU time (its wall time in traces
  without CPU markers) minus its ops' time. Without a GPU the whole batch runs on the server thread:
  ``inference_batch_cpu_s`` fits its CPU time against the batch size.
- Sequence learner ops: the torso runs on [batch x steps, ...] tensors (time folded into the batch);
  ``fold_sequence_dims`` rewrites such leading dimensions as [batch, steps x ...] (same element count)
  so that ``scale_ops_to_batch`` resizes them per sequence like the LSTM's [batch, steps, ...] inputs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from archsim.sim.step_work import step_work_us
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
    """Median server CPU seconds per recorded inference batch outside the policy's ops (seconds of
    one capture-machine thread). The batch's thread CPU time where recorded: its wall time also
    holds waits for the learner's params lock and the GIL, which happen outside the ops. The
    median, because a shared 2-core capture box descheduled some batches for tens of milliseconds.
    0 when the trace records no inference batches."""
    rows = recorded_inference_steps(trace)
    if rows.empty:
        return 0.0
    overhead_us = np.maximum(step_work_us(rows).to_numpy(dtype=float) - _ops_us(trace, rows), 0.0)
    return float(np.median(overhead_us)) * 1e-6


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

    Fitted, not scaled per observation: on a CPU the R2D2 forward reads every weight once per batch
    (4.3 M parameters, REFERENCE.md), so a batch of 4 costs little more than a batch of 1 (the
    example trace's medians: 9.2 ms at 2, 9.5 ms at 4). A least-squares line through the median
    of each recorded batch size (weighted by how many batches had it) gives a fixed part and a
    part per observation; with a single recorded size the ops scale with the batch and the rest is
    fixed. Both parts are kept >= 0, and the ops never exceed the whole.
    """
    rows = recorded_inference_steps(trace)
    if rows.empty:
        return None
    table = pd.DataFrame(
        {
            "size": np.maximum(rows["batch_size"].to_numpy(dtype=int), 1),
            "work": step_work_us(rows).to_numpy(dtype=float),
            "ops": _ops_us(trace, rows),
        }
    )
    by_size = table.groupby("size").agg(
        work=("work", "median"), ops=("ops", "median"), n=("work", "size")
    )
    sizes = np.arange(max_batch + 1, dtype=float)
    ops_us = _line_by_size(by_size, "ops", sizes)
    if len(by_size) >= 2:
        work_us = _line_by_size(by_size, "work", sizes)
    else:  # one size: its ops grow with the batch, the rest is per batch
        rest = max(float(by_size["work"].iloc[0] - by_size["ops"].iloc[0]), 0.0)
        work_us = rest + ops_us
    ops_us = np.minimum(ops_us, work_us)
    work_us[0] = ops_us[0] = 0.0
    return work_us * 1e-6, ops_us * 1e-6


def _line_by_size(by_size: pd.DataFrame, column: str, sizes: np.ndarray) -> np.ndarray:
    """``column`` (per-size medians, with counts ``n``) as a line in the batch size, evaluated at
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
