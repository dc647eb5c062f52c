"""Bad traces beyond the ingest basics: non-finite event times, trace directories whose tables are not
trace tables, a phase with no ops named with the trace's path, and raw Kineto files accepted wherever
TRACE is. One line, exit 2, no traceback, nothing written."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from archsim.cli import main
from tests.conftest import PROJECT_ROOT, kineto_fixture

TRACES = PROJECT_ROOT / "traces"


def _one_error_line(capsys) -> str:
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "field, value, cat",
    [("dur", "NaN", "cpu_op"), ("dur", "Infinity", "kernel"), ("ts", "-Infinity", "kernel")],
)
def test_non_finite_event_times_are_refused(tmp_path, capsys, field, value, cat):
    # Python's json reads NaN and Infinity; a clock never writes them.
    doc = json.loads(gzip.decompress(kineto_fixture("mi250_mlp_train.json.gz").read_bytes()))
    event = next(e for e in doc["traceEvents"] if e.get("cat") == cat)
    event[field] = 987654.321  # a marker no real event has, replaced by the bare token below
    text = json.dumps(doc)
    assert text.count("987654.321") == 1
    text = text.replace("987654.321", value)
    trace = tmp_path / "trace.json"
    trace.write_text(text)
    out = tmp_path / "out"
    assert main(["ingest", str(trace), "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert str(trace) in line and f"non-finite '{field}'" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["trace.json"]


def _broken_copy(tmp_path: Path, table: str, change) -> Path:
    trace = tmp_path / "trace"
    shutil.copytree(TRACES / "alexnet-b1-fp32", trace)
    path = trace / table
    frame = pd.read_parquet(path)
    change(frame, trace).to_parquet(path)
    return trace


def test_a_table_that_is_not_a_trace_table_is_named(tmp_path, capsys):
    steps_as_ops = _broken_copy(
        tmp_path, "ops.parquet", lambda _f, t: pd.read_parquet(t / "steps.parquet")
    )
    assert main(["trace", "info", str(steps_as_ops)]) == 2
    line = _one_error_line(capsys)
    assert (
        str(steps_as_ops / "ops.parquet") in line and "no op_id, kind, name, phase column" in line
    )


def test_a_column_of_the_wrong_type_is_named(tmp_path, capsys):
    def text_durations(frame, _trace):
        frame["dur_us"] = "slow"
        return frame

    trace = _broken_copy(tmp_path, "ops.parquet", text_durations)
    assert main(["predict", str(trace)]) == 2
    line = _one_error_line(capsys)
    assert str(trace / "ops.parquet") in line and "column dur_us" in line and "float64" in line


def test_breakdown_of_a_phase_without_ops_names_the_trace(tmp_path, capsys):
    out = tmp_path / "bd"
    trace = TRACES / "alexnet-b1-fp32"
    assert main(["breakdown", str(trace), "--phase", "train", "--out", str(out)]) == 2
    line = _one_error_line(capsys)
    assert line.startswith(f"archsim: error: {trace}: no ops in phase 'train'")
    assert "inference_batch" in line
    assert list(tmp_path.iterdir()) == []


def test_predict_takes_a_raw_kineto_file_like_the_other_commands(capsys):
    fixture = kineto_fixture("a100_alexnet_forward.json.gz")
    assert main(["predict", str(fixture), "--hw", "dgx-a100", "--phase", "other", "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["n_ops"] > 0 and result["seconds_per_batch"] > 0
    assert main(["predict", str(fixture.with_name("absent.json.gz"))]) == 2
    assert "no such trace directory or file" in _one_error_line(capsys)
