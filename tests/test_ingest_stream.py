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
