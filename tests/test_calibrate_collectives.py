"""Calibration leaves collectives out: fitted on a100_train_shapes, whose 60 ncclKernel_SendRecv wait
163.5 ms on their peers, the overlay has no communication entry (it had 0.0011, which priced
a100_80gb_train_prewindow at +1334.5%), the other classes' fits are those of the trace without its
collectives, and the other A100 fixture's collectives keep the model's time."""

from __future__ import annotations

import pandas as pd
import pytest
import yaml

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.calibrate import (
    class_errors,
    fit_efficiency,
    fit_table,
    left_out_table,
    load_efficiency,
    measured_ops,
)
from archsim.perf.classes import is_unfitted_class
from archsim.perf.kernel import efficiency_class
from tests.conftest import kineto_fixture

A100 = load_hw("dgx-a100")
FITTED_ON = "a100_train_shapes.json.gz"
PREDICTED = "a100_80gb_train_prewindow.json.gz"
SMALL = "nodevice_sampled_train.json.gz"  # 10 NCCL kernels in 124 KB: quick for the CLI


@pytest.fixture(scope="module")
def fitted_ops() -> pd.DataFrame:
    from archsim.trace.ingest import ingest

    return measured_ops(ingest(kineto_fixture(FITTED_ON)).ops)


def _collectives(ops: pd.DataFrame) -> pd.Series:
    return efficiency_class(ops).map(is_unfitted_class).astype(bool)


def test_class_names():
    assert is_unfitted_class("communication") and is_unfitted_class("communication_grid")
    assert not is_unfitted_class("other_grid") and not is_unfitted_class("gemm")


def test_fit_has_no_communication_entry(fitted_ops):
    table = fit_table(fitted_ops, A100)
    assert not any(is_unfitted_class(c) for c in table.index)
    left = left_out_table(fitted_ops, A100)
    assert (
        left.index.tolist() == ["communication_grid"] and int(left.loc[left.index[0], "ops"]) == 60
    )
    # the fit over all classes counts the fitted ops only
    assert table.loc["all", "ops"] == len(fitted_ops) - 60


def test_fitted_classes_are_those_of_the_trace_without_collectives(fitted_ops):
    collective = _collectives(fitted_ops).to_numpy()
    assert collective.sum() == 60
    without = fitted_ops[~collective].reset_index(drop=True)
    assert fit_efficiency(fitted_ops, A100) == pytest.approx(fit_efficiency(without, A100))


def test_other_a100_fixture_keeps_its_collectives_at_the_model(fitted_ops):
    from archsim.trace.ingest import ingest

    efficiency = fit_efficiency(fitted_ops, A100)
    ops = ingest(kineto_fixture(PREDICTED)).ops
    calibrated = class_errors(ops, A100, efficiency)
    raw = class_errors(ops, A100, None)
    # the 75 collectives are priced as before any fit, not at 1/0.0011 of it
    assert calibrated.loc["communication_grid", "ops"] == 75
    assert calibrated.loc["communication_grid", "predicted_s"] == pytest.approx(
        raw.loc["communication_grid", "predicted_s"]
    )
    # a fit only slows classes down (efficiency <= 1), so the calibrated total is at least the
    # model's, and no class now predicts more than its model time over the smallest efficiency
    assert calibrated.loc["total", "predicted_s"] >= raw.loc["total", "predicted_s"]
    bound = raw.loc["total", "predicted_s"] / min(efficiency.values())
    assert calibrated.loc["total", "predicted_s"] <= bound


def test_cli_reports_collectives_left_out(tmp_path, capsys):
    out = tmp_path / "sm80.yaml"
    fixture = str(kineto_fixture(SMALL))
    assert main(["calibrate", fixture, "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "left out of the fit: communication_grid (collectives:" in printed
    document = yaml.safe_load(out.read_text())
    assert not any(is_unfitted_class(c) for c in document["efficiency"])
    assert document["provenance"]["left_out"]["ops_per_class"] == {"communication_grid": 10}
    assert load_efficiency(out)  # the overlay loads


def test_overlay_naming_communication_is_refused(tmp_path, capsys):
    overlay = tmp_path / "old.yaml"
    overlay.write_text("efficiency: {gemm: 0.6, communication_grid: 0.0011}\n")
    with pytest.raises(ArchsimError, match=r"efficiency.communication_grid: collectives are not"):
        load_efficiency(overlay)
    fixture = str(kineto_fixture(SMALL))
    bd = tmp_path / "bd"
    assert main(["breakdown", fixture, "--calibration", str(overlay), "--out", str(bd)]) == 2
    err = capsys.readouterr().err
    assert "communication_grid" in err and "Traceback" not in err and len(err.splitlines()) == 1


def test_trace_of_collectives_alone_is_refused(fitted_ops):
    only = fitted_ops[_collectives(fitted_ops).to_numpy()].reset_index(drop=True)
    with pytest.raises(ArchsimError, match="all collectives, which are not calibrated"):
        fit_table(only, A100)
