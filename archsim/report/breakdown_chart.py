"""Charts for the sequential-idealization breakdown (stacked bars) and the SM-count curve.
PNG and SVG via matplotlib's Agg backend; the caller writes into an atomic output directory."""

from __future__ import annotations

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


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def draw_breakdown(table: pd.DataFrame, out_stem: Path, title: str) -> list[Path]:
    """Stacked bars, one per phase, shares in percent; writes ``out_stem``.png and .svg."""
    plt = _pyplot()
    bars = list(dict.fromkeys(table["phase"]))
    fig, ax = plt.subplots(figsize=(1.6 + 1.4 * len(bars), 4.5))
    bottoms = [0.0] * len(bars)
    for component, label in COMPONENT_LABELS.items():
        shares = [
            100.0
            * float(table[(table.phase == bar) & (table.component == component)]["share"].sum())
            for bar in bars
        ]
        ax.bar(bars, shares, bottom=bottoms, label=label, color=COMPONENT_COLORS[component])
        bottoms = [b + s for b, s in zip(bottoms, shares, strict=True)]
    totals_ms = [1e3 * float(table[table.phase == bar]["seconds"].sum()) for bar in bars]
    for x, total in enumerate(totals_ms):
        ax.text(x, 101, f"{total:.3g} ms", ha="center", va="bottom", fontsize=8)
    ax.set_ylim(0, 110)
    ax.set_ylabel("share of GPU time (%)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize=8, frameon=False)
    fig.tight_layout()
    return _save(fig, plt, out_stem)


def draw_sm_curve(curve: pd.DataFrame, out_stem: Path, title: str) -> list[Path]:
    """GPU time of the sequence versus SM count; writes ``out_stem``.png and .svg."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.plot(curve["sms"], 1e3 * curve["seconds"], marker="o")
    ax.set_xlabel("SMs")
    ax.set_ylabel("GPU time of the sequence (ms)")
    ax.set_title(title, fontsize=10)
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
