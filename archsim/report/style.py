"""One look for every archsim chart: units on axes, log2 axes labelled with the swept values, power
axes from zero, baselines marked, knees annotated. Charts call these instead of styling by hand, so a
fix here reaches every chart.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

# Colours of the things that recur across charts (matplotlib's tab10, colour-blind safe in pairs).
CPU_COLOR = "tab:blue"
GPU_COLOR = "tab:green"
TOTAL_COLOR = "tab:gray"
KNEE_COLOR = "tab:red"
# Log-2 tick labels of values closer than this ratio overlap at the charts' sizes (32 and 40 did).
CROWDED = 1.45


def pyplot():
    """matplotlib's pyplot on the Agg backend (no display needed)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def log2_axis(ax, values: Sequence[float], axis: str = "x") -> None:
    """Log-2 axis with a labelled tick at EVERY swept value (2, 4, 8, ..., 40, 80), as plain numbers."""
    from matplotlib.ticker import FixedLocator, NullLocator

    ticks = sorted({float(v) for v in values if float(v) > 0})
    target = ax.xaxis if axis == "x" else ax.yaxis
    (ax.set_xscale if axis == "x" else ax.set_yscale)("log", base=2)
    target.set_major_locator(FixedLocator(ticks))
    target.set_minor_locator(NullLocator())
    labels = [f"{t:g}" for t in ticks]
    # Neighbours closer than CROWDED on a log axis (32 and 40) would print over each other: the
    # second of a crowded pair goes on a second line.
    for i in range(1, len(ticks)):
        if ticks[i] / ticks[i - 1] < CROWDED and not labels[i - 1].startswith("\n"):
            labels[i] = "\n" + labels[i] if axis == "x" else labels[i] + "  "
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, labels)


def value_axis(ax, values: Sequence[float], axis: str = "x") -> None:
    """Linear axis with ticks only at the swept values (no "4.5 actors" in between)."""
    ticks = sorted({float(v) for v in values})
    (ax.set_xticks if axis == "x" else ax.set_yticks)(ticks, [f"{t:g}" for t in ticks])


def from_zero(ax, top_pad: float = 1.08) -> None:
    """Start the y axis at 0 so that a 1 W change does not read as a peak."""
    _, top = ax.get_ylim()
    ax.set_ylim(0, max(top, 1e-12) * top_pad)


def mark_baseline(ax, x: float, label: str) -> None:
    ax.axvline(x, color=TOTAL_COLOR, linestyle=":", linewidth=1)
    ax.annotate(
        label,
        (x, 1),
        xycoords=("data", "axes fraction"),
        xytext=(-3, -12),
        textcoords="offset points",
        ha="right",
        fontsize=7,
        color=TOTAL_COLOR,
    )


def annotate_knee(ax, x: float, y: float, text: str = "knee") -> None:
    ax.annotate(
        text,
        (x, y),
        xytext=(10, -22),
        textcoords="offset points",
        fontsize=8,
        color=KNEE_COLOR,
        arrowprops={"arrowstyle": "->", "color": KNEE_COLOR},
    )


def save(fig, out: Path, stem: str) -> list[Path]:
    """Write ``stem``.png and .svg into ``out``, each whole or not at all (archsim.atomic)."""
    from archsim.atomic import atomic_output_file

    paths = []
    for suffix in ("png", "svg"):
        path = Path(out) / f"{stem}.{suffix}"
        with atomic_output_file(path, "wb") as handle:
            fig.savefig(handle, format=suffix, dpi=120, bbox_inches="tight")
        paths.append(path)
    pyplot().close(fig)
    return paths
