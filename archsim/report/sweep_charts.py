"""Charts of a sweep table (PNG and SVG, matplotlib Agg): which chart depends on what was swept.

- actors alone: throughput, GPU power and perf/W versus actors (the paper's actor sweep);
- sms alone: slowdown versus SMs, relative to the most SMs swept (the paper's SM sweep);
- cpu_threads and sms: a CPU/GPU-ratio map of throughput and perf/W, plus both against the ratio;
- anything else: frames/s against the first swept knob, one line per value of the others.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from archsim.analysis.limiter import knee, limiter
from archsim.report.style import (
    CPU_COLOR,
    GPU_COLOR,
    TOTAL_COLOR,
    annotate_knee,
    from_zero,
    log2_axis,
    mark_baseline,
    pyplot,
    save,
    value_axis,
)


def sweep_charts(table: pd.DataFrame, swept: list[str], out: Path, title: str) -> list[Path]:
    """Draw the charts that fit the swept knobs into ``out``; returns the files written."""
    if table.empty or not swept:
        return []
    table = table.copy()
    if set(swept) == {"actors"}:
        return actor_sweep_chart(table, out, title)
    if set(swept) == {"sms"}:
        return sm_sweep_chart(table, out, title)
    if set(swept) == {"cpu_threads", "sms"}:
        return ratio_map_chart(table, out, title)
    return generic_chart(table, swept, out, title)


def _power_panel(ax, t: pd.DataFrame, x: str) -> None:
    """CPU, GPU and total power from zero: the same energy that frames per joule divides by."""
    if "cpu_power_w" in t:
        ax.plot(t[x], t["cpu_power_w"], marker="o", color=CPU_COLOR, label="CPU")
    ax.plot(t[x], t["gpu_power_w"], marker="o", color=GPU_COLOR, label="GPU")
    if "avg_power_w" in t:
        ax.plot(t[x], t["avg_power_w"], marker="o", color=TOTAL_COLOR, label="CPU + GPU")
    ax.set_ylabel("power (W)")
    from_zero(ax)
    ax.legend(fontsize=7)


def actor_sweep_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    plt = pyplot()
    t = table.sort_values("actors")
    actors = t["actors"].to_numpy(float)
    fig, axes = plt.subplots(2, 3, figsize=(14, 7.5), layout="constrained")
    ax = axes[0, 0]
    ax.plot(actors, t["frames_per_s"], marker="o")
    ax.set_ylabel("frames/s")
    at = knee(actors, t["frames_per_s"])
    if at is not None:
        annotate_knee(ax, at, float(t.loc[t["actors"] == at, "frames_per_s"].iloc[0]))
    from_zero(ax)
    ax = axes[0, 1]
    ax.plot(actors, t["learner_updates_per_s"], marker="o", color="tab:purple")
    ax.set_ylabel("learner updates/s")
    from_zero(ax)
    ax = axes[0, 2]
    ax.plot(actors, 100 * t["cpu_util"], marker="o", color=CPU_COLOR, label="CPU threads busy")
    ax.plot(actors, 100 * t["gpu_util"], marker="o", color=GPU_COLOR, label="GPU busy")
    if "gpu_sm_util" in t:
        ax.plot(
            actors,
            100 * t["gpu_sm_util"],
            marker=".",
            linestyle="--",
            color=GPU_COLOR,
            label="GPU SMs in use",
        )
    ax.set_ylabel("utilization (%)")
    ax.set_ylim(0, 105)
    ax.legend(fontsize=7)
    _power_panel(axes[1, 0], t, "actors")
    ax = axes[1, 1]
    ax.plot(actors, t["frames_per_joule"], marker="o", color="tab:orange")
    ax.set_ylabel("frames per joule (CPU + GPU energy)")
    from_zero(ax)
    for ax in axes.flat[:5]:
        log2_axis(ax, actors)
        ax.set_xlabel("actors")
        ax.grid(alpha=0.3)
    ax = axes[1, 2]
    ax.axis("off")
    what, why = limiter(t.iloc[-1].to_dict())
    text = f"At {actors[-1]:g} actors, limited by {what}:\n" + _wrap(why, 48)
    if at is not None:
        text += (
            f"\n\nKnee at {at:g} actors: doubling past it buys\nless than half of the ideal gain."
        )
    ax.text(0, 1, text, va="top", fontsize=9, wrap=True)
    fig.suptitle(f"Actor sweep: {title}")
    return save(fig, out, "actor_sweep")


def _wrap(text: str, width: int) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(text, width))


def sm_sweep_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    plt = pyplot()
    t = table.sort_values("sms")
    base = t.iloc[-1]
    sms = t["sms"].to_numpy(float)
    fig, (ax, pax) = plt.subplots(1, 2, figsize=(11, 4), layout="constrained")
    for column, label in (("frames_per_s", "frames/s"), ("learner_updates_per_s", "updates/s")):
        slowdown = base[column] / t[column]
        ax.plot(sms, slowdown, marker="o", label=f"{label}")
    ax.axhline(1.0, color=TOTAL_COLOR, linewidth=0.8)
    ax.set_ylabel(f"slowdown vs {int(base['sms'])} SMs (x, 1 = no loss)")
    ax.legend(title="slowdown of", fontsize=7)
    _power_panel(pax, t, "sms")
    for a in (ax, pax):
        log2_axis(a, sms)
        a.set_xlabel("SMs enabled")
        a.grid(alpha=0.3)
        mark_baseline(a, float(base["sms"]), "baseline")
    ax.set_title("slowdown")
    pax.set_title("power")
    fig.suptitle(f"SM sweep: {title}")
    return save(fig, out, "sm_sweep")


def ratio_map_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    plt = pyplot()
    paths: list[Path] = []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")
    panels = (("frames_per_s", "frames/s"), ("frames_per_joule", "frames per joule (CPU + GPU)"))
    for ax, (column, label) in zip(axes, panels, strict=True):
        grid = table.pivot_table(index="cpu_threads", columns="sms", values=column)
        values = grid.to_numpy()
        image = ax.imshow(values, origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(grid.columns)), [f"{c:g}" for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [f"{i:g}" for i in grid.index])
        middle = np.nanmean(values) if np.isfinite(values).any() else 0.0
        for (row, col), value in np.ndenumerate(values):
            if np.isfinite(value):
                color = "white" if value < middle else "black"
                ax.text(
                    col, row, f"{value:,.3g}", ha="center", va="center", fontsize=7, color=color
                )
        ax.set_xlabel("GPU SMs")
        ax.set_ylabel("CPU hardware threads")
        ax.set_title(label)
        fig.colorbar(image, ax=ax, label=label)
    fig.suptitle(f"CPU/GPU ratio map: {title}")
    paths += save(fig, out, "ratio_map")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), layout="constrained")
    ratio = table["cpu_threads"] / table["sms"]
    for ax, (column, label) in zip(axes, panels, strict=True):
        points = ax.scatter(ratio, table[column], c=table["sms"], cmap="viridis")
        log2_axis(ax, sorted(set(ratio.round(3))))
        ax.tick_params(axis="x", labelrotation=45, labelsize=7)
        ax.set_xlabel("CPU/GPU ratio (hardware threads per SM)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
        fig.colorbar(points, ax=ax, label="GPU SMs")
    fig.suptitle(f"Throughput and perf/W against the CPU/GPU ratio: {title}")
    return paths + save(fig, out, "ratio_scatter")


def _compact(value: float) -> str:
    """4,675 -> "4.7K", 1.2e6 -> "1.2M", 24.7 -> "24.7": cell labels that fit a heat-map cell."""
    for scale, suffix in ((1e6, "M"), (1e3, "K")):
        if abs(value) >= scale:
            return f"{value / scale:.3g}{suffix}"
    return f"{value:.3g}"


# More combinations of the other swept knobs than this, and the chart draws their median and range
# instead of a line each (a 10,000-point sweep would give ~100 lines and a legend nobody can read).
MAX_SWEEP_LINES = 10


def sweep_envelope(table: pd.DataFrame, x: str) -> pd.DataFrame:
    """Per value of ``x``: min, median and max of frames/s over every combination of the other knobs."""
    return table.groupby(x)["frames_per_s"].agg(["min", "median", "max"]).reset_index()


def generic_chart(table: pd.DataFrame, swept: list[str], out: Path, title: str) -> list[Path]:
    plt = pyplot()
    x, others = swept[0], swept[1:]
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    groups = table.groupby(others) if others else [((), table)]
    numeric = pd.api.types.is_numeric_dtype(table[x])  # words (--inference, --loop) are str
    combinations = len(groups)
    if combinations > MAX_SWEEP_LINES:
        band = sweep_envelope(table, x)
        xs = band[x] if numeric else band[x].astype(str)
        ax.fill_between(xs, band["min"], band["max"], alpha=0.25, label="min to max")
        knobs = ", ".join(others)
        ax.plot(xs, band["median"], marker="o", label=f"median of {combinations} ({knobs})")
    else:
        for key, group in groups:
            key = key if isinstance(key, tuple) else (key,)
            label = ", ".join(f"{k}={v}" for k, v in zip(others, key, strict=True)) or None
            g = group.sort_values(x)
            xs = g[x] if numeric else g[x].astype(str)
            ax.plot(xs, g["frames_per_s"], marker="o", label=label)
    if numeric:
        value_axis(ax, table[x])
    ax.set_xlabel(x.replace("_", " "))
    ax.set_ylabel("frames/s")
    from_zero(ax)
    ax.grid(alpha=0.3)
    if others:
        ax.legend(fontsize=7)
    ax.set_title(f"Sweep: {title}")
    return save(fig, out, "sweep")
