"""The user's path through the CLI on bundled traces, as a stranger reads its output."""

from __future__ import annotations

from pathlib import Path

from archsim.cli import main

TRACES = Path(__file__).resolve().parents[1] / "traces"


def test_compare_of_two_traces_names_each_groups_unit(capsys):
    """The text table printed op times with no unit (the JSON had ``unit: ms``): every group of a
    trace comparison now says its unit."""
    a, b = str(TRACES / "dqn-pong-cpu"), str(TRACES / "r2d2-seed-2x2-cpu")
    assert main(["compare", a, b]) == 0
    lines = capsys.readouterr().out.splitlines()
    groups = {line[:36].strip() for line in lines[2:]}
    assert groups == {
        "op time per step, by phase (ms)",
        "op time per step, by op class (ms)",
        "median step time (ms)",
        "recorded (count)",
    }
    assert lines[1].startswith("group (unit)")
