"""Validation outputs: the error arithmetic, the CSV, the markdown table and the scatter chart."""

from __future__ import annotations

import math
import os
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
    # load-robust figure (issue 11): frames over the CPU seconds of the run's own processes
    "measured_cpu_s",
    "measured_frames_per_cpu_s",
    "predicted_frames_per_cpu_s",
    "frames_per_cpu_s_error",
    # the machine's load (archsim.validate.load): during the runs, and during the baseline capture
    "other_busy_cpus",
    "steal_cpus",
    "capture_other_busy_cpus",
    "capture_steal_cpus",
    "capture_loadavg_1min",
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


def _finite_mean(values: Sequence[float]) -> float:
    finite = [v for v in values if math.isfinite(v)]
    return sum(finite) / len(finite) if finite else math.nan


def spread(values: Sequence[float]) -> float:
    """(max - min) / mean of repeated measurements; 0 for a single run."""
    mean = sum(values) / len(values)
    return (max(values) - min(values)) / mean if mean > 0 else math.nan


def summary(rows: list[dict]) -> dict:
    """MAE and worst configuration of the frames/s error."""
    errors = [r["frames_error"] for r in rows]
    per_cpu = [e for r in rows if math.isfinite(e := r.get("frames_per_cpu_s_error", math.nan))]
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
        "frames_per_cpu_s_mae": mean_abs_error(per_cpu),
        "worst_frames_per_cpu_s_error": max(per_cpu, key=abs, default=math.nan),
        "mean_other_busy_cpus": _finite_mean([r.get("other_busy_cpus", math.nan) for r in rows]),
        "max_other_busy_cpus": max(
            (
                v
                for r in rows
                for k in ("other_busy_cpus", "capture_other_busy_cpus")
                if math.isfinite(v := r.get(k, math.nan))
            ),
            default=math.nan,
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


def _load(row: dict) -> str:
    """Others' busy CPUs during the runs, and during the baseline capture in brackets."""
    run, capture = (
        row.get("other_busy_cpus", math.nan),
        row.get("capture_other_busy_cpus", math.nan),
    )
    text = f"{run:.2f}" if math.isfinite(run) else "n/a"
    return text + (f" ({capture:.2f} capture)" if math.isfinite(capture) else "")


def markdown_table(rows: list[dict]) -> str:
    """One line per configuration, then the MAE line."""
    lines = [
        "| config | knobs | frames/s measured | predicted | error | profiled run | "
        "calibrated error | updates/s measured | predicted | error | CPU util measured | "
        "predicted | frames/CPU-s measured | predicted | error | others' busy CPUs |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
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
            f"{r['predicted_cpu_util']:.0%} | {_num(r.get('measured_frames_per_cpu_s', math.nan))} | "
            f"{_num(r.get('predicted_frames_per_cpu_s', math.nan))} | "
            f"{_pct(r.get('frames_per_cpu_s_error', math.nan))} | {_load(r)} |"
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
        + (
            f" Per CPU-second of the run's own processes (load-robust), the frames MAE is "
            f"{s['frames_per_cpu_s_mae']:.1%} (worst {_pct(s['worst_frames_per_cpu_s_error'])})."
            if math.isfinite(s["frames_per_cpu_s_mae"])
            else ""
        )
        + (
            f" Other processes kept {s['mean_other_busy_cpus']:.2f} of {os.cpu_count()} CPUs busy "
            f"on average during the runs (at most {s['max_other_busy_cpus']:.2f} during a run or "
            f"capture)."
            if math.isfinite(s["mean_other_busy_cpus"])
            else ""
        )
    )
    return "\n".join(lines) + "\n"


def scatter_chart(rows: list[dict], stem: Path) -> None:
    """Predicted vs measured (log-log), y = x and the ±10% / ±20% bands, in two panels: frames/s
    (wall clock) and frames per CPU-second (load-robust; left out when no row has it); PNG, SVG."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    s = summary(rows)
    panels = [
        ("frames_per_s", "frames/s", f"wall clock: MAE {s['frames_mae']:.1%}"),
    ]
    if math.isfinite(s["frames_per_cpu_s_mae"]):
        panels.append(
            (
                "frames_per_cpu_s",
                "frames per CPU-second",
                f"per CPU-second (load-robust): MAE {s['frames_per_cpu_s_mae']:.1%}",
            )
        )
    fig, axes = plt.subplots(
        1, len(panels), figsize=(6.4 * len(panels), 5.6), layout="constrained", squeeze=False
    )
    for ax, (key, unit, title) in zip(axes[0], panels, strict=True):
        _scatter_panel(ax, rows, key, unit)
        ax.set_title(title)
    fig.suptitle("archsim vs real runs on this machine")
    fig.savefig(stem.with_suffix(".png"), dpi=120)
    fig.savefig(stem.with_suffix(".svg"))
    plt.close(fig)


# Labels closer than this (as a fraction of the log-scaled axis) are moved apart.
LABEL_GAP = 0.035


def _label_points(ax: object, pairs: list, lo: float, hi: float) -> None:
    """Name each point beside it; labels are placed top to bottom and a label that would land within
    LABEL_GAP of the one above (in log-scaled axis units) is pushed down until it does not."""
    span = math.log10(hi) - math.log10(lo)
    placed: list[tuple[float, float]] = []  # (x, y) of labels, in axis fractions
    for r, m, p in sorted(pairs, key=lambda t: -t[2]):
        x = (math.log10(m) - math.log10(lo)) / span
        y = (math.log10(p) - math.log10(lo)) / span
        label_y = y
        while any(abs(px - x) < 0.2 and abs(py - label_y) < LABEL_GAP for px, py in placed):
            label_y -= LABEL_GAP
        placed.append((x, label_y))
        ax.annotate(
            r["config"],
            (m, p),
            xytext=(x + 0.012, label_y + 0.008),
            textcoords="axes fraction",
            fontsize=7,
            arrowprops={"arrowstyle": "-", "lw": 0.4, "color": "0.5"} if label_y != y else None,
        )


def _scatter_panel(ax: object, rows: list[dict], key: str, unit: str) -> None:
    """One predicted-vs-measured panel of ``measured_<key>`` against ``predicted_<key>``."""
    from matplotlib.ticker import FuncFormatter, LogLocator

    pairs = [
        (r, r[f"measured_{key}"], r[f"predicted_{key}"])
        for r in rows
        if math.isfinite(r.get(f"measured_{key}", math.nan))
        and math.isfinite(r.get(f"predicted_{key}", math.nan))
    ]
    values = [v for _, m, p in pairs for v in (m, p)]
    lo, hi = min(values) / 1.5, max(values) * 1.5
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
        pts = [(r, m, p) for r, m, p in pairs if r["workload"] == workload]
        if not pts:
            continue
        ax.scatter(
            [m for _, m, _ in pts],
            [p for _, _, p in pts],
            marker=marker,
            color=color,
            label=workload.upper(),
            zorder=3,
        )
    _label_points(ax, pairs, lo, hi)
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        # labels at 1, 2 and 5 of every decade: a one-decade log axis otherwise shows one number
        axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
        axis.set_minor_locator(LogLocator(base=10, subs=tuple(range(2, 10))))
        axis.set_minor_formatter(FuncFormatter(lambda v, _: ""))
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_xlabel(f"measured {unit} (real run, no profiler)")
    ax.set_ylabel(f"predicted {unit} (archsim, --hw local, baseline trace)")
    ax.legend(loc="upper left", fontsize=8)
