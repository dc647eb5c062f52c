"""Validation and repair of single Kineto events: ids, times, sizes and text that no real trace
holds are refused in one line naming the event; text with invalid Unicode is repaired."""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from archsim.errors import ArchsimError, where

INT64_LIMIT = 2**63  # pid/tid/correlation/shape values are stored as int64
# No profiling window runs for a week: Kineto keeps a session's events in host memory buffers and
# torch.profiler schedules record a few steps at a time (pytorch.org/docs/stable/profiler.html). A
# longer event (e.g. dur=1e18) is a corrupt field, not a measurement.
MAX_EVENT_DUR_US = 7 * 86_400 * 1e6
INPUT_DIMS_KEYS = ("Input Dims", "Input dims")
_INT_ONLY = {int}
_INT_IN_TEXT = re.compile(r"-?\d{1,19}")


def as_int(value: Any, default: int = -1) -> int:
    """stream/grid/block as an int: numbers as they are, "stream 7" -> 7, anything else (or a value
    that does not fit int64) -> default."""
    if isinstance(value, bool):
        return default
    if isinstance(value, float):
        if not math.isfinite(value):
            return default
        value = int(value)
    if isinstance(value, int):
        return value if -INT64_LIMIT <= value < INT64_LIMIT else default
    if isinstance(value, str):
        found = _INT_IN_TEXT.search(value)
        if found:
            return as_int(int(found.group()), default)
    return default


def id_field(path: Path, event: dict[str, Any], index: int, key: str, value: Any) -> int:
    """pid/tid/correlation: like as_int, but a number no int64 holds (>= 2**63, +-Infinity) is an
    error rather than a silent -1, since it would merge unrelated threads or launches."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        if not (math.isfinite(value) and -INT64_LIMIT <= value < INT64_LIMIT):
            raise ArchsimError(
                where(
                    path,
                    f"{event_label(event, index)} has '{key}' {_short(value)} "
                    "(expected an integer below 2^63)",
                )
            )
        return int(value)
    return as_int(value)


def _short(value: Any) -> str:
    text = (
        repr(value)
        if not isinstance(value, int) or abs(value) < 10**30
        else f"~1e{len(str(abs(value))) - 1}"
    )
    return text if len(text) <= 40 else text[:37] + "..."


def clean_text(text: str) -> str:
    """``text`` with lone surrogates (valid JSON escapes, invalid Unicode) replaced by U+FFFD, so
    it can be written to Parquet, YAML and a terminal."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")


def first_key(args: dict[str, Any], keys: tuple[str, ...], default: Any = None) -> Any:
    for key in keys:
        if key in args:
            return args[key]
    return default


def event_label(event: dict[str, Any], index: int) -> str:
    name = clean_text(str(event.get("name", "?")))
    if len(name) > 60:
        name = name[:57] + "..."
    return f"event #{index} ({event.get('cat', '?')} '{name}')"


def _number_as_text(value: Any) -> str:
    """Why a time is a decimal string, where it is one: torch_npu's profiler writes Ascend NPU
    traces (ASCEND_PROFILER_OUTPUT/trace_view.json) with every 'ts' a string such as
    "1773285904640626.314" (verl-project/rl-insight's data/mstx_data), which archsim does not read."""
    try:
        ok = isinstance(value, str) and math.isfinite(float(value))
    except ValueError:
        ok = False
    if not ok:
        return ""
    return (
        " (a number written as text, as torch_npu's profiler writes Ascend NPU traces, "
        "trace_view.json; archsim reads torch.profiler (Kineto) traces of CUDA and ROCm GPUs)"
    )


def check_times(path: Path, event: dict[str, Any], index: int) -> tuple[float, float]:
    ts, dur = event.get("ts"), event.get("dur")
    for key, value in (("ts", ts), ("dur", dur)):
        if value is None:
            raise ArchsimError(where(path, f"{event_label(event, index)} has no '{key}'"))
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ArchsimError(
                where(
                    path,
                    f"{event_label(event, index)} has a non-numeric '{key}': {value!r}"
                    f"{_number_as_text(value)}",
                )
            )
        if not math.isfinite(value):  # json reads NaN and Infinity, which no clock produces
            raise ArchsimError(
                where(path, f"{event_label(event, index)} has a non-finite '{key}': {value!r}")
            )
        if abs(value) >= INT64_LIMIT:
            raise ArchsimError(
                where(
                    path,
                    f"{event_label(event, index)} has '{key}' {_short(value)} (expected "
                    "microseconds below 2^63)",
                )
            )
    if dur < 0:
        raise ArchsimError(
            where(path, f"{event_label(event, index)} has a negative duration ({dur} us)")
        )
    if dur > MAX_EVENT_DUR_US:
        raise ArchsimError(
            where(
                path,
                f"{event_label(event, index)} lasts {dur:.3g} us (more than a week: not a "
                "profiled event)",
            )
        )
    return ts, float(dur)


def _bad_dims(dims: Any) -> bool:
    """True when recorded Input Dims hold a negative size, or a shape of more elements than int64
    counts (no memory holds that many; its FLOPs would overflow float64)."""
    if not isinstance(dims, list):
        return False
    if dims and set(map(type, dims)) == _INT_ONLY:  # a shape (types checked in C)
        return min(dims) < 0 or math.prod(dims) >= INT64_LIMIT
    return any(_bad_dims(d) for d in dims if type(d) is list)


def check_args(path: Path, cat: str, event: dict[str, Any], index: int, args: dict) -> None:
    """Shapes and byte counts are sizes: negative (or beyond int64) ones are corrupt input."""
    if cat == "cpu_op":
        dims = first_key(args, INPUT_DIMS_KEYS)
        if dims is not None and _bad_dims(dims):
            raise ArchsimError(
                where(
                    path,
                    f"{event_label(event, index)} has a negative size or a shape of 2^63+ "
                    "elements in 'Input Dims' (expected sizes >= 0)",
                )
            )
        return
    for key in ("bytes", "size"):
        value = args.get(key)
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if is_number and not 0 <= value < INT64_LIMIT:
            raise ArchsimError(
                where(
                    path,
                    f"{event_label(event, index)} has '{key}' {_short(value)} (expected a "
                    "byte count >= 0)",
                )
            )


def clean_value(value: Any) -> Any:
    """Strings with lone surrogates repaired, numbers no int64 holds dropped, recursively."""
    if isinstance(value, dict):
        return {clean_text(str(k)): clean_value(v) for k, v in value.items()}
    if isinstance(value, list):
        return [clean_value(v) for v in value]
    if isinstance(value, str):
        return clean_text(value)
    if isinstance(value, int) and not isinstance(value, bool) and abs(value) >= INT64_LIMIT:
        return None
    return value
