"""Charts of a sweep table (PNG and SVG, matplotlib Agg): which chart depends on what was swept.

- actors alone: throughput, GPU power and perf/W versus actors (the paper's actor sweep);
- sms alone: slowdown versus SMs, relative to the most SMs swept (the paper's SM sweep);
- cpu_threads and sms: a CPU/GPU-ratio map of throughput and perf/W, plus both against the ratio;
- anything else: frames/s against the first swept knob, one line per value of the others.
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _plain_log2(ax) -> None:
    """Log-2 x axis labelled with the plain numbers swept (4, 8, 16) rather than 2^k."""
    from matplotlib.ticker import ScalarFormatter

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())


def _save(fig, out: Path, stem: str) -> list[Path]:
    # The sweep directory holds finished results, so each chart goes in whole or not at all.
    from archsim.atomic import atomic_output_file

    paths = []
    for suffix in ("png", "svg"):
        path = Path(out) / f"{stem}.{suffix}"
        with atomic_output_file(path, "wb") as handle:
            fig.savefig(handle, format=suffix, dpi=120, bbox_inches="tight")
        paths.append(path)
    _pyplot().close(fig)
    return paths


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


def actor_sweep_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    plt = _pyplot()
    t = table.sort_values("actors")
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.8), layout="constrained")
    panels = (
        ("frames_per_s", "frames/s"),
        ("gpu_power_w", "GPU power (W)"),
        ("frames_per_joule", "frames per joule"),
    )
    for ax, (column, label) in zip(axes, panels, strict=True):
        ax.plot(t["actors"], t[column], marker="o")
        _plain_log2(ax)
        ax.set_xlabel("actors")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Actor sweep: {title}")
    return _save(fig, out, "actor_sweep")


def sm_sweep_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    plt = _pyplot()
    t = table.sort_values("sms")
    base = t.iloc[-1]
    fig, ax = plt.subplots(figsize=(6, 4), layout="constrained")
    for column, label in (("frames_per_s", "frames/s"), ("learner_updates_per_s", "updates/s")):
        slowdown = base[column] / t[column]
        ax.plot(t["sms"], slowdown, marker="o", label=f"{label} slowdown")
    _plain_log2(ax)
    ax.set_xlabel("SMs")
    ax.set_ylabel(f"slowdown vs {int(base['sms'])} SMs (x)")
    ax.grid(alpha=0.3)
    ax.legend()
    ax.set_title(f"SM sweep: {title}")
    return _save(fig, out, "sm_sweep")


def ratio_map_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    plt = _pyplot()
    paths: list[Path] = []
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5), layout="constrained")
    for ax, (column, label) in zip(
        axes, (("frames_per_s", "frames/s"), ("frames_per_joule", "frames per joule")), strict=True
    ):
        grid = table.pivot_table(index="cpu_threads", columns="sms", values=column)
        image = ax.imshow(grid.to_numpy(), origin="lower", aspect="auto", cmap="viridis")
        ax.set_xticks(range(len(grid.columns)), [str(c) for c in grid.columns])
        ax.set_yticks(range(len(grid.index)), [str(i) for i in grid.index])
        ax.set_xlabel("SMs")
        ax.set_ylabel("CPU hardware threads")
        ax.set_title(label)
        fig.colorbar(image, ax=ax)
    fig.suptitle(f"CPU/GPU ratio map: {title}")
    paths += _save(fig, out, "ratio_map")
    fig, axes = plt.subplots(1, 2, figsize=(12, 4), layout="constrained")
    ratio = table["cpu_threads"] / table["sms"]
    for ax, (column, label) in zip(
        axes, (("frames_per_s", "frames/s"), ("frames_per_joule", "frames per joule")), strict=True
    ):
        ax.scatter(ratio, table[column], c=table["sms"], cmap="viridis")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("CPU/GPU ratio (hardware threads / SMs)")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    fig.suptitle(f"Throughput and perf/W against the CPU/GPU ratio: {title}")
    return paths + _save(fig, out, "ratio_scatter")


def generic_chart(table: pd.DataFrame, swept: list[str], out: Path, title: str) -> list[Path]:
    plt = _pyplot()
    x, others = swept[0], swept[1:]
    fig, ax = plt.subplots(figsize=(6.5, 4), layout="constrained")
    groups = table.groupby(others) if others else [((), table)]
    for key, group in groups:
        key = key if isinstance(key, tuple) else (key,)
        label = ", ".join(f"{k}={v}" for k, v in zip(others, key, strict=True)) or None
        g = group.sort_values(x)
        ax.plot(
            g[x].astype(str) if g[x].dtype == object else g[x],
            g["frames_per_s"],
            marker="o",
            label=label,
        )
    ax.set_xlabel(x)
    ax.set_ylabel("frames/s")
    ax.grid(alpha=0.3)
    if others:
        ax.legend(fontsize=7)
    ax.set_title(f"Sweep: {title}")
    return _save(fig, out, "sweep")
