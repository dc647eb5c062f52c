"""Validation outputs: the error arithmetic, the CSV, the markdown table and the scatter chart."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

# Issue 6's goals for frames/s: mean absolute relative error <= 10%, no configuration beyond 20%.
GOAL_MAE = 0.10
GOAL_WORST = 0.20

CSV_COLUMNS = (
    "config",
    "workload",
    "role",
    "knobs",
    "actors",
    "envs_per_actor",
    "inference_batch",
    "learner_batch",
    "train_every",
    "replay_ratio",
    "repeats",
    "window_s",
    "loadavg_1min",
    "speed_ref_ms",
    "capture_speed_ref_ms",
    "measured_frames_per_s",
    "frames_spread",
    "predicted_frames_per_s",
    "frames_error",
    "measured_updates_per_s",
    "predicted_updates_per_s",
    "updates_error",
    "measured_cpu_util",
    "predicted_cpu_util",
    "cpu_util_error",
    "capture_frames_per_s",
    "calibrated_frames_per_s",
    "calibrated_frames_error",
    "drift_corrected_frames_error",
)


def signed_rel_error(predicted: float, measured: float) -> float:
    """(predicted - measured) / measured: positive when archsim over-predicts."""
    if not measured > 0:
        return math.nan
    return (predicted - measured) / measured


def add_calibrated_columns(rows: list[dict]) -> None:
    """Each prediction scaled by its workload baseline's measured / predicted frames/s
    ("calibrated": what is left is the model's error in how frames/s CHANGES with the knobs)."""
    base = {r["workload"]: r for r in rows if r["role"] == "baseline"}
    for row in rows:
        b = base[row["workload"]]
        scale = b["measured_frames_per_s"] / b["predicted_frames_per_s"]
        row["calibrated_frames_per_s"] = row["predicted_frames_per_s"] * scale
        row["calibrated_frames_error"] = signed_rel_error(
            row["calibrated_frames_per_s"], row["measured_frames_per_s"]
        )


def mean_abs_error(errors: Sequence[float]) -> float:
    """Mean of |error| over the finite errors (NaN when there are none)."""
    finite = [abs(e) for e in errors if math.isfinite(e)]
    return sum(finite) / len(finite) if finite else math.nan


def spread(values: Sequence[float]) -> float:
    """(max - min) / mean of repeated measurements; 0 for a single run."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean > 0 else math.nan


def summary(rows: list[dict]) -> dict:
    """MAE and worst configuration of the frames/s error."""
    errors = [r["frames_error"] for r in rows]
    worst = max(
        rows, key=lambda r: abs(r["frames_error"]) if math.isfinite(r["frames_error"]) else -1
    )
    return {
        "configs": len(rows),
        "frames_mae": mean_abs_error(errors),
        "worst_config": worst["config"],
        "worst_frames_error": worst["frames_error"],
        "updates_mae": mean_abs_error([r["updates_error"] for r in rows]),
        "cpu_util_mae": mean_abs_error([r["cpu_util_error"] for r in rows]),
        "calibrated_frames_mae_variants": mean_abs_error(
            [r["calibrated_frames_error"] for r in rows if r["role"] == "variant"]
        ),
        "drift_corrected_frames_mae": mean_abs_error(
            [r.get("drift_corrected_frames_error", math.nan) for r in rows]
        ),
        **{
            f"frames_mae_{w}": mean_abs_error(
                [r["frames_error"] for r in rows if r["workload"] == w]
            )
            for w in sorted({r["workload"] for r in rows})
        },
        "meets_goal": mean_abs_error(errors) <= GOAL_MAE
        and all(abs(e) <= GOAL_WORST for e in errors if math.isfinite(e)),
    }


def write_csv(rows: list[dict], path: Path) -> None:
    import csv

    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_COLUMNS)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: _csv_value(row[k]) for k in CSV_COLUMNS})


def _csv_value(value: object) -> object:
    if isinstance(value, float):
        return f"{value:.6g}"
    return value


def _pct(x: float) -> str:
    return f"{x:+.1%}" if math.isfinite(x) else "n/a"


def _num(x: float) -> str:
    return f"{x:,.0f}" if math.isfinite(x) else ""


def markdown_table(rows: list[dict]) -> str:
    """One line per configuration, then the MAE line."""
    lines = [
        "| config | knobs | frames/s measured | predicted | error | profiled run | "
        "calibrated error | updates/s measured | predicted | error | CPU util measured | "
        "predicted |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        name = r["config"] + (" (baseline)" if r["role"] == "baseline" else "")
        spread_note = f" (±{r['frames_spread'] / 2:.0%})" if r["repeats"] > 1 else ""
        lines.append(
            f"| {name} | {r['knobs']} | {r['measured_frames_per_s']:,.0f}{spread_note} | "
            f"{r['predicted_frames_per_s']:,.0f} | {_pct(r['frames_error'])} | "
            f"{_num(r['capture_frames_per_s'])} | "
            f"{_pct(r['calibrated_frames_error']) if r['role'] == 'variant' else '='} | "
            f"{r['measured_updates_per_s']:,.1f} | {r['predicted_updates_per_s']:,.1f} | "
            f"{_pct(r['updates_error'])} | {r['measured_cpu_util']:.0%} | "
            f"{r['predicted_cpu_util']:.0%} |"
        )
    s = summary(rows)
    lines.append("")
    lines.append(
        f"Mean absolute error of frames/s over {s['configs']} configurations: "
        f"{s['frames_mae']:.1%} (goal <= {GOAL_MAE:.0%}); worst: {s['worst_config']} "
        f"{_pct(s['worst_frames_error'])} (goal: none beyond {GOAL_WORST:.0%}). By workload: "
        + ", ".join(
            f"{k.removeprefix('frames_mae_').upper()} {v:.1%}"
            for k, v in s.items()
            if k.startswith("frames_mae_")
        )
        + ". "
        f"Learner updates/s MAE {s['updates_mae']:.1%}; CPU utilization MAE {s['cpu_util_mae']:.1%}. "
        f"Calibrated to each baseline's measurement, the variants' frames/s MAE is "
        f"{s['calibrated_frames_mae_variants']:.1%}."
        + (
            f" Corrected for the machine's speed drift between capture and runs, the frames/s MAE "
            f"is {s['drift_corrected_frames_mae']:.1%}."
            if math.isfinite(s["drift_corrected_frames_mae"])
            else ""
        )
    )
    return "\n".join(lines) + "\n"


def scatter_chart(rows: list[dict], stem: Path) -> None:
    """Predicted vs measured frames/s (log-log), y = x and the ±10% / ±20% bands; PNG and SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    measured = [r["measured_frames_per_s"] for r in rows]
    predicted = [r["predicted_frames_per_s"] for r in rows]
    lo = min(measured + predicted) / 1.5
    hi = max(measured + predicted) * 1.5
    fig, ax = plt.subplots(figsize=(6.4, 5.6), layout="constrained")
    xs = [lo, hi]
    ax.plot(xs, xs, color="black", lw=1, label="predicted = measured")
    for band, alpha in ((GOAL_WORST, 0.10), (GOAL_MAE, 0.18)):
        ax.fill_between(
            xs,
            [x * (1 - band) for x in xs],
            [x * (1 + band) for x in xs],
            color="tab:green",
            alpha=alpha,
            lw=0,
            label=f"±{band:.0%}",
        )
    markers = {"dqn": ("o", "tab:blue"), "r2d2": ("s", "tab:orange")}
    for workload, (marker, color) in markers.items():
        pts = [r for r in rows if r["workload"] == workload]
        if not pts:
            continue
        ax.scatter(
            [r["measured_frames_per_s"] for r in pts],
            [r["predicted_frames_per_s"] for r in pts],
            marker=marker,
            color=color,
            label=workload.upper(),
            zorder=3,
        )
        for i, r in enumerate(pts):  # staggered so that neighbouring labels do not overlap
            ax.annotate(
                r["config"],
                (r["measured_frames_per_s"], r["predicted_frames_per_s"]),
                textcoords="offset points",
                xytext=(4, 4 - 9 * (i % 3)),
                fontsize=7,
            )
    ax.set_xscale("log")
    ax.set_yscale("log")
    from matplotlib.ticker import FuncFormatter

    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel("measured frames/s (real run, no profiler)")
    ax.set_ylabel("predicted frames/s (archsim, --hw local, baseline trace)")
    s = summary(rows)
    ax.set_title(f"archsim vs real runs on this machine: MAE {s['frames_mae']:.1%}")
    ax.legend(loc="upper left", fontsize=8)
    fig.savefig(stem.with_suffix(".png"), dpi=120)
    fig.savefig(stem.with_suffix(".svg"))
    plt.close(fig)
