"""Validation (issue 6): pooling several `archsim validate` runs into one table, worked by hand, and
the summary and bad input of `archsim validate --pool`."""

from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

# --- pooling runs, by hand ---------------------------------------------------------------------


def _row(config: str, role: str, measured: float, predicted: float, repeats: int = 2) -> dict:
    from archsim.validate.report import CSV_COLUMNS

    row = {key: math.nan for key in CSV_COLUMNS}
    row.update(
        config=config,
        workload="dqn",
        role=role,
        knobs="k",
        actors=1,
        envs_per_actor=1,
        inference_batch=1,
        learner_batch=32,
        train_every=4,
        repeats=repeats,
        measured_frames_per_s=measured,
        predicted_frames_per_s=predicted,
        measured_updates_per_s=1.0,
        predicted_updates_per_s=1.0,
        measured_cpu_util=0.5,
        predicted_cpu_util=0.5,
        speed_ref_ms=10.0,
        capture_speed_ref_ms=10.0,
    )
    return row


def test_pooled_runs_average_measurements_and_predictions(tmp_path):
    # Run 1: base measured 100 (2 repeats), predicted 90; variant 200 / 220.
    # Run 2: base measured 130 (1 repeat), predicted 110; variant 260 (1 repeat) / 240.
    # Pooled base: measured (2 x 100 + 130) / 3 = 110, predicted (90 + 110) / 2 = 100: -9.09%.
    # Variant: measured (2 x 200 + 260) / 3 = 220, predicted 230: +4.55%; calibrated by the
    # base's 110 / 100: 253, +15%. Spread of the run means: (130 - 100) / 115.
    from archsim.validate.pool import pool_rows
    from archsim.validate.report import write_csv

    runs = [
        [_row("b", "baseline", 100.0, 90.0), _row("v", "variant", 200.0, 220.0)],
        [_row("b", "baseline", 130.0, 110.0, 1), _row("v", "variant", 260.0, 240.0, 1)],
    ]
    # per CPU-second and load, base: run 1 measured 200 frames/CPU-s (others kept 0.5 CPUs busy),
    # predicted 180; run 2 measured 230 (1.1 CPUs busy), predicted 220. Pooled measured
    # (2 x 200 + 230) / 3 = 210, predicted 200: -10 / 210; others' load (2 x 0.5 + 1.1) / 3 = 0.7.
    for rows, measured, predicted, others in (
        (runs[0], 200.0, 180.0, 0.5),
        (runs[1], 230.0, 220.0, 1.1),
    ):
        rows[0].update(
            measured_frames_per_cpu_s=measured,
            predicted_frames_per_cpu_s=predicted,
            other_busy_cpus=others,
        )
    dirs = []
    for i, rows in enumerate(runs):
        (tmp_path / str(i)).mkdir()
        write_csv(rows, tmp_path / str(i) / "validation.csv")
        dirs.append(tmp_path / str(i))
    base, variant = pool_rows(dirs)
    assert base["measured_frames_per_cpu_s"] == pytest.approx(210.0)
    assert base["predicted_frames_per_cpu_s"] == pytest.approx(200.0)
    assert base["frames_per_cpu_s_error"] == pytest.approx(-10 / 210)
    assert base["other_busy_cpus"] == pytest.approx(0.7)
    assert math.isnan(variant["frames_per_cpu_s_error"])  # not in these CSVs: NaN, not 0
    assert base["repeats"] == 3 and base["measured_frames_per_s"] == pytest.approx(110.0)
    assert base["predicted_frames_per_s"] == pytest.approx(100.0)
    assert base["frames_error"] == pytest.approx(-10 / 110)
    assert base["frames_spread"] == pytest.approx(30 / 115)
    assert variant["frames_error"] == pytest.approx(10 / 220)
    assert variant["calibrated_frames_error"] == pytest.approx(253 / 220 - 1)
    assert variant["drift_corrected_frames_error"] == pytest.approx(10 / 220)  # no drift


def test_pool_bad_input_is_one_line(tmp_path):
    from archsim.validate.report import write_csv

    for name, configs in (("a", ("b", "v")), ("c", ("b", "w"))):
        (tmp_path / name).mkdir()
        write_csv(
            [_row(configs[0], "baseline", 1.0, 1.0), _row(configs[1], "variant", 1.0, 1.0)],
            tmp_path / name / "validation.csv",
        )
    (tmp_path / "bad").mkdir()
    text = (tmp_path / "a" / "validation.csv").read_text().replace(",1,", ",one,", 1)
    (tmp_path / "bad" / "validation.csv").write_text(text)
    cases = {
        ("a", "missing"): "missing/validation.csv: not found",
        ("a", "c"): "configurations ['b', 'w'] differ",
        ("a", "bad"): "bad/validation.csv: line 2, column 'actors': expected a number",
    }
    for dirs, message in cases.items():
        proc = subprocess.run(
            [sys.executable, "-m", "archsim", "validate", "--out", str(tmp_path / "out"), "--pool"]
            + [str(tmp_path / d) for d in dirs],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 2, proc.stderr
        assert message in proc.stderr and "Traceback" not in proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1
        assert not (tmp_path / "out").exists()


def test_summary_is_strict_json_with_null_for_missing_figures(tmp_path):
    # CSVs from before the load columns: the pooled summary's load figures cannot be computed and
    # are null (strict JSON), while the frames/s MAE is still there: |1.1 - 1| / 1 = 10% per row.
    from archsim.validate.report import write_csv

    dirs = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        write_csv(
            [_row("b", "baseline", 1.0, 1.1), _row("v", "variant", 2.0, 2.2)],
            tmp_path / name / "validation.csv",
        )
        dirs.append(str(tmp_path / name))
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "archsim", "validate", "--out", str(out), "--pool", *dirs],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]

    def refuse(constant: str) -> None:
        raise ValueError(f"non-strict JSON constant {constant}")

    summary = json.loads((out / "summary.json").read_text(), parse_constant=refuse)
    assert summary["frames_mae"] == pytest.approx(0.1)
    assert summary["mean_other_busy_cpus"] is None
    assert summary["frames_per_cpu_s_mae"] is None
