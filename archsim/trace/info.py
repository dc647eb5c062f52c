"""Summary of a normalized trace: what ran, in which phase, how long steps took, on what hardware.

``summarize(trace)`` returns plain data (for notebooks and tests); ``format_summary`` renders it as
the text ``archsim trace info DIR`` prints.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from archsim.perf.classes import work_inferred
from archsim.sim.marker_cost import marker_cost
from archsim.trace.concurrency import concurrency_note
from archsim.trace.format import Trace
from archsim.trace.ingest import describe_repairs
from archsim.trace.kernel_dtype import kernel_dtype_counts
from archsim.trace.pacing import workload_pacing
from archsim.trace.schema import ACTOR_PHASES, INFERENCE_PHASES, LEARNER_PHASES, PHASES

_ROLE_PHASES = {"actor": ACTOR_PHASES, "learner": LEARNER_PHASES, "inference": INFERENCE_PHASES}


def _percentiles(values: pd.Series) -> dict[str, float] | None:
    values = values.dropna()
    if values.empty:
        return None
    return {
        "n": int(len(values)),
        "p50_us": float(np.percentile(values, 50)),
        "p95_us": float(np.percentile(values, 95)),
    }


def loop_of_steps(steps: pd.DataFrame) -> tuple[bool, str]:
    """(True, why) when the trace is one single-threaded loop: actor and learner steps on one thread
    of one process and no separate inference batches (a ``capture dqn`` or ``capture run`` trace),
    its environments stepped there or by vector-env worker processes (``capture run`` of a program
    with gymnasium's AsyncVectorEnv or SB3's SubprocVecEnv: other pids with env steps only, one
    thread each, no acting); the simulator runs such a trace as that loop by default
    (``--loop sequential``)."""
    rows = steps[steps["role"].isin(("actor", "learner"))]
    if rows.empty or not {"actor", "learner"} <= set(rows["role"]):
        return False, "it has no actor and learner steps both"
    known = all(c in rows and bool((rows[c] >= 0).all()) for c in ("pid", "tid"))
    if not known:
        return False, "its steps do not say which process and thread ran them"
    pids = rows["pid"].nunique()
    learner_pids = set(rows.loc[rows["role"] == "learner", "pid"])
    loop = rows[rows["pid"].isin(learner_pids)]
    workers = rows[~rows["pid"].isin(learner_pids)]
    if pids > 1 and not (len(learner_pids) == 1 and _env_workers(loop, workers)):
        return False, f"its steps come from {pids} processes"
    if (steps["role"] == "inference").any():
        return False, "it has inference-server batches (a distributed actor/learner system)"
    threads = loop["tid"].nunique()
    if threads > 1:
        return False, f"its actor and learner steps run on {threads} threads"
    if not workers.empty:
        n = workers["pid"].nunique()
        why = f"actor and learner steps on one thread; its envs step in {n} worker process(es)"
        return True, why
    return True, "actor and learner steps on one thread of one process"


def _env_workers(loop: pd.DataFrame, workers: pd.DataFrame) -> bool:
    """True when ``workers`` (steps on pids other than the learner's) are vector-env workers of the
    loop: actor steps only, one thread per process, one env each and no acting, while the loop's
    own process steps the vector env (its own actor steps)."""
    if workers.empty or not (loop["role"] == "actor").any():
        return False
    if not (workers["role"] == "actor").all():
        return False
    if bool((workers.groupby("pid")["tid"].nunique() > 1).any()):
        return False
    acts = "act_us" in workers and bool(workers["act_us"].notna().any())
    return not acts and bool((workers["batch_size"].fillna(1) <= 1).all())


def ops_by_phase(ops: pd.DataFrame) -> pd.DataFrame:
    """Per phase: op count, summed measured time, FLOPs and bytes (read + written), in PHASES order."""
    frame = ops.assign(bytes=ops["bytes_read"] + ops["bytes_written"])
    table = frame.groupby("phase", observed=True).agg(
        ops=("op_id", "size"),
        time_us=("dur_us", "sum"),
        flops=("flops", "sum"),
        bytes=("bytes", "sum"),
    )
    order = [p for p in (*PHASES, "other") if p in table.index]
    order += sorted(p for p in table.index if p not in order)
    return table.loc[order]


def step_times(steps: pd.DataFrame, role: str) -> dict[str, Any]:
    """p50/p95 of the whole step and of each of the role's phases, over that role's steps; with the
    median thread CPU time (``cpu_p50_us``) where the capture recorded it (wall minus CPU: waits)."""
    rows = steps[steps["role"] == role]
    out: dict[str, Any] = {"steps": int(len(rows))}
    if rows.empty:
        return out
    out["step"] = _with_cpu(_percentiles(rows["dur_us"]), rows.get("cpu_us"))
    gaps = rows["gap_cpu_us"].dropna() if "gap_cpu_us" in rows else pd.Series(dtype=float)
    if not gaps.empty and out["step"] is not None:  # the loop's CPU between the thread's steps
        out["step"]["gap_cpu_p50_us"] = float(np.percentile(gaps, 50))
    phases = {}
    for phase in PHASES:
        stats = _percentiles(rows[f"{phase}_us"])
        if stats is not None:
            phases[phase] = _with_cpu(stats, rows.get(f"{phase}_cpu_us"))
    out["phases"] = phases
    return out


def _with_cpu(stats: dict[str, float] | None, cpu: pd.Series | None) -> dict[str, float] | None:
    if stats is None or cpu is None or cpu.dropna().empty:
        return stats
    return {**stats, "cpu_p50_us": float(np.percentile(cpu.dropna(), 50))}


def _cpu_text(stats: dict[str, float]) -> str:
    return f"  CPU p50 {_ms(stats['cpu_p50_us']):>10}" if "cpu_p50_us" in stats else ""


def summarize(trace: Trace) -> dict[str, Any]:
    """The facts `archsim trace info` shows, as plain data."""
    ops, meta = trace.ops, trace.meta
    source = meta.get("source", {}) or {}
    by_phase = ops_by_phase(ops)
    kinds = ops["kind"].value_counts().to_dict()
    pacing = workload_pacing(meta)
    single, loop_why = loop_of_steps(trace.steps)
    return {
        "workload": (meta.get("workload") or {}).get("name"),
        "format_version": meta.get("format_version"),
        "pacing": {
            "samples_per_insert": pacing.samples_per_insert,
            "samples_per_insert_source": pacing.pacing_source,
            "replay_limit": pacing.replay_limit,
            "frames_per_env_step": pacing.frames_per_env_step,
            "frames_per_env_step_source": pacing.frames_source,
        },
        "loop": {"default": "sequential" if single else "distributed", "why": loop_why},
        "source": {
            k: source.get(k)
            for k in (
                "device",
                "gpu_name",
                "gpu_num_sms",
                "gpu_count",
                "cpu_model",
                "cpu_cores",
                "cpu_threads",
            )
        },
        "ops": {
            "total": int(len(ops)),
            "by_kind": {str(k): int(v) for k, v in kinds.items()},
            "time_us": float(ops["dur_us"].sum()),
            "flops": float(ops["flops"].sum()),
            "without_formula": int((~ops["has_formula"]).sum()),
        },
        "ops_by_phase": {
            str(phase): {
                "ops": int(row.ops),
                "time_us": float(row.time_us),
                "flops": float(row.flops),
                "bytes": float(row.bytes),
            }
            for phase, row in by_phase.iterrows()
        },
        "steps": {role: step_times(trace.steps, role) for role in _ROLE_PHASES},
        "ingest": dict(meta.get("ingest", {}) or {}),
        "concurrency": concurrency_note(ops),  # GPU work side by side, or None
        # capture run's markers' own CPU per step, measured in its process: simulate takes it out
        "marker_cpu_us": marker_cost(trace),
        # element types of the kernels: recorded, or read from the names of shape-less ones
        "kernel_dtypes": kernel_dtype_counts(ops, work_inferred(ops)),
    }


def _si(value: float, unit: str = "") -> str:
    for scale, prefix in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= scale:
            return f"{value / scale:.2f} {prefix}{unit}"
    return f"{value:.0f} {unit}".rstrip()


def _ms(us: float) -> str:
    return f"{us / 1000:.3f} ms"


def format_summary(summary: dict[str, Any]) -> str:
    """Human-readable text of ``summarize``'s result."""
    src = summary["source"]
    lines = [f"workload: {summary['workload']}  (format_version {summary['format_version']})"]
    hw = [f"device {src['device']}"]
    if src.get("gpu_name"):
        hw.append(
            f"GPU {src['gpu_name']} ({src.get('gpu_num_sms')} SMs, {src.get('gpu_count')} GPUs)"
        )
    if src.get("cpu_model"):
        hw.append(
            f"CPU {src['cpu_model']} ({src.get('cpu_cores')} cores, {src.get('cpu_threads')} threads)"
        )
    lines.append("source hardware: " + "; ".join(hw))
    pacing = summary["pacing"]
    ratio = pacing["samples_per_insert"]
    lines.append(
        "learner pacing: "
        + (
            f"{ratio:g} samples per inserted transition ({pacing['samples_per_insert_source']}), "
            + (
                "throttling only the learner"
                if pacing["replay_limit"] == "learner"
                else "throttling both sides"
            )
            if ratio is not None
            else "unknown, the simulator runs the learner unpaced by default "
            f"({pacing['samples_per_insert_source']})"
        )
    )
    lines.append(
        f"frames per env step: {pacing['frames_per_env_step']:g} "
        f"({pacing['frames_per_env_step_source']})"
    )
    loop = summary["loop"]
    lines.append(f"simulated by default as: --loop {loop['default']} ({loop['why']})")
    ops = summary["ops"]
    kinds = ", ".join(f"{v} {k}" for k, v in ops["by_kind"].items())
    lines.append(
        f"ops: {ops['total']} ({kinds}); {_ms(ops['time_us'])} measured, {_si(ops['flops'], 'FLOP')}; "
        f"{ops['without_formula']} without a FLOP formula"
    )
    ing = summary["ingest"]
    if "kernels_linked_fraction" in ing:
        lines.append(
            f"kernels linked to a cpu op: {ing['kernels_linked_fraction']:.2%}; "
            f"unlinked launches: {ing.get('unlinked_kernels', 0)}; shapes recorded: "
            f"{ing.get('shapes_recorded')}"
        )
    repairs = describe_repairs(ing)  # what ingest dropped or repaired, counted
    if repairs:
        lines.append(repairs)
    if ing.get("compiled_graph_calls_cpu"):
        lines.append(
            f"torch.compile: {ing['compiled_graph_calls_cpu']:,} calls of compiled graphs on the "
            "CPU; the kernels Inductor fused in them are not profiler ops, so GPU predictions price "
            "only the library ops inside (matmuls, convolutions), not the fused elementwise work"
        )
    for rule in ing.get("inferred_steps") or ():  # no archsim markers: steps from torch's records
        lines.append(f"inferred {rule}")
    if summary.get("concurrency"):
        lines.append(summary["concurrency"])
    if summary.get("marker_cpu_us"):
        taken = "; ".join(
            f"{role} {f.get('step_us', 0.0):.1f} us a step + {f.get('gap_us', 0.0):.1f} us before it"
            for role, f in summary["marker_cpu_us"].items()
        )
        lines.append(
            f"capture markers' own CPU, measured in the captured process: {taken} "
            "(simulate takes it out of each step; a step keeps its phases' CPU)"
        )
    dtypes = summary.get("kernel_dtypes") or {}
    if dtypes.get("from_kernel_names") or dtypes.get("unknown"):
        named = ", ".join(f"{k} {v}" for k, v in dtypes["from_kernel_names"].items()) or "none"
        unknown = dtypes.get("unknown", 0)
        lines.append(
            f"kernel dtypes read from kernel names (no shapes recorded): {named}"
            + (f"; {unknown} kernels name none (4 B an element assumed)" if unknown else "")
        )
    lines.append("")
    lines.append(f"{'phase':<18}{'ops':>8}{'time':>14}{'FLOPs':>14}{'bytes':>12}")
    for phase, row in summary["ops_by_phase"].items():
        lines.append(
            f"{phase:<18}{row['ops']:>8}{_ms(row['time_us']):>14}{_si(row['flops']):>14}"
            f"{_si(row['bytes'], 'B'):>12}"
        )
    for role, info in summary["steps"].items():
        if not info.get("steps"):
            continue
        lines.append("")
        step = info["step"]
        if step is None:  # every dur_us empty: the steps' phases may still have times
            lines.append(f"{role} steps: {info['steps']}; step times not recorded (dur_us)")
        else:
            cpu = f", CPU p50 {_ms(step['cpu_p50_us'])}" if "cpu_p50_us" in step else ""
            if "gap_cpu_p50_us" in step:
                cpu += f", CPU between steps p50 {_ms(step['gap_cpu_p50_us'])}"
            lines.append(
                f"{role} steps: {info['steps']}; step p50 {_ms(step['p50_us'])}, "
                f"p95 {_ms(step['p95_us'])}{cpu}"
            )
        for phase, stats in info["phases"].items():
            lines.append(
                f"  {phase:<16} p50 {_ms(stats['p50_us']):>12}  p95 {_ms(stats['p95_us']):>12}"
                f"{_cpu_text(stats)}  (in {stats['n']} steps)"
            )
    if not any(info.get("steps") for info in summary["steps"].values()):
        lines.append("")
        lines.append("steps: none (the trace has no archsim::<role>_step markers)")
    return "\n".join(lines)
