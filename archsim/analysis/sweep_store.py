"""``sweep.parquet`` streamed as points finish: rows are appended as Parquet row groups to a temporary
sibling (archsim.atomic) that is renamed to ``sweep.parquet`` only when every point is in it.

``sweep.csv`` stays the durable log that a resumed sweep reads (a row is fsynced as its batch
finishes; a Parquet file is unreadable until its footer is written), so a crash never loses a
finished point. A sweep that stops on an error or Ctrl-C closes its stream and keeps it as
``sweep.partial.parquet``: every point finished so far, readable at once. A resumed sweep writes the
CSV's earlier rows first, then streams the new ones, and removes the partial file when complete.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

PARQUET_NAME = "sweep.parquet"
PARTIAL_PARQUET_NAME = "sweep.partial.parquet"
# Rows buffered before a row group is written, or seconds since the last one: row groups of a few
# hundred rows keep the file compact, and a few seconds keep the stream close to the finished points.
ROW_GROUP_ROWS = 500
ROW_GROUP_MAX_AGE_S = 5.0
INT_METRICS = frozenset({"hw_threads", "sms_total", "events"})
TEXT_METRICS = frozenset({"path"})


def column_types(knobs: dict[str, list[Any]], metric_columns: tuple[str, ...]) -> dict[str, str]:
    """Arrow type name of each column: a knob whose values are all integers is int64, all numbers
    float64, otherwise text (as in the CSV: ``none``, ``trace``); metrics are float64 but for a few
    counts and the engine's name."""
    types: dict[str, str] = {}
    for name, values in knobs.items():
        ints = all(isinstance(v, int) and not isinstance(v, bool) for v in values)
        numbers = all(isinstance(v, int | float) and not isinstance(v, bool) for v in values)
        types[name] = "int64" if ints else "float64" if numbers else "string"
    for name in metric_columns:
        types[name] = (
            "int64" if name in INT_METRICS else "string" if name in TEXT_METRICS else "float64"
        )
    return types


def _typed(value: Any, kind: str) -> Any:
    """A CSV cell or a worker's value as the column's type (an empty cell is null)."""
    if value is None or value == "":
        return None
    if kind == "int64":
        return int(value)
    if kind == "float64":
        return float(value)
    return str(value)


def to_table(rows: list[dict[str, Any]], types: dict[str, str]):
    import pyarrow as pa

    schema = arrow_schema(types)
    columns = {
        name: pa.array([_typed(row.get(name), kind) for row in rows], type=schema.field(name).type)
        for name, kind in types.items()
    }
    return pa.table(columns, schema=schema)


def arrow_schema(types: dict[str, str]):
    import pyarrow as pa

    kinds = {"int64": pa.int64(), "float64": pa.float64(), "string": pa.string()}
    return pa.schema([(name, kinds[kind]) for name, kind in types.items()])


class ParquetStream:
    """Rows in, row groups out: ``add`` buffers, ``flush`` writes one row group."""

    def __init__(self, writer, types: dict[str, str]) -> None:
        self._writer = writer
        self._types = types
        self._buffer: list[dict[str, Any]] = []
        self._flushed_at = time.monotonic()
        self.rows = 0

    def add(self, rows: list[dict[str, Any]]) -> None:
        self._buffer.extend(rows)
        self.rows += len(rows)
        age = time.monotonic() - self._flushed_at
        if len(self._buffer) >= ROW_GROUP_ROWS or age >= ROW_GROUP_MAX_AGE_S:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self._writer.write_table(to_table(self._buffer, self._types))
            self._buffer = []
        self._flushed_at = time.monotonic()

    def close(self) -> None:
        self.flush()
        self._writer.close()


def remove_stale_streams(out: Path) -> None:
    """The temporaries of a stream whose sweep was killed (no footer: unreadable) and the partial
    file of an earlier stopped run: the CSV holds their rows, and this run writes them again."""
    for stale in Path(out).glob(f".{PARQUET_NAME}.tmp-*"):
        stale.unlink(missing_ok=True)
    (Path(out) / PARTIAL_PARQUET_NAME).unlink(missing_ok=True)


@contextlib.contextmanager
def parquet_stream(out: Path, types: dict[str, str]) -> Iterator[ParquetStream]:
    """Stream into ``out/sweep.parquet`` (renamed into place when the block completes); on any
    exception the rows so far are kept, readable, in ``out/sweep.partial.parquet``."""
    import pyarrow.parquet as pq

    from archsim.atomic import atomic_output_file

    out = Path(out)
    remove_stale_streams(out)
    with atomic_output_file(out / PARQUET_NAME, "wb") as handle:
        stream = ParquetStream(pq.ParquetWriter(handle, arrow_schema(types)), types)
        try:
            yield stream
            stream.close()
        except BaseException:
            with contextlib.suppress(Exception):
                stream.close()  # the footer: the rows so far become a readable file
                handle.flush()
                os.fsync(handle.fileno())
                if stream.rows:
                    os.replace(handle.name, out / PARTIAL_PARQUET_NAME)
            raise
        handle.flush()
        os.fsync(handle.fileno())
