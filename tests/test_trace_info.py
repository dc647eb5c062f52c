"""`archsim trace info`: the summary's numbers agree with the tables, on a real GPU fixture and on a
trace with hand-set steps."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from archsim.cli import main
from archsim.trace import Trace, save
from archsim.trace.info import format_summary, ops_by_phase, summarize
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture


@pytest.fixture(scope="module")
def v100(tmp_path_factory):
    trace = ingest(kineto_fixture("v100_cnn_ddp_train.json.gz"))
    out = tmp_path_factory.mktemp("info") / "v100"
    save(trace, out)
    return trace, out


def test_ops_by_phase_partitions_the_ops(v100):
    trace, _ = v100
    table = ops_by_phase(trace.ops)
    assert table["ops"].sum() == len(trace.ops)
    assert table["time_us"].sum() == pytest.approx(trace.ops["dur_us"].sum())
    expected_bytes = (trace.ops["bytes_read"] + trace.ops["bytes_written"]).sum()
    assert table["bytes"].sum() == pytest.approx(expected_bytes)
    # no archsim markers: the training forward is inferred from the autograd pairs (issue 13)
    assert list(table.index) == ["train_forward", "train_backward", "optimizer_step", "other"]


def test_summary_names_the_source_gpu(v100):
    trace, _ = v100
    summary = summarize(trace)
    assert summary["source"]["gpu_name"] == "Tesla V100-SXM2-32GB"
    assert summary["ops"]["by_kind"] == {"kernel": 4_350, "memcpy": 1_600, "memset": 145}
    assert summary["steps"]["actor"] == {"steps": 0}
    text = format_summary(summary)
    assert "Tesla V100-SXM2-32GB (80 SMs, 8 GPUs)" in text
    # no archsim markers: learner steps inferred from torch's optimizer records, one line per rule
    assert (
        summary["steps"]["learner"]["steps"] == 5
    )  # 5 ProfilerStep windows, one optimizer step each
    assert "inferred learner steps: one per outermost 'Optimizer.step#...' annotation" in text
    assert "inferred no actor steps:" in text


def test_cli_trace_info_text_and_json(v100, capsys):
    trace, out = v100
    assert main(["trace", "info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "train_backward" in text and "kernels linked to a cpu op: 100.00%" in text
    assert main(["trace", "info", str(out), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["ops_by_phase"]["optimizer_step"]["ops"] == int(
        (trace.ops["phase"] == "optimizer_step").sum()
    )


def test_step_percentiles_are_computed_per_role_and_phase():
    # Actor steps of 100, 200, ..., 1000 us with env_step = 40% of each: p50 of 100..1000 is 550
    # (numpy's linear interpolation between 500 and 600); p95 is 955; env_step p50 = 0.4 * 550 = 220.
    durations = np.arange(1, 11) * 100.0
    steps = pd.DataFrame(
        {
            "step_id": np.arange(12),
            "role": ["actor"] * 10 + ["learner"] * 2,
            "dur_us": [*durations, 5_000.0, 7_000.0],
            "env_step_us": [*(0.4 * durations), np.nan, np.nan],
            "train_forward_us": [np.nan] * 10 + [1_000.0, 3_000.0],
        }
    )
    ops = pd.DataFrame({"op_id": [0], "kind": ["cpu"], "phase": ["act"], "dur_us": [1.0]})
    summary = summarize(Trace(meta={"source": {"device": "cpu"}}, ops=ops, steps=steps))
    actor = summary["steps"]["actor"]
    assert actor["steps"] == 10
    assert actor["step"]["p50_us"] == pytest.approx(550.0)
    assert actor["step"]["p95_us"] == pytest.approx(955.0)
    assert actor["phases"]["env_step"]["p50_us"] == pytest.approx(220.0)
    assert "train_forward" not in actor["phases"]
    learner = summary["steps"]["learner"]
    assert learner["step"]["p50_us"] == pytest.approx(6_000.0)
    assert learner["phases"]["train_forward"]["p95_us"] == pytest.approx(2_900.0)
    text = format_summary(summary)
    assert "actor steps: 10; step p50 0.550 ms, p95 0.955 ms" in text


def test_cpu_time_is_shown_beside_wall_time_where_recorded():
    # a learner whose priority update waits for a lock: 6,000 us wall, 400 us CPU; the step as a
    # whole 70,000 wall and 60,000 CPU (p50 of two equal rows). No CPU columns: nothing is shown.
    steps = pd.DataFrame(
        {
            "step_id": [0, 1],
            "role": "learner",
            "dur_us": 70_000.0,
            "cpu_us": 60_000.0,
            "priority_update_us": 6_000.0,
            "priority_update_cpu_us": 400.0,
            "train_forward_us": 30_000.0,
        }
    )
    ops = pd.DataFrame({"op_id": [0], "kind": ["cpu"], "phase": ["act"], "dur_us": [1.0]})
    summary = summarize(Trace(meta={"source": {"device": "cpu"}}, ops=ops, steps=steps))
    learner = summary["steps"]["learner"]
    assert learner["step"]["cpu_p50_us"] == pytest.approx(60_000.0)
    assert learner["phases"]["priority_update"]["cpu_p50_us"] == pytest.approx(400.0)
    assert "cpu_p50_us" not in learner["phases"]["train_forward"]
    text = format_summary(summary)
    assert "learner steps: 2; step p50 70.000 ms, p95 70.000 ms, CPU p50 60.000 ms" in text
    assert "priority_update  p50     6.000 ms  p95     6.000 ms  CPU p50   0.400 ms" in text


def test_trace_info_on_a_missing_directory_is_a_one_line_error(tmp_path, capsys):
    assert main(["trace", "info", str(tmp_path / "nope")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no such trace directory or file" in err[0]
