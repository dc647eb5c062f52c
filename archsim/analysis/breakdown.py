"""Sequential idealization (Inci et al. 2020; docs/SIMULATOR.md "Breakdown"), the paper's steps
literally: the GPU time of an op sequence with (1) infinite DRAM bandwidth, (2) + zero DRAM latency,
(3) + an ideal memory system (every request returns at issue), (4) + perfect SM utilization: the sequence on a SINGLE SM with the
ideal memory system, divided by the SM count (archsim.perf.kernel). Each drop is that component's
share; what remains is math. Whatever does not shrink when work spreads over more SMs (wave tails, too
few blocks, the per-kernel floor gpu.kernel_min_us) falls into SM utilization, never into math.

Times are seconds per step of the phase (one inference step or batch, one learner step): the phase's
ops summed and divided by the steps the trace recorded them in (``steps``), so that a trace holding
more identical steps gives the same answer. Ops run serially (one kernel at a time, no overlap) and the
time is kernel execution time without launch gaps. Ops measured on a real GPU keep their measured time
as the baseline and are scaled by the model's idealized / baseline ratio; calibrated efficiencies
therefore only matter for ops predicted from shapes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.hw.schema import HardwareConfig
from archsim.perf.batch import scale_ops_to_batch
from archsim.perf.kernel import IDEALIZATIONS, predict_op_seconds
from archsim.trace.schema import PHASE_GROUPS

COMPONENTS = (*IDEALIZATIONS, "math")
PHASE_CHOICES = ("all", "inference", "train")
GROUPS = (*PHASE_GROUPS, "other")
BREAKDOWN_COLUMNS = ("phase", "component", "seconds", "share", "steps")
# --learner-batch / --inference-batch: far above any RL batch (Ape-X's learner: 512, Horgan et al.
# 2018), low enough that resized FLOPs, bytes and grid sizes stay exact in float64 and int64.
MAX_BATCH = 2**20


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
    groups = [g for g in GROUPS if _phase_mask(ops, g).any()]
    return [*groups, "all"] if len(groups) > 1 else ["all"]


def _step_keys(ops: pd.DataFrame) -> set[tuple[str, float]]:
    """The steps these ops ran in: distinct step_id (actor/learner/inference steps), else distinct
    ProfilerStep# (Kineto traces without step markers), else one key (the whole trace as one step).
    Keys name their column, so the steps of several phase groups can be united without double counting."""
    for column in ("step_id", "profiler_step"):
        if column in ops.columns:
            ids = pd.to_numeric(ops[column], errors="coerce")
            valid = ids[ids >= 0].unique()
            if len(valid):
                return {(column, float(i)) for i in valid}
    return {("trace", 0.0)}


def steps_recorded(ops: pd.DataFrame) -> int:
    """How many steps these ops ran in (``_step_keys``)."""
    return len(_step_keys(ops))


def _bar_groups(ops: pd.DataFrame, bar: str) -> list[str]:
    """The phase groups a bar adds up: itself, or for ``all`` every group with ops."""
    return [g for g in GROUPS if _phase_mask(ops, g).any()] if bar == "all" else [bar]


def _per_step_weights(ops: pd.DataFrame) -> tuple[np.ndarray, dict[str, set]]:
    """1 / (steps of its phase group) for every op, and the steps (``_step_keys``) of each group
    with ops."""
    weights = np.zeros(len(ops))
    keys: dict[str, set] = {}
    for group in GROUPS:
        mask = _phase_mask(ops, group)
        if mask.any():
            keys[group] = _step_keys(ops[mask])
            weights[mask] = 1.0 / len(keys[group])
    return weights, keys


def _distinct_steps(keys: dict[str, set], groups: Sequence[str]) -> int:
    """Distinct steps behind ``groups``' bars: a step holding ops of two groups (an actor step's
    inference and other ops) counts once, so the ``all`` bar never claims more steps than the trace
    recorded."""
    return len(set().union(*(keys[g] for g in groups if g in keys)))


def resize_batches(
    ops: pd.DataFrame,
    steps: pd.DataFrame,
    learner_batch: int | None = None,
    inference_batch: int | None = None,
    unrolls: tuple[int, ...] = (),
) -> pd.DataFrame:
    """``ops`` with every train op resized to ``learner_batch`` and every inference op to
    ``inference_batch`` samples from the batch of the step it ran in (steps.batch_size), by
    archsim.perf.batch.scale_ops_to_batch as the simulator does; None keeps the recorded batch.
    ``unrolls``: time steps a recurrent learner unrolls at once; its [batch x steps, ...] inputs are
    folded to [batch, ...] first (archsim.sim.recorded.fold_sequence_dims, as the simulator does)."""
    from archsim.sim.recorded import fold_sequence_dims

    out = ops.reset_index(drop=True)
    for group, flag, batch in (
        ("train", "--learner-batch", learner_batch),
        ("inference", "--inference-batch", inference_batch),
    ):
        if batch is None:
            continue
        if not 1 <= batch <= MAX_BATCH:
            raise ArchsimError(f"{flag}: expected an integer in [1, {MAX_BATCH}], got {batch}")
        mask = _phase_mask(out, group)
        if not mask.any():
            raise ArchsimError(f"{flag}: the trace has no {group} ops to resize")
        none = pd.Series(dtype="int64")
        batch_of_step = dict(
            zip(steps.get("step_id", none), steps.get("batch_size", none), strict=True)
        )
        from_batch = out.loc[mask, "step_id"].map(batch_of_step)
        if from_batch.isna().any():
            raise ArchsimError(
                f"{flag}: {int(from_batch.isna().sum())} {group} ops are not in a recorded step "
                "(steps.parquet), so the batch they were captured at is unknown"
            )
        selected = out[mask]
        if group == "train" and unrolls:
            selected = fold_sequence_dims(selected, from_batch.to_numpy(), unrolls)
        parts = [
            scale_ops_to_batch(group_ops, max(1, int(b)), batch)
            for b, group_ops in selected.groupby(from_batch.to_numpy(), sort=True)
        ]
        out = pd.concat([out[~mask], *parts], ignore_index=True)
        for column in [c for c in out.columns if c.startswith("measured_")]:
            # ops left at their batch were measured as they are
            out[column] = out[column].fillna(out[column.removeprefix("measured_")])
    return out


def _stage_seconds(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    source: HardwareConfig | None,
    efficiency: Mapping[str, float] | None,
) -> list[np.ndarray]:
    """Per-op GPU seconds: baseline, then after each cumulative idealization (5 arrays)."""
    stages = [predict_op_seconds(ops, hw, source, frozenset(), efficiency, False)]
    for n in range(1, len(IDEALIZATIONS) + 1):
        idealize = frozenset(IDEALIZATIONS[:n])
        stages.append(predict_op_seconds(ops, hw, source, idealize, efficiency, False))
    return stages


def sequence_seconds(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    source: HardwareConfig | None = None,
    efficiency: Mapping[str, float] | None = None,
) -> list[float]:
    """GPU time per step of the sequence: baseline, then after each cumulative idealization (5
    numbers); ops of each phase group divided by that group's recorded steps."""
    weights, _ = _per_step_weights(ops.reset_index(drop=True))
    return [float((s * weights).sum()) for s in _stage_seconds(ops, hw, source, efficiency)]


def breakdown(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    phase: str = "all",
    source: HardwareConfig | None = None,
    efficiency: Mapping[str, float] | None = None,
) -> pd.DataFrame:
    """One row per (bar, component): seconds of GPU time per step attributed to it, its share of the
    bar, and the steps averaged. The ``all`` bar is one step of each phase group, summed; its
    ``steps`` is the distinct steps those groups' means are over (a step counted once however many
    groups ran ops in it)."""
    ops = ops.reset_index(drop=True)
    bars = phase_bars(ops, phase)
    for bar in bars:
        if not _phase_mask(ops, bar).any():
            raise ArchsimError(
                f"trace: no ops in phase {bar!r} (ops phases: "
                f"{', '.join(sorted(set(ops['phase'].astype(str))) or ['none'])})"
            )
    wanted = np.logical_or.reduce([_phase_mask(ops, b) for b in bars])
    ops = ops[wanted].reset_index(drop=True)
    weights, keys = _per_step_weights(ops)
    stages = [s * weights for s in _stage_seconds(ops, hw, source, efficiency)]
    rows = []
    for bar in bars:
        mask = _phase_mask(ops, bar)
        totals = [float(s[mask].sum()) for s in stages]
        # Guard against float noise: a later stage can never exceed an earlier one.
        totals = list(np.minimum.accumulate(totals))
        drops = [a - b for a, b in zip(totals, totals[1:], strict=False)] + [totals[-1]]
        base = totals[0]
        steps = _distinct_steps(keys, _bar_groups(ops, bar))
        for component, seconds in zip(COMPONENTS, drops, strict=True):
            rows.append(
                {
                    "phase": bar,
                    "component": component,
                    "seconds": seconds,
                    "share": seconds / base if base > 0 else 0.0,
                    "steps": steps,
                }
            )
    return pd.DataFrame(rows, columns=list(BREAKDOWN_COLUMNS))


def parse_sm_counts(text: str, max_sms: int | None = None) -> list[int]:
    """``2,4,...,80`` -> [2, 4, 6, ..., 80]; a plain list ``10,20,40`` also works."""
    parts = [p.strip() for p in text.split(",")]
    if "" in parts and text.strip():  # "4,,8" or "4,8,": a typo, not a shorter list
        raise ArchsimError(
            f"--sms {text[:60]}: item {parts.index('') + 1} is empty (expected SM counts like "
            "2,4,...,80 or 10,20,40)"
        )
    parts = [p for p in parts if p]
    try:
        if len(parts) >= 4 and parts[-2] in ("...", "…"):
            first, second, last = int(parts[0]), int(parts[1]), int(parts[-1])
            step = second - first
            if step <= 0:
                raise ValueError
            _check_sm_range(text, [first, second, last])  # before the range is built in memory
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
    _check_sm_range(text, counts)
    return counts


def _check_sm_range(text: str, counts: Sequence[int]) -> None:
    """Every SM count within gpu.sms's documented range (archsim.hw.limits), as ``--set gpu.sms``."""
    from archsim.hw.limits import HW_RANGES
    from archsim.sim.limits import format_number

    limits = HW_RANGES["gpu.sms"]
    for count in counts:
        if not limits.holds(count):
            raise ArchsimError(
                f"--sms {text[:60]}: {format_number(count)} SMs is outside the supported range "
                f"{limits.text()} ({limits.why}; docs/LIMITS.md)"
            )


def sm_curve(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    sm_counts: Sequence[int],
    source: HardwareConfig | None = None,
    efficiency: Mapping[str, float] | None = None,
    phase: str = "all",
) -> pd.DataFrame:
    """GPU time per step of ``phase`` versus SM count (all other fields of ``hw`` fixed), with the
    slowdown against the largest count swept and the steps averaged."""
    if hw.gpu is None:
        raise ArchsimError(f"hardware config {hw.name}: has no GPU to sweep SMs on")
    phase_bars(ops, phase)  # checks the phase name
    ops = ops.reset_index(drop=True)
    ops = ops[_phase_mask(ops, phase)].reset_index(drop=True)
    if ops.empty:
        raise ArchsimError(f"trace: no ops in phase {phase!r}")
    weights, keys = _per_step_weights(ops)
    rows = []
    for sms in sm_counts:
        variant = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": int(sms)})})
        seconds = predict_op_seconds(ops, variant, source, frozenset(), efficiency, False)
        rows.append({"sms": int(sms), "seconds": float((seconds * weights).sum())})
    curve = pd.DataFrame(rows)
    curve["slowdown_vs_max_sms"] = curve["seconds"] / curve["seconds"].iloc[-1]
    curve["phase"] = phase
    curve["steps"] = _distinct_steps(keys, list(keys))
    return curve
