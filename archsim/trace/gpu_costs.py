"""FLOPs, bytes and op class of GPU kernels, memcpys and memsets, from the cpu ops that launched them.

A kernel's cost comes from the nearest op, the launching op or one of its ancestors on the same
thread, that has a formula and recorded shapes (archsim.trace.flops); when that op launched several
kernels, its FLOPs and bytes are shared among them in proportion to their measured durations, so the
sum over kernels equals the op's total. For GEMM/conv ops only the kernels that do the math share it
(flops.MAIN_KERNEL_CLASSES). Memcpy/memset bytes are the measured ``bytes`` arg (ROCm: the runtime
call's ``size``).
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pandas as pd

from archsim.trace import flops as flops_mod
from archsim.trace.kineto import op_shapes
from archsim.trace.link import ancestors_table

_LEGACY_CONV_BACKWARD = "::cudnn_convolution_backward"
# Autograd nodes of convolutions (CudnnConvolutionBackward, ConvolutionBackward0, ...).
_CONV_NODE = r"^(?:autograd::engine::evaluate_function: )?\w*Conv\w*Backward\d*$"


def conv_output_hints(cpu: pd.DataFrame) -> dict[tuple[int, int], tuple[int, ...]]:
    """(pid, Sequence number) -> output shape of the forward convolution with that sequence number,
    read from its autograd node's recorded grad_output (``CudnnConvolutionBackward`` and kin: the
    node's first Input Dims entry). 2021-era traces record no stride, so this is the only place
    the output size of their convolutions is written down; autograd gives a forward op and its
    backward node the same sequence number (torch.autograd.profiler docs, "Sequence number")."""
    hints: dict[tuple[int, int], tuple[int, ...]] = {}
    names = cpu["name"].to_numpy(dtype=object)
    for i in np.flatnonzero(pd.Series(names).str.contains(_CONV_NODE, regex=True).to_numpy()):
        seq, dims = int(cpu["seq"].iat[i]), op_shapes(cpu["args"].iat[i])[0]
        if seq < 0 or not isinstance(dims, list) or not dims:
            continue
        first = dims[0]
        if isinstance(first, list) and len(first) >= 3 and all(isinstance(d, int) for d in first):
            hints[(int(cpu["pid"].iat[i]), seq)] = tuple(first)
    return hints


def _legacy_output_mask(p: int, parent: np.ndarray, names: np.ndarray) -> list[str] | None:
    """Concrete Inputs for a 2021-era ``cudnn_convolution_backward`` (which records no output_mask):
    the gradients it computed are the ``..._backward_input`` / ``..._backward_weight`` ops it called
    (the network's first convolution computes no grad_input). None when neither child is there."""
    children = [str(n) for n in names[np.flatnonzero(parent == p)]]
    grad_input = any(c.endswith("_backward_input") for c in children)
    grad_weight = any(c.endswith("_backward_weight") for c in children)
    if not (grad_input or grad_weight):
        return None
    return [""] * 10 + [str([grad_input, grad_weight])]


def _formula_op(
    pos: int,
    parent: np.ndarray,
    names: np.ndarray,
    args: np.ndarray,
    cache: dict[int, Any],
    hints: dict[tuple[int, int], tuple[int, ...]] | None = None,
    pids: np.ndarray | None = None,
    seqs: np.ndarray | None = None,
    same: dict[tuple, Any] | None = None,
) -> int:
    """Nearest op at or above ``pos`` on its thread with a formula and recorded shapes, or -1.

    ``same``: costs by (name, args dict, output hint, Concrete Inputs): ops that repeat every
    iteration share one args dict (archsim.trace.kineto), so each distinct op is costed once."""
    p = pos
    while p >= 0:
        if p not in cache:
            dims, types, concrete = op_shapes(args[p])
            out = None
            if hints and pids is not None and seqs is not None:
                out = hints.get((int(pids[p]), int(seqs[p])))
            if concrete is None and names[p].endswith(_LEGACY_CONV_BACKWARD):
                concrete = _legacy_output_mask(p, parent, names)
            key = (names[p], id(args[p]), out, repr(concrete))
            if same is not None and key in same:
                cost = same[key]
            else:
                cost = (
                    flops_mod.op_cost(names[p], dims, types, concrete, out)
                    if dims is not None
                    else None
                )
                if same is not None:
                    same[key] = cost
            cache[p] = cost
        cost = cache[p]
        if cost is not None and cost.has_formula:
            return p
        p = int(parent[p])
    return -1


def gpu_costs(
    ops: pd.DataFrame,
    kind: np.ndarray,
    op_pos: np.ndarray,
    cpu: pd.DataFrame,
    measured_bytes: np.ndarray,
    runtime: pd.DataFrame,
    launch: np.ndarray,
) -> None:
    """Fill op_class, dtype, flops, bytes, has_formula, input_dims/types of GPU ops in place."""
    n = len(ops)
    parent = ancestors_table(cpu) if len(cpu) else np.empty(0, dtype=np.int64)
    cache: dict[int, Any] = {}
    cpu_names = cpu["name"].to_numpy(dtype=object)
    cpu_args = cpu["args"].to_numpy()
    formula_pos = np.full(n, -1, dtype=np.int64)
    kernel_rows = np.flatnonzero((op_pos >= 0) & (kind == "kernel"))
    hints = conv_output_hints(cpu) if len(cpu) else {}
    cpu_pids = cpu["pid"].to_numpy()
    cpu_seqs = cpu["seq"].to_numpy()
    same: dict[tuple, Any] = {}  # the args dicts stay alive in cpu, so their ids are stable
    by_launch_op = {
        p: _formula_op(p, parent, cpu_names, cpu_args, cache, hints, cpu_pids, cpu_seqs, same)
        for p in np.unique(op_pos[kernel_rows]).tolist()
    }
    # An ancestor's formula may stand in for a launching op without one only if no op below that
    # ancestor is costed on its own: otherwise its FLOPs would be counted twice.
    has_costed_child: set[int] = set()
    for p, f in by_launch_op.items():
        if f == p:
            q = int(parent[p])
            while q >= 0 and q not in has_costed_child:
                has_costed_child.add(q)
                q = int(parent[q])
    for p, f in by_launch_op.items():
        if f >= 0 and f != p and f in has_costed_child:
            by_launch_op[p] = -1
    for i in kernel_rows:
        formula_pos[i] = by_launch_op[int(op_pos[i])]
    flops = np.zeros(n)
    read = np.zeros(n)
    written = np.zeros(n)
    has = np.zeros(n, dtype=bool)
    dtype = np.full(n, "", dtype=object)
    klass = np.full(n, "other", dtype=object)
    # Share each formula op's cost among its kernels by measured duration. For GEMM/conv ops only the
    # kernels that do the math share it (flops.MAIN_KERNEL_CLASSES); helper kernels get none.
    dur = ops["dur_us"].to_numpy()
    names = ops["name"].to_numpy(dtype=object)
    name_class = np.array([flops_mod.kernel_class(n) for n in names], dtype=object)
    sharing = formula_pos >= 0
    op_class_of = {p: cache[p].op_class for p in set(formula_pos[sharing].tolist())}
    main = np.zeros(n, dtype=bool)
    for i in np.flatnonzero(sharing):
        allowed = flops_mod.MAIN_KERNEL_CLASSES.get(op_class_of[int(formula_pos[i])])
        main[i] = allowed is None or name_class[i] in allowed
    groups_with_main = set(formula_pos[main].tolist())
    for i in np.flatnonzero(sharing & ~main):
        if int(formula_pos[i]) in groups_with_main:
            sharing[i] = False  # a helper kernel of an op whose main kernel is present
    with_formula = np.flatnonzero(sharing)
    if len(with_formula):
        groups = pd.Series(dur[with_formula]).groupby(formula_pos[with_formula])
        total = groups.transform("sum").to_numpy()
        count = groups.transform("size").to_numpy()
        share = np.where(total > 0, dur[with_formula] / np.where(total > 0, total, 1), 1 / count)
        for j, i in enumerate(with_formula):
            cost = cache[int(formula_pos[i])]
            flops[i] = cost.flops * share[j]
            read[i] = cost.bytes_read * share[j]
            written[i] = cost.bytes_written * share[j]
            has[i] = True
            dtype[i] = cost.dtype
            klass[i] = cost.op_class
    for i in np.flatnonzero((formula_pos >= 0) & ~sharing):
        klass[i] = (
            name_class[i] if name_class[i] != "other" else cache[int(formula_pos[i])].op_class
        )
        dtype[i] = cache[int(formula_pos[i])].dtype
    no_formula = np.flatnonzero((kind == "kernel") & (formula_pos < 0))
    for i in no_formula:
        k = flops_mod.op_class(cpu_names[op_pos[i]]) if op_pos[i] >= 0 else "other"
        klass[i] = k if k != "other" else name_class[i]
    # No formula: bytes read from the launching op's recorded tensors (when recorded), shared by
    # duration among that op's kernels; FLOPs stay 0.
    sized = [i for i in no_formula if op_pos[i] >= 0 and cache.get(int(op_pos[i])) is not None]
    if sized:
        sized = np.asarray(sized)
        groups = pd.Series(dur[sized]).groupby(op_pos[sized])
        total = groups.transform("sum").to_numpy()
        count = groups.transform("size").to_numpy()
        share = np.where(total > 0, dur[sized] / np.where(total > 0, total, 1), 1 / count)
        for j, i in enumerate(sized):
            cost = cache[int(op_pos[i])]
            read[i] = cost.bytes_read * share[j]
            dtype[i] = cost.dtype
    # Memcpy / memset: measured bytes (CUDA "bytes"; ROCm: the runtime call's "size").
    rt_args = runtime["args"].to_numpy()
    for i in np.flatnonzero(kind != "kernel"):
        nbytes = measured_bytes[i]
        if np.isnan(nbytes) and launch[i] >= 0:
            size = rt_args[launch[i]].get("size")
            try:
                nbytes = float(size)
            except (TypeError, ValueError):
                nbytes = np.nan
        klass[i] = kind[i]
        if not np.isnan(nbytes):
            has[i] = True
            written[i] = nbytes
            read[i] = nbytes if kind[i] == "memcpy" else 0.0
    # The launching op's recorded shapes (schema: input_dims/input_types of launch_op).
    dims_json = np.full(n, "", dtype=object)
    types_json = np.full(n, "", dtype=object)
    memo: dict[int, tuple[str, str]] = {}
    for i in np.flatnonzero(op_pos >= 0):
        p = int(op_pos[i])
        if p not in memo:
            d, ty, _ = op_shapes(cpu_args[p])
            memo[p] = (
                json.dumps(d, separators=(",", ":")) if d is not None else "",
                json.dumps(ty, separators=(",", ":")) if ty is not None else "",
            )
        dims_json[i], types_json[i] = memo[p]
    ops["op_class"], ops["dtype"], ops["flops"] = klass, dtype, flops
    ops["bytes_read"], ops["bytes_written"], ops["has_formula"] = read, written, has
    ops["input_dims"], ops["input_types"] = dims_json, types_json
