"""Bad input, round 2: the files commands read besides traces (simulation outputs for report,
calibration overlays, a sweep's settings on resume) and raw Kineto files whose ingested trace
would not load. One line naming the file, exit 2, no traceback."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.trace.format import load
from tests.conftest import error_line


@pytest.fixture(scope="module")
def sim_dir(trace_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sim") / "sim"
    assert main(["simulate", str(trace_dir), "--sim-seconds", "0.05", "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("hw_set", [[1], 1e308, {"a": 1}])
def test_report_of_a_simulation_whose_hw_set_is_not_strings(sim_dir, tmp_path, capsys, hw_set):
    # Before: TypeError ('int' is not iterable / 'float' object is not iterable).
    run = Path(shutil.copytree(sim_dir, tmp_path / "sim"))
    metrics = json.loads((run / "metrics.json").read_text())
    metrics["hw_set"] = hw_set
    (run / "metrics.json").write_text(json.dumps(metrics))
    page = tmp_path / "page.html"
    assert main(["report", str(run), "--out", str(page)]) == 0
    capsys.readouterr()
    assert "is not a list of key=value strings" in page.read_text()


def test_a_calibration_that_is_not_text_is_one_line(trace_dir, tmp_path, capsys):
    # Before: UnicodeDecodeError traceback.
    overlay = tmp_path / "cal.yaml"
    overlay.write_bytes(b"\xff\xfe\x00\x81garbage")
    assert main(["predict", str(trace_dir), "--calibration", str(overlay)]) == 2
    assert "cal.yaml: not valid YAML (UnicodeDecodeError)" in error_line(capsys)


_SWEEP = ["--actors", "1,2", "--sim-seconds", "0.05", "--no-progress"]


@pytest.fixture(scope="module")
def sweep_dir(trace_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "sweep"
    assert main(["sweep", str(trace_dir), *_SWEEP, "--out", str(out)]) == 0
    return out


@pytest.mark.parametrize("text", ["null", "[]", "5"])
def test_resuming_a_sweep_whose_settings_are_not_an_object(
    trace_dir, sweep_dir, tmp_path, capsys, text
):
    # Before: AttributeError ('NoneType' / 'list' object has no attribute 'get').
    out = Path(shutil.copytree(sweep_dir, tmp_path / "sweep"))
    capsys.readouterr()
    (out / "sweep.json").write_text(text)
    rows = (out / "sweep.csv").read_text()
    assert main(["sweep", str(trace_dir), *_SWEEP, "--out", str(out)]) == 2
    assert "sweep.json: expected a JSON object of the sweep's settings" in error_line(capsys)
    assert (out / "sweep.csv").read_text() == rows  # the finished points are kept


_KERNEL = {"ph": "X", "cat": "kernel", "name": "k", "ts": 1, "dur": 1, "pid": 0, "tid": 7}


@pytest.mark.parametrize(
    "doc, needle",
    [
        ({"traceEvents": [{**_KERNEL, "args": {"block": [-1, 1, 1]}}]}, "block_x -1"),
        (
            {"traceEvents": [_KERNEL], "deviceProperties": [{"numSms": "abc", "name": "X"}]},
            "deviceProperties[0].numSms: expected an integer >= 1, got 'abc'",
        ),
    ],
)
def test_a_kineto_file_whose_trace_would_not_load_is_refused_at_ingest(
    tmp_path, capsys, doc, needle
):
    # Before: ingest wrote the trace; every later command on it failed (or, before the load
    # checks, priced a block of -1 threads / tracebacked on int('abc')).
    raw = tmp_path / "k.json"
    raw.write_text(json.dumps(doc))
    out = tmp_path / "out"
    assert main(["ingest", str(raw), "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "k.json" in line and needle in line
    assert not out.exists()
    assert main(["predict", str(raw)]) == 2
    assert needle in error_line(capsys)


def test_an_ingested_fixture_still_loads(tmp_path, capsys):
    from tests.conftest import PROJECT_ROOT

    raw = PROJECT_ROOT / "tests" / "data" / "kineto_h100_cuda_sync_2026.json.gz"
    assert main(["ingest", str(raw), "--out", str(tmp_path / "t")]) == 0
    capsys.readouterr()
    load(tmp_path / "t")


@pytest.mark.parametrize(
    "content",
    [b"", b"null", b"[]", b'{"runs": 5}', b'{"configs": [{"bogus": 1}]}', b"\xff\xfe"],
)
def test_validate_from_a_damaged_measurements_file_is_one_line(tmp_path, capsys, content):
    # Before: JSONDecodeError, TypeError, KeyError or UnicodeDecodeError tracebacks.
    earlier = tmp_path / "earlier"
    (earlier / "traces").mkdir(parents=True)
    (earlier / "measurements.json").write_bytes(content)
    out = tmp_path / "out"
    assert main(["validate", "--from", str(earlier), "--out", str(out)]) == 2
    assert "not the measurements of an earlier archsim validate" in error_line(capsys)
    assert not out.exists() and [p.name for p in tmp_path.iterdir()] == ["earlier"]


def test_a_key_given_twice_in_any_yaml_input_is_named(trace_dir, tmp_path, capsys):
    # Before: PyYAML kept the last value silently (a hardware config's 'sms: 108' then 'sms: 40'
    # was a 40-SM card).
    from tests.conftest import PROJECT_ROOT

    text = (PROJECT_ROOT / "hwconfigs" / "dgx-a100.yaml").read_text()
    hw = tmp_path / "box.yaml"
    hw.write_text(text.replace("\n  sms: ", "\n  sms: 40\n  sms: ", 1))
    assert main(["hw", "show", str(hw)]) == 2
    assert "box.yaml: not valid YAML (key 'sms' appears twice in one mapping" in error_line(capsys)
    trace = Path(shutil.copytree(trace_dir, tmp_path / "t"))
    meta = trace / "meta.yaml"
    meta.write_text(meta.read_text() + "format_version: 1\n")
    assert main(["trace", "info", str(trace)]) == 2
    assert "key 'format_version' appears twice" in error_line(capsys)
    overlay = tmp_path / "cal.yaml"
    overlay.write_text("efficiency:\n  gemm: 0.5\n  gemm: 0.9\n")
    assert main(["predict", str(trace_dir), "--calibration", str(overlay)]) == 2
    assert "key 'gemm' appears twice" in error_line(capsys)
