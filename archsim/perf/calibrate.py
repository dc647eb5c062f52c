"""Fit per-op-class efficiencies (achieved fraction of the kernel model's bound) from a real GPU trace.

For each class c (op_class; memcpy and memset by kind), efficiency_c = sum(model bound) / sum(measured)
over the measured ops of that class: the time-weighted fraction, i.e. the factor that makes the model
reproduce the class's total measured time on the fitting GPU. (A median of per-op ratios is reported
too; totals are what the simulator adds up, so the time-weighted fit is the one used.) Classes the
fitting trace lacked keep efficiency 1 when predicting; the fit over all ops (``all``) is reported in
the provenance only. Collectives (class ``communication``: NCCL/RCCL kernels) are left out of the fit
and keep the model's time (archsim.perf.classes.UNFITTED_CLASSES says why); ``left_out_table`` lists
them for the report.

The model already predicts ACHIEVED time (archsim.perf.efficiency: published achievable DRAM and GEMM
fractions), so the fit is a correction around 1, and never above it: an efficiency above 1 would
claim kernels faster than the published achievable rates. Where model / measured exceeds 1 the
model's assumed WORK is too large for that class (a GEMM launch shows its tiles, not its depth: the
grid-only inference prices every K-slice 512 deep, and a 32-deep weight-gradient GEMM then looks
16x too slow), not its rates; the fit is clipped to 1 (``efficiency``) and the unclipped ratio kept
beside it (``model_over_measured``, and ``unclipped_efficiency`` in the overlay's provenance), so
that the overlay never speeds a class up and the over-estimate stays visible.

The overlay is YAML: ``efficiency: {gemm: 0.62, ...}`` plus ``provenance`` (trace, hw, date, ops per
class). ``predict_op_seconds(..., efficiency=...)`` and ``archsim breakdown --calibration`` use it.
"""

from __future__ import annotations

import datetime
import difflib
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

from archsim.atomic import atomic_output_file
from archsim.errors import ArchsimError
from archsim.hw.schema import HardwareConfig
from archsim.perf.classes import (
    UNFITTED_REASON,
    is_unfitted_class,
    known_classes_text,
    known_efficiency_classes,
)
from archsim.perf.kernel import MEASURED_KINDS, body_seconds, efficiency_class

ALL_CLASSES = "all"
# A calibrated efficiency is at most 1: the model's rates are already the achieved ones (module doc).
MAX_EFFICIENCY = 1.0


def measured_ops(ops: pd.DataFrame) -> pd.DataFrame:
    """Ops with a measured device duration (kernel, memcpy, memset with dur_us > 0)."""
    kind = ops["kind"].astype("string")
    dur = pd.to_numeric(ops["dur_us"], errors="coerce")
    return ops[kind.isin(MEASURED_KINDS) & (dur > 0)].reset_index(drop=True)


def _class_frame(ops: pd.DataFrame, hw: HardwareConfig, fitted: bool) -> pd.DataFrame:
    """Per measured op of the fitted classes (or, ``fitted`` False, of the left-out ones): class,
    measured and model seconds."""
    ops = measured_ops(ops)
    classes = efficiency_class(ops)
    keep = classes.map(is_unfitted_class).to_numpy(dtype=bool) != fitted
    ops = ops[keep].reset_index(drop=True)
    return pd.DataFrame(
        {
            "op_class": classes[keep].to_numpy(),
            "measured_s": ops["dur_us"].to_numpy(dtype=float) * 1e-6,
            "bound_s": body_seconds(ops, hw) if len(ops) else [],
        }
    )


def fit_table(ops: pd.DataFrame, hw: HardwareConfig) -> pd.DataFrame:
    """Per fitted class: ops, measured and model seconds, median per-op model/measured, the
    time-weighted ``model_over_measured`` and ``efficiency`` (the same clipped to MAX_EFFICIENCY);
    row ``all`` over the fitted classes' ops. Collectives are left out (``left_out_table``)."""
    if measured_ops(ops).empty:
        raise ArchsimError("trace has no measured GPU ops (kernel/memcpy/memset) to calibrate on")
    frame = _class_frame(ops, hw, fitted=True)
    if frame.empty:
        raise ArchsimError(
            f"trace's measured GPU ops are all collectives, which are not calibrated ({UNFITTED_REASON})"
        )
    frame["ratio"] = frame["bound_s"] / frame["measured_s"]
    table = frame.groupby("op_class").agg(
        ops=("ratio", "size"),
        measured_s=("measured_s", "sum"),
        bound_s=("bound_s", "sum"),
        median_efficiency=("ratio", "median"),
    )
    table["model_over_measured"] = table["bound_s"] / table["measured_s"]
    table["efficiency"] = table["model_over_measured"].clip(upper=MAX_EFFICIENCY)
    overall = pd.DataFrame(
        {
            "ops": [len(frame)],
            "measured_s": [frame["measured_s"].sum()],
            "bound_s": [frame["bound_s"].sum()],
            "median_efficiency": [frame["ratio"].median()],
        },
        index=[ALL_CLASSES],
    )
    overall["model_over_measured"] = overall["bound_s"] / overall["measured_s"]
    overall["efficiency"] = overall["model_over_measured"].clip(upper=MAX_EFFICIENCY)
    return pd.concat([table, overall]).rename_axis("op_class")


def left_out_table(ops: pd.DataFrame, hw: HardwareConfig) -> pd.DataFrame:
    """Per class left out of the fit (collectives): ops, measured and model seconds; empty when the
    trace has none."""
    frame = _class_frame(ops, hw, fitted=False)
    return (
        frame.groupby("op_class")
        .agg(
            ops=("measured_s", "size"), measured_s=("measured_s", "sum"), bound_s=("bound_s", "sum")
        )
        .rename_axis("op_class")
    )


def fit_efficiency(ops: pd.DataFrame, hw: HardwareConfig) -> dict[str, float]:
    table = fit_table(ops, hw).drop(index=ALL_CLASSES)
    return {str(c): float(e) for c, e in table["efficiency"].items()}


def calibration_document(
    table: pd.DataFrame,
    trace: str,
    hw: HardwareConfig,
    overrides: list[str] | None = None,
    left_out: pd.DataFrame | None = None,
) -> dict[str, Any]:
    """The overlay: fitted efficiencies and their provenance, naming the classes left out."""
    per_class = table.drop(index=ALL_CLASSES)
    left = {} if left_out is None else {str(c): int(n) for c, n in left_out["ops"].items()}
    return {
        "efficiency": {str(c): round(float(e), 6) for c, e in per_class["efficiency"].items()},
        "provenance": {
            "trace": trace,
            "hw": hw.name,
            "hw_overrides": list(overrides or []),
            "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            "method": "per class: sum(model) / sum(measured), time-weighted, clipped to 1 (the "
            "model's rates are the published achieved ones; above 1 the class's inferred work is "
            "too large, see unclipped_efficiency)",
            "unclipped_efficiency": {
                str(c): round(float(m), 6)
                for c, m in per_class["model_over_measured"].items()
                if m > MAX_EFFICIENCY
            },
            "all_classes_efficiency": round(float(table.loc[ALL_CLASSES, "efficiency"]), 6),
            "ops_per_class": {str(c): int(n) for c, n in table["ops"].items()},
            "median_efficiency": {
                str(c): round(float(m), 6) for c, m in table["median_efficiency"].items()
            },
            **({"left_out": {"ops_per_class": left, "reason": UNFITTED_REASON}} if left else {}),
        },
    }


def write_calibration(path: Path, document: Mapping[str, Any]) -> Path:
    with atomic_output_file(Path(path)) as handle:
        handle.write(yaml.safe_dump(dict(document), sort_keys=False))
    return Path(path)


def load_efficiency(path: Path) -> dict[str, float]:
    """The ``efficiency`` mapping of a calibration overlay, checked (positive finite numbers)."""
    from archsim.hw.strict_yaml import read_yaml_text, safe_load_unique, yaml_refusal

    path = Path(path)
    try:
        data = safe_load_unique(read_yaml_text(path))  # a class given twice is an error
    except OSError as exc:
        raise ArchsimError(f"{path}: cannot read calibration ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ArchsimError(yaml_refusal(path, exc)) from None
    except UnicodeDecodeError:  # a binary file is not YAML either
        raise ArchsimError(f"{path}: not valid YAML (UnicodeDecodeError)") from None
    if not isinstance(data, dict) or not isinstance(data.get("efficiency"), dict):
        raise ArchsimError(f"{path}: expected a mapping with key efficiency: {{class: fraction}}")
    if not data["efficiency"]:  # "calibrated" output that calibrates nothing
        raise ArchsimError(f"{path}: efficiency is empty (expected {{class: fraction}} entries)")
    out = {}
    known = known_efficiency_classes()
    for name, value in data["efficiency"].items():
        if is_unfitted_class(str(name)):  # an overlay written before collectives were left out
            raise ArchsimError(
                f"{path}: efficiency.{name}: collectives are not calibrated ({UNFITTED_REASON}); "
                "remove the entry"
            )
        if str(name) not in known:  # a typo would calibrate nothing, silently
            close = difflib.get_close_matches(str(name), sorted(known), n=1)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise ArchsimError(
                f"{path}: efficiency.{str(name)[:60]} is not a calibration class{hint}; known: "
                f"{known_classes_text()}"
            )
        if (
            isinstance(value, bool)
            or not isinstance(value, int | float)
            or not math.isfinite(value)
            or not 0 < value <= MAX_EFFICIENCY
        ):
            raise ArchsimError(
                f"{path}: efficiency.{name} must be a number in (0, 1] (got {value!r}): the "
                "model's rates are already achieved rates; a calibration may only slow a class down"
            )
        out[str(name)] = float(value)
    return out


def class_errors(
    ops: pd.DataFrame, hw: HardwareConfig, efficiency: Mapping[str, float] | None
) -> pd.DataFrame:
    """Per class: measured and predicted kernel seconds and the signed relative error of the total."""
    ops = measured_ops(ops)
    frame = pd.DataFrame(
        {
            "op_class": efficiency_class(ops).to_numpy(),
            "measured_s": ops["dur_us"].to_numpy(dtype=float) * 1e-6,
            "predicted_s": body_seconds(ops, hw, efficiency=efficiency),
        }
    )
    table = frame.groupby("op_class").agg(
        ops=("measured_s", "size"),
        measured_s=("measured_s", "sum"),
        predicted_s=("predicted_s", "sum"),
    )
    table.loc["total"] = [len(frame), frame["measured_s"].sum(), frame["predicted_s"].sum()]
    table["error"] = table["predicted_s"] / table["measured_s"] - 1.0
    table["ops"] = table["ops"].astype(int)
    return table


def total_error(
    ops: pd.DataFrame, hw: HardwareConfig, efficiency: Mapping[str, float] | None
) -> float:
    """Signed relative error of the predicted total kernel time."""
    return float(class_errors(ops, hw, efficiency).loc["total", "error"])


__all__ = [
    "MAX_EFFICIENCY",
    "calibration_document",
    "class_errors",
    "fit_efficiency",
    "fit_table",
    "left_out_table",
    "load_efficiency",
    "measured_ops",
    "total_error",
    "write_calibration",
]
