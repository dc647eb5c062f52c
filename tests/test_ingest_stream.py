"""The streaming reader (archsim.trace.stream) gives the same table as parsing the whole document,
at any chunk size (values cut by a chunk boundary), and refuses bad input in one line."""

from __future__ import annotations

import gzip
import json

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.trace import stream
from archsim.trace.kineto import flatten, read_kineto
from tests.conftest import kineto_fixture

EVENTS = [
    {
        "ph": "X",
        "cat": "cpu_op",
        "name": "aten::mm",
        "pid": 1,
        "tid": 1,
        "ts": 10,
        "dur": 5,
        "args": {
            "Input Dims": [[2, 3], [3, 4]],
            "Input type": ["float", "float"],
            "Extra": "x" * 50,
        },
    },
    {
        "ph": "X",
        "cat": "cuda_runtime",
        "name": "cudaLaunchKernel",
        "pid": 1,
        "tid": 1,
        "ts": 11,
        "dur": 2,
        "args": {"correlation": 7},
    },
    {"ph": "i", "cat": "cpu_instant_event", "name": "noise", "pid": 1, "tid": 1, "ts": 12},
    {
        "ph": "X",
        "cat": "kernel",
        "name": "k\u00e9rnel",
        "pid": 0,
        "tid": 7,
        "ts": 14.5,
        "dur": 3.25,
        "args": {"correlation": 7, "grid": [4, 1, 1], "block": [128, 1, 1], "device": 0},
    },
]
DOC = {"schemaVersion": 1, "traceEvents": EVENTS, "traceName": "t", "deviceProperties": []}


def _same(a, b) -> None:
    pd.testing.assert_frame_equal(a.events.drop(columns="args"), b.events.drop(columns="args"))
    assert a.top == b.top and a.n_events == b.n_events


@settings(max_examples=25, deadline=None)
@given(chunk=st.integers(min_value=1, max_value=400), indent=st.sampled_from([None, 0, 2]))
def test_any_chunk_size_gives_the_whole_document_table(tmp_path_factory, chunk, indent):
    path = tmp_path_factory.mktemp("s") / "t.json"
    path.write_text(json.dumps(DOC, indent=indent))
    old, old_look = stream.CHUNK_CHARS, stream._LOOKAHEAD
    stream.CHUNK_CHARS, stream._LOOKAHEAD = chunk, min(chunk, 64)
    try:
        streamed = read_kineto(path)
    finally:
        stream.CHUNK_CHARS, stream._LOOKAHEAD = old, old_look
    _same(streamed, flatten(path, DOC))
    # only the args keys something reads are kept
    assert "Extra" not in streamed.events["args"].iloc[0]
    assert streamed.events["args"].iloc[0]["Input Dims"] == [[2, 3], [3, 4]]


@pytest.mark.parametrize(
    "name", ["a100_train_shapes", "v100_resnet50_train_2021", "mi210_gpu_only"]
)
def test_fixture_streamed_equals_whole_parse(name):
    path = kineto_fixture(f"{name}.json.gz")
    doc = json.loads(gzip.decompress(path.read_bytes()))
    _same(read_kineto(path), flatten(path, doc))


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "not JSON"),
        ("[1, 2]", "expected a JSON object with 'traceEvents'"),
        ('{"traceEvents": 3}', "no 'traceEvents' list"),
        ('{"traceName": "x"}', "no 'traceEvents' list"),
        ('{"traceEvents": [{"ph": "X"} {"ph": "X"}]}', "not JSON"),
        ('{"traceEvents": [', "not JSON"),
        ('{"traceEvents": []} trailing', "not JSON"),
        ('{"traceEvents": [' + "[" * 100_000 + "]" * 100_000 + "]}", "nested too deeply"),
        ('{"traceEvents": [{"ts": ' + "9" * 5000 + "}]}", "unreadable JSON number"),
        ('{"traceEvents": [7]}', "traceEvents[0] is not a JSON object"),
    ],
)
def test_bad_documents_are_one_line(tmp_path, text, expected):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(ArchsimError) as err:
        read_kineto(path)
    assert expected in str(err.value) and "\n" not in str(err.value)


def test_non_utf8_is_refused(tmp_path):
    path = tmp_path / "bad.json"
    path.write_bytes(b'{"traceEvents": [{"name": "\xff"}]}')
    with pytest.raises(ArchsimError, match="not JSON"):
        read_kineto(path)


def test_gpu_and_autograd_args_become_typed_columns(tmp_path):
    """GPU events keep launch geometry as typed columns (no args dict); a cpu op's Sequence number
    and Fwd thread id become the seq / fwd_tid columns; equal shapes share one args dict."""
    mm = EVENTS[0] | {"args": EVENTS[0]["args"] | {"Sequence number": 12, "Fwd thread id": 1}}
    again = mm | {"ts": 30, "args": mm["args"] | {"Sequence number": 13}}
    doc = DOC | {"traceEvents": [mm, *EVENTS[1:], again]}
    path = tmp_path / "t.json"
    path.write_text(json.dumps(doc))
    kt = read_kineto(path)
    _same(kt, flatten(path, doc))
    ev = kt.events.set_index("index")
    assert ev.loc[0, "seq"] == 12 and ev.loc[4, "seq"] == 13 and ev.loc[0, "fwd_tid"] == 1
    assert ev.loc[1, "seq"] == -1 and ev.loc[3, "seq"] == -1  # runtime call, kernel
    assert ev.loc[0, "args"] is ev.loc[4, "args"]  # same shapes: one dict
    assert ev.loc[0, "args"] == {"Input Dims": [[2, 3], [3, 4]], "Input type": ["float", "float"]}
    assert ev.loc[3, "args"] == {}
    row = kt.gpu_fields.loc[3]  # the kernel: grid [4,1,1], block [128,1,1], device 0, stream = tid
    assert (row["device"], row["stream"], row["grid_x"], row["grid_y"], row["block_x"]) == (
        0,
        7,
        4,
        1,
        128,
    )
    assert pd.isna(row["registers_per_thread"]) and list(kt.gpu_fields.index) == [3]


@pytest.mark.parametrize("gz", [False, True])
def test_on_bytes_reports_bytes_read_up_to_the_file_size(tmp_path, gz):
    """Progress: the callback hears the bytes of the file read so far (compressed ones for .gz),
    never going back, ending at the file's size."""
    text = json.dumps(DOC | {"traceEvents": EVENTS * 200}).encode()
    path = tmp_path / ("t.json.gz" if gz else "t.json")
    path.write_bytes(gzip.compress(text) if gz else text)
    seen: list[int] = []
    old, old_look = stream.CHUNK_CHARS, stream._LOOKAHEAD
    stream.CHUNK_CHARS, stream._LOOKAHEAD = 997, 64
    try:
        kt = read_kineto(path, on_bytes=seen.append)
    finally:
        stream.CHUNK_CHARS, stream._LOOKAHEAD = old, old_look
    assert kt.n_events == 4 * 200 and kt.duplicates_removed == 3 * 199  # the copies are duplicates
    assert len(seen) > 1 and seen == sorted(seen) and seen[-1] == path.stat().st_size


def test_ingest_command_is_quiet_off_a_terminal(tmp_path, capsys):
    """No progress bar where stderr is not a terminal (pytest captures it): scripted runs stay clean."""
    from archsim.cli import main

    assert (
        main(
            [
                "ingest",
                str(kineto_fixture("a100_train_shapes.json.gz")),
                "--out",
                str(tmp_path / "o"),
            ]
        )
        == 0
    )
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out.startswith("wrote ")
