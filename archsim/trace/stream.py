"""Streaming read of a Kineto trace: the top-level object is scanned incrementally and each entry of
``traceEvents`` is decoded on its own (``json.JSONDecoder.raw_decode``) from a text buffer refilled
in chunks, so a multi-GB trace never exists as one string or one list of dicts (a 313 MB trace
parsed whole peaked at 5.8x its size, issue 13). Bad input is refused in one line as before: not
JSON, nesting too deep, numbers too long, no ``traceEvents`` list.
"""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from archsim.errors import ArchsimError, where
from archsim.trace.not_kineto import (
    LFS_POINTER_PREFIX,
    extra_data_message,
    lfs_pointer_message,
    no_events_reason,
)

CHUNK_CHARS = 1 << 22  # 4 Mi characters of text per refill
# A top-level scalar is decoded only with this much text after it (or at end of file), so that a
# number cut by the chunk boundary is never read short.
_LOOKAHEAD = 1 << 16
_NON_WS = re.compile(r"[^ \t\n\r]")
# After an event: optional whitespace, then ',' (more events) or ']' (the end of traceEvents).
_SEPARATOR = re.compile(r"[ \t\n\r]*([,\]])")
_DECODER = json.JSONDecoder()
_EXACT = float(2**52)  # float64 holds every integer below this exactly
# One JSON value (an event, or a top-level entry such as deviceProperties) longer than this is
# refused: Kineto's largest events are a few kB (a kernel with its args; the fixtures' longest is
# under 20 kB), and a 500 MB string (or a gzip bomb of one) held and decoded in memory took 1.2 GB
# and 37 s before it was refused (benchmarks/big_input.py). Events in any number are fine.
MAX_VALUE_CHARS = 64 * 2**20
# Events ingest keeps (complete spans of the categories it reads) take 300 B to 1 KB each in memory:
# about 300 B on a real trace (benchmarks/big_input.py: 1.09 M events, 313 MB of JSON, 504 MB
# peak), about 1 KB for minimal events (a million bare cpu_op spans: 962 MB peak RSS, docs/LIMITS.md).
# 6 M of them keeps ingest within about 6 GB whatever the events are, and is 5.5x the largest trace
# seen (issue 13's: 1.09 M events, 313 MB). ARCHSIM_MAX_EVENTS=N reads more.
MAX_EVENTS_DEFAULT = 6_000_000
MAX_EVENTS_ENV = "ARCHSIM_MAX_EVENTS"


def max_events() -> int:
    """The cap on kept events: ARCHSIM_MAX_EVENTS when set (an integer >= 1), else the default."""
    text = os.environ.get(MAX_EVENTS_ENV, "").strip()
    if not text:
        return MAX_EVENTS_DEFAULT
    try:
        value = int(text.replace("_", "").replace(",", ""))
    except ValueError:
        value = 0
    if value < 1:
        raise ArchsimError(f"{MAX_EVENTS_ENV}={text[:40]}: expected an integer >= 1")
    return value


def too_many_events(path: Path, limit: int) -> ArchsimError:
    return ArchsimError(
        where(
            path,
            f"over {limit:,} events to keep (about {limit * 300 / 1e9:.1f} GB in memory at 300 B "
            f"an event): a gzip bomb, or a trace to record with fewer profiler steps; set "
            f"{MAX_EVENTS_ENV}=N to read more",
        )
    )


# A decode error this close to the end of the text held may be a value cut by the chunk boundary
# (``tru``, ``1.5e``, ``"\u00``): read on. Further back it is the file's own error: say so now,
# instead of reading the rest of the file into memory first.
_CUT_MARGIN = 64


class _Buffer:
    def __init__(
        self, handle: IO[str], path: Path, on_bytes: Callable[[int], None] | None = None
    ) -> None:
        self.handle, self.path, self.on_bytes = handle, path, on_bytes
        self.text, self.pos, self.eof = "", 0, False
        self.file = _file_of(handle)

    def fill(self, chars: int = 0) -> bool:
        """Append a chunk of at least ``chars`` characters (dropping consumed text); False at end
        of file."""
        if self.eof:
            return False
        try:
            chunk = self.handle.read(max(CHUNK_CHARS, chars))
        except UnicodeDecodeError as exc:
            raise ArchsimError(where(self.path, f"not JSON ({str(exc).split(':')[0]})")) from None
        except (EOFError, OSError, zlib.error) as exc:
            raise ArchsimError(
                where(self.path, f"truncated or corrupt gzip ({exc.__class__.__name__}: {exc})")
            ) from None
        self.text = self.text[self.pos :] + chunk
        self.pos = 0
        self.eof = not chunk
        if self.on_bytes is not None and self.file is not None:
            self.on_bytes(self.file.tell())
        return bool(chunk)

    def skip_ws(self) -> str:
        """The next non-whitespace character ("" at end of file), not consumed."""
        while True:
            found = _NON_WS.search(self.text, self.pos)
            if found:
                self.pos = found.start()
                return self.text[self.pos]
            self.pos = len(self.text)
            if not self.fill():
                return ""

    def expect(self, chars: str, what: str) -> str:
        char = self.skip_ws()
        if not char or char not in chars:
            found = repr(char) if char else "end of file"
            raise ArchsimError(where(self.path, f"not JSON (expected {what}, found {found})"))
        self.pos += 1
        return char

    def value(self, scalar_safe: bool = False) -> tuple[Any, int, int]:
        """Decode the next JSON value: (value, start, end) offsets into ``self.text``."""
        self.skip_ws()
        if not scalar_safe:
            while not self.eof and len(self.text) - self.pos < _LOOKAHEAD:
                self.fill()
        while True:
            try:
                value, end = _DECODER.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as exc:
                held = len(self.text) - self.pos
                cut = exc.msg.startswith("Unterminated") or exc.pos >= len(self.text) - _CUT_MARGIN
                if cut and held > MAX_VALUE_CHARS:
                    raise ArchsimError(
                        where(
                            self.path,
                            f"not a Kineto trace (one JSON value runs past "
                            f"{MAX_VALUE_CHARS / 2**20:g} MiB of text; Kineto events are a few kB)",
                        )
                    ) from None
                # the value may continue: read as much again as is held, so a long value is
                # decoded a few times (log2 of its length), not once per chunk (quadratic)
                if cut and self.fill(min(held, MAX_VALUE_CHARS + 1 - held)):
                    continue
                # a string or value still open at end of file: the file was cut short (a copy or
                # write that stopped), not a different format
                cut = exc.msg.startswith("Unterminated") or not self.text[exc.pos :].strip()
                said = "; the file ends mid-value: truncated?" if cut and self.text.strip() else ""
                raise ArchsimError(where(self.path, f"not JSON ({exc.msg}{said})")) from None
            except RecursionError:
                raise ArchsimError(
                    where(self.path, "JSON nested too deeply to be a Kineto trace")
                ) from None
            except ValueError as exc:  # integers beyond sys.get_int_max_str_digits() digits
                raise ArchsimError(
                    where(self.path, f"unreadable JSON number ({str(exc)[:80]})")
                ) from None
            start, self.pos = self.pos, end
            return value, start, end


def open_text(path: Path) -> IO[str]:
    """The trace as text, gunzipped on the fly when it starts with the gzip magic bytes."""
    path = Path(path)
    if path.is_dir():
        raise ArchsimError(
            where(path, "is a directory (expected a Kineto .json or .json.gz trace file)")
        )
    if not path.is_file():
        raise ArchsimError(where(path, "no such trace file"))
    raw = open(path, "rb")  # noqa: SIM115 - closed with the text wrapper by the caller
    if raw.read(2) == b"\x1f\x8b":
        raw.seek(0)
        binary: IO[bytes] = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    else:
        raw.seek(0)
        binary = raw
    # utf-8-sig: a leading byte order mark is skipped, as RFC 8259 allows (it was "not JSON")
    return io.TextIOWrapper(io.BufferedReader(binary, 1 << 20), encoding="utf-8-sig")  # type: ignore[arg-type]


def _file_of(handle: IO[str]) -> IO[bytes] | None:
    """The file under the text (and gzip) layers of ``open_text``, whose position is bytes read."""
    binary = getattr(getattr(handle, "buffer", None), "raw", None)
    if isinstance(binary, gzip.GzipFile):
        binary = binary.fileobj  # type: ignore[assignment]
    return binary if binary is not None and hasattr(binary, "tell") else None


def _json_kind(value: Any) -> str:
    """What a top-level JSON value is, for the refusal: pytorch's test/profiler/
    profiler_utils_mock_events.json is an array of two arrays (profiler events as dicts of
    '_name', '_start_us', then Python-tracer frames), not the Chrome trace format."""
    if isinstance(value, list):
        first = type(value[0]).__name__ if value else None
        named = {"list": "arrays", "dict": "objects", "str": "strings"}.get(str(first), "values")
        return f"an array of {named}" if value else "an empty array"
    return {"dict": "an object", "str": "a string", "NoneType": "null", "bool": "a boolean"}.get(
        type(value).__name__, "a number"
    )


def iter_trace(
    path: Path, top: dict[str, Any], on_bytes: Callable[[int], None] | None = None
) -> Iterator[tuple[int, Any, str]]:
    """Yield (index, event, event's JSON text) for each entry of ``traceEvents``; ``top`` receives
    the other top-level keys (complete once the iterator is exhausted). ``on_bytes(n)`` is called
    after each chunk with the bytes of the file read so far (compressed bytes for .gz), for a
    progress bar."""
    with open_text(path) as handle:
        buf = _Buffer(handle, Path(path), on_bytes)
        if buf.skip_ws() == "v":  # a Git LFS pointer is about 130 characters: hold it whole
            if len(buf.text) - buf.pos < 1024:
                buf.fill(1024)
            if buf.text.startswith(LFS_POINTER_PREFIX, buf.pos):
                raise ArchsimError(where(path, lfs_pointer_message(buf.text[buf.pos :])))
        if buf.skip_ws() == "[" and _array_of_objects(buf):
            # the Chrome trace format's "JSON Array Format": the events alone, no top-level keys
            # (https://docs.google.com/document/d/1CvAClvFfyA5R-PhYUmn5OOQtYMH4h6I0nSsKchNAySU),
            # whose closing ']' is optional: writers that append events as they go leave it out, and
            # may end on a ',' (Chromium's py_trace_event, commit 8aec0121: "trace_event_viewer
            # knows how to fixup traces that dont have a close"), as does a tracer killed mid-run
            buf.pos += 1
            yield from _events(buf, closing_optional=True)
            if buf.skip_ws():
                raise ArchsimError(where(path, "not JSON (Extra data)"))
            return
        if buf.skip_ws() != "{":
            # a top-level array, number, ... (or empty file): decode it for the usual message
            if not buf.skip_ws():
                raise ArchsimError(where(path, "not JSON (Expecting value)"))
            value, _, _ = buf.value()
            raise ArchsimError(
                where(
                    path,
                    "not a Kineto trace (expected a JSON object with 'traceEvents' or a JSON array "
                    f"of event objects; found {_json_kind(value)})",
                )
            )
        buf.pos += 1
        seen_events = False
        if buf.skip_ws() == "}":
            buf.pos += 1
        else:
            while True:
                key, _, _ = buf.value()
                if not isinstance(key, str):
                    raise ArchsimError(where(path, "not JSON (expected a property name)"))
                buf.expect(":", "':'")
                if key == "traceEvents" and buf.skip_ws() == "[" and not seen_events:
                    seen_events = True
                    buf.pos += 1
                    if buf.skip_ws() == "]":
                        buf.pos += 1
                    else:
                        yield from _events(buf)
                else:
                    value, _, _ = buf.value()
                    if key == "traceEvents":  # not a list, or a second traceEvents key
                        raise ArchsimError(
                            where(path, "not a Kineto trace (no 'traceEvents' list)")
                        )
                    top[key] = value
                if buf.expect(",}", "',' or '}'") == "}":
                    break
        if buf.skip_ws():
            raise ArchsimError(where(path, extra_data_message(top, seen_events)))
        if not seen_events:
            raise ArchsimError(
                where(path, f"not a Kineto trace (no 'traceEvents' list{no_events_reason(top)})")
            )


def _array_of_objects(buf: _Buffer) -> bool:
    """Whether the array at ``buf.pos`` ('[', not consumed) starts with an object."""
    while True:
        found = _NON_WS.search(buf.text, buf.pos + 1)
        if found:
            return buf.text[found.start()] == "{"
        if not buf.fill():  # keeps the text from buf.pos on
            return False


def _events(buf: _Buffer, closing_optional: bool = False) -> Iterator[tuple[int, Any, str]]:
    """The entries of traceEvents, the '[' consumed; fast path: decode straight from the buffer
    and match the separator with one regex; fall back to the refilling calls near a chunk end.
    ``closing_optional``: the file may end after an event (or after its ',') without the ']'."""
    index = 0
    decode = _DECODER.raw_decode
    while True:
        text, pos = buf.text, buf.pos
        try:
            if len(text) - pos < _LOOKAHEAD and not buf.eof:
                raise ValueError  # near the chunk end: take the careful path
            if text[pos] in " \t\n\r":
                pos = _NON_WS.search(text, pos).start()  # type: ignore[union-attr]
            event, end = decode(text, pos)
            sep = _SEPARATOR.match(text, end)
            if sep is None:
                raise ValueError
        except (ValueError, AttributeError, IndexError, RecursionError):  # the careful path
            if closing_optional and index and not buf.skip_ws():
                return  # the file ends after a ',': the array's ']' left out
            event, pos, end = buf.value(scalar_safe=True)
            yield index, event, buf.text[pos:end] if _needs_text(event) else ""
            index += 1
            if closing_optional and not buf.skip_ws():
                return  # the file ends after the event
            if buf.expect(",]", "',' or ']' in traceEvents") == "]":
                return
            continue
        buf.pos = sep.end()
        ts = event.get("ts") if type(event) is dict else None
        if type(ts) is float and not -_EXACT < ts < _EXACT and _needs_text(event):
            yield index, event, text[pos:end]
        else:
            yield index, event, ""
        index += 1
        if sep.group(1) == "]":
            return


def _needs_text(event: Any) -> bool:
    """The event's text is kept only where a float timestamp is past float64's exact range."""
    if isinstance(event, dict):
        ts = event.get("ts")
        return isinstance(ts, float) and abs(ts) >= 2**52 and ts == ts and abs(ts) != float("inf")
    return False
