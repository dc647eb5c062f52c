"""Link GPU activity to the CPU code that caused it, and points in time to enclosing intervals.

Rules (checked on the real traces the test suite reads; see tests/test_ingest_fixtures.py): a kernel/memcpy/memset joins its launching runtime call
(``cudaLaunchKernel``, ``hipLaunchKernel``, ``cudaMemcpyAsync``...) by ``args.correlation``; the launch
then belongs to the innermost ``cpu_op`` on the same pid/tid whose interval contains the launch's
start. ``External id`` is NOT used (in 2023-era traces it equals the correlation on launches),
except as the correlation of a trace that records none (correlation_from_external_ids).

Interval containment is vectorised: per thread, ops nest, so a stack sweep gives each interval its
parent once; a query point then starts at the last interval that began at or before it
(``searchsorted``) and climbs parents until one still covers it. The climb is vectorised over all
queries, so its cost is (number of queries) x (nesting depth) numpy steps, not a Python loop per query.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def _parents(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """Parent index of each interval (sorted by start asc, end desc) within one group; -1 for roots."""
    parent = np.full(len(starts), -1, dtype=np.int64)
    stack: list[int] = []
    for i in range(len(starts)):
        s = starts[i]
        # An interval ending exactly where this one starts is a predecessor, not a parent
        # (µs timestamps often touch), unless both start at the same time (then it nests).
        while stack and (ends[stack[-1]] < s or (ends[stack[-1]] == s and starts[stack[-1]] < s)):
            stack.pop()
        if stack:
            parent[i] = stack[-1]
        stack.append(i)
    return parent


def _group_codes(keys_a: np.ndarray, keys_b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Map two arrays of (possibly tuple-encoded) keys onto shared dense integer codes."""
    both = np.concatenate([keys_a, keys_b])
    _, codes = np.unique(both, return_inverse=True)
    return codes[: len(keys_a)], codes[len(keys_a) :]


_THREAD_KEY = np.dtype([("pid", np.int64), ("tid", np.int64)])


def thread_key(pid: np.ndarray, tid: np.ndarray) -> np.ndarray:
    """One comparable, sortable key per (pid, tid). A structured pair rather than bits packed into
    one int64: Kineto pids/tids are not bounded by Linux's 2**22 (device pids, synthetic tids,
    64-bit thread handles), and a packed key would merge distinct threads."""
    pid = np.asarray(pid, dtype=np.int64)
    key = np.empty(len(pid), dtype=_THREAD_KEY)
    key["pid"], key["tid"] = pid, np.asarray(tid, dtype=np.int64)
    return key


def innermost_containing(
    query_key: np.ndarray,
    query_t: np.ndarray,
    iv_key: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
) -> np.ndarray:
    """Index (into the interval arrays) of the innermost interval with the same key containing each
    query time, or -1. Intervals of one key must nest (true for ops and annotations on one thread).
    """
    n_iv = len(iv_start)
    result = np.full(len(query_t), -1, dtype=np.int64)
    if n_iv == 0 or len(query_t) == 0:
        return result
    q_code, iv_code = _group_codes(np.asarray(query_key), np.asarray(iv_key))
    iv_start = np.asarray(iv_start, dtype=np.float64)
    iv_end = np.asarray(iv_end, dtype=np.float64)
    # Sort intervals by (key, start asc, end desc): the parent of an interval comes before it.
    order = np.lexsort((-iv_end, iv_start, iv_code))
    s_code, s_start, s_end = iv_code[order], iv_start[order], iv_end[order]
    parent = np.full(n_iv, -1, dtype=np.int64)
    bounds = np.flatnonzero(np.diff(s_code)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n_iv], strict=True):
        local = _parents(s_start[lo:hi], s_end[lo:hi])
        parent[lo:hi] = np.where(local >= 0, local + lo, -1)
    # Last interval (in sorted order) with key == q_key and start <= t.
    q_t = np.asarray(query_t, dtype=np.float64)
    pos = np.empty(len(q_t), dtype=np.int64)
    key_lo = np.searchsorted(s_code, q_code, side="left")
    key_hi = np.searchsorted(s_code, q_code, side="right")
    # Within each key block starts are sorted ascending, so search per key block.
    for code in np.unique(q_code):
        sel = q_code == code
        lo, hi = key_lo[sel][0], key_hi[sel][0]
        pos[sel] = lo + np.searchsorted(s_start[lo:hi], q_t[sel], side="right") - 1
        pos[sel] = np.where(pos[sel] >= lo, pos[sel], -1)
    cand = pos
    active = cand >= 0
    while True:
        bad = active & (s_end[np.maximum(cand, 0)] < q_t)
        if not bad.any():
            break
        cand = np.where(bad, parent[np.maximum(cand, 0)], cand)
        active = cand >= 0
    result = np.where(active, order[np.maximum(cand, 0)], -1)
    return result


def latest_containing(
    query_key: np.ndarray,
    query_t: np.ndarray,
    iv_key: np.ndarray,
    iv_start: np.ndarray,
    iv_end: np.ndarray,
    chunk: int = 2048,
) -> np.ndarray:
    """Index of the interval with the same key that contains each query time and started last, or -1.

    For intervals that may overlap without nesting (annotations of several threads of one process).
    Works in chunks of queries so the comparison matrix stays small.
    """
    result = np.full(len(query_t), -1, dtype=np.int64)
    if len(iv_start) == 0 or len(query_t) == 0:
        return result
    query_key, query_t = np.asarray(query_key), np.asarray(query_t, dtype=np.float64)
    iv_key = np.asarray(iv_key)
    iv_start, iv_end = np.asarray(iv_start, np.float64), np.asarray(iv_end, np.float64)
    for key in np.unique(query_key):
        q_idx = np.flatnonzero(query_key == key)
        iv_idx = np.flatnonzero(iv_key == key)
        if len(iv_idx) == 0:
            continue
        st, en = iv_start[iv_idx], iv_end[iv_idx]
        for lo in range(0, len(q_idx), chunk):
            qi = q_idx[lo : lo + chunk]
            t = query_t[qi][:, None]
            inside = (st[None, :] <= t) & (t <= en[None, :])
            score = np.where(inside, st[None, :], -np.inf)
            best = score.argmax(axis=1)
            found = inside[np.arange(len(qi)), best]
            result[qi] = np.where(found, iv_idx[best], -1)
    return result


def correlation_from_external_ids(
    gpu: pd.DataFrame, runtime: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, int]:
    """(gpu, runtime, GPU events given a correlation here). Only for a trace in which no GPU event
    and no runtime call records ``correlation`` at all: some ROCm traces (AMD-AGI/TraceLens
    evals/unit_tests/gemm/*.json) give a kernel and its ``hipExtModuleLaunchKernel`` only a shared
    ``External id``, which their ac2g flow repeats. The k-th GPU event of an External id (in time
    order) pairs with the k-th launch or copy call of that id, so an id shared by every launch of
    one cpu op still pairs each kernel with its own launch. Traces with correlations keep them."""
    if (gpu["correlation"] >= 0).any() or (runtime["correlation"] >= 0).any():
        return gpu, runtime, 0
    launch = runtime["name"].astype(str).str.contains(r"Launch|Memcpy|Memset").to_numpy()
    rt_ext = np.where(launch & (runtime["external_id"].to_numpy() >= 0), runtime["external_id"], -1)
    gpu_ext = gpu["external_id"].to_numpy()
    if not len(gpu) or not (rt_ext >= 0).any():
        return gpu, runtime, 0

    def ranks(ext: np.ndarray, ts: pd.Series) -> np.ndarray:
        order = pd.DataFrame({"ext": ext, "ts": ts.to_numpy()}).sort_values("ts", kind="stable")
        return order.groupby("ext").cumcount().reindex(range(len(ext))).to_numpy()

    ext = np.concatenate([rt_ext, gpu_ext])
    rank = np.concatenate([ranks(rt_ext, runtime["ts"]), ranks(gpu_ext, gpu["ts"])])
    key, _ = pd.factorize(pd.MultiIndex.from_arrays([ext, rank]))  # one id per (External id, k)
    key = np.where(ext >= 0, key, -1)
    gpu, runtime = gpu.copy(), runtime.copy()
    runtime["correlation"] = key[: len(runtime)]
    gpu["correlation"] = key[len(runtime) :]
    linked = np.isin(gpu["correlation"].to_numpy(), runtime["correlation"].to_numpy()[rt_ext >= 0])
    return gpu, runtime, int((linked & (gpu_ext >= 0)).sum())


def ops_by_external_id(gpu: pd.DataFrame, cpu: pd.DataFrame, unlinked: np.ndarray) -> np.ndarray:
    """Row position in ``cpu`` of the op whose ``External id`` an unlinked GPU event carries, or -1.

    Kineto copies the launching op's External id onto its kernels, so in a trace that records no
    runtime calls at all (a hand-trimmed trace: pytorch/pytorch test/inductor/test_analysis.py's
    H100 example profile keeps the cpu ops and kernels only) a kernel still names its op. Where
    runtime calls are recorded the launch decides (some traces' kernels carry the correlation as
    their External id, which may be another op's id), so callers pass only the GPU events of a
    trace without them. Only an id that one cpu op holds, and only an op that began before the
    GPU event (work cannot start before the op that queued it)."""
    out = np.full(len(gpu), -1, dtype=np.int64)
    ext = gpu["external_id"].to_numpy()
    cpu_ext = cpu["external_id"].to_numpy()
    if not unlinked.any() or not len(cpu) or not (cpu_ext >= 0).any():
        return out
    ids, counts = np.unique(cpu_ext[cpu_ext >= 0], return_counts=True)
    unique = ids[counts == 1]
    held = np.isin(cpu_ext, unique)  # the cpu ops whose id no other op holds
    lookup = pd.Series(np.flatnonzero(held), index=cpu_ext[held])
    want = np.flatnonzero(unlinked & (ext >= 0) & np.isin(ext, unique))
    if not len(want):
        return out
    pos = lookup.reindex(ext[want]).to_numpy(dtype=np.int64)
    began = cpu["ts"].to_numpy(dtype=np.float64)[pos] <= gpu["ts"].to_numpy(dtype=np.float64)[want]
    out[want[began]] = pos[began]
    return out


def anchor_by_external_id(
    gpu: pd.DataFrame,
    cpu: pd.DataFrame,
    launched: np.ndarray,
    op_pos: np.ndarray,
    launch_at: tuple[np.ndarray, np.ndarray, np.ndarray],
    no_runtime: bool,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """(pid, tid, time) each GPU event is placed at for phases and steps, and how many events
    were linked by External id: the launch's where one is recorded (``launched``), else, in a
    trace with no runtime calls (``no_runtime``), the start of the op ops_by_external_id finds,
    whose position is written into ``op_pos``."""
    pid, tid, t = (a.copy() for a in launch_at)
    by_ext = ops_by_external_id(gpu, cpu, ~launched & no_runtime)
    named = by_ext >= 0
    if named.any():
        op_pos[named] = by_ext[named]
        pid[named] = cpu["pid"].to_numpy()[by_ext[named]]
        tid[named] = cpu["tid"].to_numpy()[by_ext[named]]
        t[named] = cpu["ts"].to_numpy(dtype=np.float64)[by_ext[named]]
    return pid, tid, t, int(named.sum())


def link_to_runtime(gpu: pd.DataFrame, runtime: pd.DataFrame) -> np.ndarray:
    """Row position in ``runtime`` of each GPU event's launch (same correlation), or -1."""
    rt = runtime[runtime["correlation"] >= 0]
    rt_pos = pd.Series(np.arange(len(runtime)), index=runtime.index)[rt.index]
    lookup = pd.Series(rt_pos.to_numpy(), index=rt["correlation"].to_numpy())
    lookup = lookup[~lookup.index.duplicated(keep="first")]
    corr = gpu["correlation"].to_numpy()
    found = lookup.reindex(corr)
    return np.where(corr >= 0, found.fillna(-1).to_numpy(), -1).astype(np.int64)


def ancestors_table(ops: pd.DataFrame) -> np.ndarray:
    """Parent row position of each cpu op (innermost op on the same thread containing its start and
    starting before it, or -1). Used to climb from a launching op to the op that has a FLOP formula.
    """
    n = len(ops)
    _, key = np.unique(
        thread_key(ops["pid"].to_numpy(), ops["tid"].to_numpy()), return_inverse=True
    )
    start, end = ops["ts"].to_numpy(), ops["end"].to_numpy()
    order = np.lexsort((-end, start, key))
    parent_sorted = np.full(n, -1, dtype=np.int64)
    s_key = key[order]
    bounds = np.flatnonzero(np.diff(s_key)) + 1
    for lo, hi in zip(np.r_[0, bounds], np.r_[bounds, n], strict=True):
        local = _parents(start[order][lo:hi], end[order][lo:hi])
        parent_sorted[lo:hi] = np.where(local >= 0, local + lo, -1)
    parent = np.full(n, -1, dtype=np.int64)
    parent[order] = np.where(parent_sorted >= 0, order[np.maximum(parent_sorted, 0)], -1)
    return parent
