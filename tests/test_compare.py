"""``archsim compare``: golden differences between two simulations and two traces."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest

from archsim.analysis.compare import compare_metrics, compare_traces
from archsim.cli import main
from archsim.trace import load

ROOT = Path(__file__).resolve().parents[1]


def test_metrics_rows_by_hand():
    a = {"hw": "dgx1-v100", "actors": 64, "frames_per_s": 1000.0, "gpu_power_w": 100.0}
    b = {"hw": "dgx-a100", "actors": 64, "frames_per_s": 1500.0, "gpu_power_w": 80.0}
    table = compare_metrics(a, b).set_index("item")
    assert table.loc["frames_per_s", "ratio"] == pytest.approx(1.5)
    assert table.loc["gpu_power_w", "change"] == pytest.approx(-20.0)
    assert table.loc["hw", "group"] == "setting" and table.loc["hw", "b"] == "dgx-a100"
    assert "actors" not in table.index  # an unchanged knob is not a change


def test_trace_rows_are_per_step_not_per_recording():
    """A trace with its steps recorded twice over compares equal per step to itself."""
    trace = load(ROOT / "traces" / "alexnet-b32-fp32")
    doubled = type(trace)(
        meta=trace.meta,
        ops=pd.concat(
            [
                trace.ops,
                trace.ops.assign(step_id=trace.ops["step_id"] + trace.ops["step_id"].max() + 1),
            ]
        ),
        steps=trace.steps,
    )
    table = compare_traces(trace, doubled)
    per_phase = table[table["group"] == "op time per step, by phase"]
    assert len(per_phase) and all(math.isclose(r, 1.0) for r in per_phase["ratio"])
    counts = table[table["group"] == "recorded"].set_index("item")
    assert counts.loc["ops", "ratio"] == pytest.approx(2.0)


def test_cli_writes_table_and_chart_and_refuses_mixed_kinds(tmp_path, capsys):
    fp32, fp16 = ROOT / "traces" / "alexnet-b32-fp32", ROOT / "traces" / "alexnet-b32-fp16"
    out = tmp_path / "cmp"
    assert main(["compare", str(fp32), str(fp16), "--out", str(out), "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["rows"]
    conv = next(r for r in rows if r["group"].endswith("op class") and r["item"] == "conv")
    assert 0 < conv["ratio"] < 1  # fp16 convolutions take less time than fp32 ones
    assert {p.name for p in out.iterdir()} == {"compare.csv", "compare.png", "compare.svg"}
    sim = tmp_path / "sim"
    sim.mkdir()
    (sim / "metrics.json").write_text(json.dumps({"frames_per_s": 1.0}))
    assert main(["compare", str(fp32), str(sim)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compare two of one kind" in err[0]
