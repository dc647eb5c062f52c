"""Read a torch.profiler (Kineto) Chrome trace, validate it, and flatten it into one events table.

Parsing happens once here; everything downstream works on the table. Category names are normalised
onto the current Kineto names so that 2021-era traces (PyTorch 1.8-1.10: ``Operator``, ``Runtime``,
``Kernel``, ``Memcpy``, ``Memset``, ``tid: "stream 7"``, lower-case ``external id``, as in the
pytorch/kineto tb_plugin test traces) and AMD/ROCm traces (``hip*`` runtime calls, no register or
occupancy args, ``baseTimeNanoseconds``) look the same as a 2024 CUDA trace.
"""

from __future__ import annotations

import ast
import gzip
import json
import math
import zlib
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError, where
from archsim.trace.kineto_checks import (
    INPUT_DIMS_KEYS,
    as_int,
    check_args,
    check_times,
    clean_text,
    clean_value,
    first_key,
    id_field,
)

# Kineto category (lower-cased) -> normalised category. Legacy names from PyTorch 1.8-1.10 traces.
# Other categories (gpu_user_annotation mirrors, python_function, cuda_sync, ac2g flows) are skipped.
CATEGORY_ALIASES: dict[str, str] = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "cuda_runtime": "cuda_runtime",
    "runtime": "cuda_runtime",
    "cuda_driver": "cuda_runtime",  # cuLaunchKernel (Triton etc.) correlates like cudaLaunchKernel
    "kernel": "kernel",
    "gpu_memcpy": "gpu_memcpy",
    "memcpy": "gpu_memcpy",
    "gpu_memset": "gpu_memset",
    "memset": "gpu_memset",
}
GPU_CATEGORIES = ("kernel", "gpu_memcpy", "gpu_memset")
HOST_CATEGORIES = ("cpu_op", "user_annotation", "cuda_runtime")
KEPT_CATEGORIES = GPU_CATEGORIES + HOST_CATEGORIES

# args keys: current spelling first, then legacy spellings seen in older traces.
_EXTERNAL_ID_KEYS = ("External id", "external id")
_INPUT_TYPE_KEYS = ("Input type", "Input types")
_OCCUPANCY_KEYS = ("est. achieved occupancy %", "theoretical occupancy %")
# float64 holds every integer up to 2**53 exactly; microsecond timestamps beyond 2**52 (about 143 years
# after the Unix epoch: no real clock) are rebased onto the earliest event before float conversion so
# that they keep microsecond resolution (stated in meta as ingest.ts_rebased_by_us).
TS_EXACT_LIMIT_US = 2**52
# Device-event categories of accelerators other than CUDA/ROCm GPUs (Meta MTIA: mtia_ccp_events,
# mtia_runtime, as written by Kineto's MTIA backend). archsim has no model of these devices.
FOREIGN_DEVICE_PREFIXES = ("mtia_",)
# CUPTI range-profiler mode records kernel ranges in this category instead of kernel events.
CUPTI_RANGE_CATEGORY = "cuda_profiler_range"
# record_function names that are annotations even when filed as ops (older traces).
_ANNOTATION_PREFIXES = ("ProfilerStep#", "archsim::", "Optimizer.step#", "Optimizer.zero_grad#")


@dataclass
class KinetoTrace:
    """The flattened trace: ``events`` (one row per kept complete event) and top-level metadata."""

    path: Path
    events: pd.DataFrame
    top: dict[str, Any] = field(default_factory=dict)  # top-level keys other than traceEvents
    n_events: int = 0  # all entries of traceEvents, kept or not
    # Repairs and skipped content, stated in meta: exact duplicate events removed, the amount (us)
    # subtracted from every timestamp, names with invalid Unicode (lone surrogates) replaced.
    duplicates_removed: int = 0
    ts_rebased_by_us: int = 0
    names_repaired: int = 0
    # Complete events of categories ingest does not read but must not ignore silently (counts by
    # category): foreign-accelerator device events and CUPTI range-profiler ranges.
    other_device_events: dict[str, int] = field(default_factory=dict)


def read_json(path: Path) -> dict[str, Any]:
    """Load a Kineto JSON or JSON.gz file (gzip detected by its magic bytes, not the suffix)."""
    path = Path(path)
    if path.is_dir():
        raise ArchsimError(
            where(path, "is a directory (expected a Kineto .json or .json.gz trace file)")
        )
    if not path.is_file():
        raise ArchsimError(where(path, "no such trace file"))
    try:
        raw = path.read_bytes()
        if raw[:2] == b"\x1f\x8b":
            raw = gzip.decompress(raw)
    except (EOFError, OSError, zlib.error) as exc:
        raise ArchsimError(
            where(path, f"truncated or corrupt gzip ({exc.__class__.__name__}: {exc})")
        ) from None
    try:
        doc = json.loads(raw)
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        detail = str(exc).split(":")[0] if isinstance(exc, UnicodeDecodeError) else exc.msg
        raise ArchsimError(where(path, f"not JSON ({detail})")) from None
    except RecursionError:
        raise ArchsimError(where(path, "JSON nested too deeply to be a Kineto trace")) from None
    except ValueError as exc:  # integers of more than sys.get_int_max_str_digits() digits
        raise ArchsimError(where(path, f"unreadable JSON number ({str(exc)[:80]})")) from None
    if not isinstance(doc, dict):
        raise ArchsimError(
            where(path, "not a Kineto trace (expected a JSON object with 'traceEvents')")
        )
    if not isinstance(doc.get("traceEvents"), list):
        raise ArchsimError(where(path, "not a Kineto trace (no 'traceEvents' list)"))
    if _has_huge_float_ts(doc["traceEvents"]):
        # Parse again keeping each number's text, so that rebasing is exact (see _rebased).
        doc = json.loads(raw, parse_float=ExactFloat)
    return doc


class ExactFloat(float):
    """A JSON number as float that remembers its text (only used for traces with timestamps
    beyond 2**52 us, where float64 has lost the fraction)."""

    text: str

    def __new__(cls, text: str) -> ExactFloat:
        value = super().__new__(cls, text)
        value.text = text
        return value


def _has_huge_float_ts(events: list[Any]) -> bool:
    for event in events:
        if isinstance(event, dict):
            ts = event.get("ts")
            if isinstance(ts, float) and math.isfinite(ts) and abs(ts) >= TS_EXACT_LIMIT_US:
                return True
    return False


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return np.nan
    try:
        return float(value)
    except OverflowError:
        return np.nan


def flatten(path: Path, doc: dict[str, Any]) -> KinetoTrace:
    """Turn ``traceEvents`` into a table of the complete events ingest needs, validating each.

    Repairs, each counted on the result: exact duplicate events are removed (a trace concatenated
    with itself would otherwise double every time); timestamps beyond 2**52 us are rebased onto the
    earliest one before conversion to float; names with lone surrogates get U+FFFD.
    """
    path = Path(path)
    cols: dict[str, list[Any]] = {
        k: []
        for k in (
            "index",
            "cat",
            "name",
            "pid",
            "tid",
            "ts",
            "dur",
            "correlation",
            "external_id",
            "args",
        )
    }
    other_device: dict[str, int] = {}
    names_repaired = 0
    for index, event in enumerate(doc["traceEvents"]):
        if not isinstance(event, dict):
            raise ArchsimError(where(path, f"traceEvents[{index}] is not a JSON object"))
        if event.get("ph") != "X":
            continue
        raw_cat = str(event.get("cat", "")).lower()
        cat = CATEGORY_ALIASES.get(raw_cat)
        if cat is None:
            if raw_cat.startswith(FOREIGN_DEVICE_PREFIXES) or raw_cat == CUPTI_RANGE_CATEGORY:
                other_device[raw_cat] = other_device.get(raw_cat, 0) + 1
            continue
        ts, dur = check_times(path, event, index)
        args = event.get("args")
        if not isinstance(args, dict):
            args = {}
        check_args(path, cat, event, index, args)
        name = event.get("name")
        name = str(name) if name is not None else ""
        cleaned = clean_text(name)
        names_repaired += cleaned is not name
        name = cleaned
        # Legacy traces file record_function ranges (ProfilerStep#N, user scopes) under "Operator";
        # they are annotations, not ops.
        if cat == "cpu_op" and name.startswith(_ANNOTATION_PREFIXES):
            cat = "user_annotation"
        cols["index"].append(index)
        cols["cat"].append(cat)
        cols["name"].append(name)
        cols["pid"].append(id_field(path, event, index, "pid", event.get("pid")))
        cols["tid"].append(id_field(path, event, index, "tid", event.get("tid")))
        cols["ts"].append(ts)
        cols["dur"].append(dur)
        cols["correlation"].append(
            id_field(path, event, index, "correlation", args.get("correlation"))
        )
        cols["external_id"].append(as_int(first_key(args, _EXTERNAL_ID_KEYS)))
        cols["args"].append(args)
    ts_values, rebase = _rebased(cols["ts"])
    events = pd.DataFrame(
        {
            "index": np.asarray(cols["index"], dtype=np.int64),
            "cat": pd.Categorical(cols["cat"], categories=list(dict.fromkeys(KEPT_CATEGORIES))),
            "name": pd.Series(cols["name"], dtype=object),
            "pid": np.asarray(cols["pid"], dtype=np.int64),
            "tid": np.asarray(cols["tid"], dtype=np.int64),
            "ts": ts_values,
            "dur": np.asarray(cols["dur"], dtype=np.float64),
            "correlation": np.asarray(cols["correlation"], dtype=np.int64),
            "external_id": np.asarray(cols["external_id"], dtype=np.int64),
            "args": pd.Series(cols["args"], dtype=object),
        }
    )
    key = ["cat", "name", "pid", "tid", "ts", "dur", "correlation", "external_id"]
    duplicated = events.duplicated(subset=key, keep="first").to_numpy()
    if duplicated.any():
        events = events[~duplicated].reset_index(drop=True)
    events["end"] = events["ts"] + events["dur"]
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    return KinetoTrace(
        path=path,
        events=events,
        top=top,
        n_events=len(doc["traceEvents"]),
        duplicates_removed=int(duplicated.sum()),
        ts_rebased_by_us=rebase,
        names_repaired=int(names_repaired),
        other_device_events=other_device,
    )


def _rebased(ts: list[int | float]) -> tuple[np.ndarray, int]:
    """(timestamps as float64, the integer us subtracted from each: 0 unless some exceed 2**52).

    Subtracting in Python integers (or decimals, for numbers parsed as ExactFloat) first keeps the
    timestamps exact; converting 9.2e18 straight to float64 would round them to multiples of 1024 us
    and mis-link kernels to launches.
    """
    if not ts or max(abs(t) for t in ts) < TS_EXACT_LIMIT_US:
        return np.asarray(ts, dtype=np.float64), 0
    exact = [Decimal(t.text) if isinstance(t, ExactFloat) else t for t in ts]
    base = min(math.floor(t) for t in exact)
    return np.asarray([float(t - base) for t in exact], dtype=np.float64), int(base)


def read_kineto(path: Path) -> KinetoTrace:
    """Read, validate and flatten a Kineto trace file."""
    return flatten(Path(path), read_json(Path(path)))


def gpu_event_fields(gpu: pd.DataFrame) -> pd.DataFrame:
    """Device, stream, launch geometry and bytes of kernel/memcpy/memset events (NaN when absent)."""
    rows = []
    for args, pid, tid in zip(gpu["args"], gpu["pid"], gpu["tid"], strict=True):
        grid = args.get("grid") or [0, 0, 0]
        block = args.get("block") or [0, 0, 0]
        grid = (list(grid) + [1, 1, 1])[:3] if isinstance(grid, list) else [0, 0, 0]
        block = (list(block) + [1, 1, 1])[:3] if isinstance(block, list) else [0, 0, 0]
        rows.append(
            (
                as_int(args.get("device"), pid),
                as_int(args.get("stream"), tid),
                *(as_int(v, 0) for v in grid),
                *(as_int(v, 0) for v in block),
                _number(args.get("registers per thread")),
                _number(args.get("shared memory")),
                _number(args.get("blocks per SM")),
                _number(args.get("warps per SM")),
                _number(first_key(args, _OCCUPANCY_KEYS)),
                _number(args.get("bytes")),
            )
        )
    columns = [
        "device",
        "stream",
        "grid_x",
        "grid_y",
        "grid_z",
        "block_x",
        "block_y",
        "block_z",
        "registers_per_thread",
        "shared_memory_bytes",
        "blocks_per_sm",
        "warps_per_sm",
        "est_occupancy_pct",
        "bytes",
    ]
    return pd.DataFrame.from_records(rows, columns=columns, index=gpu.index)


# Launch APIs whose traced grid counts work-items (threads), not blocks. HIP API reference, hip_ext.h
# hipExtModuleLaunchKernel(f, globalWorkSizeX/Y/Z, localWorkSizeX/Y/Z, ...): "globalWorkSizeX -
# global work size in X" (https://rocm.docs.amd.com/projects/HIP/en/latest/doxygen/html/
# group___module.html), unlike hipModuleLaunchKernel/hipLaunchKernel, which take gridDim in blocks.
# Kineto records the arguments as given: all 339 such kernels of a public MI210 trace (Tensile
# Cijk_*, MIOpen igemm, batched_transpose) have a grid divisible by their block.
WORK_ITEM_LAUNCH_APIS = frozenset({"hipExtModuleLaunchKernel"})


def grid_in_blocks(fields: pd.DataFrame, launch_api: np.ndarray) -> int:
    """Convert ``fields`` grid_x/y/z from work-items to blocks (ceil) in place for kernels launched
    through a work-item API; returns how many kernels were converted."""
    work_items = np.isin(launch_api.astype(str), list(WORK_ITEM_LAUNCH_APIS))
    work_items &= (fields["grid_x"].to_numpy() > 0) & (fields["block_x"].to_numpy() > 0)
    if not work_items.any():
        return 0
    for axis in "xyz":
        grid = fields[f"grid_{axis}"].to_numpy(dtype=np.int64)
        block = np.maximum(fields[f"block_{axis}"].to_numpy(dtype=np.int64), 1)
        fields[f"grid_{axis}"] = np.where(work_items, -(-grid // block), grid)
    return int(work_items.sum())


def _as_list(value: Any) -> Any:
    """Some exporters write the shape lists as text ("[[2, 3], [3]]"); read those back."""
    if isinstance(value, str) and value.startswith("["):
        try:
            return ast.literal_eval(value)
        except (ValueError, SyntaxError):
            return None
    return value


def op_shapes(args: dict[str, Any]) -> tuple[Any, Any, Any]:
    """(Input Dims, Input type, Concrete Inputs) of a cpu op's args, None where not recorded."""
    return (
        _as_list(first_key(args, INPUT_DIMS_KEYS)),
        _as_list(first_key(args, _INPUT_TYPE_KEYS)),
        _as_list(args.get("Concrete Inputs")),
    )


def device_properties(top: dict[str, Any]) -> list[dict[str, Any]]:
    """``deviceProperties`` as a list of plain dicts (empty for CPU-only traces and for traces that
    do not record it)."""
    props = top.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [clean_value(dict(p)) for p in props if isinstance(p, dict)]
