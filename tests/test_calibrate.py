"""Calibration: per-class efficiencies fitted on the real V100 fixture reproduce its class totals, the
calibrated total beats the uncalibrated one, the overlay round-trips, and the A100 generalization
figure is computed (recorded in docs/ACCURACY.md, asserted only to be finite)."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import yaml

from archsim.analysis.breakdown import breakdown
from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.calibrate import (
    class_errors,
    fit_efficiency,
    fit_table,
    load_efficiency,
    total_error,
)
from archsim.perf.kernel import body_seconds, efficiency_class
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture

V100 = load_hw("dgx1-v100")


@pytest.fixture(scope="module")
def v100_ops() -> pd.DataFrame:
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture("v100_cnn_ddp_train.json.gz")).ops


def test_fit_by_hand_on_two_ops() -> None:
    # Two elementwise kernels whose model bound is b1, b2 and measured 2*b1, 4*b2:
    # efficiency = (b1 + b2) / (2 b1 + 4 b2).
    rows = [
        {"kind": "kernel", "op_class": "elementwise", "dtype": "float32", "grid_x": 1000,
         "block_x": 128, "bytes_read": 8e6, "bytes_written": 4e6, "flops": 1e6},
        {"kind": "kernel", "op_class": "elementwise", "dtype": "float32", "grid_x": 4000,
         "block_x": 128, "bytes_read": 32e6, "bytes_written": 16e6, "flops": 4e6},
    ]  # fmt: skip
    ops = conform(pd.DataFrame(rows), OPS_COLUMNS)
    b1, b2 = body_seconds(ops, V100)
    ops["dur_us"] = [2 * b1 * 1e6, 4 * b2 * 1e6]
    efficiency = fit_efficiency(ops, V100)
    assert efficiency == {"elementwise": pytest.approx((b1 + b2) / (2 * b1 + 4 * b2))}
    # the calibrated model reproduces the class total exactly
    assert body_seconds(ops, V100, efficiency=efficiency).sum() == pytest.approx(2 * b1 + 4 * b2)


def test_calibration_on_v100_fixture(v100_ops) -> None:
    table = fit_table(v100_ops, V100)
    efficiency = fit_efficiency(v100_ops, V100)
    assert set(efficiency) == set(efficiency_class(v100_ops)) and "all" not in efficiency
    assert all(math.isfinite(e) and e > 0 for e in efficiency.values())
    assert table.loc["all", "ops"] == len(v100_ops)
    assert all(e <= 1.0 for e in efficiency.values())  # the model's rates are achieved rates
    # the time-weighted fit reproduces every unclipped class total on the fitting trace; a class the
    # model over-predicts (model / measured > 1: work inferred too large) is clipped to 1 and keeps
    # the model's own time, so its error is unchanged and never hidden
    raw = class_errors(v100_ops, V100, None).drop(index="total")
    per_class = class_errors(v100_ops, V100, efficiency).drop(index="total")
    clipped = table.drop(index="all")["model_over_measured"] > 1
    assert clipped.any()  # the V100 gemm_grid class (32-deep GEMMs priced 512 deep) is one
    assert per_class.loc[~clipped, "error"].abs().max() < 1e-6
    assert per_class.loc[clipped, "error"].to_numpy() == pytest.approx(
        raw.loc[clipped, "error"].to_numpy()
    )
    assert (per_class.loc[clipped, "error"] > 0).all()
    assert (per_class["error"].abs() <= raw["error"].abs() + 1e-9).all()


def test_a100_generalization_is_computed(v100_ops, capsys) -> None:
    from archsim.trace.ingest import ingest

    efficiency = fit_efficiency(v100_ops, V100)
    a100 = load_hw("dgx-a100")
    ops = ingest(kineto_fixture("a100_alexnet_forward.json.gz")).ops
    raw, cal = total_error(ops, a100, None), total_error(ops, a100, efficiency)
    print(f"A100 AlexNet forward: shapes-only error {raw:+.1%}, V100-calibrated error {cal:+.1%}")
    assert math.isfinite(raw) and math.isfinite(cal)


def test_cli_calibrate_writes_overlay_used_by_breakdown(tmp_path, v100_ops) -> None:
    out = tmp_path / "v100.yaml"
    fixture = str(kineto_fixture("v100_cnn_ddp_train.json.gz"))
    assert main(["calibrate", fixture, "--hw", "dgx1-v100", "--out", str(out)]) == 0
    document = yaml.safe_load(out.read_text())
    assert set(document) == {"efficiency", "provenance"}
    assert document["provenance"]["hw"] == "dgx1-v100"
    assert document["provenance"]["ops_per_class"]["all"] == len(v100_ops)
    efficiency = load_efficiency(out)
    assert efficiency == pytest.approx(fit_efficiency(v100_ops, V100), rel=1e-5)
    # a calibrated breakdown of the trace predicted from shapes alone keeps shares summing to 1
    table = breakdown(v100_ops, V100, "all", source=None, efficiency=efficiency)
    for _, rows in table.groupby("phase"):
        assert rows.share.sum() == pytest.approx(1.0, abs=1e-3)
    # without --hw the preset matching the trace's GPU (Tesla V100-SXM2-32GB) is used
    default_out = tmp_path / "default.yaml"
    assert main(["calibrate", fixture, "--out", str(default_out)]) == 0
    assert yaml.safe_load(default_out.read_text())["provenance"]["hw"] == "dgx1-v100"
    bd = tmp_path / "bd"
    assert main(["breakdown", fixture, "--calibration", str(out), "--out", str(bd)]) == 0


def test_bad_overlay_is_an_error(tmp_path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("efficiency: {gemm: -1}\n")
    with pytest.raises(ArchsimError, match=r"efficiency.gemm must be a number in \(0, 1\]"):
        load_efficiency(bad)
    bad.write_text("efficiency: {gemm: 2.82}\n")  # faster than the achieved rates: refused
    with pytest.raises(ArchsimError, match=r"efficiency.gemm must be a number in \(0, 1\]"):
        load_efficiency(bad)
    bad.write_text("gemm: 0.5\n")
    with pytest.raises(ArchsimError, match="expected a mapping with key efficiency"):
        load_efficiency(bad)
    with pytest.raises(ArchsimError, match="no measured GPU ops"):
        fit_table(conform(pd.DataFrame([{"kind": "cpu"}]), OPS_COLUMNS), V100)
