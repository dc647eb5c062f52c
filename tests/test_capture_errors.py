"""Bad input to the capture API and CLI: one-line errors, exit 2, no traceback, nothing written."""

from __future__ import annotations

import subprocess
import sys

import pytest
import torch

import archsim
from archsim.capture.workloads import known_names
from archsim.cli import main
from archsim.errors import ArchsimError
from tests.conftest import PROJECT_ROOT


def _stderr_lines(capsys) -> list[str]:
    return [line for line in capsys.readouterr().err.splitlines() if line.strip()]


def test_unknown_workload_is_one_line_listing_known_names(tmp_path, capsys):
    assert main(["capture", "pongzilla", "--out", str(tmp_path / "o")]) == 2
    lines = _stderr_lines(capsys)
    known = ", ".join(known_names())
    assert "dqn" in known_names()
    assert lines == [f"archsim: error: unknown workload 'pongzilla' (known workloads: {known})"]
    assert not (tmp_path / "o").exists()


def test_unknown_workload_from_a_real_process_has_no_traceback(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "archsim", "capture", "nope", "--out", str(tmp_path / "o")],
        capture_output=True,
        text=True,
        cwd=PROJECT_ROOT,
        check=False,
    )
    assert result.returncode == 2
    known = ", ".join(known_names())
    assert result.stderr.strip().splitlines() == [
        f"archsim: error: unknown workload 'nope' (known workloads: {known})"
    ]


def test_non_empty_output_dir_is_refused_and_left_alone(tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    (out / "keep.txt").write_text("mine")
    assert main(["capture", "dqn", "--steps", "5", "--out", str(out)]) == 2
    lines = _stderr_lines(capsys)
    assert len(lines) == 1 and "output directory is not empty" in lines[0] and "--force" in lines[0]
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]  # no temporary left beside it


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")
def test_cuda_without_a_gpu_is_a_clear_error(tmp_path, capsys):
    assert main(["capture", "dqn", "--device", "cuda", "--out", str(tmp_path / "o")]) == 2
    lines = _stderr_lines(capsys)
    assert len(lines) == 1 and "CUDA is not available" in lines[0]
    assert not (tmp_path / "o").exists()


def test_phase_name_typo_lists_the_phases():
    with pytest.raises(ArchsimError, match=r"unknown phase 'env_stpe' \(expected one of: env_step"):
        archsim.phase("env_stpe")


def test_step_role_and_attribute_are_checked():
    with pytest.raises(ArchsimError, match="unknown step role 'acter'"):
        archsim.step("acter")
    with pytest.raises(ArchsimError, match="expected an integer"):
        archsim.step("actor", actor="3")


def test_error_inside_the_block_leaves_no_output(tmp_path):
    out = tmp_path / "t"
    with (
        pytest.raises(RuntimeError, match="user bug"),
        archsim.capture(out, {"name": "x"}, schedule=None),
    ):
        torch.ones(3).sum()
        raise RuntimeError("user bug")
    assert not out.exists()
    assert list(tmp_path.iterdir()) == []


def test_schedule_that_records_nothing_is_an_error(tmp_path):
    schedule = archsim.capture.CaptureSchedule(skip_first=0, wait=50, warmup=1, active=5, repeat=1)
    with pytest.raises(ArchsimError, match="recorded nothing: it ran 3 steps"):  # noqa: SIM117
        with archsim.capture(tmp_path / "t", {"name": "x"}, schedule=schedule) as cap:
            for _ in range(3):
                torch.ones(3).sum()
                cap.step()
    assert not (tmp_path / "t").exists()


def test_bad_schedule_values():
    with pytest.raises(ArchsimError, match="active=0"):
        archsim.capture.CaptureSchedule(active=0)
    with pytest.raises(ArchsimError, match="wait=-1"):
        archsim.capture.CaptureSchedule(wait=-1)
