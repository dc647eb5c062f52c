"""Bad input, round 3: bounded memory and time on hostile Kineto files (benchmarks/big_input.py
measures the real sizes). One JSON value past archsim.trace.stream.MAX_VALUE_CHARS (a 500 MB string,
or a gzip bomb of one) is refused in one line once that much is held, instead of the whole value
decoded again at every 4 Mi-character chunk (500 MB: 37 s and 1.2 GB before, 0.9 s and 0.3 GB now);
a syntax error is reported where it is, without reading the rest of the file; a long value within
the cap still reads whole. The caps are made small here so each test reads a few kB."""

from __future__ import annotations

import gzip
import json

import pytest

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.trace import stream
from archsim.trace.kineto import read_kineto
from tests.conftest import error_line


@pytest.fixture
def small_chunks(monkeypatch):
    """4 kB chunks, 64 kB values: the shapes of the real limits, a thousandth of their size."""
    monkeypatch.setattr(stream, "CHUNK_CHARS", 4096)
    monkeypatch.setattr(stream, "_LOOKAHEAD", 64)
    monkeypatch.setattr(stream, "MAX_VALUE_CHARS", 64 * 1024)


def _event(name: str, ts: int = 1) -> dict:
    return {"ph": "X", "cat": "cpu_op", "name": name, "ts": ts, "dur": 1, "pid": 1, "tid": 1}


@pytest.mark.parametrize(
    "text",
    [
        '{"traceEvents": [{"ph": "X", "name": "' + "x" * 300_000 + '"}]}',  # in an event
        '{"traceName": "' + "x" * 300_000 + '", "traceEvents": []}',  # a top-level value
        '"' + "x" * 300_000 + '"',  # the whole file one string
        '{"traceEvents": [{"ph": "X", "name": "' + "x" * 300_000,  # and never closed
    ],
    ids=["event", "top-level", "file", "unterminated"],
)
def test_a_value_past_the_cap_is_refused_before_the_rest_is_read(tmp_path, small_chunks, text):
    path = tmp_path / "big.json"
    path.write_text(text)
    read: list[int] = []
    with pytest.raises(ArchsimError, match="one JSON value runs past 0.0625 MiB") as info:
        read_kineto(path, on_bytes=read.append)
    assert "\n" not in str(info.value) and str(path) in str(info.value)
    assert max(read) < 200_000 < len(text)  # refused with about 2x the cap held, not all of it


def test_a_gzip_bomb_of_one_string_is_one_line_from_the_cli(tmp_path, small_chunks, capsys):
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wt") as out:
        out.write('{"traceEvents": [{"ph": "X", "name": "')
        for _ in range(64):  # 4 MiB of text from 4 kB of gzip
            out.write("x" * 65536)
        out.write('"}]}')
    assert bomb.stat().st_size < 64 * 1024
    assert main(["ingest", str(bomb), "--out", str(tmp_path / "t")]) == 2
    assert "one JSON value runs past" in error_line(capsys)
    assert not (tmp_path / "t").exists()


def test_a_syntax_error_is_reported_without_reading_the_rest(tmp_path, small_chunks):
    # Before: every decode error read another chunk, to the end of the file, before it was said.
    good = ",\n".join(json.dumps(_event(f"op{i}", i)) for i in range(20_000))
    path = tmp_path / "bad.json"
    path.write_text('{"traceEvents": [{"ph": "X", "name": "a", "ts": 1, "dur": }, ' + good + "]}")
    read: list[int] = []
    with pytest.raises(ArchsimError, match="not JSON \\(Expecting value") as info:
        read_kineto(path, on_bytes=read.append)
    assert "truncated" not in str(info.value)
    assert max(read) < 20_000 < path.stat().st_size


def test_a_long_value_within_the_cap_still_reads_whole(tmp_path, small_chunks):
    name = "y" * 50_000  # 12 chunks long, under the 64 kB cap
    doc = {"traceEvents": [_event("a"), _event(name, 2), _event("b", 3)], "traceName": "n"}
    path = tmp_path / "long.json"
    path.write_text(json.dumps(doc))
    trace = read_kineto(path)
    assert list(trace.events["name"]) == ["a", name, "b"]


def test_a_cut_file_still_says_truncated(tmp_path, small_chunks):
    text = json.dumps({"traceEvents": [_event(f"op{i}", i) for i in range(500)]})
    path = tmp_path / "cut.json"
    path.write_text(text[: len(text) // 2])
    with pytest.raises(ArchsimError, match="truncated"):
        read_kineto(path)


def test_events_past_the_cap_are_refused_and_the_cap_can_be_lifted(tmp_path, monkeypatch):
    # A 690 kB gzip of one repeated cpu_op expanded to 3 M events and 0.9 GB before any refusal.
    events = ",".join(json.dumps(_event("a", i)) for i in range(50))
    path = tmp_path / "many.json.gz"
    with gzip.open(path, "wt") as out:
        out.write('{"traceEvents": [' + events + "]}")
    monkeypatch.setenv(stream.MAX_EVENTS_ENV, "20")
    with pytest.raises(ArchsimError, match="over 20 events to keep .* set ARCHSIM_MAX_EVENTS=N"):
        read_kineto(path)
    monkeypatch.setenv(stream.MAX_EVENTS_ENV, "50")
    assert len(read_kineto(path).events) == 50
    monkeypatch.setenv(stream.MAX_EVENTS_ENV, "-3")
    with pytest.raises(ArchsimError, match="ARCHSIM_MAX_EVENTS=-3: expected an integer >= 1"):
        read_kineto(path)
    monkeypatch.delenv(stream.MAX_EVENTS_ENV)
    assert stream.max_events() == stream.MAX_EVENTS_DEFAULT
