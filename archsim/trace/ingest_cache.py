"""Ingest each small trace file once per process: the same file ingested again gives a copy.

Ingest is a pure function of the file's bytes and path (no environment, no clock), so a second ingest
of an unchanged file can return a copy of the first result. Notebooks, ``predict`` over several
presets and the test suite (the SD3.5 fixture, 2 s to ingest, is read by 16 test modules) ingest the
same files again and again. The key is the resolved path and a BLAKE2b digest of the bytes, not the
modification time: Linux file times tick with the kernel's coarse clock (1-4 ms), so a file rewritten
within one tick at the same size would otherwise be served stale. Only files up to
``MAX_CACHED_FILE_BYTES`` are kept (a large trace is ingested once per process anyway, and its table
would stay in memory), at most ``MAX_CACHED_TRACES`` of them and ``MAX_CACHED_TABLE_BYTES`` of tables
in all, least recently used dropped first: a compressed file's tables take 2-4x its size in memory
(SD3.5: 3.8 MiB of .json.gz, 6.6 MiB of tables), so the file-size bound alone would let eight traces
hold gigabytes.
"""

from __future__ import annotations

import copy
import hashlib
from collections import OrderedDict
from pathlib import Path

from archsim.trace.format import Trace

MAX_CACHED_FILE_BYTES = 64 * 2**20
MAX_CACHED_TRACES = 8
MAX_CACHED_TABLE_BYTES = 256 * 2**20
_CACHE: OrderedDict[tuple[str, str, bytes], tuple[Trace, int]] = OrderedDict()


def cache_key(path: Path) -> tuple[str, str, bytes] | None:
    """(path as given, resolved path, digest of the bytes) of a small readable file, else None (not
    cached; ingest then reports any problem with the file itself). The path as given is part of
    the key because the trace keeps it (``raw_path``)."""
    try:
        if not path.is_file() or path.stat().st_size > MAX_CACHED_FILE_BYTES:
            return None
        data = path.read_bytes()
        return str(path), str(path.resolve()), hashlib.blake2b(data, digest_size=32).digest()
    except OSError:
        return None


def cached(key: tuple[str, str, bytes]) -> Trace | None:
    """A copy of the trace ingested from ``key``'s file, or None."""
    entry = _CACHE.get(key)
    if entry is None:
        return None
    _CACHE.move_to_end(key)
    return _copy(entry[0])


def table_bytes(trace: Trace) -> int:
    """Memory the trace's ops and steps tables hold (pandas' deep count: strings included)."""
    return int(trace.ops.memory_usage(deep=True).sum() + trace.steps.memory_usage(deep=True).sum())


def remember(key: tuple[str, str, bytes], trace: Trace) -> None:
    """Keep a copy of ``trace`` unless its tables alone exceed the cache's bytes; then drop the least
    recently used until both bounds hold."""
    size = table_bytes(trace)
    if size > MAX_CACHED_TABLE_BYTES:
        return
    _CACHE[key] = (_copy(trace), size)
    _CACHE.move_to_end(key)
    while len(_CACHE) > MAX_CACHED_TRACES or cached_table_bytes() > MAX_CACHED_TABLE_BYTES:
        _CACHE.popitem(last=False)


def cached_table_bytes() -> int:
    """Table bytes the cache holds now."""
    return sum(size for _, size in _CACHE.values())


def _copy(trace: Trace) -> Trace:
    """An independent copy (callers add columns and edit meta in place), without __post_init__'s
    conform pass: the tables already conform."""
    dup = copy.copy(trace)
    dup.meta = copy.deepcopy(trace.meta)
    dup.ops = trace.ops.copy(deep=True)
    dup.steps = trace.steps.copy(deep=True)
    return dup
