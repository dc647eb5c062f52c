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
import re
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError, where

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
_INPUT_DIMS_KEYS = ("Input Dims", "Input dims")
_INPUT_TYPE_KEYS = ("Input type", "Input types")
_OCCUPANCY_KEYS = ("est. achieved occupancy %", "theoretical occupancy %")
_INT_IN_TEXT = re.compile(r"-?\d+")
# record_function names that are annotations even when filed as ops (older traces).
_ANNOTATION_PREFIXES = ("ProfilerStep#", "archsim::", "Optimizer.step#", "Optimizer.zero_grad#")


@dataclass
class KinetoTrace:
    """The flattened trace: ``events`` (one row per kept complete event) and top-level metadata."""

    path: Path
    events: pd.DataFrame
    top: dict[str, Any] = field(default_factory=dict)  # top-level keys other than traceEvents
    n_events: int = 0  # all entries of traceEvents, kept or not


def read_json(path: Path) -> dict[str, Any]:
    """Load a Kineto JSON or JSON.gz file (gzip detected by its magic bytes, not the suffix)."""
    path = Path(path)
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
    if not isinstance(doc, dict):
        raise ArchsimError(
            where(path, "not a Kineto trace (expected a JSON object with 'traceEvents')")
        )
    if not isinstance(doc.get("traceEvents"), list):
        raise ArchsimError(where(path, "not a Kineto trace (no 'traceEvents' list)"))
    return doc


def _as_int(value: Any, default: int = -1) -> int:
    """pid/tid/stream as an int: numbers as they are, "stream 7" -> 7, anything else -> default."""
    if isinstance(value, bool):
        return default
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value == value:
        return int(value)
    if isinstance(value, str):
        found = _INT_IN_TEXT.search(value)
        if found:
            return int(found.group())
    return default


def _first(args: dict[str, Any], keys: tuple[str, ...], default: Any = None) -> Any:
    for key in keys:
        if key in args:
            return args[key]
    return default


def _number(value: Any) -> float:
    return (
        float(value) if isinstance(value, int | float) and not isinstance(value, bool) else np.nan
    )


def _event_label(event: dict[str, Any], index: int) -> str:
    name = str(event.get("name", "?"))
    if len(name) > 60:
        name = name[:57] + "..."
    return f"event #{index} ({event.get('cat', '?')} '{name}')"


def _check_times(path: Path, event: dict[str, Any], index: int) -> tuple[float, float]:
    ts, dur = event.get("ts"), event.get("dur")
    for key, value in (("ts", ts), ("dur", dur)):
        if value is None:
            raise ArchsimError(where(path, f"{_event_label(event, index)} has no '{key}'"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ArchsimError(
                where(path, f"{_event_label(event, index)} has a non-numeric '{key}': {value!r}")
            )
        if not math.isfinite(value):  # json reads NaN and Infinity, which no clock produces
            raise ArchsimError(
                where(path, f"{_event_label(event, index)} has a non-finite '{key}': {value!r}")
            )
    if dur < 0:
        raise ArchsimError(
            where(path, f"{_event_label(event, index)} has a negative duration ({dur} us)")
        )
    return float(ts), float(dur)


def flatten(path: Path, doc: dict[str, Any]) -> KinetoTrace:
    """Turn ``traceEvents`` into a table of the complete events ingest needs, validating each."""
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
    for index, event in enumerate(doc["traceEvents"]):
        if not isinstance(event, dict):
            raise ArchsimError(where(path, f"traceEvents[{index}] is not a JSON object"))
        if event.get("ph") != "X":
            continue
        cat = CATEGORY_ALIASES.get(str(event.get("cat", "")).lower())
        name = event.get("name")
        if cat is None:
            continue
        ts, dur = _check_times(path, event, index)
        args = event.get("args")
        if not isinstance(args, dict):
            args = {}
        name = str(name) if name is not None else ""
        # Legacy traces file record_function ranges (ProfilerStep#N, user scopes) under "Operator";
        # they are annotations, not ops.
        if cat == "cpu_op" and name.startswith(_ANNOTATION_PREFIXES):
            cat = "user_annotation"
        cols["index"].append(index)
        cols["cat"].append(cat)
        cols["name"].append(name)
        cols["pid"].append(_as_int(event.get("pid")))
        cols["tid"].append(_as_int(event.get("tid")))
        cols["ts"].append(ts)
        cols["dur"].append(dur)
        cols["correlation"].append(_as_int(args.get("correlation")))
        cols["external_id"].append(_as_int(_first(args, _EXTERNAL_ID_KEYS)))
        cols["args"].append(args)
    events = pd.DataFrame(
        {
            "index": np.asarray(cols["index"], dtype=np.int64),
            "cat": pd.Categorical(cols["cat"], categories=list(dict.fromkeys(KEPT_CATEGORIES))),
            "name": pd.Series(cols["name"], dtype=object),
            "pid": np.asarray(cols["pid"], dtype=np.int64),
            "tid": np.asarray(cols["tid"], dtype=np.int64),
            "ts": np.asarray(cols["ts"], dtype=np.float64),
            "dur": np.asarray(cols["dur"], dtype=np.float64),
            "correlation": np.asarray(cols["correlation"], dtype=np.int64),
            "external_id": np.asarray(cols["external_id"], dtype=np.int64),
            "args": pd.Series(cols["args"], dtype=object),
        }
    )
    events["end"] = events["ts"] + events["dur"]
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    return KinetoTrace(path=path, events=events, top=top, n_events=len(doc["traceEvents"]))


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
                _as_int(args.get("device"), pid),
                _as_int(args.get("stream"), tid),
                *(_as_int(v, 0) for v in grid),
                *(_as_int(v, 0) for v in block),
                _number(args.get("registers per thread")),
                _number(args.get("shared memory")),
                _number(args.get("blocks per SM")),
                _number(args.get("warps per SM")),
                _number(_first(args, _OCCUPANCY_KEYS)),
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
        _as_list(_first(args, _INPUT_DIMS_KEYS)),
        _as_list(_first(args, _INPUT_TYPE_KEYS)),
        _as_list(args.get("Concrete Inputs")),
    )


def device_properties(top: dict[str, Any]) -> list[dict[str, Any]]:
    """``deviceProperties`` as a list of plain dicts (empty for CPU-only traces)."""
    props = top.get("deviceProperties")
    if not isinstance(props, list):
        return []
    return [dict(p) for p in props if isinstance(p, dict)]
