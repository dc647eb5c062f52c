"""Read a folder of archsim outputs into report sections (plain data; archsim.report.html_page draws).

Each kind of output is recognised by the files its command writes:
- a trace directory: ``meta.yaml`` + ``ops.parquet`` (``archsim capture`` / ``ingest``);
- a simulation: ``metrics.json`` (``archsim simulate``);
- a sweep: ``sweep.csv`` + ``sweep.json`` (``archsim sweep``);
- a breakdown: ``breakdown.csv`` (``archsim breakdown``);
- a validation: ``validation.csv`` + ``summary.json`` (``archsim validate``);
- an accuracy table: ``accuracy.csv`` (``benchmarks/accuracy_table.py``);
- a comparison: ``compare.csv`` (``archsim compare``).
Folders are searched recursively (a demo folder holds a trace, a breakdown and two sweeps), to a
bounded depth and number of sections so a report of a huge tree stays bounded.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from archsim.errors import ArchsimError
from archsim.json_object import read_json_object

MAX_DEPTH = 4
MAX_SECTIONS = 60
MAX_TABLE_ROWS = 60
# A table CSV read into the page: the largest archsim writes is a 100,000-point sweep.csv (the
# sweep limit) of about 400-600 B a row, 40-60 MB. A 300 MB file took 53 s and 2.9 GB before.
MAX_CSV_BYTES = 128 * 2**20
# Captions of the charts archsim's commands draw, by file stem.
CAPTIONS = {
    "breakdown": "Where GPU time goes, by sequential idealization (Inci et al. 2020): each segment is "
    "the time saved by idealizing that component, outermost first; what remains is math.",
    "sm_curve": "GPU time per step versus enabled SMs (log2 axis); the slowdown against the most SMs.",
    "actor_sweep": "Throughput, power and energy efficiency versus the number of actors.",
    "sm_sweep": "Throughput versus enabled SMs at a fixed actor count, relative to the most SMs.",
    "ratio_map": "Throughput over CPU threads x GPU SMs: the CPU/GPU ratio map.",
    "ratio_scatter": "Throughput against the CPU/GPU ratio (CPU threads per SM).",
    "sweep": "Frames/s against the swept knobs.",
    "compare": "What changed from A to B: B/A per row on a log2 axis.",
    "validation_scatter": "Predicted versus measured on real runs of this machine; the diagonal is "
    "a perfect prediction.",
}
HEADLINE_METRICS = (
    ("frames_per_s", "frames/s", "{:,.0f}"),
    ("env_steps_per_s", "env steps/s", "{:,.0f}"),
    ("learner_updates_per_s", "learner updates/s", "{:,.1f}"),
    ("cpu_util", "CPU utilization", "{:.0%}"),
    ("gpu_util", "GPU busy", "{:.0%}"),
    ("gpu_power_w", "GPU power, W", "{:,.1f}"),
    ("cpu_power_w", "CPU power, W", "{:,.1f}"),
    ("frames_per_joule", "frames per joule (CPU + GPU)", "{:,.1f}"),
)


@dataclass
class Section:
    """One output folder, ready to draw."""

    kind: str  # trace | simulate | sweep | breakdown | validate | accuracy
    path: Path
    title: str
    headline: list[tuple[str, str]] = field(default_factory=list)  # (label, formatted value)
    limiter: tuple[str, str] | None = None  # (what, why)
    text: str = ""  # preformatted text (trace info)
    tables: list[tuple[str, pd.DataFrame]] = field(default_factory=list)
    charts: list[tuple[Path, str]] = field(default_factory=list)  # (image, caption)
    settings: dict = field(default_factory=dict)  # knobs, hardware, seed, versions


def _kind(folder: Path) -> str | None:
    names = {p.name for p in folder.iterdir() if p.is_file()}
    if {"meta.yaml", "ops.parquet"} <= names:
        return "trace"
    if "metrics.json" in names:
        return "simulate"
    if {"sweep.csv", "sweep.json"} <= names:
        return "sweep"
    if "breakdown.csv" in names:
        return "breakdown"
    if {"validation.csv", "summary.json"} <= names:
        return "validate"
    if "accuracy.csv" in names:
        return "accuracy"
    if "compare.csv" in names:
        return "compare"
    return None


def find_outputs(roots: list[Path]) -> list[tuple[str, Path]]:
    """(kind, folder) of every archsim output under ``roots``, in a stable order."""
    found: list[tuple[str, Path]] = []

    def walk(folder: Path, depth: int) -> None:
        if len(found) >= MAX_SECTIONS:
            return
        kind = _kind(folder)
        if kind is not None:
            found.append((kind, folder))
            return
        if depth >= MAX_DEPTH:
            return
        for child in sorted(
            p for p in folder.iterdir() if p.is_dir() and not p.name.startswith(".")
        ):
            walk(child, depth + 1)

    for root in roots:
        root = Path(root)
        if not root.is_dir():
            raise ArchsimError(f"{root}: expected a folder of archsim outputs")
        walk(root, 0)
    if not found:
        raise ArchsimError(
            f"{', '.join(str(r) for r in roots)}: no archsim outputs found (expected a trace, "
            "metrics.json, sweep.csv, breakdown.csv or validation.csv)"
        )
    return found


def _charts(folder: Path) -> list[tuple[Path, str]]:
    charts = []
    for png in sorted(folder.glob("*.png")):
        caption = CAPTIONS.get(png.stem, png.stem.replace("_", " "))
        charts.append((png, caption))
    return charts


def _csv(path: Path) -> pd.DataFrame:
    try:
        size = path.stat().st_size
        if size > MAX_CSV_BYTES:
            raise ValueError(f"{size / 2**20:,.0f} MiB, over the {MAX_CSV_BYTES >> 20} MiB cap")
        return pd.read_csv(path)
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ArchsimError(f"{path}: not a readable CSV table ({exc})") from None


def _finished_points(path: Path, table: pd.DataFrame) -> pd.DataFrame:
    """The rows a resumed sweep would keep: a last line cut short by a crash (no newline) is left
    out, and the columns the page computes with must be numbers (a torn 'x' was a traceback)."""
    with open(path, "rb") as handle:
        handle.seek(max(0, path.stat().st_size - 1))
        torn = handle.read(1) not in (b"\n", b"")
    if torn and len(table):
        table = table.iloc[:-1]
    for column in ("actors", "frames_per_s"):
        if column in table:
            numbers = pd.to_numeric(table[column], errors="coerce")
            bad = numbers.isna() & table[column].notna()
            if bad.any():
                raise ArchsimError(
                    f"{path}: column {column} holds {str(table[column][bad].iloc[0])[:40]!r} "
                    "(expected numbers)"
                )
            table = table.assign(**{column: numbers})
    return table


def _fmt(value: object, pattern: str) -> str:
    try:
        number = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return str(value)
    return pattern.format(number) if math.isfinite(number) else "n/a"


def _headline(record: dict) -> list[tuple[str, str]]:
    return [(label, _fmt(record[k], p)) for k, label, p in HEADLINE_METRICS if k in record]


def _trace_section(folder: Path) -> Section:
    from archsim.trace import load
    from archsim.trace.info import format_summary, summarize

    trace = load(folder)
    summary = summarize(trace)
    return Section("trace", folder, f"Trace {folder.name}", text=format_summary(summary))


def _simulate_section(folder: Path) -> Section:
    from archsim.analysis.limiter import limiter

    record = read_json_object(folder / "metrics.json")
    section = Section("simulate", folder, f"Simulation {folder.name}")
    section.headline = _headline(record)
    section.limiter = limiter(record)
    metric_names = {k for k, _, _ in HEADLINE_METRICS}
    section.settings = {k: v for k, v in record.items() if k not in metric_names}
    rows = [(k, v) for k, v in record.items() if isinstance(v, float)]
    section.tables.append(("All metrics", pd.DataFrame(rows, columns=["metric", "value"])))
    section.charts = _charts(folder)
    return section


def _sweep_section(folder: Path) -> Section:
    from archsim.analysis.limiter import knee, limiter

    table = _finished_points(folder / "sweep.csv", _csv(folder / "sweep.csv"))
    # knob columns come first in sweep.csv: rows in knob order, as the points were swept
    knobs = (
        list(table.columns[: list(table.columns).index("frames_per_s")])
        if "frames_per_s" in table
        else []
    )
    if knobs:
        table = table.sort_values(knobs, kind="stable").reset_index(drop=True)
    settings = read_json_object(folder / "sweep.json")
    section = Section("sweep", folder, f"Sweep {folder.name}", settings=settings)
    if "frames_per_s" in table and len(table):
        best = table.loc[table["frames_per_s"].idxmax()].to_dict()
        section.headline = [("points", str(len(table)))] + _headline(best)
        section.limiter = limiter(best)
        if "actors" in table and table["actors"].nunique() > 2:
            at = knee(table["actors"], table["frames_per_s"])
            if at is not None:
                section.headline.append(("knee at actors", f"{at:,.0f}"))
    section.tables.append(("Points", table))
    section.charts = _charts(folder)
    return section


def _table_section(kind: str, folder: Path, csv_name: str, title: str) -> Section:
    section = Section(kind, folder, f"{title} {folder.name}")
    section.tables.append((csv_name, _csv(folder / csv_name)))
    for extra in ("sm_curve.csv",):
        if (folder / extra).exists():
            section.tables.append((extra, _csv(folder / extra)))
    if (folder / "summary.json").exists():
        summary = read_json_object(folder / "summary.json")
        section.headline = [
            (k.replace("_", " "), _fmt(v, "{:.1%}" if "mae" in k or "worst" in k else "{:,.3g}"))
            for k, v in summary.items()
            if isinstance(v, int | float)
        ]
    section.charts = _charts(folder)
    return section


def read_section(kind: str, folder: Path) -> Section:
    """The section of one output folder of ``kind`` (as :func:`find_outputs` says)."""
    if kind == "trace":
        return _trace_section(folder)
    if kind == "simulate":
        return _simulate_section(folder)
    if kind == "sweep":
        return _sweep_section(folder)
    if kind == "breakdown":
        return _table_section(kind, folder, "breakdown.csv", "Breakdown")
    if kind == "validate":
        return _table_section(kind, folder, "validation.csv", "Validation")
    if kind == "compare":
        return _table_section(kind, folder, "compare.csv", "Comparison")
    return _table_section(kind, folder, "accuracy.csv", "Kernel-model accuracy")
