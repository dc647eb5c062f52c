"""Charts for the sequential-idealization breakdown and the SM-count curve (issue 16's reading rules:
per-step times with the step count, percentages on segments, tiny bars never drawn at full height, a
log2 SM axis with every swept count labelled where it fits, the slowdown shown). PNG and SVG via
matplotlib's Agg backend, SVG text kept as text; the caller writes into an atomic output directory."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd

COMPONENT_LABELS = {
    "dram_bw": "DRAM bandwidth",
    "dram_latency": "DRAM latency",
    "memory_system": "on-chip memory system",
    "sm_utilization": "SM utilization",
    "math": "math",
}
COMPONENT_COLORS = {
    "dram_bw": "#4e79a7",
    "dram_latency": "#a0cbe8",
    "memory_system": "#f28e2b",
    "sm_utilization": "#e15759",
    "math": "#59a14f",
}
# What one step of each bar is, for axis labels and titles.
STEP_NAMES = {
    "inference": "inference step",
    "train": "learner step",
    "other": "step",
    "all": "step of each phase",
}
# A segment gets its percentage printed when it is at least this tall (fraction of the axis).
MIN_LABELLED_FRACTION = 0.04
# A bar below this fraction of the largest bar gets no composition bar (its segments would be drawn
# at full height beside a bar thousands of times larger); its value is written there instead.
MIN_SPLIT_FRACTION = 0.01
# Log2 SM axis: a count gets a tick label when it lies at least this far (in log2 units) from the
# last labelled one; the largest count (the baseline) is always labelled.
MIN_LABEL_GAP_LOG2 = 0.3


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.3g} ms"


def draw_breakdown(table: pd.DataFrame, out_stem: Path, title: str) -> list[Path]:
    """Left: GPU time per step of each bar, stacked by component, on one axis. Right: each bar's
    composition in percent (bars under MIN_SPLIT_FRACTION of the largest are not split). Writes
    ``out_stem``.png and .svg."""
    plt = _pyplot()
    bars = list(dict.fromkeys(table["phase"]))
    seconds = {
        bar: table[table.phase == bar].set_index("component")["seconds"].reindex(COMPONENT_LABELS)
        for bar in bars
    }
    totals = {bar: float(seconds[bar].sum()) for bar in bars}
    steps = {bar: int(table[table.phase == bar]["steps"].iloc[0]) for bar in bars}
    largest = max(totals.values()) or 1.0
    width = 2.4 + 1.1 * len(bars)
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, (left, right) = plt.subplots(1, 2, figsize=(max(2 * width + 1.6, 9.0), 5.0))
        x_labels = [f"{bar}\n{steps[bar]} step{'s' * (steps[bar] != 1)}" for bar in bars]
        for ax, absolute in ((left, True), (right, False)):
            bottoms = [0.0] * len(bars)
            for component, label in COMPONENT_LABELS.items():
                heights = []
                for bar in bars:
                    value = float(seconds[bar][component])
                    if absolute:
                        heights.append(1e3 * value)
                    elif totals[bar] >= MIN_SPLIT_FRACTION * largest and totals[bar] > 0:
                        heights.append(100.0 * value / totals[bar])
                    else:
                        heights.append(0.0)
                ax.bar(range(len(bars)), heights, bottom=bottoms, color=COMPONENT_COLORS[component],
                       label=label if absolute else None, width=0.6)  # fmt: skip
                top = 1e3 * largest if absolute else 100.0
                for x, bar in enumerate(bars):
                    share = float(seconds[bar][component]) / totals[bar] if totals[bar] else 0.0
                    if heights[x] >= MIN_LABELLED_FRACTION * top:
                        ax.text(x, bottoms[x] + heights[x] / 2, f"{100 * share:.0f}%",
                                ha="center", va="center", fontsize=8, color="white")  # fmt: skip
                bottoms = [b + h for b, h in zip(bottoms, heights, strict=True)]
            ax.set_xticks(range(len(bars)), x_labels, fontsize=8)
        for x, bar in enumerate(bars):
            left.text(x, 1e3 * totals[bar], _ms(totals[bar]), ha="center", va="bottom", fontsize=8)
            if not (totals[bar] >= MIN_SPLIT_FRACTION * largest and totals[bar] > 0):
                right.text(x, 2, f"{_ms(totals[bar])}:\n< {100 * MIN_SPLIT_FRACTION:.0f}% of\n"
                           "the largest,\nnot split", ha="center", va="bottom", fontsize=7)  # fmt: skip
        left.set_ylim(0, 1e3 * largest * 1.12)
        left.set_ylabel("GPU time per step, ms")
        left.set_title("GPU time per step (one axis for all bars)", fontsize=9)
        right.set_ylim(0, 100)
        right.set_ylabel("share of the bar's GPU time, %")
        right.set_title("where each bar's time goes", fontsize=9)
        fig.suptitle(f"{title}: sequential idealization, per step of each phase", fontsize=10)
        fig.legend(loc="lower center", ncol=len(COMPONENT_LABELS), fontsize=8, frameon=False)
        fig.tight_layout(rect=(0, 0.06, 1, 1))
        return _save(fig, plt, out_stem)


def sm_tick_labels(sms: list[int]) -> list[str]:
    """Tick label of each swept SM count on a log2 axis: the count, or "" where it would overlap the
    previous label (MIN_LABEL_GAP_LOG2); the largest count always keeps its label."""
    labels = [""] * len(sms)
    last = -math.inf
    top = math.log2(max(sms))
    for i, count in enumerate(sms):
        here = math.log2(count)
        if here - last >= MIN_LABEL_GAP_LOG2 and (
            count == max(sms) or top - here >= MIN_LABEL_GAP_LOG2
        ):
            labels[i] = str(count)
            last = here
    labels[sms.index(max(sms))] = str(max(sms))
    return labels


def draw_sm_curve(curve: pd.DataFrame, out_stem: Path, title: str) -> list[Path]:
    """GPU time per step of the phase versus SM count on a log2 axis, the slowdown against the
    largest count on the right axis and at each labelled point; writes ``out_stem``.png and .svg."""
    plt = _pyplot()
    phase = str(curve["phase"].iloc[0]) if "phase" in curve else "all"
    step_name = STEP_NAMES.get(phase, "step")
    steps = int(curve["steps"].iloc[0]) if "steps" in curve else 0
    sms = [int(s) for s in curve["sms"]]
    ms = [1e3 * float(s) for s in curve["seconds"]]
    baseline_ms = ms[sms.index(max(sms))]
    labels = sm_tick_labels(sms)
    with plt.rc_context({"svg.fonttype": "none"}):
        fig, ax = plt.subplots(figsize=(7.5, 4.6))
        ax.plot(sms, ms, marker="o", markersize=4, color="#4e79a7")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sms, labels, fontsize=8)
        ax.minorticks_off()
        ax.set_xlabel("SMs enabled (log2 axis; every swept count is a point and a tick)")
        ax.set_ylabel(f"GPU time per {step_name}, ms")
        ax.set_ylim(0, max(ms) * 1.15)
        for count, value, label in zip(sms, ms, labels, strict=True):
            if label:
                ax.annotate(f"x{value / baseline_ms:.3g}", (count, value), textcoords="offset points",
                            xytext=(0, 6), ha="center", fontsize=7)  # fmt: skip
        ax.axvline(max(sms), color="grey", linestyle="--", linewidth=0.8)
        ax.text(0.98, 0.95, f"baseline (dashed): {max(sms)} SMs, {baseline_ms:.3g} ms",
                transform=ax.transAxes, ha="right", va="top", fontsize=8)  # fmt: skip
        right = ax.secondary_yaxis(
            "right", functions=(lambda y: y / baseline_ms, lambda s: s * baseline_ms)
        )
        right.set_ylabel(f"slowdown vs {max(sms)} SMs (x)")
        phase_text = "all phases" if phase == "all" else f"phase {phase}"
        ax.set_title(f"{title}: {phase_text}, mean of {steps} steps", fontsize=10)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        return _save(fig, plt, out_stem)


def _save(fig, plt, out_stem: Path) -> list[Path]:
    paths = []
    for suffix in (".png", ".svg"):
        path = out_stem.with_suffix(suffix)
        fig.savefig(path, dpi=120)
        paths.append(path)
    plt.close(fig)
    return paths
