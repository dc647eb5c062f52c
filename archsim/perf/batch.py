"""Resize a step's ops to another batch size (the simulator's inference/learner batch knobs)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.columns import strings

# Phases whose ops process one batch of samples: their work grows with the batch size. Optimizer,
# target sync and parameter publication touch the parameters only, whose size does not depend on it.
BATCH_PHASES = frozenset(
    {
        "preprocess",
        "act",
        "inference_batch",
        "replay_sample",
        "train_forward",
        "train_backward",
        "priority_update",
        "other",
    }
)


def _batch_fractions(input_dims: str, from_batch: int) -> tuple[float, bool, bool]:
    """From an op's Input Dims JSON: (fraction of input elements in batch-major tensors, whether any
    input is batch-major, whether the output is: its first multi-dimensional input is batch-major).
    A tensor is batch-major when its first dimension equals the batch (1-D only when batch > 1).
    The output rule follows the leading operand: linear/addmm/conv/element-wise outputs carry the
    batch of their input, while a weight gradient mm([out, B], [B, in]) contracts it away."""
    try:
        shapes = json.loads(input_dims) if input_dims else None
    except (ValueError, TypeError):
        shapes = None
    if not isinstance(shapes, list):
        return math.nan, False, False
    total = scaling = 0
    output_scales: bool | None = None
    for shape in shapes:
        if not isinstance(shape, list) or not shape or not all(isinstance(d, int) for d in shape):
            continue
        elements = math.prod(shape)
        total += elements
        batch_major = shape[0] == from_batch and (len(shape) >= 2 or from_batch > 1)
        if batch_major:
            scaling += elements
        if output_scales is None and (len(shape) >= 2 or batch_major):
            output_scales = batch_major
    if total == 0:
        return math.nan, False, False
    return scaling / total, scaling > 0, bool(output_scales)


def scale_ops_to_batch(ops: pd.DataFrame, from_batch: int, to_batch: int) -> pd.DataFrame:
    """The ops of one step re-sized from ``from_batch`` to ``to_batch`` samples.

    Ops in batch-dependent phases (BATCH_PHASES) grow with the batch. When the op's Input Dims are
    known (CPU captures), only batch-major inputs scale (weights and biases do not), FLOPs scale when
    any input is batch-major, and the output scales when its leading operand is batch-major (not for a
    weight gradient, which contracts the batch away).
    Without Input Dims (kernels of real GPU traces) FLOPs, bytes and grid_x all scale by to/from.
    The measured values are kept in ``measured_*`` columns so that predict_op_seconds scales the
    measured duration by model(scaled, target) / model(as measured, source).
    """
    if from_batch < 1 or to_batch < 1:
        raise ArchsimError(f"batch sizes must be >= 1 (got from {from_batch} to {to_batch})")
    return scale_ops_to_batches(ops, np.full(len(ops), from_batch), np.full(len(ops), to_batch))


def scale_ops_to_batches(
    ops: pd.DataFrame, from_batch: np.ndarray, to_batch: np.ndarray
) -> pd.DataFrame:
    """Op i re-sized from ``from_batch[i]`` to ``to_batch[i]`` samples, as scale_ops_to_batch does
    for one pair: the simulator resizes a job's ops to every batch size in one table, and one call on
    it costs what one call per (recorded batch, size) pair cost each."""
    from_batch, to_batch = np.asarray(from_batch), np.asarray(to_batch)
    bad = (from_batch < 1) | (to_batch < 1)
    if bad.any():
        i = int(np.argmax(bad))
        raise ArchsimError(
            f"batch sizes must be >= 1 (got from {from_batch[i].item()} to {to_batch[i].item()})"
        )
    out = ops.reset_index(drop=True)  # copy on write: the columns set below never reach ``ops``
    factor = to_batch / from_batch
    in_phase = strings(out, "phase").isin(BATCH_PHASES).to_numpy(dtype=bool)
    keys = list(zip(strings(out, "input_dims"), from_batch.tolist(), strict=True))
    parsed = {key: _batch_fractions(*key) for key in dict.fromkeys(keys)}
    read_frac = np.array([parsed[k][0] for k in keys], dtype=float)
    any_batch = np.array([parsed[k][1] for k in keys], dtype=bool)
    known = np.isfinite(read_frac)
    output_batch = np.array([parsed[k][2] for k in keys], dtype=bool)
    # per-column growth factor of each op
    uniform = np.where(in_phase, factor, 1.0)
    work_scale = np.where(known, np.where(in_phase & any_batch, factor, 1.0), uniform)
    read_scale = np.where(
        known, 1.0 + (np.where(in_phase, factor, 1.0) - 1.0) * np.nan_to_num(read_frac), uniform
    )
    write_scale = np.where(known, np.where(in_phase & output_batch, factor, 1.0), uniform)
    scales = {
        "flops": work_scale,
        "bytes_read": read_scale,
        "bytes_written": write_scale,
        "grid_x": write_scale,
    }
    for column, scale in scales.items():
        if column not in out.columns:
            continue
        original = f"measured_{column}"
        if original not in out.columns:
            out[original] = out[column]
        base = pd.to_numeric(out[column], errors="coerce").to_numpy(dtype=float)
        if column == "grid_x":
            scaled = np.where(base > 0, np.maximum(np.ceil(base * scale), 1), base)
            out[column] = scaled.astype("int64")
        else:
            out[column] = base * scale
    return out
