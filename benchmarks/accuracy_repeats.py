"""Repeat launches for docs/ACCURACY.md (benchmarks/accuracy_table.py): the model-only comparison with
the first launch of each distinct kernel, memcpy and memset dropped, as every benchmarking guide
discards warm-up. The goals stay judged on whole traces; this shows how much of a fixture's shortfall
is a cold cost the model does not price (a first launch's code, kernel-argument and TLB misses), and
how much is there on every launch."""

from __future__ import annotations

import textwrap

import numpy as np
import pandas as pd
from accuracy_format import pct

# Under this share of the measured time in repeat launches the repeat figures would rest on a few ops
# and say nothing of the trace (a fixture whose every kernel runs once keeps ~0%): shown as n/a.
MIN_KEPT_SHARE = 0.10
NOT_REPEATED = "n/a (every kernel runs once)"
TOO_LITTLE = f"n/a (under {MIN_KEPT_SHARE:.0%} kept)"
KERNEL_KEY = ["kind", "name", "grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]
COPY_KEY = ["kind", "name", "bytes_read", "bytes_written"]


def launch_keys(ops: pd.DataFrame) -> pd.Series:
    """One string per op naming the distinct thing it launches.

    Kernels: name, grid, block and the launching op's input shapes. Memcpy/memset: kind, name (the
    direction) and bytes; where the trace records no size (ROCm's hipMemset events carry none) the
    launching op's input shapes stand in for it, so memsets of different ops stay apart.
    """

    def joined(columns: list[str]) -> pd.Series:  # column-wise, not a Python call per row
        parts = [ops[c].astype(object).astype(str) for c in columns]
        out = parts[0]
        for part in parts[1:]:
            out = out + "|" + part
        return out

    kind = ops["kind"].astype(object).astype(str)
    dims = ops["input_dims"].astype(object).fillna("").astype(str)
    kernel_part = joined(KERNEL_KEY) + "|" + dims
    written = pd.to_numeric(ops["bytes_written"], errors="coerce").fillna(0.0)
    copy_part = joined(COPY_KEY)
    copy_part = copy_part.where(written > 0, copy_part + "|" + dims)
    return kernel_part.where(kind == "kernel", copy_part)


def first_launches(ops: pd.DataFrame) -> np.ndarray:
    """True for each op that is the earliest (by start time) launch of its key (launch_keys)."""
    keys = launch_keys(ops).to_numpy()
    order = np.argsort(ops["start_us"].to_numpy(dtype=float), kind="stable")
    first_sorted = ~pd.Series(keys[order]).duplicated(keep="first").to_numpy()
    first = np.zeros(len(ops), dtype=bool)
    first[order] = first_sorted
    return first


def _median_abs(frame: pd.DataFrame) -> float:
    k = frame[frame.kernel]
    if k.empty:
        return float("nan")
    return float(np.median(np.abs(k.model_s / k.measured_s - 1)))


def repeat_summary(frame: pd.DataFrame) -> dict[str, float]:
    """Kept share, total error and per-kernel median |error| on repeats; first launches' median.

    ``frame`` has per-op ``measured_s``, ``model_s``, ``kernel``, ``key`` (launch_keys) and
    ``first`` (first_launches). The cold cost in the measurements alone, no model involved: over
    the kernels that repeat, the first launch's measured time over its own repeats' median
    (``cold_median``, ``cold_p90``) and the first launches' time beyond that median, as a share of
    the fixture's measured time (``cold_share``).
    """
    rep = frame[~frame["first"]]
    first = frame[frame["first"]]
    k = frame[frame.kernel]
    repeat_median = k[~k["first"]].groupby("key").measured_s.median()
    firsts = k[k["first"]].set_index("key").measured_s
    common = firsts.index.intersection(repeat_median.index)
    ratios = (firsts[common] / repeat_median[common]).to_numpy()
    excess = float((firsts[common] - repeat_median[common]).sum())
    return {
        "kept": float(rep.measured_s.sum() / frame.measured_s.sum()),
        "error": float(rep.model_s.sum() / rep.measured_s.sum() - 1) if len(rep) else np.nan,
        "median_abs": _median_abs(rep),
        "first_median_abs": _median_abs(first),
        "n_first": int(first.kernel.sum()),
        "n_repeat": int(rep.kernel.sum()),
        "n_cold": len(ratios),
        "cold_median": float(np.median(ratios)) if len(ratios) else np.nan,
        "cold_p90": float(np.quantile(ratios, 0.9)) if len(ratios) else np.nan,
        "cold_share": excess / float(frame.measured_s.sum()),
    }


def judged(r: dict[str, float]) -> bool:
    """Whether enough is kept to judge repeats: a tenth of the time, and some kernel repeats."""
    return r["kept"] >= MIN_KEPT_SHARE and r["n_repeat"] > 0


def repeat_cells(r: dict[str, float]) -> str:
    """The three table cells (kept share, total error, per-kernel median |error|) on repeats."""
    if not judged(r):
        why = NOT_REPEATED if r["n_repeat"] == 0 else TOO_LITTLE
        return f"{r['kept']:.0%} | {why} | {why} |"
    return f"{r['kept']:.0%} | {pct(r['error'])} | {100 * r['median_abs']:.0f}% |"


def meets(r: dict[str, float], total_goal: float, kernel_goal: float) -> bool:
    """Both goals met on repeat launches (never where too little time is kept to judge)."""
    return judged(r) and abs(r["error"]) <= total_goal and r["median_abs"] <= kernel_goal


def cold_table(sums: dict[str, dict[str, float]]) -> list[str]:
    """Per fixture: first launches' median |error| against repeats', and the measured cold cost."""
    rows = [
        "### First launches against repeat launches",
        "",
        "Per-kernel median |error| (model only) of each distinct kernel's first launch and of its",
        "later launches; then, from the measurements alone, over the kernels that repeat: the first",
        "launch's time over its own repeats' median (median and 90th percentile), and the first",
        "launches' time beyond that median as a share of the fixture's measured time. Above 1 the",
        "first launch carries a cold cost the model does not price (*First launches* under What",
        "limits accuracy); a negative share, first launches shorter than repeats (NCCL kernels",
        "that waited less for their peers). The first-launch column also holds every kernel",
        "that runs once.",
        "",
        "| fixture | first launches | median abs error | repeat launches | median abs error "
        "| kernels that repeat | first / repeats' median: median | 90th pct "
        "| first launches' excess, share of measured |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in sums.items():
        med = f"{100 * r['median_abs']:.0f}%" if r["n_repeat"] else "n/a"
        if r["n_cold"]:
            cold = f"{r['cold_median']:.2f}x | {r['cold_p90']:.2f}x | {r['cold_share']:.2%}"
        else:
            cold = "n/a | n/a | n/a"
        rows.append(
            f"| {name} | {r['n_first']} | {100 * r['first_median_abs']:.0f}% | {r['n_repeat']} | "
            f"{med} | {r['n_cold']} | {cold} |"
        )
    return rows


def goals_sentence(
    shaped: dict[str, dict[str, float]], total_goal: float, kernel_goal: float
) -> list[str]:
    """What the repeat columns are, the n/a cut, and how many fixtures with shapes meet the goals."""
    both = [n for n, r in shaped.items() if meets(r, total_goal, kernel_goal)]
    total = [n for n, r in shaped.items() if judged(r) and abs(r["error"]) <= total_goal]
    kernel = [n for n, r in shaped.items() if judged(r) and r["median_abs"] <= kernel_goal]
    text = (
        "*Repeat launches*: the same comparison without the first launch of each distinct kernel "
        "(same name, grid, block and launching op's input shapes) or copy (same kind, direction "
        "and bytes; the launching op's shapes where the trace records no size, as ROCm's "
        "memsets), as benchmarking practice discards warm-up; *kept* is the share of the measured "
        f"time left. Under {MIN_KEPT_SHARE:.0%} kept, or with no kernel launched twice, the "
        "figures would rest on a few ops, not the trace: n/a. Dropping first launches also drops "
        "every kernel that runs once, so a figure moves with which kernels remain as well as with "
        "cold costs (the table below separates the two). On repeat launches "
        f"{len(both)} of the {len(shaped)} fixtures with shapes meet both goals ({len(total)} the "
        f"20% total, {len(kernel)} the 30% per-kernel median): "
        + ", ".join(f"`{n}`" for n in both)
        + ". The goals column, and tests/test_accuracy_goals.py, judge whole traces, as the "
        "goals are stated; the repeat columns judge nothing."
    )
    return textwrap.wrap(text, width=96, break_on_hyphens=False)
