"""Bad command lines and output paths: every usage error is one line, ``archsim: error: ...``, naming
the sub-command and the argument, exit 2 (argparse alone prints its whole usage block first), and
nothing is written."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from archsim.cli import main
from tests.conftest import PROJECT_ROOT, kineto_fixture

DQN_TRACE = PROJECT_ROOT / "traces" / "dqn-pong-cpu"


def _usage_error(capsys, argv: list[str]) -> str:
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: ")
    return lines[0]


def _error(capsys, argv: list[str]) -> str:
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: ")
    return lines[0]


@pytest.mark.parametrize(
    "argv, needles",
    [
        ([], ["COMMAND", "archsim --help"]),
        (["frobnicate"], ["invalid choice: 'frobnicate'"]),
        (["hw"], ["hw: ", "ACTION"]),
        (["hw", "show"], ["hw show: ", "name"]),
        (["breakdown", str(DQN_TRACE), "--phase", "lunch", "--out", "x"], ["--phase", "'lunch'"]),
        (["simulate", str(DQN_TRACE), "--out"], ["simulate: ", "--out"]),
        (["sweep", str(DQN_TRACE), "--actors"], ["--actors", "expected one argument"]),
        (["capture", "dqn", "--steps", "0", "--out", "x"], ["capture dqn: ", "--steps", "got 0"]),
        (["capture", "dqn", "--steps", "many"], ["capture dqn: ", "--steps", "'many'"]),
        (["capture", "dqn", "--bogus", "--out", "x"], ["unrecognized arguments: --bogus"]),
        (["capture", "alexnet", "--dtype", "int8", "--out", "x"], ["--dtype", "'int8'"]),
        (["capture", "r2d2", "--actors", "0", "--out", "x"], ["capture r2d2: ", "--actors"]),
        (["capture", "r2d2", "--port=-1", "--out", "x"], ["--port", "got -1"]),
    ],
)
def test_usage_errors_are_one_line_and_name_the_argument(tmp_path, capsys, argv, needles):
    line = _usage_error(capsys, argv)
    for needle in needles:
        assert needle in line
    assert not Path("x").exists()


def test_usage_error_from_a_real_process_has_no_usage_block(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "archsim", "capture", "dqn", "--steps", "0", "--out", "o"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "archsim: error: capture dqn: argument --steps: expected an integer >= 1, got 0 "
        "(see archsim capture dqn --help)"
    ]
    assert list(tmp_path.iterdir()) == []


def test_capture_without_a_workload_lists_them(capsys):
    assert _error(capsys, ["capture"]) == (
        "archsim: error: capture: expected a WORKLOAD, one of: alexnet, apex, dqn, r2d2, run"
    )


def test_a_negative_knob_list_reaches_the_knob_check(tmp_path, capsys):
    # argparse would take "-4,4" for an unknown option; it is a value, and a bad one
    out = tmp_path / "sweep"
    line = _error(capsys, ["sweep", str(DQN_TRACE), "--actors", "-4,4", "--out", str(out)])
    assert "--actors: expected an integer >= 1, got -4" in line
    assert not out.exists()


def test_output_under_a_file_is_a_clear_error(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    out = blocker / "trace"
    fixture = kineto_fixture("mi250_mlp_train.json.gz")
    line = _error(capsys, ["ingest", str(fixture), "--out", str(out)])
    assert str(out) in line and "cannot create the output directory" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_calibration_output_that_is_a_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "cal"
    out.mkdir()
    fixture = kineto_fixture("a100_alexnet_forward.json.gz")
    line = _error(capsys, ["calibrate", str(fixture), "--out", str(out)])
    assert str(out) in line and "is a directory" in line
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == ["cal"]


def test_making_an_atari_env_prints_nothing_on_stderr():
    # ALE's C++ banner would otherwise precede the error line of any capture that fails after its
    # environments exist (DQN, and every R2D2 learner and actor process).
    code = "from workloads.dqn.env import AtariEnv; AtariEnv(seed=0).reset()"
    result = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr == ""
