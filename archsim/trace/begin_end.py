"""Duration events written as begin/end pairs (``ph`` "B" then "E"), read as complete events.

The Chrome trace event format allows a span as one complete event (``ph`` "X", with ``dur``) or as
a "B" and a later "E" on the same process and thread, properly nested: an "E" closes the most
recent open "B" of its thread and may omit name and category; its args are merged into the
begin's (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU, "Duration
Events"). Kineto writes "X"; tracers that append as they go write pairs (shish/eventtracer-php's
``begin()``/``end()``, for one). Before this, ingest read only "X" and refused a trace of pairs as
having nothing to ingest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_EXACT = json.JSONDecoder(parse_float=Decimal)


@dataclass
class PairCounts:
    """What pairing found, for the trace's meta: pairs read as complete events, begins never
    closed (the trace ends inside them: dropped, as a cut span has no duration), ends with no
    open begin on their thread (dropped)."""

    paired: int = 0
    unclosed_begins: int = 0
    entries: int = 0  # every entry read, paired or not
    unmatched_ends: int = 0


def _ts(event: dict[str, Any], text: str) -> Any:
    """The event's timestamp, exact (Decimal) where the streamer kept its text."""
    return _EXACT.decode(text).get("ts") if text else event.get("ts")


def paired_complete(
    events: Iterable[tuple[int, Any, str]], counts: PairCounts
) -> Iterator[tuple[int, Any, str]]:
    """Yield ``events`` (index, event, JSON text) with each B/E pair replaced by one complete
    event at the begin's index, yielded when its end is read; everything else passes unchanged.
    A pair whose timestamps are not numbers passes through as a complete event without ``dur``,
    so the usual check names the event and what is wrong."""
    open_spans: dict[tuple[Any, Any], list[tuple[int, dict[str, Any], str]]] = {}
    for index, event, text in events:
        counts.entries = index + 1
        phase = event.get("ph") if isinstance(event, dict) else None
        if phase == "B":
            key = (event.get("pid"), event.get("tid"))
            open_spans.setdefault(key, []).append((index, event, text))
            continue
        if phase != "E":
            yield index, event, text
            continue
        stack = open_spans.get((event.get("pid"), event.get("tid")))
        if not stack:
            counts.unmatched_ends += 1
            continue
        begin_index, begin, begin_text = stack.pop()
        start, end = _ts(begin, begin_text), _ts(event, text)
        complete = {**begin, "ph": "X"}
        if isinstance(start, (int, float, Decimal)) and isinstance(end, (int, float, Decimal)):
            complete["dur"] = float(Decimal(str(end)) - Decimal(str(start)))
        end_args = event.get("args")
        if isinstance(end_args, dict) and end_args:
            begin_args = begin.get("args")
            complete["args"] = {**(begin_args if isinstance(begin_args, dict) else {}), **end_args}
        counts.paired += 1
        yield begin_index, complete, begin_text
    counts.unclosed_begins = sum(len(stack) for stack in open_spans.values())
