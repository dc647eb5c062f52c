"""Typed columns that ``archsim.trace.kineto.flatten_events`` fills while streaming: which args keys
are kept, GPU events' launch geometry / registers / bytes as numbers, and cpu ops' shape args stored
once per distinct value. Split from kineto.py to keep it short; nothing here reads files.
"""

from __future__ import annotations

import json
from array import array
from typing import Any

import numpy as np
import pandas as pd

from archsim.trace.kineto_checks import INPUT_DIMS_KEYS, INT64_LIMIT, _bad_dims, as_int

INPUT_TYPE_KEYS = ("Input type", "Input types")
OCCUPANCY_KEYS = ("est. achieved occupancy %", "theoretical occupancy %")
STRIDES_KEY = "Input Strides"  # torch.profiler record_shapes, one entry per Input Dims entry


def as_float(value: Any) -> float:
    """A JSON number as float; NaN for anything else (or a number beyond float64)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return np.nan
    try:
        return float(value)
    except OverflowError:
        return np.nan


# args keys anything downstream reads (ingest, gpu_costs, flops, infer_steps); the rest of each event's
# args is dropped as it streams, so memory holds what is used, not the whole JSON. GPU events keep
# theirs as typed columns (KinetoTrace.gpu_fields), runtime calls only a copy's size (ROCm) and a
# launch's grid/block (runtime_kept).
# (a cpu op's autograd "Sequence number" and "Fwd thread id" become the int columns seq and fwd_tid)
HOST_KEPT = frozenset(
    (
        "Concrete Inputs",
        *INPUT_DIMS_KEYS,
        *INPUT_TYPE_KEYS,
        STRIDES_KEY,  # copies' sector traffic (archsim.perf.sectors): the ops table's input_strides
        "kernel_kwargs",  # TorchInductor's Triton launches: their iteration axes (inductor_args)
    )
)
GPU_INT_FIELDS = (
    "device",
    "stream",
    "grid_x",
    "grid_y",
    "grid_z",
    "block_x",
    "block_y",
    "block_z",
)
GPU_FLOAT_FIELDS = (
    "registers_per_thread",
    "shared_memory_bytes",
    "blocks_per_sm",
    "warps_per_sm",
    "est_occupancy_pct",
    "bytes",
)
GPU_FLOAT_KEYS = (  # the args keys of GPU_FLOAT_FIELDS, current spelling first
    ("registers per thread",),
    ("shared memory",),
    ("blocks per SM",),
    ("warps per SM",),
    OCCUPANCY_KEYS,
    ("bytes",),
)


def autograd_id(value: Any) -> int:
    """A Sequence number / Fwd thread id as recorded, -1 when absent or not an int64 >= 0."""
    if type(value) is int and 0 <= value < INT64_LIMIT:
        return value
    return -1


class BadDims(Exception):
    """Input Dims that check_args refuses (raised where first seen)."""


def shared_args(
    args: dict[str, Any], shared: dict[Any, Any], dims_key: str | None = None
) -> dict[str, Any]:
    """The shape, type and Concrete Inputs args of a cpu op as one dict shared by every op that
    recorded the same (each distinct list and dict stored once: an iteration repeats them all).
    ``dims_key``: the Input Dims key whose lists are checked for negative / int64-overflowing sizes
    (kineto_checks.check_args), once per distinct list."""
    parts: list[str] = []
    kept: dict[str, Any] = {}
    for key in sorted(HOST_KEPT.intersection(args)):
        value = args[key]
        text = repr(value)
        if type(value) is list:
            if key == dims_key and text not in shared and _bad_dims(value):
                raise BadDims
            value = shared.setdefault(text, value)
        kept[key] = value
        parts += (key, text)
    return shared.setdefault(tuple(parts), kept)


def as_numpy(values: array, dtype: type) -> np.ndarray:
    """A typed array as a numpy array (copied, so the array's buffer can be freed)."""
    return np.array(values, dtype=dtype) if len(values) else np.empty(0, dtype=dtype)


def gpu_int_values(args: dict[str, Any], pid: int, tid: int) -> tuple[int, ...]:
    """device, stream, grid x/y/z, block x/y/z of a GPU event (device/stream default to pid/tid,
    a missing grid or block to 0s, missing trailing dimensions to 1)."""
    grid = args.get("grid") or [0, 0, 0]
    block = args.get("block") or [0, 0, 0]
    grid = (list(grid) + [1, 1, 1])[:3] if isinstance(grid, list) else [0, 0, 0]
    block = (list(block) + [1, 1, 1])[:3] if isinstance(block, list) else [0, 0, 0]
    device, stream = args.get("device"), args.get("stream")
    values = (
        device if type(device) is int else as_int(device, pid),
        stream if type(stream) is int else as_int(stream, tid),
        *(v if type(v) is int else as_int(v, 0) for v in grid),
        *(v if type(v) is int else as_int(v, 0) for v in block),
    )
    if all(-INT64_LIMIT <= v < INT64_LIMIT for v in values):  # the common case: plain ints
        return values
    return (  # some int past int64: as_int replaces it by the default
        as_int(device, pid),
        as_int(stream, tid),
        *(as_int(v, 0) for v in grid),
        *(as_int(v, 0) for v in block),
    )


# A launch's geometry under the spelling of Kineto's roctracer logger for hipExtModuleLaunchKernel
# ("grid dim" / "block dim", e.g. AMD-AGI/TraceLens evals/unit_tests/gemm/*.json, MI300X), whose
# kernel events record none; the launch's own "grid" / "block" (ROCm 6+) are read too.
LAUNCH_GEOMETRY_KEYS = (("grid", "grid dim"), ("block", "block dim"))


def runtime_kept(args: dict[str, Any], shared: dict[Any, Any]) -> dict[str, Any]:
    """The args a runtime call keeps: a copy's ``size`` (ROCm) and a launch's ``grid`` / ``block``
    (for a kernel that records none: launch_geometry), one dict per distinct value."""
    kept: dict[str, Any] = {"size": args["size"]} if "size" in args else {}
    for name, spellings in zip(("grid", "block"), LAUNCH_GEOMETRY_KEYS, strict=True):
        value = next((args[k] for k in spellings if isinstance(args.get(k), list)), None)
        if value is not None:
            kept[name] = value
    return shared.setdefault(("runtime", repr(sorted(kept.items()))), kept) if kept else kept


def launch_geometry(fields: pd.DataFrame, rt_args: np.ndarray, launch: np.ndarray) -> int:
    """Fill ``fields`` grid/block in place from the launch's args for linked kernels that record no
    grid (ROCm traces whose kernel events carry only an External id); returns how many were filled.
    The values are the launch's as given: grid_in_blocks then converts a work-item API's grid."""
    missing = np.flatnonzero((fields["grid_x"].to_numpy() <= 0) & (launch >= 0))
    rows, values = [], []
    for i in missing:
        args = rt_args[launch[i]]
        if "grid" in args and "block" in args:
            geometry = gpu_int_values({"grid": args["grid"], "block": args["block"]}, 0, 0)[2:]
            if geometry[0] > 0:
                rows.append(i)
                values.append(geometry)
    if rows:
        columns = ["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
        fields.loc[fields.index[rows], columns] = np.asarray(values, dtype=np.int64)
    return len(rows)


def strides_json(cpu_args: np.ndarray, op_pos: np.ndarray) -> np.ndarray:
    """The launching op's ``Input Strides`` as compact JSON per GPU op ("" where not recorded or
    not a list): the ops table's ``input_strides``, beside ``input_dims``."""
    out = np.full(len(op_pos), "", dtype=object)
    memo: dict[int, str] = {}
    for i in np.flatnonzero(op_pos >= 0):
        p = int(op_pos[i])
        if p not in memo:
            value = cpu_args[p].get(STRIDES_KEY) if isinstance(cpu_args[p], dict) else None
            memo[p] = json.dumps(value, separators=(",", ":")) if type(value) is list else ""
        out[i] = memo[p]
    return out
