"""Bad input to `archsim ingest`: one-line error naming the file and the problem, exit code 2, no
traceback, nothing left behind. Inputs are real fixtures damaged in one specific way."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.trace.ingest import MAX_UNLINKED_FRACTION, ingest
from tests.conftest import kineto_fixture

SMALL = "mi250_mlp_train.json.gz"


def _doc(name: str = SMALL) -> dict:
    return json.loads(gzip.decompress(kineto_fixture(name).read_bytes()))


def _write(tmp_path: Path, doc: object, name: str = "trace.json.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _first(doc: dict, cat: str) -> dict:
    return next(e for e in doc["traceEvents"] if e.get("cat") == cat)


def _run_and_expect_error(capsys, tmp_path: Path, trace: Path, *needles: str) -> str:
    out = tmp_path / "out"
    code = main(["ingest", str(trace), "--out", str(out)])
    captured = capsys.readouterr()
    assert code == 2
    lines = captured.err.strip().splitlines()
    assert len(lines) == 1, captured.err  # one line, no traceback
    assert lines[0].startswith("archsim: error: ") and str(trace) in lines[0]
    for needle in needles:
        assert needle in lines[0]
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out")]  # no temp leftovers
    return lines[0]


def test_truncated_gzip(tmp_path, capsys):
    data = kineto_fixture(SMALL).read_bytes()
    trace = tmp_path / "cut.json.gz"
    trace.write_bytes(data[: len(data) // 2])
    _run_and_expect_error(capsys, tmp_path, trace, "truncated or corrupt gzip")


def test_not_json(tmp_path, capsys):
    trace = tmp_path / "notes.json"
    trace.write_text("this is a profiler log, not a trace\n")
    _run_and_expect_error(capsys, tmp_path, trace, "not JSON")


@pytest.mark.parametrize("doc", [{"schemaVersion": 1, "deviceProperties": []}, [1, 2, 3]])
def test_json_without_trace_events(tmp_path, capsys, doc):
    _run_and_expect_error(capsys, tmp_path, _write(tmp_path, doc), "traceEvents")


@pytest.mark.parametrize("field", ["ts", "dur"])
def test_event_missing_a_time_field(tmp_path, capsys, field):
    doc = _doc()
    kernel = _first(doc, "kernel")
    del kernel[field]
    _run_and_expect_error(capsys, tmp_path, _write(tmp_path, doc), f"has no '{field}'", "kernel")


def test_negative_duration(tmp_path, capsys):
    doc = _doc()
    _first(doc, "cpu_op")["dur"] = -3.5
    _run_and_expect_error(capsys, tmp_path, _write(tmp_path, doc), "negative duration", "-3.5")


def test_kernel_whose_launch_is_missing(tmp_path, capsys):
    doc = _doc()
    kernel = _first(doc, "kernel")
    kernel["args"]["correlation"] = 999_999_999  # no runtime call has it
    line = _run_and_expect_error(
        capsys, tmp_path, _write(tmp_path, doc), "no launching runtime call", "999999999"
    )
    assert str(kernel["ts"]) in line and kernel["name"][:40] in line


def test_a_few_unlinked_kernels_at_the_window_edge_are_tolerated_and_counted(tmp_path):
    # One broken correlation among the V100 trace's 6,095 GPU events is far below the limit.
    doc = _doc("v100_cnn_ddp_train.json.gz")
    kernels = [e for e in doc["traceEvents"] if e.get("cat") == "kernel"]
    kernels[-1]["args"]["correlation"] = -12345
    assert MAX_UNLINKED_FRACTION > 1 / 6_095
    trace = ingest(_write(tmp_path, doc))
    assert trace.meta["ingest"]["unlinked_kernels"] == 1
    assert trace.meta["ingest"]["kernels_linked_fraction"] == pytest.approx(4_349 / 4_350, abs=1e-6)
    orphan = trace.ops[trace.ops["launch_op"] == ""]
    assert len(orphan) == 1 and orphan["phase"].iloc[0] == "other"


def test_missing_file_is_an_archsim_error(tmp_path):
    with pytest.raises(ArchsimError, match="no such trace file"):
        ingest(tmp_path / "absent.json.gz")


def test_non_empty_output_directory_needs_force(tmp_path, capsys):
    trace = kineto_fixture(SMALL)
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["ingest", str(trace), "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(out) in err[0] and "not empty" in err[0]
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert main(["ingest", str(trace), "--out", str(out), "--force"]) == 0
    assert sorted(p.name for p in out.iterdir()) == [
        "meta.yaml",
        "ops.parquet",
        "raw_trace.json.gz",
        "steps.parquet",
    ]


def test_trace_with_nothing_to_ingest(tmp_path, capsys):
    doc = _doc()
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") == "user_annotation"]
    _run_and_expect_error(capsys, tmp_path, _write(tmp_path, doc), "nothing to ingest")


def test_non_numeric_timestamp(tmp_path, capsys):
    doc = _doc()
    _first(doc, "cuda_runtime")["ts"] = "4203669603438.301"
    _run_and_expect_error(capsys, tmp_path, _write(tmp_path, doc), "non-numeric 'ts'")
