"""Bad input, round 2 (found by fuzzing every sub-command): an output that is (or holds) an input
is refused before anything is read, so ``--force`` never replaces the trace being read; a
``breakdown --sms`` range is bounded before it is built; meta.yaml fields and trace-table columns of
the wrong type or sign are one line naming the file and field; hardware YAML booleans are not
numbers. One line, exit 2, no traceback, the input left as it was."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.trace.format import load
from archsim.trace.meta_checks import META_FIELDS
from tests.conftest import PROJECT_ROOT, error_line


def _listing(root: Path) -> dict[str, bytes]:
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def _copy(trace_dir: Path, where: Path) -> Path:
    return Path(shutil.copytree(trace_dir, where))


# --- an output over an input ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "argv",
    [
        ["sweep", "{t}", "--actors", "1,2", "--out", "{t}", "--force"],
        ["simulate", "{t}", "--out", "{parent}", "--force"],
        ["compare", "{t}", "{t}", "--out", "{t}", "--force"],
        ["breakdown", "{t}", "--out", "{parent}", "--force"],
        ["calibrate", "{t}", "--out", "{t}/meta.yaml"],
        ["validate", "--pool", "{t}", "{t}", "--out", "{t}", "--force"],
    ],
    ids=["sweep", "simulate", "compare", "breakdown", "calibrate", "validate"],
)
def test_an_output_that_is_or_holds_an_input_is_refused_and_the_input_kept(
    trace_dir, tmp_path, capsys, argv
):
    # Before: `sweep T --out T --force` replaced the trace by the sweep; the next command said
    # "T: not a trace directory (meta.yaml is missing)".
    trace = _copy(trace_dir, tmp_path / "runs" / "tiny")
    before = _listing(tmp_path)
    argv = [a.format(t=trace, parent=trace.parent) for a in argv]
    assert main(argv) == 2
    line = error_line(capsys)
    assert "choose another output path" in line and str(trace) in line
    assert _listing(tmp_path) == before


def test_ingest_into_the_folder_holding_the_kineto_file_is_refused(tmp_path, capsys):
    raw = tmp_path / "trace.json.gz"
    shutil.copy(PROJECT_ROOT / "tests" / "data" / "hta_backward_thread.json.gz", raw)
    assert main(["ingest", str(raw), "--out", str(tmp_path), "--force"]) == 2
    assert "holds the input" in error_line(capsys)
    assert raw.is_file()


def test_a_hardware_yaml_inside_the_output_is_an_input_too(trace_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    hw = out / "box.yaml"
    shutil.copy(PROJECT_ROOT / "hwconfigs" / "dgx-a100.yaml", hw)
    assert main(["simulate", str(trace_dir), "--hw", str(hw), "--out", str(out), "--force"]) == 2
    assert "box.yaml" in error_line(capsys)
    assert hw.is_file()


def test_an_output_inside_an_input_folder_is_still_allowed(trace_dir, tmp_path, capsys):
    trace = _copy(trace_dir, tmp_path / "tiny")
    argv = ["simulate", str(trace), "--sim-seconds", "0.05", "--out", str(trace / "sim")]
    assert main(argv) == 0
    assert (trace / "sim" / "metrics.json").is_file()
    load(trace)  # still a trace


# --- breakdown --sms ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "sms, needle",
    [
        ("1,2,...,1000000000", "1,000,000,000 SMs is outside the supported range 1..1,024"),
        ("100000", "100,000 SMs"),
        ("0,2,...,80", "0 SMs"),
        ("", "SM counts must be positive integers"),
    ],
)
def test_breakdown_sm_counts_are_bounded_before_the_range_is_built(
    trace_dir, tmp_path, capsys, sms, needle
):
    # Before: 1,2,...,1e9 built a list of 10^9 ints (tens of GB) then priced every count;
    # 100000 SMs ran (gpu.sms allows 1..1024 elsewhere); "" silently skipped the curve.
    # CPU time, not wall time: the refusal must not build the range (a busy machine stretches
    # wall time, never this process's CPU seconds)
    started = time.process_time()
    argv = ["breakdown", str(trace_dir), "--hw", "dgx-a100", f"--sms={sms}", "--out"]
    assert main([*argv, str(tmp_path / "b")]) == 2
    assert needle in error_line(capsys)
    assert time.process_time() - started < 5
    assert not (tmp_path / "b").exists()


# --- meta.yaml fields of the wrong type ---------------------------------------------------------


def _with_meta(trace_dir: Path, where: Path, field: str, value) -> Path:
    trace = _copy(trace_dir, where)
    meta = yaml.safe_load((trace / "meta.yaml").read_text())
    node = meta
    parts = field.split(".")
    for part in parts[:-1]:
        if not isinstance(node.get(part), dict):
            node[part] = {}
        node = node[part]
    node[parts[-1]] = value
    (trace / "meta.yaml").write_text(yaml.safe_dump(meta))
    return trace


@pytest.mark.parametrize(
    "field, value",
    [
        ("workload.settings.param_bytes", "abc"),  # was ValueError from float() in the simulator
        ("workload.settings.r2d2.sequence_length", "abc"),  # was ValueError from int()
        ("capture.unprofiled_cpu_us", [1, 2]),  # was AttributeError: .items()
        ("capture.unprofiled_cpu_us.actor", 3),
        ("ingest.inferred_steps", 5),  # trace info: TypeError, not iterable
        ("workload.settings.r2d2.frame_stack", None),  # null where read at once: int(None)
        ("capture.unprofiled_cpu_us.actor", None),  # was AttributeError: None.items()
        ("ingest.names_repaired", "abc"),  # trace info: "Cannot specify ',' with 's'"
    ],
)
def test_meta_fields_of_the_wrong_type_are_named(trace_dir, tmp_path, capsys, field, value):
    trace = _with_meta(trace_dir, tmp_path / "t", field, value)
    code = main(["simulate", str(trace), "--sim-seconds", "0.05", "--out", str(tmp_path / "o")])
    assert code == 2
    line = error_line(capsys)
    assert "meta.yaml" in line and field in line and "expected" in line
    assert not (tmp_path / "o").exists()
    assert main(["trace", "info", str(trace)]) == 2
    assert field in error_line(capsys)


_BAD_VALUES = st.one_of(
    st.text(max_size=5),
    st.integers(max_value=-1),
    st.sampled_from([float("nan"), float("inf"), -0.5, 2.5, True, [1], {"a": 1}]),
)


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(field=st.sampled_from(sorted(META_FIELDS)), value=_BAD_VALUES)
def test_any_bad_meta_value_loads_or_is_one_line_naming_the_field(
    trace_dir, tmp_path_factory, field, value
):
    trace = _with_meta(trace_dir, tmp_path_factory.mktemp("m") / "t", field, value)
    try:
        load(trace)
    except ArchsimError as exc:
        assert "meta.yaml" in str(exc) and field.split(".")[-1] in str(exc)


# --- trace-table columns ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "table, column, value",
    [
        ("steps", "cpu_us", -1.0),  # was simulated: negative CPU time
        ("steps", "env_step_us", -1.0),
        ("steps", "gap_cpu_us", np.inf),
        ("steps", "start_us", np.inf),
        ("ops", "launch_dur_us", -1.0),
        ("ops", "start_us", -np.inf),
        ("ops", "grid_x", -1),
    ],
)
def test_table_columns_of_the_wrong_sign_are_named(
    trace_dir, tmp_path, capsys, table, column, value
):
    trace = _copy(trace_dir, tmp_path / "t")
    frame = pd.read_parquet(trace / f"{table}.parquet")
    frame.loc[frame.index[0], column] = value
    frame.to_parquet(trace / f"{table}.parquet", index=False)
    assert main(["trace", "info", str(trace)]) == 2
    line = error_line(capsys)
    assert f"{table}.parquet: row 0 has {column}" in line and "expected" in line


def test_trace_info_of_steps_without_durations_shows_their_phases(trace_dir, tmp_path, capsys):
    # Before: TypeError in format_summary (step percentiles were None).
    trace = _copy(trace_dir, tmp_path / "t")
    steps = pd.read_parquet(trace / "steps.parquet")
    steps["dur_us"] = np.nan
    steps.to_parquet(trace / "steps.parquet", index=False)
    assert main(["trace", "info", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "learner steps: 3; step times not recorded (dur_us)" in out
    assert "train_forward" in out


# --- hardware configs ---------------------------------------------------------------------------


@pytest.mark.parametrize("value", ["true", "yes", "false"])
def test_a_yaml_boolean_is_not_a_number(tmp_path, capsys, value):
    # Before: `--set gpu.sms=true` (or `sms: yes` in a file) was one SM.
    assert main(["hw", "show", "dgx-a100", "--set", f"gpu.sms={value}"]) == 2
    assert "key gpu.sms is" in error_line(capsys)
    text = (PROJECT_ROOT / "hwconfigs" / "dgx-a100.yaml").read_text()
    path = tmp_path / "box.yaml"
    path.write_text(text.replace("sockets: 2", f"sockets: {value}", 1))
    assert "sockets: " + value in path.read_text()
    assert main(["ratio", "--hw", str(path)]) == 2
    assert "box.yaml: key cpu.sockets is" in error_line(capsys)


def test_an_empty_hardware_name_is_named_not_the_current_folder(capsys):
    assert main(["hw", "show", ""]) == 2
    assert "'': expected a hardware preset name" in error_line(capsys)


# --- end to end ---------------------------------------------------------------------------------


def test_end_to_end_refusals_have_no_traceback(trace_dir, tmp_path):
    trace = _copy(trace_dir, tmp_path / "tiny")
    bad_meta = _with_meta(trace_dir, tmp_path / "bad", "workload.settings.param_bytes", "abc")
    commands = [
        ["sweep", str(trace), "--actors", "1,2", "--out", str(trace), "--force"],
        ["breakdown", str(trace), "--sms", "1,2,...,1000000000", "--out", str(tmp_path / "b")],
        ["simulate", str(bad_meta), "--out", str(tmp_path / "s")],
    ]
    runs = [
        subprocess.Popen(
            [sys.executable, "-m", "archsim", *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=PROJECT_ROOT,
        )
        for argv in commands
    ]
    for run in runs:
        _, err = run.communicate(timeout=120)
        assert run.returncode == 2, err
        assert err.count("\n") == 1 and err.startswith("archsim: error: "), err
    load(trace)
