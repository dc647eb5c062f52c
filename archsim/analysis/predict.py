"""Predict the time of one inference batch (or one learner step) of a trace on a target GPU.

The GPU time of a step is the sum of the kernel model's per-op seconds over the step's ops: ops run one
after another on one stream, as PyTorch issues them for a single forward pass (no overlap between ops,
the same assumption as Habitat, Yu et al., USENIX ATC 2021, and ASTRA-sim).

The CPU-side launch cost is reported on its own. PyTorch launches kernels asynchronously, so the host
thread runs ahead of the GPU and a step finishes after whichever is longer: the GPU busy time or the
host's launch time (``archsim.perf.kernel.cpu_launch_seconds``: ``gpu.launch_overhead_us`` per op,
the cost the simulator charges; a CPU-captured leaf op counts as one kernel launch). So
``seconds_per_batch = max(gpu_seconds, launch_overhead_seconds)``; ``launch_bound`` says which side
decided it. (Host Python/framework time between launches is not modelled here; the simulator does.)

Steps: ops are grouped by ``step_id`` (one ``archsim::inference_step`` / ``learner_step`` each); a
foreign trace without archsim step markers is grouped by its ``ProfilerStep#`` number instead, and a
trace with neither counts as one step. Ops outside every step (id -1) are left out when some ops are
inside one. The per-step sums are combined with the median, which ignores a stray first step without
changing a steady run (every AlexNet step issues the same ops, so median == mean there). ``--phase
all`` over steps of several roles (DQN's actor and learner steps) groups by ProfilerStep iteration
where the trace has those, takes the mean (a learner step every few iterations is the point, not an
outlier) and counts steps/s: no one batch size applies.

A trace measured on a GPU also gives ``measured_gpu_seconds``: the device time of its kernels, copies
and memsets per step (same steps, same median), beside the predicted ``gpu_seconds``. By default its
measured ops are scaled by model(target) / model(source); ``model_only`` predicts every op from the
model alone (FLOPs, bytes, launch geometry), the path a CPU capture takes and the honest accuracy
test on a GPU trace (``--hw`` its own GPU: compare gpu_seconds with measured_gpu_seconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.hw.schema import HardwareConfig
from archsim.perf.classes import work_inferred
from archsim.trace.format import Trace
from archsim.trace.kernel_dtype import named_dtypes
from archsim.trace.schema import PHASE_GROUPS, PHASES, UNKNOWN_PHASE

# Bytes per element of the floating dtypes a target may run in (IEEE 754 sizes).
FLOAT_ITEMSIZE_BYTES: dict[str, int] = {"float64": 8, "float32": 4, "float16": 2, "bfloat16": 2}
# Spellings seen in traces and meta ("Input type" strings are c10 scalar type names).
_DTYPE_ALIASES: dict[str, str] = {
    "float": "float32",
    "fp32": "float32",
    "half": "float16",
    "fp16": "float16",
    "double": "float64",
    "c10::half": "float16",
    "c10::bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
# Workloads whose inference items are images (workloads/alexnet); an RL actor's are observations.
IMAGE_WORKLOADS = frozenset({"alexnet"})
# Which step role's batch size applies to each phase group.
_GROUP_ROLES: dict[str, tuple[str, ...]] = {
    "inference": ("inference", "actor"),
    "train": ("learner",),
}


def normalize_dtype(name: str) -> str:
    """Canonical dtype name (float32, float16, ...) for the spellings traces and users use."""
    key = str(name).strip().lower().removeprefix("torch.")
    return _DTYPE_ALIASES.get(key, key)


def phase_names(phase: str) -> tuple[str, ...]:
    """The op phases a ``--phase`` value selects: ``all``, a group (inference, train) or one phase."""
    if phase == "all":
        return (*PHASES, UNKNOWN_PHASE)
    if phase in PHASE_GROUPS:
        return PHASE_GROUPS[phase]
    if phase in PHASES or phase == UNKNOWN_PHASE:
        return (phase,)
    choices = ", ".join(["all", *PHASE_GROUPS, *PHASES, UNKNOWN_PHASE])
    raise ArchsimError(f"--phase {phase}: unknown phase (expected one of: {choices})")


def _trace_label(trace: Trace) -> str:
    if trace.raw_path is not None:
        return str(trace.raw_path.parent)
    return str(trace.meta.get("workload", {}).get("name", "trace"))


def select_phase_ops(trace: Trace, phase: str, label: str | None = None) -> pd.DataFrame:
    """The trace's ops in ``phase``; an ArchsimError naming the phases present when there are none."""
    names = phase_names(phase)
    ops = trace.ops[trace.ops["phase"].isin(names)]
    if ops.empty:
        present = sorted(set(trace.ops["phase"].astype(str))) or ["none: the trace has no ops"]
        raise ArchsimError(
            f"{label or _trace_label(trace)}: no ops in phase {phase!r} (phases present: {', '.join(present)})"
        )
    return ops.reset_index(drop=True)


def retarget_dtype(ops: pd.DataFrame, target_dtype: str) -> pd.DataFrame:
    """A copy of ``ops`` as if the floating-point ops had run in ``target_dtype``.

    A CPU may capture fp32 on behalf of an fp16 target (meta ``target_dtype``). The kernel model picks
    its peak from the ``dtype`` column, and the bytes an op moves scale with the element size, so
    both are rewritten for float ops; integer/bool ops (indices, masks) are left alone.
    """
    target = normalize_dtype(target_dtype)
    if target not in FLOAT_ITEMSIZE_BYTES:
        raise ArchsimError(
            f"target_dtype {target_dtype!r}: expected one of {', '.join(FLOAT_ITEMSIZE_BYTES)}"
        )
    out = ops.copy()
    captured = out["dtype"].astype(str).map(normalize_dtype)
    is_float = captured.isin(list(FLOAT_ITEMSIZE_BYTES))
    size_ratio = captured.map(FLOAT_ITEMSIZE_BYTES).fillna(1.0).rdiv(FLOAT_ITEMSIZE_BYTES[target])
    for column in ("bytes_read", "bytes_written"):
        out[column] = np.where(is_float, out[column] * size_ratio, out[column])
    out["dtype"] = out["dtype"].where(~is_float, target).astype("string")
    return out


def _dominant_dtype(ops: pd.DataFrame) -> str:
    """The dtype that carries most FLOPs (the one that sets the speed), else the most common one;
    a shape-less kernel's is the one its name spells, as the kernel model reads it
    (archsim.trace.kernel_dtype)."""
    dtypes = named_dtypes(ops, work_inferred(ops)).astype(str).map(normalize_dtype)
    if ops["flops"].sum() > 0:
        return str(ops.groupby(dtypes)["flops"].sum().idxmax())
    counts = dtypes[dtypes != ""].value_counts()
    return str(counts.index[0]) if len(counts) else "unknown"


def _mixed_roles(ops: pd.DataFrame, trace: Trace, phase: str) -> bool:
    """``--phase all`` over archsim steps of several roles (an actor's and a learner's)."""
    if phase != "all":
        return False
    steps = trace.steps[trace.steps["step_id"].isin(ops["step_id"])]
    return bool(steps["role"].nunique() > 1)


def _step_key(ops: pd.DataFrame, mixed: bool = False) -> str:
    """Column that says which step an op belongs to: archsim steps, else ProfilerStep numbers.

    Over steps of several roles (``mixed``), a step is one iteration of the program as the profiler's
    schedule cut it (ProfilerStep#) when the trace has those."""
    if mixed and (ops["profiler_step"] >= 0).any():
        return "profiler_step"
    if (ops["step_id"] >= 0).any():
        return "step_id"
    if (ops["profiler_step"] >= 0).any():
        return "profiler_step"
    return "step_id"


def _step_batch_size(trace: Trace, step_ids: np.ndarray, phase: str) -> int | None:
    """Batch size of the steps the ops ran in (median over them), else the workload's setting, else
    None (a foreign trace that does not say). Steps that ingest inferred for a trace without archsim
    markers (archsim.trace.infer_steps) carry no batch size of their own: theirs is the schema's
    fill value, not a measurement; so do the learner steps of an on-policy capture that never
    measured its batch (archsim.trace.learner_batch)."""
    from archsim.trace.learner_batch import unknown_learner_batch

    inferred = bool((trace.meta.get("ingest") or {}).get("inferred_steps"))
    steps = trace.steps[trace.steps["step_id"].isin(step_ids)]
    if inferred:
        steps = steps.iloc[:0]
    elif unknown_learner_batch(trace):  # an on-policy update's default 1, not a measurement
        steps = steps[steps["role"].astype(str) != "learner"]
    roles = _GROUP_ROLES.get(phase)
    if roles is not None and not steps.empty and steps["role"].isin(roles).any():
        steps = steps[steps["role"].isin(roles)]
    if not steps.empty:
        if roles is None and steps["role"].nunique() > 1:
            return None  # --phase all over actor and learner steps: no one batch size
        return int(np.median(steps["batch_size"].to_numpy()))
    settings = (trace.meta.get("workload") or {}).get("settings") or {}
    for key in ("batch_size", "batch"):
        if isinstance(settings.get(key), int):
            return int(settings[key])
    return None


def _rate_unit(trace: Trace, names: set[str], batch_known: bool) -> str:
    """What the rate counts over ops of phases ``names``: steps when the batch is unknown, images for
    an image classifier's inference, observations for an RL actor's inference, samples for training."""
    if not batch_known:
        return "steps/s"
    if set(names) <= set(PHASE_GROUPS["train"]):
        return "samples/s"
    workload = str((trace.meta.get("workload") or {}).get("name", "")).lower()
    if workload in IMAGE_WORKLOADS and set(names) <= set(PHASE_GROUPS["inference"]):
        return "images/s"
    if set(names) <= set(PHASE_GROUPS["inference"]):
        return "observations/s"
    return "items/s"


def _measured_per_step(
    ops: pd.DataFrame, step_key: str, steps: pd.Index, statistic: Any = np.median
) -> float | None:
    """Median (``statistic``) over ``steps`` of the device time the trace measured (kernels, copies,
    memsets), or None when no selected op has a measured duration (a CPU capture)."""
    from archsim.perf.columns import MEASURED_KINDS

    dur_us = pd.to_numeric(ops["dur_us"], errors="coerce").to_numpy(dtype=float)
    measured = ops["kind"].astype(str).isin(MEASURED_KINDS).to_numpy() & np.isfinite(dur_us)
    if not measured.any():
        return None
    per_step = (
        pd.Series(np.where(measured, dur_us, 0.0) * 1e-6)
        .groupby(ops[step_key].to_numpy())
        .sum()
        .reindex(steps, fill_value=0.0)
    )
    return float(statistic(per_step.to_numpy()))


def predict_phase(
    trace: Trace,
    hw: HardwareConfig,
    phase: str = "inference",
    hw_name: str | None = None,
    label: str | None = None,
    efficiency: Mapping[str, float] | None = None,
    source: HardwareConfig | None | str = "trace",
    model_only: bool = False,
) -> dict[str, Any]:
    """Predicted seconds per step of ``phase`` on one GPU of ``hw`` (see the module docstring).

    Returns phase, batch (1 with ``batch_known`` False when the trace does not record it), dtype,
    seconds_per_batch, items_per_s (``rate_unit`` says what an item is), gpu_seconds (predicted),
    measured_gpu_seconds (the device time the trace itself measured per step; None for a CPU
    capture), launch_overhead_seconds, launch_bound, launches, hw, gpu, n_ops (ops per step),
    n_steps, steps_from, model_only, notes (one-line caveats, e.g. bf16 on a GPU without BF16
    math: archsim.perf.bf16). A trace meta ``target_dtype`` (a CPU capture made for an fp16
    target) is applied to the ops first (:func:`retarget_dtype`). ``efficiency``: the per-class
    overlay of ``archsim calibrate``. ``source``: the hardware the trace was measured on ("trace":
    found from the trace, archsim.perf.source). ``model_only``: every op from the model alone
    (FLOPs, bytes, launch geometry), ignoring measured durations.
    """
    from archsim.perf.bf16 import emulated_bf16_note
    from archsim.perf.fp8 import fp8_port_note
    from archsim.perf.kernel import cpu_launch_seconds, predict_op_seconds
    from archsim.perf.launch import launch_calls
    from archsim.perf.source import source_hw_for_trace

    if hw.gpu is None:
        raise ArchsimError(f"--hw {hw.name}: has no GPU section; predict needs a GPU target")
    ops = select_phase_ops(trace, phase, label)
    target_dtype = trace.meta.get("target_dtype")
    if target_dtype:
        ops = retarget_dtype(ops, str(target_dtype))
    if model_only:
        source_hw = None
    else:
        source_hw = source_hw_for_trace(trace) if isinstance(source, str) else source
    seconds = np.asarray(predict_op_seconds(ops, hw, source_hw, efficiency=efficiency), dtype=float)
    launch_s = np.asarray(cpu_launch_seconds(ops, hw), dtype=float)

    # Steps of mixed roles (--phase all over actor and learner steps) differ by design (a learner
    # step every few actor steps): the mean is the GPU time per step (or per profiler iteration,
    # _step_key) and there is no one batch size; otherwise the median (module docstring).
    mixed = _mixed_roles(ops, trace, phase)
    step_key = _step_key(ops, mixed)
    statistic = np.mean if mixed else np.median
    per_step = (
        pd.DataFrame(
            {
                "step": ops[step_key].to_numpy(),
                "gpu_s": seconds,
                "launch_s": launch_s,
                "launches": launch_calls(ops),  # a graph launch's kernels share one call
            }
        )
        .groupby("step", sort=True)[["gpu_s", "launch_s", "launches"]]
        .sum()
    )
    if (per_step.index >= 0).any():  # ops outside any step (id -1) are not part of a batch
        per_step = per_step[per_step.index >= 0]
    in_steps = ops[ops[step_key].isin(per_step.index)]
    gpu_seconds = float(statistic(per_step["gpu_s"]))
    n_launches = float(statistic(per_step["launches"]))
    launch_overhead_seconds = float(statistic(per_step["launch_s"]))
    seconds_per_batch = max(gpu_seconds, launch_overhead_seconds)
    step_ids = per_step.index.to_numpy() if step_key == "step_id" else np.array([], dtype=int)
    known_batch = None if mixed else _step_batch_size(trace, step_ids, phase)
    batch = known_batch if known_batch is not None else 1
    return {
        "phase": phase,
        "batch": batch,
        "batch_known": known_batch is not None,
        "dtype": normalize_dtype(target_dtype) if target_dtype else _dominant_dtype(ops),
        "seconds_per_batch": seconds_per_batch,
        "items_per_s": batch / seconds_per_batch,
        "rate_unit": _rate_unit(trace, set(ops["phase"].astype(str)), known_batch is not None),
        "gpu_seconds": gpu_seconds,
        "measured_gpu_seconds": _measured_per_step(ops, step_key, per_step.index, statistic),
        "launch_overhead_seconds": launch_overhead_seconds,
        "launch_bound": launch_overhead_seconds > gpu_seconds,
        "launches": int(round(n_launches)),
        "hw": hw_name or hw.name,
        "gpu": hw.gpu.name,
        "source_hw": source_hw.name if source_hw is not None else None,
        "model_only": bool(model_only),
        "n_ops": int(round(len(in_steps) / len(per_step))),
        "n_steps": int(len(per_step)),
        "steps_from": step_key,
        "notes": [  # one line each
            n for n in (emulated_bf16_note(in_steps, hw), fp8_port_note(in_steps, hw)) if n
        ],
    }


def predict_inference(
    trace: Trace,
    hw: HardwareConfig,
    phase: str = "inference",
    hw_name: str | None = None,
    label: str | None = None,
    efficiency: Mapping[str, float] | None = None,
    source: HardwareConfig | None | str = "trace",
    model_only: bool = False,
) -> dict[str, Any]:
    """Inference prediction: :func:`predict_phase` plus ``images_per_s`` (= batch / seconds_per_batch;
    kept for compatibility whatever the items are: ``rate_unit`` names them)."""
    result = predict_phase(trace, hw, phase, hw_name, label, efficiency, source, model_only)
    result["images_per_s"] = result["items_per_s"]
    return result
