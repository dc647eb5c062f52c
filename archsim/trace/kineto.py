"""Read a torch.profiler (Kineto) Chrome trace, validate it, and flatten it into one events table.

Parsing happens once here; everything downstream works on the table. Category names are normalised
onto the current Kineto names so that 2021-era traces (PyTorch 1.8-1.10: ``Operator``, ``Runtime``,
``Kernel``, ``Memcpy``, ``Memset``, ``tid: "stream 7"``, lower-case ``external id``, as in the
pytorch/kineto tb_plugin test traces) and AMD/ROCm traces (``hip*`` runtime calls, no register or
occupancy args, ``baseTimeNanoseconds``) look the same as a 2024 CUDA trace.
"""

from __future__ import annotations

import ast
import json
import math
from array import array
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError, where
from archsim.trace.begin_end import PairCounts, paired_complete
from archsim.trace.infer_steps import ENV_STEP_FUNCTION
from archsim.trace.kineto_checks import (
    INPUT_DIMS_KEYS,
    INT64_LIMIT,
    MAX_EVENT_DUR_US,
    as_int,
    check_args,
    check_times,
    clean_text,
    first_key,
    id_field,
)
from archsim.trace.kineto_columns import (
    GPU_FLOAT_FIELDS,
    GPU_FLOAT_KEYS,
    GPU_INT_FIELDS,
    HOST_KEPT,
    BadDims,
    as_float,
    as_numpy,
    autograd_id,
    gpu_int_values,
    runtime_kept,
    shared_args,
)
from archsim.trace.kineto_columns import INPUT_TYPE_KEYS as _INPUT_TYPE_KEYS
from archsim.trace.not_kineto import no_events_reason
from archsim.trace.stream import iter_trace, max_events, too_many_events

# Kineto category (lower-cased) -> normalised category. Legacy names from PyTorch 1.8-1.10 traces.
# Other categories (gpu_user_annotation mirrors, python_function, cuda_sync, ac2g flows) are skipped.
CATEGORY_ALIASES: dict[str, str] = {
    "cpu_op": "cpu_op",
    "operator": "cpu_op",
    "user_annotation": "user_annotation",
    "cuda_runtime": "cuda_runtime",
    "runtime": "cuda_runtime",
    "cuda_driver": "cuda_runtime",  # cuLaunchKernel (Triton etc.) correlates like cudaLaunchKernel
    # Intel XPU (Kineto's PTI plugin): urEnqueueKernelLaunch carries its kernel's correlation too
    "xpu_runtime": "cuda_runtime",
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
    uncategorized_events: int = 0  # complete events with no "cat" at all (pre-Kineto exports)
    skipped_categories: dict[str, int] = field(default_factory=dict)  # complete events not read
    pairs: PairCounts = field(default_factory=PairCounts)  # B/E pairs read as complete events
    # GPU events' launch geometry, registers and bytes (GPU_INT_FIELDS + GPU_FLOAT_FIELDS), one row
    # per kernel/memcpy/memset event, indexed by the event's position in traceEvents ("index").
    gpu_fields: pd.DataFrame | None = None


class ExactFloat(float):
    """A JSON number as float that remembers its text (only used for traces with timestamps
    beyond 2**52 us, where float64 has lost the fraction)."""

    text: str

    def __new__(cls, text: str) -> ExactFloat:
        value = super().__new__(cls, text)
        value.text = text
        return value


_EMPTY: dict[str, Any] = {}  # shared by every event without kept args (never mutated)
_NUMBER = (int, float)
_EXACT_DECODER = json.JSONDecoder(parse_float=lambda text: ExactFloat(text))


def flatten(path: Path, doc: dict[str, Any]) -> KinetoTrace:
    """Flatten an already parsed trace document (see flatten_events)."""
    events = doc.get("traceEvents")
    top = {k: v for k, v in doc.items() if k != "traceEvents"}
    if not isinstance(events, list):
        why = no_events_reason(top) if "traceEvents" not in doc else ""
        raise ArchsimError(where(path, f"not a Kineto trace (no 'traceEvents' list{why})"))
    return flatten_events(Path(path), ((i, e, "") for i, e in enumerate(events)), top)


def flatten_events(path: Path, events: Iterable[tuple[int, Any, str]], top: dict) -> KinetoTrace:
    """Turn ``traceEvents`` into a table of the complete events ingest needs, validating each.

    ``events`` yields (index, event, event JSON text or ""), e.g. from archsim.trace.stream; ``top``
    holds the other top-level keys once ``events`` is exhausted. Repairs, each counted on the
    result: exact duplicate events are removed (a trace concatenated with itself would otherwise
    double every time); timestamps beyond 2**52 us are rebased onto the earliest one before
    conversion to float; names with lone surrogates get U+FFFD.

    Memory: numbers go into typed arrays (8 bytes a value, not a Python object and a pointer) and
    the launch geometry, registers and bytes of GPU events into typed columns (``gpu_fields``) as
    they stream, so a GPU event keeps no args dict at all (issue 13: the per-event dicts were most
    of the peak on a 313 MB trace).
    """
    path = Path(path)
    ints = {k: array("q") for k in ("index", "pid", "tid", "correlation", "external_id")}
    dur_col, ts_col = array("d"), array("d")
    ts_big: list[int | float] | None = None  # all timestamps as Python numbers once one is >= 2**52
    cat_col: list[str] = []
    seq_col, fwd_col = array("q"), array("q")  # autograd Sequence number, Fwd thread id (or -1)
    name_col: list[str] = []
    args_col: list[dict[str, Any]] = []
    gpu_index = array("q")
    gpu_ints = [array("q") for _ in GPU_INT_FIELDS]
    gpu_floats = [array("d") for _ in GPU_FLOAT_FIELDS]
    other_device: dict[str, int] = {}
    skipped: dict[str, int] = {}
    names: dict[str, str] = {}  # one string object per distinct name (kernel names repeat)
    shared: dict[Any, Any] = {}  # one object per distinct shape list and args dict (never mutated)
    names_repaired = uncategorized = 0
    n_events = 0
    pairs = PairCounts()
    limit = max_events()  # memory grows with the events kept (archsim.trace.stream)
    for index, event, text in paired_complete(events, pairs):
        n_events = max(n_events, index + 1)
        if not isinstance(event, dict):
            raise ArchsimError(where(path, f"traceEvents[{index}] is not a JSON object"))
        if event.get("ph") != "X":
            continue
        raw_cat = str(event.get("cat", "")).lower()
        cat = CATEGORY_ALIASES.get(raw_cat)
        if raw_cat == "python_function" and ENV_STEP_FUNCTION.search(str(event.get("name"))):
            cat = (
                "user_annotation"  # gymnasium Env.step (with_stack traces): an inferred actor step
            )
        if cat is None:
            skipped[raw_cat] = skipped.get(raw_cat, 0) + 1
            if raw_cat.startswith(FOREIGN_DEVICE_PREFIXES) or raw_cat == CUPTI_RANGE_CATEGORY:
                other_device[raw_cat] = other_device.get(raw_cat, 0) + 1
            uncategorized += "cat" not in event  # torch <= 1.7's autograd profiler wrote none
            continue
        ts, dur = event.get("ts"), event.get("dur")
        if not (  # the common case checked inline; check_times says what is wrong otherwise
            type(ts) in _NUMBER
            and type(dur) in _NUMBER
            and -INT64_LIMIT < ts < INT64_LIMIT
            and 0 <= dur <= MAX_EVENT_DUR_US
        ):
            ts, dur = check_times(path, event, index)
        dur = float(dur)
        if text:  # a float timestamp past 2**52: keep its digits exact for rebasing
            ts = _EXACT_DECODER.decode(text).get("ts", ts)
        args = event.get("args")
        if not isinstance(args, dict):
            args = {}
        is_op = cat == "cpu_op"
        if not is_op:  # a cpu op's shapes are checked once per distinct list (_shared_args)
            check_args(path, cat, event, index, args)
        name = event.get("name")
        if type(name) is str and name in names:
            name = names[name]
        else:
            text_name = str(name) if name is not None else ""
            cleaned = clean_text(text_name)
            names_repaired += cleaned is not text_name
            if isinstance(name, str):
                names[name] = cleaned
            name = cleaned
        # Legacy traces file record_function ranges (ProfilerStep#N, user scopes) under "Operator";
        # they are annotations, not ops.
        if cat == "cpu_op" and name.startswith(_ANNOTATION_PREFIXES):
            cat = "user_annotation"
        pid, tid, corr = event.get("pid"), event.get("tid"), args.get("correlation")
        if not (type(pid) is int and -INT64_LIMIT <= pid < INT64_LIMIT):
            pid = id_field(path, event, index, "pid", pid)
        if not (type(tid) is int and -INT64_LIMIT <= tid < INT64_LIMIT):
            tid = id_field(path, event, index, "tid", tid)
        if not (type(corr) is int and -INT64_LIMIT <= corr < INT64_LIMIT):
            corr = id_field(path, event, index, "correlation", corr)
        if ts_big is None and not -TS_EXACT_LIMIT_US < ts < TS_EXACT_LIMIT_US:
            ts_big = list(ts_col)  # past float64's exact range: keep Python numbers (exact)
        if ts_big is not None:
            ts_big.append(ts)
        else:
            ts_col.append(ts)
        ints["index"].append(index)
        ints["pid"].append(pid)
        ints["tid"].append(tid)
        ints["correlation"].append(corr)
        ext = args.get("External id", _EMPTY)  # a sentinel: the legacy key is looked up too
        if not (type(ext) is int and -INT64_LIMIT <= ext < INT64_LIMIT):
            ext = as_int(first_key(args, _EXTERNAL_ID_KEYS))
        ints["external_id"].append(ext)
        dur_col.append(dur)
        if len(dur_col) > limit:
            raise too_many_events(path, limit)
        cat_col.append(cat)
        name_col.append(name)
        if cat in GPU_CATEGORIES:  # typed columns instead of a dict
            gpu_index.append(index)
            for column, value in zip(gpu_ints, gpu_int_values(args, pid, tid), strict=True):
                column.append(value)
            for column, key in zip(gpu_floats, GPU_FLOAT_KEYS, strict=True):
                column.append(as_float(first_key(args, key)))
            kept = _EMPTY
            seq_col.append(-1)
            fwd_col.append(-1)
        elif cat == "cuda_runtime":
            seq_col.append(-1)
            fwd_col.append(-1)
            kept = runtime_kept(args, shared) or _EMPTY
        else:
            seq_col.append(autograd_id(args.get("Sequence number")))
            fwd_col.append(autograd_id(args.get("Fwd thread id")))
            kept = _EMPTY
            if HOST_KEPT.intersection(args):
                dims_key = next((k for k in INPUT_DIMS_KEYS if k in args), None) if is_op else None
                try:
                    kept = shared_args(args, shared, dims_key)
                except BadDims:
                    check_args(path, "cpu_op", event, index, args)  # says what is wrong
                    raise
        args_col.append(kept)
        del event, args
    n_events = max(n_events, pairs.entries)  # pairs' end events are not yielded
    ts_values, rebase = _rebased(ts_big if ts_big is not None else ts_col)
    del ts_big, ts_col
    events_table = pd.DataFrame(
        {
            "index": as_numpy(ints.pop("index"), np.int64),
            "cat": pd.Categorical(cat_col, categories=list(dict.fromkeys(KEPT_CATEGORIES))),
            "name": pd.Series(name_col, dtype=object),
            "pid": as_numpy(ints.pop("pid"), np.int64),
            "tid": as_numpy(ints.pop("tid"), np.int64),
            "ts": ts_values,
            "dur": as_numpy(dur_col, np.float64),
            "correlation": as_numpy(ints.pop("correlation"), np.int64),
            "external_id": as_numpy(ints.pop("external_id"), np.int64),
            "seq": as_numpy(seq_col, np.int64),
            "fwd_tid": as_numpy(fwd_col, np.int64),
            "args": pd.Series(args_col, dtype=object),
        }
    )
    del cat_col, name_col, args_col
    gpu_fields = pd.DataFrame(
        {
            **{k: as_numpy(c, np.int64) for k, c in zip(GPU_INT_FIELDS, gpu_ints, strict=True)},
            **{
                k: as_numpy(c, np.float64)
                for k, c in zip(GPU_FLOAT_FIELDS, gpu_floats, strict=True)
            },
        },
        index=pd.Index(as_numpy(gpu_index, np.int64), name="index"),
    )
    # exact duplicates: same identity and the same kept args
    key = ["cat", "name", "pid", "tid", "ts", "dur", "correlation", "external_id"]
    duplicated = events_table.duplicated(subset=key, keep="first").to_numpy()
    if duplicated.any():
        events_table = events_table[~duplicated].reset_index(drop=True)
    events_table["end"] = events_table["ts"] + events_table["dur"]
    return KinetoTrace(
        path=path,
        events=events_table,
        top=top,
        n_events=n_events,
        duplicates_removed=int(duplicated.sum()),
        ts_rebased_by_us=rebase,
        names_repaired=int(names_repaired),
        other_device_events=other_device,
        uncategorized_events=uncategorized,
        skipped_categories=skipped,
        pairs=pairs,
        gpu_fields=gpu_fields,
    )


def _rebased(ts: array | list[int | float]) -> tuple[np.ndarray, int]:
    """(timestamps as float64, the integer us subtracted from each: 0 unless some exceed 2**52).

    Subtracting in Python integers (or decimals, for numbers parsed as ExactFloat) first keeps the
    timestamps exact; converting 9.2e18 straight to float64 would round them to multiples of 1024 us
    and mis-link kernels to launches.
    """
    if isinstance(ts, array):  # every value below 2**52 (flatten_events checked)
        return as_numpy(ts, np.float64), 0
    if not ts or max(abs(t) for t in ts) < TS_EXACT_LIMIT_US:
        return np.asarray(ts, dtype=np.float64), 0
    exact = [Decimal(t.text) if isinstance(t, ExactFloat) else t for t in ts]
    base = min(math.floor(t) for t in exact)
    return np.asarray([float(t - base) for t in exact], dtype=np.float64), int(base)


def read_kineto(path: Path, on_bytes: Callable[[int], None] | None = None) -> KinetoTrace:
    """Read, validate and flatten a Kineto trace file, streaming its events (archsim.trace.stream);
    ``on_bytes(n)``: bytes of the file read so far, after each chunk (progress)."""
    top: dict[str, Any] = {}
    return flatten_events(Path(path), iter_trace(Path(path), top, on_bytes), top)


def gpu_event_fields(kt: KinetoTrace, gpu: pd.DataFrame) -> pd.DataFrame:
    """Device, stream, launch geometry and bytes of ``gpu`` (rows of ``kt.events``: kernel, memcpy,
    memset), NaN where not recorded; a copy, indexed like ``gpu``."""
    assert kt.gpu_fields is not None
    fields = kt.gpu_fields.loc[gpu["index"].to_numpy()]
    return fields.set_axis(gpu.index, axis=0)


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
