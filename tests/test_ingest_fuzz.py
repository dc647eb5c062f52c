"""Fuzz the ingester with mutated real traces: whatever a mutation does to a small real Kineto file
(wild values in any field, deleted keys, duplicated or dropped events, truncated text), ingest ends
either in a valid trace that saves and loads back, or in a one-line ArchsimError; never another
exception, never a negative or non-finite time, FLOP or byte count."""

from __future__ import annotations

import copy
import gzip
import json
import os
from functools import cache
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.trace import load, save
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

# Small real traces of both vendors: CUDA with memsets on 3 streams (149 events); ROCm with shapes
# and baseTimeNanoseconds (220 events); and the repository's CPU-only AlexNet capture with archsim
# step and phase markers (1,019 events, traces/alexnet-b1-fp32).
SMALL_FIXTURES = ("a100_event_sync_multistream.json.gz", "mi250_mlp_train.json.gz")
MARKED_TRACE = (
    Path(__file__).resolve().parents[1] / "traces" / "alexnet-b1-fp32" / "raw_trace.json.gz"
)
SOURCES = (*SMALL_FIXTURES, "alexnet-b1-fp32")
# Bounded so the suite stays fast (~15 s here); ARCHSIM_FUZZ_EXAMPLES=2000 for a deep run by hand.
FUZZ_EXAMPLES = int(os.environ.get("ARCHSIM_FUZZ_EXAMPLES", "40"))
EVENT_KEYS = ("ph", "cat", "name", "pid", "tid", "ts", "dur", "args")
ARG_KEYS = (
    "correlation",
    "External id",
    "Input Dims",
    "Input type",
    "Concrete Inputs",
    "bytes",
    "size",
    "grid",
    "block",
    "device",
    "stream",
    "Sequence number",
)

_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from(["", "\ud800", "stream 7", "kernel", "X", "cpu_op", "ProfilerStep#1", "1e400"]),
    st.sampled_from(
        [
            "archsim::learner_step#batch_size=-1",
            "archsim::actor_step#actor=" + "9" * 20,
            "archsim::actor_step#oops",
            "archsim::cpu#us=nan",
            "archsim::cpu_gap#us=-1",
            "archsim::env_step",
            "ProfilerStep#" + "1" * 20,
            "user_annotation",
        ]
    ),
    st.text(max_size=12),
)
WILD = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)


# Shapes of ops that have formulas: sizes up to 2**62 whose products overflow int64 and float64.
SHAPES = st.lists(
    st.lists(st.integers(min_value=-2, max_value=2**62), max_size=6), min_size=1, max_size=4
)


@cache
def _doc(name: str) -> dict:
    path = MARKED_TRACE if name == "alexnet-b1-fp32" else kineto_fixture(name)
    return json.loads(gzip.decompress(path.read_bytes()))


@st.composite
def mutations(draw) -> list[tuple]:
    """A few edits: (kind, event position as a fraction, key, value)."""
    kinds = st.sampled_from(
        ["set", "set_arg", "delete", "duplicate", "drop", "not_object", "dims", "drop_cat"]
    )
    out = []
    for _ in range(draw(st.integers(min_value=1, max_value=4))):
        kind = draw(kinds)
        where = draw(st.floats(min_value=0, max_value=0.999))
        key = draw(st.sampled_from(ARG_KEYS if kind == "set_arg" else EVENT_KEYS))
        value = draw(SHAPES if kind == "dims" else WILD)
        out.append((kind, where, key, value))
    return out


def _mutate(doc: dict, edits: list[tuple]) -> dict:
    doc = copy.deepcopy(doc)
    events = doc["traceEvents"]
    for kind, where, key, value in edits:
        if not events:
            break
        i = int(where * len(events))
        event = events[i]
        if kind == "duplicate":
            events.insert(i, copy.deepcopy(event))
        elif kind == "drop":
            del events[i]
        elif kind == "drop_cat":  # every event of this one's category (e.g. all runtime calls)
            cat = event.get("cat") if isinstance(event, dict) else None
            events[:] = [e for e in events if not (isinstance(e, dict) and e.get("cat") == cat)]
        elif kind == "not_object":
            events[i] = value
        elif not isinstance(event, dict):
            continue
        elif kind == "dims":  # new shapes for the next op that has some
            ops = [
                e for e in events[i:] if isinstance(e, dict) and "Input Dims" in e.get("args", {})
            ]
            if ops:
                ops[0]["args"]["Input Dims"] = value
        elif kind == "set":
            event[key] = value
        elif kind == "delete":
            event.pop(key, None)
        elif kind == "set_arg":
            if not isinstance(event.get("args"), dict):
                event["args"] = {}
            event["args"][key] = value
    return doc


def _check_ingest(path: Path, out: Path) -> None:
    try:
        trace = ingest(path)
    except ArchsimError as exc:
        assert "\n" not in str(exc) and str(exc)
        return
    ops = trace.ops
    for column in ("dur_us", "flops", "bytes_read", "bytes_written"):
        values = ops[column].to_numpy(dtype=np.float64)
        assert np.isfinite(values).all() and (values >= 0).all(), column
    again = load(save(trace, out, force=True))
    assert len(again.ops) == len(ops) and len(again.steps) == len(trace.steps)


@settings(
    max_examples=FUZZ_EXAMPLES,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=st.sampled_from(SOURCES), edits=mutations())
def test_mutated_real_traces_ingest_or_fail_in_one_line(tmp_path, name, edits):
    path = tmp_path / "mutated.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_mutate(_doc(name), edits)).encode()))
    _check_ingest(path, tmp_path / "out")


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(name=st.sampled_from(SOURCES), cut=st.floats(min_value=0, max_value=1))
def test_truncated_trace_text_fails_in_one_line(tmp_path, name, cut):
    text = json.dumps(_doc(name))
    path = tmp_path / "cut.json"
    path.write_text(text[: int(cut * len(text))])
    _check_ingest(path, tmp_path / "out")
