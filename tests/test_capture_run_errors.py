"""``archsim capture run`` on bad input: one `archsim: error:` line, exit 2, nothing written, nothing left patched."""

from __future__ import annotations

import pytest

from archsim.capture.phase_fn import PhaseFn
from archsim.cli import main
from archsim.errors import ArchsimError
from tests.capture_toy import one_error_line, patch_points, toy_script


def test_a_program_that_never_trains_fails_in_one_line(tmp_path, capsys):
    script = toy_script(tmp_path)
    patched = patch_points()
    out = tmp_path / "never"
    assert main(["capture", "run", "--out", str(out), "--", str(script), "30", "act-only"]) == 2
    line = one_error_line(capsys)
    assert "made no optimizer step" in line and "toy_loop" in line
    assert not out.exists()
    assert patch_points() == patched


def test_too_short_for_the_schedule_fails_in_one_line(tmp_path, capsys):
    script = toy_script(tmp_path)
    out = tmp_path / "short"
    assert main(["capture", "run", "--out", str(out), "--", str(script), "20", "train"]) == 2
    assert "the schedule records from step 63" in one_error_line(capsys)
    assert not out.exists()


def test_a_failing_program_is_one_archsim_line_after_its_traceback(tmp_path, capsys):
    script = tmp_path / "boom.py"
    script.write_text("raise SystemExit(3)\n")
    assert main(["capture", "run", "--out", str(tmp_path / "o"), "--", str(script)]) == 2
    assert "boom exited with status 3" in one_error_line(capsys)


@pytest.mark.parametrize(
    ("program", "expected"),
    [
        (["no_such_script.py"], "script 'no_such_script.py' does not exist"),
        (["-m", "no_such_module_w1"], "no module named 'no_such_module_w1'"),
        (["-m"], "'-m' needs a MODULE name"),
        ([], "expected a program after '--'"),
    ],
)
def test_bad_program_is_one_line(tmp_path, capsys, program, expected):
    assert main(["capture", "run", "--out", str(tmp_path / "o"), "--", *program]) == 2
    assert expected in one_error_line(capsys)
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ("no_colon=act", "expected MODULE:QUALNAME=PHASE"),
        ("mod:fn", "expected MODULE:QUALNAME=PHASE"),
        ("mod:fn=warp_drive", "unknown phase 'warp_drive'"),
    ],
)
def test_bad_phase_fn_syntax_is_one_line(tmp_path, capsys, spec, expected):
    script = toy_script(tmp_path)
    args = ["capture", "run", "--out", str(tmp_path / "o"), "--phase-fn", spec, "--", str(script)]
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    assert exit_info.value.code == 2
    assert expected in one_error_line(capsys)


def test_phase_fn_of_an_unknown_module_or_name_is_one_line(tmp_path, capsys):
    script = toy_script(tmp_path)
    out = tmp_path / "o"
    bad_module = ["--phase-fn", "no_such_module_w1:f=act", "--", str(script), "30", "train"]
    assert main(["capture", "run", "--out", str(out), *bad_module]) == 2
    assert "no module named 'no_such_module_w1'" in one_error_line(capsys)
    bad_name = [
        "--phase-fn",
        "__main__:Nope.sample=replay_sample",
        "--",
        str(script),
        "30",
        "train",
    ]
    patched = patch_points()
    assert main(["capture", "run", "--out", str(out), *bad_name]) == 2
    assert "'__main__' has no 'Nope.sample'" in one_error_line(capsys)
    assert patch_points() == patched
    assert not out.exists()


def test_phase_fn_parse():
    assert PhaseFn.parse("a.b:C.d=replay_sample") == PhaseFn("a.b", "C.d", "replay_sample")
    with pytest.raises(ArchsimError, match="expected MODULE:QUALNAME=PHASE"):
        PhaseFn.parse("a:b c=act")
