"""Steps of an unannotated trace (a plain torch.profiler trace: no ``archsim::`` markers), inferred
from what torch itself records. Each rule used is returned as one line for ``trace info``.

Learner steps, per process, by the first rule that applies:

1. ``Optimizer.step#...`` annotations (torch.optim records one per ``step()``; the outermost one when
   wrappers nest them) end learner steps. A step starts at its training forward: the grad-mode ops
   (those with an autograd ``Sequence number``) on the optimizer's thread since the previous
   optimizer step whose sequence numbers the backward pass later consumes (the forward/backward
   pairs; a forward under ``no_grad`` records no sequence number), or at ``Optimizer.zero_grad`` or
   the first backward op when that comes first.
2. ``ProfilerStep#N`` windows that hold a backward pass (``autograd::engine::evaluate_function``).
3. Backward passes alone: runs of backward ops with no grad-mode forward op between them.

Phases inside a learner step: ``train_forward`` (first to last paired forward op),
``train_backward`` (first to last backward op, on the autograd thread), ``optimizer_step``.

Actor steps, where the trace shows them: gymnasium ``step`` calls (Python function events, recorded
only with ``with_stack=True``) are ``env_step``, with the no-grad forward just before each as ``act``;
otherwise ``ProfilerStep#N`` windows that hold a no-grad forward pass (a linear/conv/matmul op
without a sequence number) outside every learner step are actor steps, up to the start of a learner
step in the same window: ``act`` is that forward, and ``env_step`` the rest of the window (the
profiler records no event for a Python environment).
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pandas as pd

OPTIMIZER_STEP = "Optimizer.step#"
ZERO_GRAD = "Optimizer.zero_grad#"
BACKWARD_OP = "autograd::engine::evaluate_function"
PROFILER_STEP = re.compile(r"^ProfilerStep#\d+$")
# Kineto names Python function events "<file>(<line>): <function>".
ENV_STEP_FUNCTION = re.compile(r"(?:^|[/\\])(?:gymnasium|gym)[/\\][^()]*\(\d+\): step$")
# Forward-pass compute ops of a policy network (an acting forward is one of these without an
# autograd sequence number, i.e. run under no_grad / inference_mode).
FORWARD_OPS = frozenset(
    (
        "aten::linear",
        "aten::addmm",
        "aten::matmul",
        "aten::mm",
        "aten::bmm",
        "aten::conv1d",
        "aten::conv2d",
        "aten::conv3d",
        "aten::lstm",
        "aten::gru",
        "aten::scaled_dot_product_attention",
    )
)
_STEP_COLS = ["role", "actor", "batch_size", "pid", "tid", "start_us", "dur_us", "end"]
_PHASE_COLS = ["phase", "pid", "tid", "ts", "end"]


def _outermost(frame: pd.DataFrame) -> pd.DataFrame:
    """Rows not contained in an earlier row of the same thread (nested wrappers record twice)."""
    keep, last_end = [], {}
    frame = frame.sort_values("ts", kind="stable")
    for i, (pid, tid, ts, end) in enumerate(
        zip(frame["pid"], frame["tid"], frame["ts"], frame["end"], strict=True)
    ):
        if ts < last_end.get((pid, tid), -np.inf):
            continue
        keep.append(i)
        last_end[(pid, tid)] = end
    return frame.iloc[keep]


def backward_ops(names: pd.Series, fwd_thread: np.ndarray) -> np.ndarray:
    """Mask of autograd's backward ops: ``autograd::engine::evaluate_function: X`` (today's torch
    wraps every node in it), else the node itself, which 2021 traces record bare (``MseLossBackward``,
    ``torch::autograd::AccumulateGrad``) with its forward's thread as 'Fwd thread id' >= 1 where
    forward ops record 0 (pytorch/kineto tb_plugin/test/gpu_metrics_input.json of May 2021, and
    the tb_plugin ResNet-50 sample of June 2021, fixture v100_resnet50_train_2021)."""
    names = names.astype(str)
    return (
        names.str.startswith(BACKWARD_OP).to_numpy()
        | (np.asarray(fwd_thread) >= 1)
        | (names == "torch::autograd::AccumulateGrad").to_numpy()
    )


def _sequence_numbers(cpu: pd.DataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(autograd sequence number of each cpu op or -1, its 'Fwd thread id' or -1)."""
    # read while streaming (archsim.trace.kineto: -1 when absent or not a non-negative int64)
    seq = cpu["seq"].to_numpy(dtype=np.int64)
    fwd = cpu["fwd_tid"].to_numpy(dtype=np.int64)
    return seq, fwd


def infer_steps(
    annotations: pd.DataFrame, cpu: pd.DataFrame
) -> tuple[pd.DataFrame, pd.DataFrame, list[str]]:
    """(step rows, phase intervals, one line per rule used) of a trace without archsim markers.

    Step rows have the columns of archsim.trace.steps step rows (role, actor, batch_size, pid, tid,
    start_us, dur_us, end); phase intervals (phase, pid, tid, ts, end).
    """
    names = cpu["name"].astype(str)
    seq, fwd_thread = _sequence_numbers(cpu)
    is_bw = backward_ops(names, fwd_thread)
    grad_fwd = (seq >= 0) & ~is_bw & (fwd_thread <= 0) & ~names.str.startswith("autograd::")
    acting = names.isin(FORWARD_OPS).to_numpy() & (seq < 0)
    ops = cpu.assign(seq=seq, is_bw=is_bw, grad_fwd=grad_fwd.to_numpy(), acting=acting)
    ann_names = annotations["name"].astype(str)
    windows = annotations[ann_names.str.match(PROFILER_STEP)]
    steps: list[dict[str, Any]] = []
    phases: list[dict[str, Any]] = []
    rules: set[str] = set()
    for pid in sorted(set(ops.loc[ops["is_bw"], "pid"]) | set(annotations["pid"])):
        proc = ops[ops["pid"] == pid]
        mine = annotations[annotations["pid"] == pid]
        optim = _outermost(mine[mine["name"].astype(str).str.startswith(OPTIMIZER_STEP)])
        zero = mine[mine["name"].astype(str).str.startswith(ZERO_GRAD)]
        bw = proc[proc["is_bw"]]
        win = windows[windows["pid"] == pid]
        if len(optim):
            rules.add(
                f"learner steps: one per outermost '{OPTIMIZER_STEP}...' annotation, from its "
                "training forward (grad-mode ops paired with the backward by sequence number)"
            )
            ends = list(zip(optim["tid"], optim["ts"], optim["end"], strict=True))
            _learner_steps(pid, ends, proc, bw, zero, win, steps, phases, optimizer=True)
            continue
        holding = [w for w in win.itertuples() if ((bw["ts"] >= w.ts) & (bw["ts"] < w.end)).any()]
        if holding:
            rules.add(
                "learner steps: ProfilerStep#N windows that hold a backward pass "
                f"('{BACKWARD_OP}' ops)"
            )
            for w in holding:
                inside = bw[(bw["ts"] >= w.ts) & (bw["ts"] < w.end)]
                steps.append(_row("learner", pid, w.tid, w.ts, w.end))
                _phase(phases, "train_backward", inside)
                fwd = proc[
                    proc["grad_fwd"] & (proc["ts"] >= w.ts) & (proc["ts"] < inside["ts"].min())
                ]
                fwd = _paired_forward(proc, fwd, inside)
                _phase(phases, "train_forward", fwd)
            continue
        if len(bw):
            rules.add(
                "learner steps: one per backward pass (runs of "
                f"'{BACKWARD_OP}' ops with no grad-mode forward op between them)"
            )
            ends = _backward_passes(proc, bw)
            _learner_steps(pid, ends, proc, bw, zero, win, steps, phases, optimizer=False)
    learner = pd.DataFrame(steps, columns=_STEP_COLS)
    actors = _actor_steps(annotations, ops, windows, learner, phases, rules)
    if len(learner) and not actors:
        rules.add(
            "no actor steps: no gymnasium 'step' calls (profile with with_stack=True) and no "
            "ProfilerStep#N window with a no-grad forward outside training, so simulate has no "
            "env_step times"
        )
    if not len(learner):
        rules.add(
            f"no learner steps: no '{OPTIMIZER_STEP}...' annotation and no backward pass "
            f"('{BACKWARD_OP}' ops)"
        )
    steps += actors
    frame = pd.DataFrame(steps, columns=_STEP_COLS)
    return frame, pd.DataFrame(phases, columns=_PHASE_COLS), sorted(rules)


def _row(role: str, pid: int, tid: int, start: float, end: float) -> dict[str, Any]:
    return {
        "role": role,
        "actor": 0 if role == "actor" else -1,
        "batch_size": 1,
        "pid": int(pid),
        "tid": int(tid),
        "start_us": float(start),
        "dur_us": float(end - start),
        "end": float(end),
    }


def _phase(phases: list[dict[str, Any]], phase: str, ops: pd.DataFrame) -> None:
    """One interval from the first op's start to the last op's end (on the first op's thread)."""
    if len(ops):
        first = ops.loc[ops["ts"].idxmin()]
        phases.append(
            {
                "phase": phase,
                "pid": int(first["pid"]),
                "tid": int(first["tid"]),
                "ts": float(first["ts"]),
                "end": float(ops["end"].max()),
            }
        )


def _backward_passes(proc: pd.DataFrame, bw: pd.DataFrame) -> list[tuple[int, float, float]]:
    """(thread, start, end) of each backward pass: a new pass begins at a backward op when a
    grad-mode forward op started since the previous backward op."""
    fwd_ts = np.sort(proc.loc[proc["grad_fwd"], "ts"].to_numpy())
    bw = bw.sort_values("ts")
    passes: list[list[float]] = []
    prev_ts = -np.inf
    for ts, end, tid in zip(bw["ts"], bw["end"], bw["tid"], strict=True):
        forward_between = np.searchsorted(fwd_ts, ts) > np.searchsorted(fwd_ts, prev_ts, "right")
        if not passes or forward_between:
            passes.append([tid, ts, end])
        passes[-1][2] = max(passes[-1][2], end)
        prev_ts = ts
    return [(int(t), float(s), float(e)) for t, s, e in passes]


def _paired_forward(proc: pd.DataFrame, fwd: pd.DataFrame, bw: pd.DataFrame) -> pd.DataFrame:
    """The training forward among grad-mode ops ``fwd`` before backward ops ``bw``: those whose
    sequence number the backward consumes, after the last no-grad forward op (acting). Ops record
    the autograd counter's next value, so an unrelated grad-mode op (e.g. torch.as_tensor of an
    observation) can share a forward op's number; the acting forward bounds the search."""
    if (bw["seq"] >= 0).any():
        fwd = fwd[fwd["seq"].isin(set(bw["seq"]))]
    if len(fwd):
        first_bw = bw["ts"].min() if len(bw) else np.inf
        acting = proc["acting"] & (proc["ts"] >= fwd["ts"].min()) & (proc["ts"] < first_bw)
        if acting.any():
            fwd = fwd[fwd["ts"] > proc.loc[acting, "ts"].max()]
    return fwd


def _learner_steps(
    pid: int,
    ends: list[tuple[int, float, float]],
    proc: pd.DataFrame,
    bw: pd.DataFrame,
    zero: pd.DataFrame,
    windows: pd.DataFrame,
    steps: list[dict[str, Any]],
    phases: list[dict[str, Any]],
    optimizer: bool,
) -> None:
    """Learner steps ending at each (thread, start, end) anchor: an optimizer step (the backward
    before it is part of the step) or a backward pass (which is the step's end). A step does not
    start before the ProfilerStep window (one iteration of the program's loop) holding its anchor."""
    prev_end = -np.inf
    w_ts, w_end = windows["ts"].to_numpy(float), windows["end"].to_numpy(float)
    for tid, a_ts, a_end in sorted(ends, key=lambda e: e[1]):
        holding = w_ts[(w_ts <= a_ts) & (a_ts < w_end)]
        if len(holding):
            prev_end = max(prev_end, float(holding.max()))
        limit = a_ts if optimizer else a_end
        inside = bw[(bw["ts"] >= prev_end) & (bw["ts"] < limit)]
        first_bw = inside["ts"].min() if len(inside) else a_ts
        fwd = proc[
            proc["grad_fwd"]
            & (proc["tid"] == (inside["tid"].iloc[0] if not optimizer and len(inside) else tid))
            & (proc["ts"] >= prev_end)
            & (proc["ts"] < first_bw)
        ]
        fwd = _paired_forward(proc, fwd, inside)
        zg = zero[(zero["ts"] >= prev_end) & (zero["ts"] < a_ts) & (zero["tid"] == tid)]
        start = min([a_ts, first_bw, *fwd["ts"].nsmallest(1), *zg["ts"].nsmallest(1)])
        steps.append(_row("learner", pid, tid, start, a_end))
        _phase(phases, "train_forward", fwd)
        _phase(phases, "train_backward", inside)
        if optimizer:
            phases.append(
                {"phase": "optimizer_step", "pid": pid, "tid": tid, "ts": a_ts, "end": a_end}
            )
        prev_end = a_end


def _inside_any(ts: np.ndarray, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    if not len(starts):
        return np.zeros(len(ts), dtype=bool)
    order = np.argsort(starts)
    starts, ends = starts[order], np.maximum.accumulate(ends[order])
    pos = np.searchsorted(starts, ts, "right") - 1
    return (pos >= 0) & (ts < ends[np.maximum(pos, 0)])


def _actor_steps(
    annotations: pd.DataFrame,
    ops: pd.DataFrame,
    windows: pd.DataFrame,
    learner: pd.DataFrame,
    phases: list[dict[str, Any]],
    rules: set[str],
) -> list[dict[str, Any]]:
    l_start, l_end = learner["start_us"].to_numpy(float), learner["end"].to_numpy(float)
    acting = ops[ops["acting"]]
    acting = acting[~_inside_any(acting["ts"].to_numpy(float), l_start, l_end)]
    envs = annotations[annotations["name"].astype(str).str.contains(ENV_STEP_FUNCTION)]
    rows: list[dict[str, Any]] = []
    if len(envs):
        rules.add(
            "actor steps: gymnasium 'step' calls (Python function events) as env_step, the "
            "no-grad forward just before each as act"
        )
        prev = {}
        for env in _outermost(envs).itertuples():
            key = (env.pid, env.tid)
            mine = acting[
                (acting["pid"] == env.pid)
                & (acting["tid"] == env.tid)
                & (acting["ts"] >= prev.get(key, -np.inf))
                & (acting["ts"] < env.ts)
            ]
            start = float(mine["ts"].min()) if len(mine) else env.ts
            rows.append(_row("actor", env.pid, env.tid, start, env.end))
            _phase(phases, "act", mine)
            phases.append(
                {"phase": "env_step", "pid": env.pid, "tid": env.tid, "ts": env.ts, "end": env.end}
            )
            prev[key] = env.end
        return rows
    for w in windows.itertuples():
        mine = acting[(acting["pid"] == w.pid) & (acting["ts"] >= w.ts) & (acting["ts"] < w.end)]
        if not len(mine):
            continue
        later = l_start[(learner["pid"].to_numpy() == w.pid) & (l_start > w.ts) & (l_start < w.end)]
        end = float(later.min()) if len(later) else float(w.end)
        mine = mine[mine["ts"] < end]
        if not len(mine):
            continue
        rows.append(_row("actor", w.pid, mine["tid"].iloc[0], w.ts, end))
        _phase(phases, "act", mine)
    if rows:
        rules.add(
            "actor steps: ProfilerStep#N windows holding a no-grad forward pass outside "
            "learner steps; act = that forward, env_step = the rest of the window up to "
            "the learner step (no event records a Python environment)"
        )
    return rows


def residual_env_step(table: pd.DataFrame) -> pd.DataFrame:
    """Inferred actor steps without an env_step interval: env_step_us = the step's time outside
    its other phases (see the module docstring)."""
    actor = (table["role"] == "actor") & table["env_step_us"].isna()
    if actor.any():
        other = [
            c
            for c in table.columns
            if c.endswith("_us")
            and c not in ("start_us", "dur_us")
            and not c.endswith("_cpu_us")
            and c != "env_step_us"
        ]
        used = table.loc[actor, other].fillna(0.0).sum(axis=1)
        table.loc[actor, "env_step_us"] = (table.loc[actor, "dur_us"] - used).clip(lower=0.0)
    return table
