"""Ingest any torch.profiler (Kineto) trace into the normalized trace (ops + steps + meta).

GPU traces: one op per kernel / memcpy / memset, linked to its launch by correlation and to the
innermost cpu op around the launch (archsim.trace.link); FLOPs and bytes from the launching op or an
ancestor with a formula (archsim.trace.gpu_costs). Kernels queued before the profiling window (no
launch in the file) are dropped and counted; device events of accelerators archsim has no model of
(MTIA) and traces with launches but no kernel events are refused in one line.

CPU-only traces: one op per compute cpu op that is not inside another kept op. Compute ops are ops
in a namespace (``aten::``..., not ``autograd::``/``profiler::``) that are not pure metadata (views,
empty, reshape: flops.METADATA_OPS), and torch.distributed's collectives (``gloo:all_reduce``, class
communication: flops.is_collective), whether filed as cpu ops or, as torch 2.x does, annotations.
Kept: the outermost compute op that has a FLOP formula, or is a collective (its measured time
includes the ops it calls: ``aten::linear`` rather than the ``addmm`` and bias ``copy_`` inside it,
which a plain "leaf op" rule would split and lose the GEMM), and compute ops without a formula that
contain no other compute op (true leaves). Kept ops never overlap on a thread, so their times add
up. FLOPs/bytes from each op's own shapes.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError, where
from archsim.trace import flops as flops_mod
from archsim.trace import ingest_cache
from archsim.trace.format import Trace
from archsim.trace.gpu_costs import gpu_costs
from archsim.trace.host_pid_device import device_of_cpu_pid
from archsim.trace.infer_steps import infer_steps
from archsim.trace.ingest_meta import device_properties, merge_meta, trace_meta
from archsim.trace.kineto import (
    CUPTI_RANGE_CATEGORY,
    FOREIGN_DEVICE_PREFIXES,
    GPU_CATEGORIES,
    KinetoTrace,
    gpu_event_fields,
    grid_in_blocks,
    op_shapes,
    read_kineto,
)
from archsim.trace.kineto_columns import launch_geometry
from archsim.trace.link import (
    ancestors_table,
    anchor_by_external_id,
    correlation_from_external_ids,
    innermost_containing,
    link_to_runtime,
    thread_key,
)
from archsim.trace.not_kineto import nothing_to_ingest_reason
from archsim.trace.schema import OPS_COLUMNS, conform
from archsim.trace.steps import (
    assign_phases,
    assign_profiler_steps,
    build_steps,
    enclosing_step,
    has_step_markers,
)

# Kernels whose correlation matches no runtime call. Real traces can cut a few launches at the edges
# of the profiling window, so a small share is tolerated and counted in meta; beyond it the trace is
# refused. None of the five fixtures has any (checked: 0 of 13,162 kernels, memcpys and memsets).
MAX_UNLINKED_FRACTION = 0.01
_KIND_OF_CATEGORY = {"kernel": "kernel", "gpu_memcpy": "memcpy", "gpu_memset": "memset"}
_NON_OP_NAMESPACES = ("autograd::", "profiler::", "archsim::", "torch::autograd::")
# Runtime/driver calls that put work on a GPU (CUDA, HIP, driver API; kernels, copies, memsets).
_LAUNCH_CALL = r"Launch|Memcpy|Memset"


def ingest(
    path: Path | str,
    meta: dict[str, Any] | None = None,
    on_bytes: Callable[[int], None] | None = None,
) -> Trace:
    """Parse ``path`` (Kineto JSON or JSON.gz) into a Trace; ``meta`` (e.g. from archsim.capture)
    is merged over what the trace itself says; ``on_bytes(n)`` hears how many bytes of the file
    have been read (a progress bar). An unchanged small file ingested again (no ``meta``, no
    ``on_bytes``) gives a copy of the first result (archsim.trace.ingest_cache)."""
    path = Path(path)
    key = ingest_cache.cache_key(path) if meta is None and on_bytes is None else None
    if key is not None and (trace := ingest_cache.cached(key)) is not None:
        return trace
    trace = _ingest(path, meta, on_bytes)
    if key is not None:
        ingest_cache.remember(key, trace)
    return trace


def _ingest(
    path: Path, meta: dict[str, Any] | None, on_bytes: Callable[[int], None] | None
) -> Trace:
    kt = read_kineto(path, on_bytes)
    ev = kt.events
    annotations = ev[ev["cat"] == "user_annotation"].reset_index(drop=True)
    cpu = ev[ev["cat"] == "cpu_op"].reset_index(drop=True)
    gpu = ev[ev["cat"].isin(GPU_CATEGORIES)].reset_index(drop=True)
    runtime = ev[ev["cat"] == "cuda_runtime"].reset_index(drop=True)
    if not len(gpu) and not len(cpu) and not kt.other_device_events:
        legacy = nothing_to_ingest_reason(kt)
        raise ArchsimError(
            where(path, f"no cpu_op, kernel, memcpy or memset events{legacy}: nothing to ingest")
        )
    counts: dict[str, Any] = {
        "duplicate_events_removed": kt.duplicates_removed,
        "ts_rebased_by_us": kt.ts_rebased_by_us,
        "names_repaired": kt.names_repaired,
        "begin_end_pairs": kt.pairs.paired,  # "B"/"E" spans read as complete events
        "unclosed_begin_events": kt.pairs.unclosed_begins,
    }
    gpu, runtime, counts["linked_by_external_id"] = correlation_from_external_ids(gpu, runtime)
    gpu, counts["prewindow_gpu_events_dropped"] = drop_prewindow(gpu, runtime)
    _refuse_unmodelled_devices(kt, gpu, runtime)  # after the drop: launches left without kernels
    if not len(gpu) and not len(cpu):
        raise ArchsimError(
            where(path, "every GPU event was queued before the profiling window: nothing to ingest")
        )
    if len(gpu):
        ops = _gpu_ops(kt, gpu, runtime, cpu, counts)
    else:  # torch 2.x files a process group's work ("gloo:all_reduce") as a user annotation
        collective = annotations["name"].astype(str).map(flops_mod.is_collective).astype(bool)
        ops = _cpu_ops(pd.concat([cpu, annotations[collective]], ignore_index=True), counts)
    # torch.compile'd code on the CPU: Inductor's fused C++ kernels are not profiler ops, so only
    # the library ops inside its graph calls are priced (archsim.trace.info says so)
    compiled = annotations["name"].astype(str).str.startswith(COMPILED_GRAPH_PREFIX)
    counts["compiled_graph_calls_cpu"] = 0 if len(gpu) else int(compiled.sum())
    inferred, counts["inferred_steps"] = None, []
    if not has_step_markers(annotations):
        *inferred, counts["inferred_steps"] = infer_steps(annotations, cpu)
    steps, phase_intervals, unknown_markers = build_steps(path, annotations, inferred)
    pid, tid, t = ops["_anchor_pid"].to_numpy(), ops["_anchor_tid"].to_numpy(), ops["_anchor_t"]
    t = t.to_numpy(dtype=np.float64)
    valid = ~np.isnan(t)
    ops["phase"] = assign_phases(phase_intervals, annotations, cpu, pid, tid, t, valid)
    ops["profiler_step"] = assign_profiler_steps(annotations, pid, t, valid, path)
    step_id = np.full(len(ops), -1, dtype=np.int64)
    if valid.any():
        step_id[valid] = enclosing_step(steps, pid[valid], tid[valid], t[valid])
    ops["step_id"] = step_id
    ops = ops.sort_values(["start_us", "device", "stream", "pid", "tid"], kind="stable")
    ops["op_id"] = np.arange(len(ops), dtype=np.int64)
    ops = conform(ops.reset_index(drop=True), OPS_COLUMNS)
    counts.update(
        n_ops=len(ops),
        ops_without_formula=int((~ops["has_formula"]).sum()),
        shapes_recorded=bool(_shapes_recorded(cpu)),
        n_steps=len(steps),
        unknown_markers=int(unknown_markers),
    )
    devices = sorted(int(d) for d in ops.loc[ops["device"] >= 0, "device"].unique())
    source_meta = trace_meta(kt, devices, counts, MAX_UNLINKED_FRACTION)
    return Trace(meta=merge_meta(source_meta, meta or {}), ops=ops, steps=steps, raw_path=path)


# The record_function of a call into a torch.compile'd graph (torch._inductor's output code).
COMPILED_GRAPH_PREFIX = "## Call CompiledFxGraph"
# meta["ingest"] counts of what ingest left out or repaired, and how to say each.
_REPAIRS = (
    ("prewindow_gpu_events_dropped", "GPU events queued before the profiling window dropped"),
    ("duplicate_events_removed", "duplicate events removed"),
    ("names_repaired", "names with invalid Unicode repaired"),
    ("ts_rebased_by_us", "us subtracted from every timestamp (kept exact)"),
    ("begin_end_pairs", "begin/end ('B'/'E') event pairs read as complete events"),
    ("unclosed_begin_events", "begin ('B') events never ended dropped"),
)


def describe_repairs(ingest_meta: dict[str, Any]) -> str | None:
    """One line naming what ingest dropped or repaired (meta["ingest"]), None when nothing."""
    done = [f"{ingest_meta[k]:,} {text}" for k, text in _REPAIRS if ingest_meta.get(k)]
    return "ingest repairs: " + "; ".join(done) if done else None


def _refuse_unmodelled_devices(kt: KinetoTrace, gpu: pd.DataFrame, runtime: pd.DataFrame) -> None:
    """One line, rather than a trace whose device work is silently missing and whose meta says
    cuda: device events of an accelerator archsim has no model of (MTIA), or runtime launches with
    no kernel events at all (CUPTI range-profiler mode records ranges, not kernels)."""
    foreign = {
        c: n for c, n in kt.other_device_events.items() if c.startswith(FOREIGN_DEVICE_PREFIXES)
    }
    if foreign:
        props = device_properties(kt.top)
        named = f" of '{props[0].get('name')}'" if props and props[0].get("name") else ""
        listed = ", ".join(f"{n} {c}" for c, n in sorted(foreign.items()))
        raise ArchsimError(
            where(
                kt.path,
                f"device work is in non-CUDA/ROCm accelerator events{named} ({listed}): archsim "
                "models CPUs and CUDA/ROCm GPUs only, so this trace cannot be simulated",
            )
        )
    if len(gpu):
        return
    launches = runtime["name"].astype(str).str.contains(_LAUNCH_CALL).to_numpy()
    if launches.any():
        ranges = kt.other_device_events.get(CUPTI_RANGE_CATEGORY, 0)
        mode = (
            f" (CUPTI range-profiler mode: {ranges} {CUPTI_RANGE_CATEGORY} events)"
            if ranges
            else ""
        )
        raise ArchsimError(
            where(
                kt.path,
                f"{int(launches.sum())} kernel launches / copies in runtime calls but no kernel, "
                f"memcpy or memset events{mode}: the GPU work was not recorded, so this trace "
                "cannot be simulated",
            )
        )


def drop_prewindow(gpu: pd.DataFrame, runtime: pd.DataFrame) -> tuple[pd.DataFrame, int]:
    """(GPU events without those queued before the profiling window opened, how many were dropped).

    CUPTI correlation ids grow monotonically with every launch of a process, so a GPU event whose
    correlation matches no runtime call and is below the first runtime call's correlation was
    launched before recording began: it ran inside the window (its queue drained there) but its
    launch is not in the file. Such events cannot be attributed to any cpu op or step.
    """
    rt_corr = runtime["correlation"].to_numpy()
    rt_corr = rt_corr[rt_corr >= 0]
    if not len(gpu) or not len(rt_corr):
        return gpu, 0
    corr = gpu["correlation"].to_numpy()
    early = (corr >= 0) & (corr < rt_corr.min()) & ~np.isin(corr, rt_corr)
    if not early.any():
        return gpu, 0
    return gpu[~early].reset_index(drop=True), int(early.sum())


def _shapes_recorded(cpu: pd.DataFrame) -> bool:
    return any(op_shapes(a)[0] is not None for a in cpu["args"])


def _gpu_ops(
    kt: KinetoTrace,
    gpu: pd.DataFrame,
    runtime: pd.DataFrame,
    cpu: pd.DataFrame,
    counts: dict[str, Any],
) -> pd.DataFrame:
    launch = link_to_runtime(gpu, runtime)
    unlinked = np.flatnonzero(launch < 0)
    # A trace with no runtime calls at all (GPU-only activity) has nothing to link to: its GPU events
    # are kept unlinked (counted). With runtime calls, many unlinked events mean a broken file.
    if len(runtime) and len(unlinked) > MAX_UNLINKED_FRACTION * len(gpu):
        first = gpu.iloc[unlinked[0]]
        raise ArchsimError(
            where(
                kt.path,
                f"{len(unlinked)} of {len(gpu)} GPU events have no launching runtime call "
                f"(more than {MAX_UNLINKED_FRACTION:.0%}); first: {first['cat']} "
                f"'{first['name'][:80]}' at ts {first['ts']} with correlation {first['correlation']}",
            )
        )
    ok = launch >= 0
    lp = np.where(ok, launch, len(runtime))  # unlinked -> the fill value appended below
    l_pid = np.append(runtime["pid"].to_numpy(), -1)[lp]
    l_tid = np.append(runtime["tid"].to_numpy(), -1)[lp]
    l_ts = np.append(runtime["ts"].to_numpy(dtype=np.float64), np.nan)[lp]
    l_dur = np.append(runtime["dur"].to_numpy(dtype=np.float64), np.nan)[lp]
    op_pos = np.full(len(gpu), -1, dtype=np.int64)
    if ok.any() and len(cpu):
        op_pos[ok] = innermost_containing(
            thread_key(l_pid[ok], l_tid[ok]),
            l_ts[ok],
            thread_key(cpu["pid"].to_numpy(), cpu["tid"].to_numpy()),
            cpu["ts"].to_numpy(),
            cpu["end"].to_numpy(),
        )
    # Phases and steps are found at the launch, or where none is recorded, at the start of the op
    # the GPU event's External id names (op_pos is filled in place for those).
    a_pid, a_tid, a_t, counts["linked_to_op_by_external_id"] = anchor_by_external_id(
        gpu, cpu, ok, op_pos, (l_pid, l_tid, l_ts), no_runtime=not len(runtime)
    )
    kind = gpu["cat"].map(_KIND_OF_CATEGORY).astype(str).to_numpy()
    launch_api = np.append(runtime["name"].to_numpy(dtype=object), "")[lp]
    fields = gpu_event_fields(kt, gpu)
    counts["devices_from_cpu_pid"] = device_of_cpu_pid(kt, fields, gpu, cpu, runtime)
    counts["grids_from_launch"] = launch_geometry(fields, runtime["args"].to_numpy(), launch)
    counts["grids_converted_from_work_items"] = grid_in_blocks(fields, launch_api)
    ops = pd.DataFrame(
        {
            "kind": kind,
            "name": gpu["name"].to_numpy(),
            "pid": gpu["pid"].to_numpy(),
            "tid": gpu["tid"].to_numpy(),
            "correlation": gpu["correlation"].to_numpy(),
            "start_us": gpu["ts"].to_numpy(),
            "dur_us": gpu["dur"].to_numpy(),
            "launch_start_us": l_ts,
            "launch_dur_us": l_dur,
        }
    )
    for col in fields.columns.drop("bytes"):
        ops[col] = fields[col].to_numpy()
    cpu_names = np.append(cpu["name"].to_numpy(dtype=object), "")  # position -1 -> ""
    ops["launch_op"] = cpu_names[op_pos]
    ops["launch_api"] = launch_api
    gpu_costs(ops, kind, op_pos, cpu, fields["bytes"].to_numpy(), runtime, launch)
    ops["_anchor_pid"], ops["_anchor_tid"], ops["_anchor_t"] = a_pid, a_tid, a_t
    is_kernel = kind == "kernel"
    linked_kernels = int(((op_pos >= 0) & is_kernel).sum())
    counts.update(
        n_kernels=int(is_kernel.sum()),
        n_memcpy=int((kind == "memcpy").sum()),
        n_memset=int((kind == "memset").sum()),
        unlinked_kernels=len(unlinked),
        kernels_linked_fraction=round(linked_kernels / max(int(is_kernel.sum()), 1), 6),
        gpu_events_without_cpu_op=int((op_pos < 0).sum()),
    )
    return ops


def _cpu_ops(cpu: pd.DataFrame, counts: dict[str, Any]) -> pd.DataFrame:
    """Compute cpu ops of a CPU-only trace (see module docstring for the rule)."""
    names = cpu["name"].astype(str)
    namespaced = names.str.contains("::", regex=False) & ~names.str.startswith(_NON_OP_NAMESPACES)
    collective = names.map(flops_mod.is_collective).astype(bool)
    namespaced |= collective  # gloo:all_reduce: one colon
    metadata = names.map(flops_mod.is_metadata_op).astype(bool)
    computed = namespaced & ~metadata
    compute = cpu[computed].reset_index(drop=True)
    costs_all = [
        flops_mod.op_cost(name, *op_shapes(args))
        for name, args in zip(compute["name"], compute["args"], strict=True)
    ]
    has_f = np.array([c.has_formula for c in costs_all], dtype=bool)
    # a collective is kept whole, like an op with a formula: gloo's all_gather copies its inputs
    # into the output list with aten ops of its own, which are part of the collective's time
    has_f |= collective[computed].to_numpy(dtype=bool)
    parent = ancestors_table(compute) if len(compute) else np.empty(0, dtype=np.int64)
    is_parent = np.zeros(len(compute), dtype=bool)
    is_parent[parent[parent >= 0]] = True
    # An op is covered when an enclosing compute op already has a formula (its time includes ours).
    covered = np.zeros(len(compute), dtype=bool)
    order = np.lexsort((-compute["end"].to_numpy(), compute["ts"].to_numpy()))
    for i in order:  # parents start no later than their children, so they are visited first
        p = parent[i]
        covered[i] = p >= 0 and (covered[p] or has_f[p])
    keep = ~covered & (has_f | ~is_parent)
    leaves = compute[keep].reset_index(drop=True)
    rows = []
    for cost, args in zip(
        (c for c, k in zip(costs_all, keep, strict=True) if k), leaves["args"], strict=True
    ):
        dims, types, _ = op_shapes(args)
        rows.append(
            (
                cost.op_class,
                cost.dtype,
                cost.flops,
                cost.bytes_read,
                cost.bytes_written,
                cost.has_formula,
                json.dumps(dims, separators=(",", ":")) if dims is not None else "",
                json.dumps(types, separators=(",", ":")) if types is not None else "",
            )
        )
    cost_cols = [
        "op_class",
        "dtype",
        "flops",
        "bytes_read",
        "bytes_written",
        "has_formula",
        "input_dims",
        "input_types",
    ]
    costs = pd.DataFrame.from_records(rows, columns=cost_cols)
    ops = pd.DataFrame(
        {
            "kind": "cpu",
            "name": leaves["name"].to_numpy(),
            "launch_op": leaves["name"].to_numpy(),
            "pid": leaves["pid"].to_numpy(),
            "tid": leaves["tid"].to_numpy(),
            "correlation": -1,
            "start_us": leaves["ts"].to_numpy(),
            "dur_us": leaves["dur"].to_numpy(),
            "device": -1,
            "stream": -1,
        }
    )
    for col in cost_cols:
        ops[col] = costs[col].to_numpy() if len(costs) else pd.Series([], dtype=object)
    ops["_anchor_pid"], ops["_anchor_tid"] = ops["pid"], ops["tid"]
    ops["_anchor_t"] = ops["start_us"].astype(np.float64)
    counts.update(
        n_cpu_ops=len(cpu),
        metadata_ops_left_out=int((namespaced & metadata).sum()),
        ops_inside_kept_ops=int((~keep).sum()),
    )
    return ops
