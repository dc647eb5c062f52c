"""Several validation runs pooled into one table (``archsim validate --pool DIR DIR ...``).

One run measures each configuration twice and predicts from one baseline capture, and on a shared
VM one capture taken in a slow minute moves every prediction of its workload (the 2026-11-22 runs:
a DQN capture 20% slow). Pooling k runs averages k captures and 2k measurements per configuration:
per configuration, measured = the repeat-weighted mean of the runs' measured means, predicted = the
mean of the runs' predictions; errors, the calibrated and drift-corrected diagnostics and the spread
(of the runs' measured means) are recomputed from those.
"""

from __future__ import annotations

import csv
import math
import statistics
from pathlib import Path

from archsim.errors import ArchsimError
from archsim.validate.report import (
    CSV_COLUMNS,
    add_calibrated_columns,
    signed_rel_error,
    spread,
)

_TEXT = ("config", "workload", "role", "knobs")
_INTS = ("actors", "envs_per_actor", "inference_batch", "learner_batch", "train_every", "repeats")


def read_rows(path: Path) -> list[dict]:
    """The rows of one run's validation.csv, numbers as numbers."""
    if not path.exists():
        raise ArchsimError(f"{path}: not found (expected an archsim validate output's CSV)")
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        missing = [
            c for c in ("config", "measured_frames_per_s") if c not in (reader.fieldnames or [])
        ]
        if missing:
            raise ArchsimError(f"{path}: no '{missing[0]}' column (not a validation.csv)")
        rows = []
        for line, raw in enumerate(reader, start=2):
            # columns added since an older run wrote its CSV are NaN there
            row: dict = {key: math.nan for key in CSV_COLUMNS}
            for key, value in raw.items():
                try:
                    if key in _TEXT:
                        row[key] = value
                    elif key in _INTS:
                        row[key] = int(value)
                    else:
                        row[key] = float(value) if value not in ("", None) else math.nan
                except (TypeError, ValueError):
                    raise ArchsimError(
                        f"{path}: line {line}, column '{key}': expected a number, got {value!r}"
                    ) from None
            rows.append(row)
    return rows


def pool_rows(run_dirs: list[Path]) -> list[dict]:
    """One row per configuration over every run in ``run_dirs`` (each an archsim validate --out)."""
    if len(run_dirs) < 2:
        raise ArchsimError("--pool: expected at least two validation output directories")
    runs = [read_rows(Path(d) / "validation.csv") for d in run_dirs]
    names = [r["config"] for r in runs[0]]
    for directory, rows in zip(run_dirs[1:], runs[1:], strict=True):
        if [r["config"] for r in rows] != names:
            raise ArchsimError(
                f"{directory}/validation.csv: configurations {[r['config'] for r in rows]} differ "
                f"from {run_dirs[0]}'s {names}"
            )
    pooled = [_pool_one([rows[i] for rows in runs]) for i in range(len(names))]
    add_calibrated_columns(pooled)
    return pooled


def _pool_one(rows: list[dict]) -> dict:
    weights = [max(r["repeats"], 1) for r in rows]
    out = dict(rows[0])
    out["repeats"] = sum(weights)

    def measured(key: str) -> float:
        return sum(w * r[key] for w, r in zip(weights, rows, strict=True)) / sum(weights)

    def predicted(key: str) -> float:
        return statistics.fmean(r[key] for r in rows)

    for key in (
        "window_s",
        "loadavg_1min",
        "speed_ref_ms",
        "measured_cpu_s",
        "other_busy_cpus",
        "steal_cpus",
    ):
        out[key] = measured(key)
    for key in (
        "capture_speed_ref_ms",
        "capture_other_busy_cpus",
        "capture_steal_cpus",
        "capture_loadavg_1min",
    ):
        out[key] = predicted(key)
    out["frames_spread"] = spread([r["measured_frames_per_s"] for r in rows])
    for metric, measured_key, predicted_key in (
        ("frames", "measured_frames_per_s", "predicted_frames_per_s"),
        ("updates", "measured_updates_per_s", "predicted_updates_per_s"),
        ("cpu_util", "measured_cpu_util", "predicted_cpu_util"),
        ("frames_per_cpu_s", "measured_frames_per_cpu_s", "predicted_frames_per_cpu_s"),
    ):
        out[measured_key], out[predicted_key] = measured(measured_key), predicted(predicted_key)
        out[f"{metric}_error"] = signed_rel_error(out[predicted_key], out[measured_key])
    captures = [r["capture_frames_per_s"] for r in rows if math.isfinite(r["capture_frames_per_s"])]
    out["capture_frames_per_s"] = statistics.fmean(captures) if captures else math.nan
    # each run's prediction scaled by its own drift, then averaged like the predictions
    corrected = [
        r["predicted_frames_per_s"] * r["capture_speed_ref_ms"] / r["speed_ref_ms"] for r in rows
    ]
    finite = [c for c in corrected if math.isfinite(c)]
    out["drift_corrected_frames_error"] = (
        signed_rel_error(statistics.fmean(finite), out["measured_frames_per_s"])
        if len(finite) == len(rows)
        else math.nan
    )
    return {key: out.get(key, math.nan) for key in CSV_COLUMNS}
