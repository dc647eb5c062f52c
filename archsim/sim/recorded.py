"""What a SEED-style trace (R2D2 with central inference, workloads/r2d2) records beyond ops: the
learner's own inference batches (steps rows with role "inference") and sequence-shaped learner ops.

- Recorded inference batches: their mean size (reported next to the simulated one) and the server's
  CPU cost per batch that is not the policy's ops: request handling, (de)serialisation, frame-stack
  and recurrent-state bookkeeping, replay insert = the batch's duration minus its ops' time.
- Sequence learner ops: the torso runs on [batch x steps, ...] tensors (time folded into the batch);
  ``fold_sequence_dims`` rewrites such leading dimensions as [batch, steps x ...] (same element count)
  so that ``scale_ops_to_batch`` resizes them per sequence like the LSTM's [batch, steps, ...] inputs.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

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
    one capture-machine thread). The median, because a shared 2-core capture box descheduled some
    batches for tens of milliseconds. 0 when the trace records no inference batches."""
    rows = recorded_inference_steps(trace)
    if rows.empty:
        return 0.0
    ops = trace.ops[trace.ops["phase"].isin(PHASE_GROUPS["inference"])]
    ops_us = ops.groupby("step_id")["dur_us"].sum()
    inside_us = ops_us.reindex(rows["step_id"]).fillna(0.0).to_numpy(dtype=float)
    overhead_us = np.maximum(rows["dur_us"].to_numpy(dtype=float) - inside_us, 0.0)
    return float(np.median(overhead_us)) * 1e-6


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
