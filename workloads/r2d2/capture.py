"""Capture a SEED-style R2D2 run: every process profiles itself, the traces are merged (one clock,
process roles) and ingested into one trace directory whose steps table has per-actor env/wait phases,
inference batches (size, time) and learner steps.

A run in which a process failed still saves what the others recorded, marks it
``capture.complete: false`` with the reason, and then raises an ArchsimError naming the process.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any

from archsim.atomic import check_output_dir
from archsim.capture.merge import ProcessPart, merge_process_traces
from archsim.errors import ArchsimError
from archsim.trace.format import RAW_FILE
from workloads.dqn.env import FRAME_SKIP
from workloads.r2d2.seed.runner import RECORDED_FRACTION, run_seed
from workloads.r2d2.seed.settings import SeedSettings


def capture_r2d2(
    settings: SeedSettings,
    out_dir: Path,
    *,
    force: bool = False,
    process_dir: Path | None = None,
) -> Any:
    """Run learner + actors for ``settings.seconds`` and save the merged trace to ``out_dir``.

    ``process_dir``: where each process writes its own trace and sidecar, and the runner its
    ``processes.json`` (pid -> role, written as soon as the processes start); a temporary folder,
    removed afterwards, when None.
    """
    import torch

    from archsim.capture.machine import source_description
    from archsim.capture.session import ingest_and_save

    out_dir = Path(out_dir)
    check_output_dir(out_dir, force)
    with tempfile.TemporaryDirectory(prefix="archsim-r2d2-") as tmp:
        tmp_dir = Path(tmp)
        result = run_seed(settings, Path(process_dir) if process_dir else tmp_dir / "processes")
        raw_path = tmp_dir / RAW_FILE
        merged = merge_processes(result, raw_path)
        meta = {
            "workload": {
                "name": "r2d2",
                "settings": settings.as_dict(),
                # For the simulator (archsim.trace.pacing): the actors' AtariEnv repeats each action
                # FRAME_SKIP frames; the trainer samples replay_ratio sequences per sequence
                # inserted, one sequence per (length - overlap) env steps of an environment, and
                # waits for data while the actors never wait for it (seed/rate.py): "learner".
                "frames_per_env_step": FRAME_SKIP,
                "samples_per_insert": settings.replay_ratio
                / (settings.r2d2.sequence_length - settings.r2d2.sequence_overlap),
                "replay_limit": "learner",
            },
            "source": source_description("cpu"),
            "torch_version": str(torch.__version__),
            "capture": {
                # every process records the first half of its run and times the second half
                "schedule": None,
                "recorded_fraction": RECORDED_FRACTION,
                "record_shapes": settings.record_shapes,
                "multi_process": True,
                "inference": settings.inference,
                "complete": result.complete,
                "incomplete_reason": result.failure,
                "run_seconds": round(result.run_seconds, 3),
                "port": result.port,
                "processes": merged["processes"],
            },
        }
        unprofiled = unprofiled_by_role(merged["processes"])
        if unprofiled:
            meta["capture"]["unprofiled_cpu_us"] = unprofiled
        trace = ingest_and_save(raw_path, meta, out_dir, force)
        warn_without_learner_steps(trace.steps, settings.seconds, out_dir)
    if not result.complete:
        raise ArchsimError(
            f"{result.failure}; the partial trace is in {out_dir} (meta capture.complete: false)"
        )
    return trace


def warn_without_learner_steps(steps, seconds: float, out_dir: Path) -> bool:
    """One line on stderr when the recorded half holds no whole learner step (one with its CPU time):
    the learner trains only once replay holds a batch, 0.5-0.8 s into a small run on a 2-core VM
    (measured beside two busy loops, tests/test_r2d2_seed.py), so a short run can record actors only
    and the simulator would have no learner work to replay. Returns whether it warned."""
    learner = steps[steps.role == "learner"] if "role" in steps.columns else steps.iloc[0:0]
    if "cpu_us" in learner.columns and learner.cpu_us.notna().any():
        return False
    print(
        f"r2d2 capture: {out_dir}: the recorded half of the {seconds:g}-s run holds no whole learner "
        "step (replay had not filled a batch yet); run longer (--seconds) for a trace with learner work",
        file=sys.stderr,
    )
    return True


def unprofiled_by_role(processes: list[dict]) -> dict:
    """The processes' unprofiled step times as one {role: {phase: figures}} (archsim.sim.profiler_cost
    reads them per role). Processes of one role (the actors) pool their steps: the mean is the
    step-weighted mean; the median the step-weighted mean of their medians (an approximation: the
    samples themselves stay in the processes)."""
    pooled: dict[str, dict[str, list[dict]]] = {}
    for process in processes:
        for role, phases in (process.get("unprofiled_cpu_us") or {}).items():
            for name, figures in phases.items():
                pooled.setdefault(role, {}).setdefault(name, []).append(figures)
    merged: dict[str, dict] = {}
    for role, phases in pooled.items():
        for name, parts in phases.items():
            steps = sum(int(p.get("steps", 0)) for p in parts)
            if steps <= 0:
                continue
            figures = {"steps": steps}
            for key in ("median_us", "mean_us"):
                if all(key in p for p in parts):
                    total = sum(float(p[key]) * int(p.get("steps", 0)) for p in parts)
                    figures[key] = round(total / steps, 3)
            merged.setdefault(role, {})[name] = figures
    return merged


def merge_processes(result, raw_path: Path) -> dict:
    """Merge the per-process traces of a multi-process run (``result.processes``: role, index, pid,
    trace path, sidecar, exit code) into one raw Kineto trace at ``raw_path``; one line when no
    process exported a trace. Shared by the R2D2 and Ape-X captures."""

    parts = [
        ProcessPart(
            r.role, r.index, r.pid, Path(r.trace) if r.trace else None, r.sidecar, r.exitcode
        )
        for r in result.processes
    ]
    if not any(p.trace_path for p in parts):
        raise ArchsimError(f"no process exported a trace: {result.failure or 'unknown reason'}")
    return merge_process_traces(parts, raw_path)
