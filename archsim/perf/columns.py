"""Typed access to ops-table columns that may be missing (hand-built tables, foreign traces)."""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import numpy as np
import pandas as pd

MEASURED_KINDS = ("kernel", "memcpy", "memset")  # ops with a measured device duration


_STRING = pd.Series([], dtype="string").dtype  # what strings() converts to


def column(ops: pd.DataFrame, name: str, default: float = 0.0) -> np.ndarray:
    if name not in ops.columns:
        return np.full(len(ops), default, dtype=float)
    values = ops[name]
    if isinstance(values.dtype, np.dtype) and values.dtype.kind in "biuf":
        # already numbers (the model asks for dozens of columns a call): a writable float copy,
        # the same as the general path below without its pandas conversions
        return np.array(values.to_numpy(), dtype=float)
    return pd.to_numeric(values, errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def strings(ops: pd.DataFrame, name: str) -> pd.Series:
    if name not in ops.columns:
        return pd.Series([""] * len(ops), dtype="string")
    values = ops[name]
    index = values.index
    if (
        values.dtype == _STRING
        and isinstance(index, pd.RangeIndex)
        and index.start == 0
        and index.step == 1
        and not values.array.isna().any()  # Series.hasnans' test, without its ~30 us of wrapping
    ):
        return values.copy(deep=False)  # nothing to convert, fill or renumber (copy on write)
    return values.astype("string").fillna("").reset_index(drop=True)


def by_unique(values: pd.Series, fn: Callable[[pd.Series], object]) -> np.ndarray:
    """``fn`` evaluated once per distinct value and spread back over the rows.

    Kernel names are long and repeat thousands of times in a trace; running regular expressions on
    the distinct names only keeps the model vectorized in practice (a 100K-op table in well under a
    second instead of seconds). ``fn`` maps each value on its own (row i of its result depends on
    value i only) and gets the distinct values as Python strings (object dtype): pandas' string
    methods then run Python's ``re`` directly, about three times faster on a few values than on
    pyarrow strings, which re-parse every pattern to choose an engine (pandas 3); the matches are
    the same, since pandas falls back to ``re`` wherever RE2 would differ. A ``fn`` that captures
    nothing but constants (module constants, a captured pattern or group index: _memo_key) is also
    remembered per value across calls
    (:func:`_remembered`): the model runs on the same few names call after call (a simulator's
    steps, a sweep's points), and a value seen before costs a dict lookup instead of pandas calls."""
    if (
        0 < len(values) <= _SMALL_TABLE_ROWS
        and isinstance(values.dtype, pd.StringDtype)
        and not values.array.isna().any()  # pd.NA or NaN ("str" dtype): factorize's code -1
    ):
        return _by_unique_small(values.array.to_numpy(dtype=object), fn)
    codes, uniques = pd.factorize(values, sort=False)
    if isinstance(uniques.dtype, pd.StringDtype):  # factorize leaves no missing value
        distinct = np.asarray(uniques, dtype=object)
    else:
        distinct = pd.Series(uniques, dtype="string").fillna("").to_numpy(dtype=object)
    key = _memo_key(fn)
    if key is None or len(distinct) == 0:
        result = _evaluate(fn, distinct)
    else:
        result = _remembered(key, fn, distinct)
    if len(values) == 0:
        return result[:0]
    return result[np.maximum(codes, 0)]


# At most this many rows, by_unique finds the distinct values with a dict instead of pd.factorize
# (~100 us of fixed cost on pyarrow strings, paid ~40 times per model call on a small table).
_SMALL_TABLE_ROWS = 512


def _by_unique_small(rows: np.ndarray, fn: Callable[[pd.Series], object]) -> np.ndarray:
    """by_unique on a few rows of Python strings: the same distinct values in the same (first-seen)
    order as pd.factorize gives, so ``fn`` sees the same input and the result is the same."""
    position: dict[str, int] = {}
    codes = np.array([position.setdefault(value, len(position)) for value in rows], dtype=np.intp)
    distinct = np.array(list(position), dtype=object)
    key = _memo_key(fn)
    result = _evaluate(fn, distinct) if key is None else _remembered(key, fn, distinct)
    return result[codes]


# Results of closure-free ``by_unique`` functions per value: {key: (dtype, {value: result row})}, or
# _UNCACHED for a function whose results are not plain numbers. Cleared past _MEMO_LIMIT values (a
# real trace has a few thousand distinct kernel names; generated tests may make many more).
_MEMO: dict[tuple, Any] = {}
_UNCACHED = object()
_MEMO_LIMIT = 200_000


def _evaluate(fn: Callable[[pd.Series], object], distinct: np.ndarray) -> np.ndarray:
    return np.asarray(fn(pd.Series(distinct, dtype=object)))


def _memo_key(fn: Callable[[pd.Series], object], depth: int = 0) -> tuple | None:
    """(code, defaults, module, the module globals it names, what it captures) of a function that
    captures only constants (strings, numbers: a pattern, a group index) and such functions, else
    None. The globals' current values (patterns, tables) are part of the key, so a constant
    replaced at run time (a test's monkeypatch) starts a new memo; a mutable one (a dict) counts by
    identity, and what functions it calls read is not looked at: module constants stay constant.
    A captured value counts with its type (1, 1.0 and True are different keys)."""
    code = getattr(fn, "__code__", None)
    if code is None or getattr(fn, "__kwdefaults__", None):
        return None
    captured: tuple = ()
    if fn.__closure__ is not None:
        captured = tuple(_captured_key(cell, depth) for cell in fn.__closure__)
        if any(key is None for key in captured):
            return None
    try:
        hash(fn.__defaults__)
    except TypeError:
        return None
    module = fn.__globals__
    named = tuple(_by_value(module[name]) for name in code.co_names if name in module)
    return (code, fn.__defaults__, id(module), named, captured)


_CONSTANT_TYPES = (str, int, float, bool, bytes, type(None))  # immutable: safe to key by value


def _captured_key(cell: Any, depth: int) -> tuple | None:
    """A closure cell's key: a constant by (type, value), a function by its own _memo_key (a few
    levels deep: tile_dims' lambda captures its local ``number``), anything else None."""
    try:
        value = cell.cell_contents
    except ValueError:  # a cell not yet filled
        return None
    if type(value) in _CONSTANT_TYPES:
        return (type(value), value)
    if depth < 3 and getattr(value, "__code__", None) is not None:
        key = _memo_key(value, depth + 1)
        return None if key is None else ("function", key)
    return None


def _by_value(value: object) -> object:
    try:
        hash(value)
    except TypeError:
        return ("id", id(value))
    return value


def _remembered(key: tuple, fn: Callable[[pd.Series], object], distinct: np.ndarray) -> np.ndarray:
    """``fn`` of ``distinct``, evaluating it only on values it has not seen (same rows, same dtype:
    a function whose result is not one row of numbers per value is not remembered)."""
    entry = _MEMO.get(key)
    if entry is _UNCACHED:
        return _evaluate(fn, distinct)
    dtype, memo = entry if entry is not None else (None, {})
    missing = [value for value in distinct if value not in memo]
    if missing:
        fresh = _evaluate(fn, np.array(missing, dtype=object))
        if (
            fresh.dtype.kind not in "biuf"
            or fresh.shape[:1] != (len(missing),)
            or (dtype is not None and fresh.dtype != dtype)
        ):
            _MEMO[key] = _UNCACHED
            return _evaluate(fn, distinct)
        if sum(len(m) for _, m in (e for e in _MEMO.values() if e is not _UNCACHED)) > _MEMO_LIMIT:
            _MEMO.clear()  # and this function keeps only the values of this call
            memo = {value: memo[value] for value in distinct if value in memo}
        dtype = fresh.dtype
        memo.update(zip(missing, fresh, strict=True))
        _MEMO[key] = (dtype, memo)
    return np.array([memo[value] for value in distinct], dtype=dtype)


@lru_cache(maxsize=4096)
def _parsed_dims(text: str) -> list:
    try:
        dims = json.loads(text)
    except ValueError:
        return []
    return dims if isinstance(dims, list) else []


def parsed_input_dims(text: object) -> list:
    """An op's recorded ``Input Dims`` as a list, one shape per input ([] when absent or not a JSON
    list). Parsed once per distinct string: callers never modify the list."""
    return _parsed_dims(text) if isinstance(text, str) and text else []
