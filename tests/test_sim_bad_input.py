"""``archsim simulate`` and ``archsim capture dqn`` inputs that used to run for nothing: an infinite
``--sim-seconds`` (simulated forever) and a ``--steps`` too short for the profiler schedule (ran every
step, then failed). Both are refused up front: one line, exit 2, nothing written."""

from __future__ import annotations

import pytest

from archsim.cli import main
from tests.conftest import error_line


@pytest.mark.parametrize("seconds", ["inf", "Infinity"])
def test_infinite_simulated_time_is_refused(trace_dir, tmp_path, capsys, seconds):
    out = tmp_path / "run"
    argv = ["simulate", str(trace_dir), "--actors", "4", "--inference-batch", "4"]
    assert main([*argv, "--sim-seconds", seconds, "--out", str(out)]) == 2
    assert "--sim-seconds: expected a positive finite duration, got inf" in error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_dqn_steps_too_few_for_the_schedule_is_refused_before_running(tmp_path, capsys):
    out = tmp_path / "dqn"
    assert main(["capture", "dqn", "--steps", "100", "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "--steps 100" in line and "nothing would be recorded" in line
    assert "--skip-first" in line  # says how to fix it
    assert list(tmp_path.iterdir()) == []
    # the check follows the schedule flags: 0 + 0 + 3 steps before the first recorded one
    assert main(["capture", "dqn", "--steps", "3", "--skip-first", "0", "--wait", "0",
                 "--warmup", "3", "--out", str(out)]) == 2  # fmt: skip
    assert "records from step 4" in error_line(capsys)
