"""Merging a captured program's worker processes into its trace (``archsim capture run``): each
worker that stepped an environment wrote its own trace and sidecar (archsim.capture.child_capture);
they are merged with the program's own process as ``capture r2d2`` merges its processes
(archsim.capture.merge), its frames per env step read from the workers' envs, and a vector env whose
workers recorded nothing is refused in one line."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from archsim.capture.frameskip import IN_WORKERS, NO_ENV_STEPPED, FrameSkip, set_frames
from archsim.errors import ArchsimError


def merge_workers(trace: Any, workers: Any, out_dir: Path, name: str) -> Any:
    """The parent's saved trace merged with its workers' (archsim.capture.merge), re-ingested into
    ``out_dir``; the same trace when no worker stepped an environment. Notes name what is missing."""
    from archsim.capture.child_capture import note
    from archsim.capture.merge import ProcessPart, merge_process_traces
    from archsim.capture.session import ingest_and_save
    from archsim.trace.format import RAW_FILE

    parts, notes = workers.parts()
    for line in notes:
        note(line)
    if not any(part.trace_path for part in parts):
        _check_vector_workers_recorded(trace, workers, parts, name)
        started = [w for w in workers.started if not w.library]  # DataLoader workers step no env
        if started:
            note(
                f"{name} started {len(started)} worker process(es); none has a trace of "
                "env steps, so only this process is in the trace"
            )
        return trace
    # the program's own process: its training, acting and waiting for the workers' env steps
    parent = ProcessPart("learner", 0, os.getpid(), out_dir / RAW_FILE, {"complete": True})
    raw_path = workers.folder / RAW_FILE
    merged = merge_process_traces([parent, *parts], raw_path)
    meta = {k: trace.meta[k] for k in ("workload", "source", "torch_version") if k in trace.meta}
    capture_meta = dict(trace.meta.get("capture") or {})
    capture_meta["multi_process"] = True
    capture_meta["processes"] = merged["processes"]
    pooled = _pooled_unprofiled(capture_meta.get("unprofiled_cpu_us") or {}, merged["processes"])
    capture_meta["unprofiled_cpu_us"] = pooled
    meta["capture"] = capture_meta
    if "workload" in meta:
        meta["workload"] = workers_frames(dict(meta["workload"]), parts)
    trace = ingest_and_save(raw_path, meta, out_dir, force=True)
    traced = sum(1 for part in parts if part.trace_path)
    note(f"merged the traces of {traced} worker process(es) with this process's")
    return trace


def _check_vector_workers_recorded(trace: Any, workers: Any, parts: list[Any], name: str) -> None:
    """One-line error when the program's vector env stepped its envs in worker processes and none of
    them recorded a window: the program's env steps then hold only its send/receive (a CartPole PPO
    on AsyncVectorEnv: 0.14 ms of CPU in a 1.2 ms env step), and simulate would price the env
    steps at that. The workers count their schedule in their own env steps, which an on-policy
    loop's extra window (archsim.capture.role_schedule) does not reach."""
    source = str((trace.meta.get("workload") or {}).get("frames_per_env_step_source", ""))
    if not parts or IN_WORKERS not in source:
        return
    ran = max(int(((p.sidecar or {}).get("counts") or {}).get("ticks", 0)) for p in parts)
    s = workers.settings.schedule  # the profiled schedule: its skip_first is the user's + 1
    first = s["skip_first"] - 1 + s["wait"] + s["warmup"]
    raise ArchsimError(
        f"capture run: {name}'s vector env stepped its environments in {len(parts)} worker "
        f"process(es), and none recorded a window: each ran at most {ran} env steps after the "
        f"first optimizer step, and the schedule records from step {first + 1} on; without them "
        "the trace holds no env work: run it longer or lower --wait/--warmup"
    )


def workers_frames(workload: dict[str, Any], parts: list[Any]) -> dict[str, Any]:
    """``workload`` with the workers' frames per env step where the parent's vector env stepped its
    envs in them (archsim.capture.frameskip.IN_WORKERS), or where it stepped none and its worker
    processes stepped their own (actors in ``mp.Process`` targets): each worker read its own env's."""
    label, source = IN_WORKERS, str(workload.get("frames_per_env_step_source", ""))
    if source.endswith(NO_ENV_STEPPED):  # actors in mp.Process targets, stepping their own envs
        label = "its worker processes step its environments"
    elif IN_WORKERS not in source:
        return workload
    read = [(p.sidecar or {}).get("frameskip") or {} for p in parts]
    values = {r.get("frames_per_env_step") for r in read}
    if len(values) != 1 or None in values:
        why = "; ".join(sorted({str(r.get("source")) for r in read}))
        set_frames(workload, FrameSkip(None, f"{label}, which said: {why}"))
    else:
        source = f"{label}: {read[0].get('source')}"
        set_frames(workload, FrameSkip(float(values.pop()), source))
    return workload


def _pooled_unprofiled(parent: dict, processes: list[dict]) -> dict:
    """Unprofiled step times of the parent and its workers pooled per role, as ``capture r2d2``
    pools its actors (archsim.sim.profiler_cost compares them with every process's rows)."""
    from workloads.r2d2.capture import unprofiled_by_role

    return unprofiled_by_role([{"unprofiled_cpu_us": parent}, *processes])
