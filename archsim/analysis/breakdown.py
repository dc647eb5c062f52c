"""Sequential idealization (Inci et al. 2020; DESIGN.md): evaluate the GPU time of an op sequence with
ideal DRAM bandwidth, then also zero DRAM latency, then also an ideal on-chip memory system, then also
perfect SM utilization. Each drop is that component's share; what remains is math (which also holds
the GPU's per-kernel floor, gpu.kernel_min_us, that no idealization removes). Ops run serially (one
kernel at a time, no overlap), and the time is kernel execution time without launch gaps. Ops measured
on a real GPU keep their measured time as the baseline and are scaled by the model's idealized /
baseline ratio; calibrated efficiencies therefore only matter for ops predicted from shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.hw.schema import HardwareConfig
from archsim.perf.kernel import IDEALIZATIONS, predict_op_seconds
from archsim.trace.schema import PHASE_GROUPS

COMPONENTS = (*IDEALIZATIONS, "math")
PHASE_CHOICES = ("all", "inference", "train")
BREAKDOWN_COLUMNS = ("phase", "component", "seconds", "share")


def _phase_mask(ops: pd.DataFrame, group: str) -> np.ndarray:
    phases = ops["phase"].astype("string").fillna("")
    if group == "all":
        return np.ones(len(ops), dtype=bool)
    if group == "other":
        known = {p for members in PHASE_GROUPS.values() for p in members}
        return (~phases.isin(known)).to_numpy(dtype=bool)
    return phases.isin(PHASE_GROUPS[group]).to_numpy(dtype=bool)


def phase_bars(ops: pd.DataFrame, phase: str) -> list[str]:
    """Bars to draw: for ``all``, each phase group with ops (inference, train, other) and the total."""
    if phase not in PHASE_CHOICES:
        raise ArchsimError(f"--phase {phase}: expected one of {', '.join(PHASE_CHOICES)}")
    if phase != "all":
        return [phase]
    groups = [g for g in (*PHASE_GROUPS, "other") if _phase_mask(ops, g).any()]
    return [*groups, "all"] if len(groups) > 1 else ["all"]


def sequence_seconds(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    source: HardwareConfig | None = None,
    efficiency: Mapping[str, float] | None = None,
) -> list[float]:
    """GPU time of the sequence: baseline, then after each cumulative idealization (5 numbers)."""
    totals = [float(predict_op_seconds(ops, hw, source, frozenset(), efficiency, False).sum())]
    applied: set[str] = set()
    for component in IDEALIZATIONS:
        applied.add(component)
        seconds = predict_op_seconds(ops, hw, source, frozenset(applied), efficiency, False)
        totals.append(float(seconds.sum()))
    return totals


def breakdown(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    phase: str = "all",
    source: HardwareConfig | None = None,
    efficiency: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One row per (bar, component): seconds of GPU time attributed to it and its share of the bar."""
    rows = []
    for bar in phase_bars(ops, phase):
        selected = ops[_phase_mask(ops, bar)].reset_index(drop=True)
        if selected.empty:
            raise ArchsimError(
                f"trace: no ops in phase {bar!r} (ops phases: "
                f"{', '.join(sorted(set(ops['phase'].astype(str))) or ['none'])})"
            )
        totals = sequence_seconds(selected, hw, source, efficiency)
        # Guard against float noise: a later stage can never exceed an earlier one.
        totals = list(np.minimum.accumulate(totals))
        drops = [a - b for a, b in zip(totals, totals[1:], strict=False)] + [totals[-1]]
        base = totals[0]
        for component, seconds in zip(COMPONENTS, drops, strict=True):
            rows.append(
                {
                    "phase": bar,
                    "component": component,
                    "seconds": seconds,
                    "share": seconds / base if base > 0 else 0.0,
                }
            )
    return pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS))


def parse_sm_counts(text: str, max_sms: int | None = None) -> list[int]:
    """``2,4,...,80`` -> [2, 4, 6, ..., 80]; a plain list ``10,20,40`` also works."""
    parts = [p.strip() for p in text.split(",") if p.strip()]
    try:
        if len(parts) >= 4 and parts[-2] in ("...", "…"):
            first, second, last = int(parts[0]), int(parts[1]), int(parts[-1])
            step = second - first
            if step <= 0:
                raise ValueError
            counts = list(range(first, last + 1, step))
            counts = [*counts[:-1], last] if counts[-1] != last else counts
            counts = sorted({*counts, *[int(p) for p in parts[:-2]]})
        else:
            counts = sorted({int(p) for p in parts})
    except ValueError:
        raise ArchsimError(
            f"--sms {text}: expected SM counts like 2,4,...,80 or 10,20,40"
        ) from None
    if not counts or counts[0] < 1:
        raise ArchsimError(f"--sms {text}: SM counts must be positive integers")
    return counts


def sm_curve(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    sm_counts: Sequence[int],
    source: HardwareConfig | None = None,
    efficiency: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """GPU time of the sequence versus SM count (all other fields of ``hw`` fixed)."""
    if hw.gpu is None:
        raise ArchsimError(f"hardware config {hw.name}: has no GPU to sweep SMs on")
    rows = []
    for sms in sm_counts:
        variant = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": int(sms)})})
        seconds = float(
            predict_op_seconds(ops, variant, source, frozenset(), efficiency, False).sum()
        )
        rows.append({"sms": int(sms), "seconds": seconds})
    curve = pd.DataFrame(rows)
    curve["slowdown_vs_max_sms"] = curve["seconds"] / curve["seconds"].iloc[-1]
    return curve
