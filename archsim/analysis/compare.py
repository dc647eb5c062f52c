"""What changed between two traces or two simulation outputs ("what did this hardware change buy").

Both inputs must be of one kind:
- two traces (directories, or raw Kineto JSON that is ingested on the fly): per phase, op time per
  step (the sum of op durations in steps of that phase, divided by those steps, so traces that
  recorded different numbers of steps compare fairly); per op class, op time per recorded step and
  share of the total; per role and phase, the median step time (wall and CPU);
- two simulations (``metrics.json`` of ``archsim simulate``): every numeric metric, and the knobs that
  differ.
Rows are (group, item, a, b, ratio b/a, change b-a), one table for every kind, so one chart draws both.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.json_object import read_json_object
from archsim.sim.config import KNOB_NAMES

COLUMNS = ("group", "item", "unit", "a", "b", "ratio", "change")
# Keys of a metrics.json record that are inputs (knobs, hardware), not results.
SETTING_KEYS = frozenset(KNOB_NAMES) | {"trace", "hw", "hw_set", "sms", "hw_threads", "path"}


def _row(group: str, item: str, unit: str, a: float, b: float) -> dict:
    ratio = b / a if a and math.isfinite(a) and math.isfinite(b) else math.nan
    return {
        "group": group,
        "item": item,
        "unit": unit,
        "a": a,
        "b": b,
        "ratio": ratio,
        "change": b - a,
    }


def _per_step_time(ops: pd.DataFrame, key: str) -> dict[str, float]:
    """Op time (ms) per step, by ``key`` (phase or op_class): sum over ops / distinct steps seen."""
    out = {}
    steps_total = max(1, ops.loc[ops["step_id"] >= 0, "step_id"].nunique())
    for value, group in ops.groupby(key):
        steps = group.loc[group["step_id"] >= 0, "step_id"].nunique()
        out[str(value)] = group["dur_us"].sum() / 1e3 / (steps or steps_total)
    return out


def _step_medians(steps: pd.DataFrame) -> dict[str, float]:
    out = {}
    for role, group in steps.groupby("role"):
        out[f"{role} step (wall)"] = float(group["dur_us"].median() / 1e3)
        if "cpu_us" in group and group["cpu_us"].notna().any():
            out[f"{role} step (CPU)"] = float(group["cpu_us"].median() / 1e3)
        for column in group.columns:
            if column.endswith("_us") and column not in ("dur_us", "cpu_us", "start_us"):
                values = group[column].dropna()
                if len(values):
                    out[f"{role}: {column[:-3]}"] = float(values.median() / 1e3)
    return out


def _pair(group: str, unit: str, a: dict[str, float], b: dict[str, float]) -> list[dict]:
    return [_row(group, k, unit, a.get(k, 0.0), b.get(k, 0.0)) for k in sorted(set(a) | set(b))]


def compare_traces(a, b) -> pd.DataFrame:
    """Rows of what changed from trace ``a`` to trace ``b`` (archsim.trace.Trace objects)."""
    rows: list[dict] = []
    rows += _pair(
        "op time per step, by phase",
        "ms",
        _per_step_time(a.ops, "phase"),
        _per_step_time(b.ops, "phase"),
    )
    rows += _pair(
        "op time per step, by op class",
        "ms",
        _per_step_time(a.ops, "op_class"),
        _per_step_time(b.ops, "op_class"),
    )
    rows += _pair("median step time", "ms", _step_medians(a.steps), _step_medians(b.steps))
    counts_a = {"ops": float(len(a.ops)), "steps": float(len(a.steps))}
    counts_b = {"ops": float(len(b.ops)), "steps": float(len(b.steps))}
    rows += _pair("recorded", "count", counts_a, counts_b)
    return pd.DataFrame(rows, columns=list(COLUMNS))


def compare_metrics(a: dict, b: dict) -> pd.DataFrame:
    """Rows of what changed from one ``metrics.json`` record to another (numbers, then settings)."""
    rows = []
    for key in a:
        va, vb = a.get(key), b.get(key)
        numeric = all(isinstance(v, int | float) and not isinstance(v, bool) for v in (va, vb))
        if numeric and key in b:
            group = "setting" if key in SETTING_KEYS else "metric"
            rows.append(_row(group, key, "", float(va), float(vb)))
        elif key in b and va != vb:
            rows.append(
                {
                    "group": "setting",
                    "item": key,
                    "unit": "",
                    "a": va,
                    "b": vb,
                    "ratio": math.nan,
                    "change": math.nan,
                }
            )
    table = pd.DataFrame(rows, columns=list(COLUMNS))
    settings = table["group"] == "setting"
    same = settings & (table["a"].astype(str) == table["b"].astype(str))
    return table[~same].reset_index(drop=True)


def load_pair(path_a: Path, path_b: Path) -> tuple[str, pd.DataFrame]:
    """('traces' or 'simulations', the comparison table) for two inputs of the same kind."""
    kinds = [_kind(Path(p)) for p in (path_a, path_b)]
    if kinds[0] != kinds[1]:
        raise ArchsimError(
            f"{path_b}: is a {kinds[1]} but {path_a} is a {kinds[0]}; compare two of one kind"
        )
    if kinds[0] == "simulation":
        a, b = (read_json_object(Path(p) / "metrics.json") for p in (path_a, path_b))
        return "simulations", compare_metrics(a, b)
    from archsim.commands._trace_input import load_trace_input

    return "traces", compare_traces(load_trace_input(Path(path_a)), load_trace_input(Path(path_b)))


def _kind(path: Path) -> str:
    if path.is_dir() and (path / "metrics.json").is_file():
        return "simulation"
    if (path.is_dir() and (path / "meta.yaml").exists()) or path.name.endswith(
        (".json", ".json.gz")
    ):
        return "trace"
    raise ArchsimError(
        f"{path}: expected a trace (directory with meta.yaml, or Kineto .json/.json.gz) or a "
        "simulation output (directory with metrics.json)"
    )


def format_table(table: pd.DataFrame, limit: int = 60) -> str:
    """Plain-text table of the rows that changed, largest relative change first within each group;
    a group's unit (the ``unit`` column, e.g. ms) follows its name."""
    lines = [f"{'group (unit)':<36} {'item':<34} {'A':>12} {'B':>12} {'B/A':>8}"]
    for group, rows in table.groupby("group", sort=False):
        units = {str(u) for u in rows["unit"] if u}
        label = f"{group} ({units.pop()})" if len(units) == 1 else str(group)
        rows = rows.assign(
            _order=-np.abs(np.log(rows["ratio"].astype(float).where(rows["ratio"] > 0)))
        )
        for _, r in rows.sort_values("_order", na_position="last").head(limit).iterrows():
            ratio = (
                f"{r['ratio']:.3f}"
                if isinstance(r["ratio"], float) and math.isfinite(r["ratio"])
                else ""
            )
            lines.append(
                f"{label:<36} {str(r['item'])[:34]:<34} {_cell(r['a']):>12} {_cell(r['b']):>12} {ratio:>8}"
            )
    return "\n".join(lines)


def _cell(value: object) -> str:
    if isinstance(value, float):
        return f"{value:,.4g}" if math.isfinite(value) else "n/a"
    return str(value)[:12]
