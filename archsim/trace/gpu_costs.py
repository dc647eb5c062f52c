"""FLOPs, bytes and op class of GPU kernels, memcpys and memsets, from the cpu ops that launched them.

A kernel's cost comes from the nearest op, the launching op or one of its ancestors on the same
thread, that has a formula and recorded shapes (archsim.trace.flops). When that op launched several
kernels its FLOPs and bytes are split among them by the model alone, never by their measured
durations: a duration-weighted split would hand a kernel that ran long more work, and a model-only
prediction (``predict --model-only``) would then read the measured answer back (:func:`split_op`
states the rules). Memcpy/memset bytes are the measured ``bytes`` arg (ROCm: the runtime call's
``size``).
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import numpy as np
import pandas as pd

from archsim.perf.blocks import (
    AUXILIARY_KERNEL_PATTERN,
    DEFAULT_DTYPE_BYTES,
    DTYPE_BYTES,
    ELEMENTS_PER_THREAD,
)
from archsim.trace import flops as flops_mod
from archsim.trace.flops.args import DEFAULT_DTYPE, untyped_list_element_bytes
from archsim.trace.inductor_args import inplace_written_bytes
from archsim.trace.inductor_args import read_bytes as triton_read_bytes
from archsim.trace.kineto import op_shapes
from archsim.trace.kineto_columns import strides_json
from archsim.trace.link import ancestors_table
from archsim.trace.norm_traffic import norm_split
from archsim.trace.tbe_traffic import LOOKUP_OP as TBE_LOOKUP_OP
from archsim.trace.tbe_traffic import tbe_forward_bytes

_LEGACY_CONV_BACKWARD = "::cudnn_convolution_backward"
# Autograd nodes of convolutions (CudnnConvolutionBackward, ConvolutionBackward0, ...).
_CONV_NODE = r"^(?:autograd::engine::evaluate_function: )?\w*Conv\w*Backward\d*$"


_AUXILIARY = re.compile(AUXILIARY_KERNEL_PATTERN)
# MIOpen's SetTensor/ScaleTensor kernels (github.com/ROCm/MIOpen,
# src/kernels/MIOpenSubTensorOpWithScalarKernel.cl, SubTensorOpWithScalar1d..5d: a fixed grid whose
# work-items stride over the whole tensor, ``for(did0 = did0_begin; did0 < len0; did0 +=
# WORK_LENGTH_0)``, so the grid does not show the data). Around
# a convolution the implicit-GEMM invokers zero the output before a split-K kernel accumulates into
# it (src/conv/invokers/impl_gemm_dynamic.cpp: ``if(need_set_zero) SetTensor(handle,
# tensors.outDesc, tensors.out, &zero)``): the op's output, written once, nothing read.
_SET_TENSOR = re.compile(r"^SubTensorOpWithScalar[1-5]d$")


def launch_threads(ops: pd.DataFrame) -> np.ndarray:
    """(blocks, threads) of each kernel from its traced grid and block; blocks 0 where the trace
    records no grid (ROCm traces without launch arguments)."""

    def product(prefix: str) -> np.ndarray:
        out = np.ones(len(ops))
        for axis in "xyz":
            col = f"{prefix}_{axis}"
            if col in ops.columns:
                values = pd.to_numeric(ops[col], errors="coerce").to_numpy(dtype=float)
                out *= np.maximum(np.nan_to_num(values, nan=1.0), 1.0)
        return out

    grid_x = pd.to_numeric(ops.get("grid_x", pd.Series(np.nan, index=ops.index)), errors="coerce")
    known = np.nan_to_num(grid_x.to_numpy(dtype=float), nan=0.0) > 0
    return np.stack([np.where(known, product("grid"), 0.0), product("block")])


def launch_block_x(ops: pd.DataFrame) -> np.ndarray:
    """blockDim.x of each kernel (1 where the trace records none)."""
    if "block_x" not in ops.columns:
        return np.ones(len(ops))
    values = pd.to_numeric(ops["block_x"], errors="coerce").to_numpy(dtype=float)
    return np.maximum(np.nan_to_num(values, nan=1.0), 1.0)


# A looped Triton reduction's launch kwargs (``XBLOCK=1,R0_BLOCK=2048``): its axes in the order of
# its trailing iteration counts (archsim.trace.inductor_args).
_KWARG_AXIS = re.compile(r"\b([XYZ]|R\d_)BLOCK=(\d+)")


def reduction_loop_steps(name: str, args: Any) -> float:
    """Iterations of a looped Triton reduction's ``for r0_offset in range(0, r0_numel, R0_BLOCK)``
    loop (``triton_red_`` kernels): ceil(r0_numel / R0_BLOCK), r0_numel being the Concrete Input at
    R0_BLOCK's place among the trailing counts (one per ``kernel_kwargs`` axis, in its order); NaN
    for other ops or where the call does not record both."""
    if not str(name).startswith("triton_red_") or not isinstance(args, dict):
        return float("nan")
    axes = _KWARG_AXIS.findall(str(args.get("kernel_kwargs", "")))
    concrete = op_shapes(args)[2]
    where = [i for i, (axis, _) in enumerate(axes) if axis == "R0_"]
    if not where or not isinstance(concrete, list) or len(concrete) < len(axes):
        return float("nan")
    try:
        numel = int(str(concrete[len(concrete) - len(axes) + where[0]]))
    except ValueError:
        return float("nan")
    block = int(axes[where[0]][1])
    return float(-(-numel // block)) if numel > 0 and block > 0 else float("nan")


def _element_bytes(dtype: str) -> float:
    return float(DTYPE_BYTES.get(dtype.replace("torch.", ""), DEFAULT_DTYPE_BYTES))


def split_op(
    cost: flops_mod.OpCost,
    names: list[str],
    blocks: np.ndarray,
    threads: np.ndarray,
    columns: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(FLOPs, bytes read, bytes written, shares the op's cost) of each kernel one op launched, in
    launch order, from the model alone (no measured duration), by these rules:

    - GEMM/conv ops (flops.MAIN_KERNEL_CLASSES): the main kernels, those named as the class's
      engines and not as one of the auxiliary kernels of archsim.perf.blocks
      (AUXILIARY_KERNEL_PATTERN: layout, FFT and Winograd transforms, split-K reductions, scaling,
      epilogues), share the op's FLOPs and bytes in proportion to their launch size, blocks x
      threads: a library splits a GEMM into equal tiles, so the work of each launch is its tile count
      times the tile. The other kernels (auxiliary ones, bias broadcasts) multiply no tiles: they
      get no FLOPs, and the bytes their own grid moves, each element (ELEMENTS_PER_THREAD per
      thread, PyTorch's element-wise launch) read once and written once (none where the trace has
      no grid: the kernel model then infers them), except MIOpen's SetTensor kernels
      (``SubTensorOpWithScalar<n>d``, a grid-stride loop), which write the op's output once.
      Without a main kernel the non-auxiliary ones share as main. Where a sharing kernel's grid is not recorded, shares are equal.
    - Other ops: every kernel shares by launch size (one element per thread-slot of the launch,
      as element-wise and reduction launches size their grid to their data), except, for reduction
      ops, the one-block final stage of a two-stage reduction (after a multi-block kernel of the op):
      it reduces the partials, one per block of the stage before it, so it reads that many
      elements (and adds them: one FLOP each) and writes at most that, not a share of the input.
    - Normalization ops of several kernels (a kernel named in archsim.trace.norm_traffic): each
      kernel's bytes are what its code reads and writes (a statistics kernel reads the whole input,
      then the element-wise kernel reads it again), so together they move more than the op's
      nominal bytes; FLOPs are shared by launch size as above. ``columns`` (blocks x blockDim.x of
      each launch; blocks x threads when not given) sizes their per-column results.
    The shares sum to the op's total where its work is all in its main (or stage-one) kernels."""
    n = len(names)
    blocks = np.asarray(blocks, dtype=float)
    size = blocks * np.asarray(threads, dtype=float)
    flops, read, written = np.zeros(n), np.zeros(n), np.zeros(n)
    sharing = np.ones(n, dtype=bool)
    element = _element_bytes(cost.dtype)
    allowed = flops_mod.MAIN_KERNEL_CLASSES.get(cost.op_class)
    norm = None
    if n > 1 and allowed is None:
        cols = size if columns is None else np.asarray(columns, dtype=float)
        norm = norm_split(
            names, blocks, threads, cols, cost.bytes_read, cost.bytes_written, element
        )
    if norm is not None:
        weight = size / size.sum() if (size > 0).all() else np.full(n, 1 / n)
        return cost.flops * weight, norm[0], norm[1], sharing
    if allowed is not None:
        auxiliary = np.array([bool(_AUXILIARY.search(name.lower())) for name in names], dtype=bool)
        engine = np.array([flops_mod.kernel_class(name) in allowed for name in names], dtype=bool)
        sharing = engine & ~auxiliary if (engine & ~auxiliary).any() else ~auxiliary
        moved = size * ELEMENTS_PER_THREAD * element
        read = np.where(sharing, 0.0, moved)
        written = read.copy()
        sets = np.array([bool(_SET_TENSOR.match(name)) for name in names], dtype=bool) & ~sharing
        read[sets], written[sets] = 0.0, cost.bytes_written
    elif cost.op_class == "reduction" and n > 1 and blocks.max() > 1:
        for i in np.flatnonzero(blocks == 1):
            before = np.flatnonzero(blocks[:i] > 1)
            if len(before) == 0:
                continue  # nothing launched before it produced partials: it is a kernel of its own
            partials = blocks[before[-1]]
            sharing[i] = False
            flops[i] = partials
            read[i] = partials * element
            written[i] = min(read[i], cost.bytes_written)
    if sharing.any():
        sizes = size[sharing]
        # A launch size the trace does not record (blocks 0) leaves no basis but equal shares.
        weight = sizes / sizes.sum() if (sizes > 0).all() else np.full(len(sizes), 1 / len(sizes))
        flops[sharing] = cost.flops * weight
        read[sharing] = cost.bytes_read * weight
        written[sharing] = cost.bytes_written * weight
    return flops, read, written, sharing


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
    """Fill op_class, dtype, flops, bytes, has_formula, input_dims/types and reduction_loop_steps
    (:func:`reduction_loop_steps` of the launching op) of GPU ops in place."""
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
    # Split each formula op's cost among its kernels by the model (split_op), never by duration.
    names = ops["name"].to_numpy(dtype=object)
    name_class = np.array([flops_mod.kernel_class(n) for n in names], dtype=object)
    blocks, threads = launch_threads(ops)
    columns = blocks * launch_block_x(ops)
    for p, rows in _groups(formula_pos):
        cost = cache[p]
        f, r, w, share = split_op(
            cost, names[rows].tolist(), blocks[rows], threads[rows], columns[rows]
        )
        untyped = untyped_list_element_bytes(cpu_args[p], names[rows].tolist())
        if untyped is not None:  # priced at the fp32 default: the kernel says the element size
            r, w = r * (untyped / DEFAULT_DTYPE[1]), w * (untyped / DEFAULT_DTYPE[1])
        flops[rows], read[rows], written[rows] = f, r, w
        has[rows] = True  # the launching op has a formula; split_op placed its work
        dtype[rows] = cost.dtype
        klass[rows] = np.where(
            share | (name_class[rows] == "other"), cost.op_class, name_class[rows]
        )
    no_formula = np.flatnonzero((kind == "kernel") & (formula_pos < 0))
    for i in no_formula:
        k = flops_mod.op_class(cpu_names[op_pos[i]]) if op_pos[i] >= 0 else "other"
        klass[i] = k if k != "other" else name_class[i]
    # No formula: bytes read from the launching op's recorded tensors (when recorded), split among
    # that op's kernels by the same rules; FLOPs stay 0.
    sized = np.full(n, -1, dtype=np.int64)
    for i in no_formula:
        if op_pos[i] >= 0 and cache.get(int(op_pos[i])) is not None:
            sized[i] = op_pos[i]
    for p, rows in _groups(sized):
        cost = cache[p]
        # Inductor's Triton kernels read a slice's source only as deep as their iterations
        # (archsim.trace.inductor_args.read_bytes).
        capped = triton_read_bytes(str(cpu_names[p]), cpu_args[p])
        if capped is not None and capped < cost.bytes_read:
            cost = dataclasses.replace(cost, bytes_read=capped)
        _, r, _, _ = split_op(
            cost, names[rows].tolist(), blocks[rows], threads[rows], columns[rows]
        )
        read[rows] = r
        dtype[rows] = cost.dtype
        # Inductor's Triton pointwise kernels: the in-place buffer they provably write back
        # (archsim.trace.inductor_args), shared among the op's kernels as their reads are.
        back = inplace_written_bytes(str(cpu_names[p]), cpu_args[p])
        if back > 0:
            total = float(np.sum(r))
            written[rows] = back * (r / total) if total > 0 else back / len(rows)
        # FBGEMM's TBE forward reads the rows its indices name, not the table
        # (archsim.trace.tbe_traffic).
        if str(cpu_names[p]) == TBE_LOOKUP_OP:
            d, ty, _ = op_shapes(cpu_args[p])
            for i in rows:
                tbe = tbe_forward_bytes(str(cpu_names[p]), str(names[i]), d or [], ty or [])
                if tbe is not None:
                    read[i], written[i] = tbe
    ops["input_strides"] = strides_json(cpu_args, op_pos)  # copies' sectors (archsim.perf.sectors)
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
    loop_steps = np.full(n, np.nan)
    memo: dict[int, tuple[str, str, float]] = {}
    for i in np.flatnonzero(op_pos >= 0):
        p = int(op_pos[i])
        if p not in memo:
            d, ty, _ = op_shapes(cpu_args[p])
            memo[p] = (
                json.dumps(d, separators=(",", ":")) if d is not None else "",
                json.dumps(ty, separators=(",", ":")) if ty is not None else "",
                reduction_loop_steps(str(cpu_names[p]), cpu_args[p]),
            )
        dims_json[i], types_json[i], loop_steps[i] = memo[p]
    ops["op_class"], ops["dtype"], ops["flops"] = klass, dtype, flops
    ops["bytes_read"], ops["bytes_written"], ops["has_formula"] = read, written, has
    ops["input_dims"], ops["input_types"] = dims_json, types_json
    ops["reduction_loop_steps"] = loop_steps


def _groups(key: np.ndarray) -> list[tuple[int, np.ndarray]]:
    """(key, rows in row order) for every key >= 0: the kernels of one op, in launch order."""
    rows = np.flatnonzero(key >= 0)
    order = rows[np.argsort(key[rows], kind="stable")]
    if len(order) == 0:
        return []
    cuts = np.flatnonzero(np.diff(key[order])) + 1
    return [(int(key[g[0]]), g) for g in np.split(order, cuts)]
