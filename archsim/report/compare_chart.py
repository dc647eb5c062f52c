"""Chart of ``archsim compare``: B/A per row on a log2 axis (a halving and a doubling look alike), one
panel per group, the rows that changed most first."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from archsim.report.style import pyplot, save

ROWS_PER_PANEL = 14
HEADLINE = (
    "frames_per_s",
    "env_steps_per_s",
    "learner_updates_per_s",
    "cpu_util",
    "gpu_util",
    "gpu_sm_util",
    "cpu_power_w",
    "gpu_power_w",
    "avg_power_w",
    "frames_per_joule",
    "actor_wait_s_per_step",
    "inference_batch_mean",
)


def compare_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    numeric = table[pd.to_numeric(table["ratio"], errors="coerce").gt(0)].copy()
    numeric = numeric[numeric["group"] != "setting"]
    if numeric.empty:
        return []
    groups = list(dict.fromkeys(numeric["group"]))
    plt = pyplot()
    fig, axes = plt.subplots(
        len(groups),
        1,
        figsize=(8, 1.2 + 0.32 * ROWS_PER_PANEL * len(groups)),
        layout="constrained",
        squeeze=False,
    )
    for ax, group in zip(axes[:, 0], groups, strict=True):
        rows = numeric[numeric["group"] == group].copy()
        headline = rows[rows["item"].isin(HEADLINE)]
        if len(headline):  # a simulation: the metrics people read, in their usual order
            rows = headline.set_index("item").loc[
                [h for h in HEADLINE if h in set(headline["item"])]
            ]
            rows = rows.reset_index().iloc[::-1]
        else:
            rows["size"] = np.abs(np.log2(rows["ratio"].astype(float)))
            rows = rows.sort_values("size", ascending=False).head(ROWS_PER_PANEL).iloc[::-1]
        ratios = rows["ratio"].astype(float).to_numpy()
        # neutral colours: whether larger is better depends on the row (frames/s vs power)
        colors = ["tab:blue" if r >= 1 else "tab:orange" for r in ratios]
        ax.barh(range(len(rows)), np.log2(ratios), color=colors)
        ax.set_yticks(range(len(rows)), [str(i)[:40] for i in rows["item"]], fontsize=7)
        ax.axvline(0, color="black", linewidth=0.8)
        span = max(1.0, float(np.max(np.abs(np.log2(ratios)))) * 1.15)
        ticks = [t for t in range(-math.ceil(span), math.ceil(span) + 1)]
        ax.set_xlim(-span, span)
        ax.set_xticks(ticks, [f"{2.0**t:g}x" for t in ticks], fontsize=7)
        ax.set_title(group, fontsize=9)
        ax.set_xlabel("B / A (log2 scale; right of 0: B larger)", fontsize=8)
        ax.grid(axis="x", alpha=0.3)
    fig.suptitle(f"What changed: {title}")
    return save(fig, out, "compare")
