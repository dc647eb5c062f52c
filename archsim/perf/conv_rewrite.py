"""A trace's convolutions as the other implementation (the simulator's ``--conv-impl``, issue 15
item 5): pure functions on ops tables.

Ops are rewritten in the formats the ingest gives each implementation's captured ops (names, Input
Dims, FLOPs and bytes as archsim's op formulas count them), so the kernel model prices a rewritten
trace as it prices a capture made that way: im2col and col2im move the column buffer at the
generation's DRAM fraction, the GEMMs run at its GEMM fraction (archsim.perf.efficiency), each
kernel at least ``gpu.kernel_min_us`` (the per-layer closed form is archsim.perf.conv_impl).

Library -> unfold, per layer: forward conv = im2col (input -> buffer) + GEMM (buffer, weights ->
output) + bias add; backward conv = bias-gradient sum + weight-gradient GEMM (grad output, buffer)
and, where the input gradient is computed, a column-gradient GEMM (-> buffer) and col2im (buffer ->
input gradient). Unfold -> library merges those ops back into one conv / conv-backward op, and
drops the unfold path's layout copies (transposes of the buffer and the output gradient) with them.
A trace captured with unfold keeps its ops, with each im2col's written bytes set to the column
buffer (the op formulas give im2col none).
"""

from __future__ import annotations

import dataclasses
import json
import math
from dataclasses import dataclass
from itertools import count

import pandas as pd

from archsim.perf.columns import parsed_input_dims
from archsim.perf.conv_impl import FP32_BYTES, IMPLS

FORWARD_CONV_NAMES = frozenset(
    {
        "aten::conv2d",
        "aten::convolution",
        "aten::_convolution",
        "aten::cudnn_convolution",
        "aten::mkldnn_convolution",
    }
)
BACKWARD_CONV_NAMES = frozenset({"aten::convolution_backward", "aten::cudnn_convolution_backward"})
GEMM_NAMES = frozenset({"aten::matmul", "aten::mm", "aten::bmm"})
HALF_DTYPES = frozenset({"float16", "bfloat16", "half", "c10::Half", "c10::BFloat16"})


@dataclass(frozen=True)
class _Layer:
    """One captured convolution's shapes (elements) and element size (bytes)."""

    n: int
    c: int
    h: int
    w: int
    o: int
    kh: int
    kw: int
    out_pixels: int  # OH x OW
    bias: bool
    elem: int

    @property
    def taps(self) -> int:
        return self.c * self.kh * self.kw

    @property
    def input_bytes(self) -> float:
        return float(self.n * self.c * self.h * self.w * self.elem)

    @property
    def weight_bytes(self) -> float:
        return float(self.o * self.taps * self.elem)

    @property
    def output_bytes(self) -> float:
        return float(self.n * self.o * self.out_pixels * self.elem)

    @property
    def buffer_bytes(self) -> float:
        return float(self.n * self.taps * self.out_pixels * self.elem)

    @property
    def gemm_flops(self) -> float:
        return 2.0 * self.n * self.o * self.out_pixels * self.taps

    @property
    def bias_flops(self) -> float:
        return float(self.n * self.o * self.out_pixels) if self.bias else 0.0


def _elem(dtype) -> int:
    return 2 if str(dtype) in HALF_DTYPES else FP32_BYTES


def _num(row: dict, key: str) -> float:
    value = row.get(key)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return 0.0
    return value if value == value else 0.0  # NaN -> 0


def _is4(shape) -> bool:
    return isinstance(shape, list) and len(shape) == 4 and all(isinstance(v, int) for v in shape)


def _forward_layer(row: dict) -> _Layer | None:
    """The layer of a library forward conv op (4-D input and weight, groups 1), else None."""
    dims = parsed_input_dims(row.get("input_dims"))
    if len(dims) < 2 or not (_is4(dims[0]) and _is4(dims[1])):
        return None
    (n, c, h, w), (o, c2, kh, kw) = dims[0], dims[1]
    elem = _elem(row.get("dtype"))
    pixels = _num(row, "bytes_written") / elem / max(n * o, 1)
    if c2 != c or pixels < 1 or pixels != int(pixels):
        return None
    bias = len(dims) > 2 and dims[2] == [o]
    return _Layer(n, c, h, w, o, kh, kw, int(pixels), bias, elem)


def _backward_layer(row: dict) -> tuple[_Layer, bool] | None:
    """(layer, whether the input gradient is computed) of a library conv-backward op, else None."""
    dims = parsed_input_dims(row.get("input_dims"))
    if len(dims) < 3 or not all(_is4(d) for d in dims[:3]):
        return None
    (n, o, oh, ow), (n2, c, h, w), (o2, c2, kh, kw) = dims[0], dims[1], dims[2]
    if n2 != n or o2 != o or c2 != c:
        return None
    layer = _Layer(n, c, h, w, o, kh, kw, oh * ow, False, _elem(row.get("dtype")))
    grad_input = _num(row, "bytes_written") >= layer.input_bytes
    gemms = (2.0 if grad_input else 1.0) * layer.gemm_flops
    bias = _num(row, "flops") >= gemms + 0.5 * n * o * oh * ow
    return dataclasses.replace(layer, bias=bias), grad_input


def _op(base: dict, op_id: int, name: str, op_class: str, flops, read, written, dims) -> dict:
    row = dict(base)
    row.update(
        op_id=op_id,
        name=name,
        launch_op=name,
        op_class=op_class,
        flops=float(flops),
        bytes_read=float(read),
        bytes_written=float(written),
        input_dims=json.dumps(dims, separators=(",", ":")),
        has_formula=True,
    )
    return row


def _unfold_ops(row: dict, ids) -> list[dict] | None:
    """A library conv or conv-backward op as the unfold path's ops (None: not a convolution)."""
    name = row.get("name")
    if name in FORWARD_CONV_NAMES and (layer := _forward_layer(row)) is not None:
        lay, l_ = layer, layer.out_pixels
        out = [
            _op(row, next(ids), "aten::im2col", "other", 0.0, lay.input_bytes, lay.buffer_bytes,
                [[lay.n, lay.c, lay.h, lay.w], [], [], [], []]),
            _op(row, next(ids), "aten::matmul", "gemm", lay.gemm_flops,
                lay.buffer_bytes + lay.weight_bytes, lay.output_bytes,
                [[lay.o, lay.taps], [lay.n, lay.taps, l_]]),
        ]  # fmt: skip
        if lay.bias:
            out.append(
                _op(row, next(ids), "aten::add", "elementwise", lay.bias_flops,
                    lay.output_bytes + lay.o * lay.elem, lay.output_bytes,
                    [[lay.n, lay.o, l_], [1, lay.o, 1], []])
            )  # fmt: skip
        return out
    if name in BACKWARD_CONV_NAMES and (found := _backward_layer(row)) is not None:
        lay, grad_input = found
        l_, nl = lay.out_pixels, lay.n * lay.out_pixels
        grad_out = lay.output_bytes
        out = []
        if lay.bias:
            out.append(
                _op(row, next(ids), "aten::sum", "reduction", lay.bias_flops, grad_out,
                    lay.o * lay.elem, [[lay.n, lay.o, l_], [], [], []])
            )  # fmt: skip
        out.append(
            _op(row, next(ids), "aten::mm", "gemm", lay.gemm_flops, grad_out + lay.buffer_bytes,
                lay.weight_bytes, [[lay.o, nl], [nl, lay.taps]])
        )  # fmt: skip
        if grad_input:
            out += [
                _op(row, next(ids), "aten::mm", "gemm", lay.gemm_flops,
                    grad_out + lay.weight_bytes, lay.buffer_bytes, [[nl, lay.o], [lay.o, lay.taps]]),
                _op(row, next(ids), "aten::col2im", "other", 0.0, lay.buffer_bytes,
                    lay.input_bytes, [[lay.n, lay.taps, l_], [], [], [], [], []]),
            ]  # fmt: skip
        return out
    return None


def _pairs(rows: list[dict]) -> list[tuple[int, int, int | None, _Layer]]:
    """(im2col index, GEMM index, bias-add index or None, layer) of every unfold convolution in one
    step's rows (in order): an im2col and the next GEMM whose columns operand is its buffer."""
    found, used = [], set()
    for i, row in enumerate(rows):
        if row.get("name") != "aten::im2col":
            continue
        dims = parsed_input_dims(row.get("input_dims"))
        if not dims or not _is4(dims[0]):
            continue
        n, c, h, w = dims[0]
        for j in range(i + 1, len(rows)):
            gemm = rows[j]
            if j in used or gemm.get("name") not in GEMM_NAMES:
                continue
            gd = parsed_input_dims(gemm.get("input_dims"))
            if len(gd) < 2:
                continue
            cols, weight = gd[1], gd[0]
            if not (len(cols) == 3 and cols[0] == n and len(weight) == 2 and weight[1] == cols[1]):
                continue
            taps, pixels, o = cols[1], cols[2], weight[0]
            side = math.isqrt(taps // c) if taps % c == 0 else 0
            if side * side * c != taps:
                break  # a non-square kernel: not modelled, the pair is left as captured
            add = j + 1 if j + 1 < len(rows) and _is_bias_add(rows[j + 1], n, o, pixels) else None
            elem = _elem(row.get("dtype"))
            layer = _Layer(n, c, h, w, o, side, side, pixels, add is not None, elem)
            found.append((i, j, add, layer))
            used.add(j)
            break
    return found


def _is_bias_add(row: dict, n: int, o: int, pixels: int) -> bool:
    dims = parsed_input_dims(row.get("input_dims"))
    return row.get("name") == "aten::add" and len(dims) >= 2 and dims[0] == [n, o, pixels]


def _library_step(rows: list[dict]) -> list[dict]:
    """One step's unfold rows with every im2col + GEMM (+ bias add) as one conv op and the matching
    backward GEMMs, col2im and layout copies as one conv-backward op."""
    pairs = _pairs(rows)
    if not pairs:
        return rows
    drop: set[int] = set()
    replace: dict[int, dict] = {}
    layers: dict[tuple, _Layer] = {}
    for i, j, add, lay in pairs:
        flops = _num(rows[j], "flops") + (_num(rows[add], "flops") if add is not None else 0.0)
        bias_bytes = lay.o * lay.elem if lay.bias else 0.0
        replace[i] = _op(
            rows[i], rows[i]["op_id"], "aten::conv2d", "conv", flops,
            lay.input_bytes + lay.weight_bytes + bias_bytes, lay.output_bytes,
            [[lay.n, lay.c, lay.h, lay.w], [lay.o, lay.c, lay.kh, lay.kw],
             [lay.o] if lay.bias else [], [], [], [], []],
        )  # fmt: skip
        drop.update({j} | ({add} if add is not None else set()))
        # the online and target networks' forwards share shapes: one backward per shape
        layers[(lay.n, lay.o, lay.taps, lay.out_pixels)] = lay
    for lay in layers.values():
        _merge_backward(rows, lay, drop, replace)
    return [replace.get(k, r) for k, r in enumerate(rows) if k not in drop]


def _merge_backward(rows: list[dict], lay: _Layer, drop: set[int], replace: dict) -> None:
    """The layer's unfold backward ops in ``rows`` (weight-gradient GEMM first) as one conv-backward
    op: the weight-gradient GEMM's row is replaced, the others are dropped."""
    nl, l_ = lay.n * lay.out_pixels, lay.out_pixels
    wanted = {
        "grad_weight": ("gemm", [[lay.o, nl], [nl, lay.taps]]),
        "grad_cols": ("gemm", [[nl, lay.o], [lay.o, lay.taps]]),
        "col2im": ("aten::col2im", [lay.n, lay.taps, l_]),
        "bias": ("aten::sum", [lay.n, lay.o, l_]),
        "copy_cols": ("aten::clone", [lay.n, lay.taps, l_]),
        "copy_grad": ("aten::clone", [lay.n, l_, lay.o]),
    }
    hits: dict[str, int] = {}
    for k, row in enumerate(rows):
        if k in drop or k in replace or row.get("phase") != "train_backward":
            continue
        dims = parsed_input_dims(row.get("input_dims"))
        for what, (name, shape) in wanted.items():
            if what in hits:
                continue
            if name == "gemm":
                match = row.get("name") in GEMM_NAMES and dims[:2] == shape
            else:
                match = row.get("name") == name and bool(dims) and dims[0] == shape
            if match:
                hits[what] = k
                break
    if "grad_weight" not in hits:
        return
    grad_input = "grad_cols" in hits
    flops = sum(
        _num(rows[hits[w]], "flops") for w in ("grad_weight", "grad_cols", "bias") if w in hits
    )
    side = math.isqrt(l_)
    out_hw = [side, side] if side * side == l_ else [l_, 1]
    base = rows[hits["grad_weight"]]
    replace[hits["grad_weight"]] = _op(
        base, base["op_id"], "aten::convolution_backward", "conv", flops,
        lay.output_bytes + lay.input_bytes + lay.weight_bytes,
        lay.weight_bytes + (lay.input_bytes if grad_input else 0.0),
        [[lay.n, lay.o, *out_hw], [lay.n, lay.c, lay.h, lay.w], [lay.o, lay.c, lay.kh, lay.kw],
         [], [], [], [], [], [], [], []],
    )  # fmt: skip
    drop.update(k for w, k in hits.items() if w != "grad_weight")


def _by_step(ops: pd.DataFrame, per_step) -> pd.DataFrame:
    """``per_step`` applied to each step's rows in order (rows without a step together)."""
    steps = ops.loc[ops["name"] == "aten::im2col", "step_id"].unique()
    touched = ops["step_id"].isin(steps).to_numpy()
    if not touched.any():
        return ops
    groups: dict = {}
    for row in ops[touched].to_dict("records"):
        groups.setdefault(row.get("step_id"), []).append(row)
    out = [r for group in groups.values() for r in per_step(group)]
    new = pd.DataFrame(out, columns=ops.columns).astype(ops.dtypes.to_dict(), errors="ignore")
    return pd.concat([ops[~touched], new], ignore_index=True)


def to_unfold(ops: pd.DataFrame) -> pd.DataFrame:
    """A library capture's ops with every convolution as the unfold path's ops."""
    ids = count(int(pd.to_numeric(ops["op_id"]).max()) + 1 if len(ops) else 0)
    out: list[dict] = []
    for row in ops.to_dict("records"):
        new = _unfold_ops(row, ids)
        out.extend(new if new is not None else [row])
    return pd.DataFrame(out, columns=ops.columns).astype(ops.dtypes.to_dict(), errors="ignore")


def to_library(ops: pd.DataFrame) -> pd.DataFrame:
    """An unfold capture's ops with every im2col + GEMM convolution as one library conv op."""
    return _by_step(ops, _library_step)


def with_im2col_buffers(ops: pd.DataFrame) -> pd.DataFrame:
    """An unfold capture's ops with each im2col writing its column buffer (only the columns the
    pairing reads are turned into records: a trace's whole rows would cost seconds)."""
    steps = ops.loc[ops["name"] == "aten::im2col", "step_id"].unique()
    slim = ops.loc[ops["step_id"].isin(steps), ["step_id", "name", "input_dims", "dtype"]]
    if slim.empty:
        return ops
    groups: dict = {}
    for index, row in zip(slim.index, slim.to_dict("records"), strict=True):
        groups.setdefault(row["step_id"], []).append((index, row))
    where, buffers = [], []
    for group in groups.values():
        for i, _, _, layer in _pairs([row for _, row in group]):
            where.append(group[i][0])
            buffers.append(layer.buffer_bytes)
    out = ops.copy()
    if where:
        out.loc[where, "bytes_written"] = buffers
    return out


def captured_impl(meta: dict | None, ops: pd.DataFrame) -> str:
    """The trace's convolution implementation: its workload settings' ``conv_impl``, else unfold
    when it holds im2col ops, else the library's."""
    settings = ((meta or {}).get("workload") or {}).get("settings") or {}
    impl = settings.get("conv_impl")
    if impl in IMPLS:
        return impl
    return "unfold" if bool((ops["name"] == "aten::im2col").any()) else "cudnn"


def has_conv_layers(ops: pd.DataFrame) -> bool:
    """Whether the ops hold a convolution this module can rewrite (either implementation)."""
    names = ops["name"]
    for row in ops[names.isin(FORWARD_CONV_NAMES)].to_dict("records"):
        if _forward_layer(row) is not None:
            return True
    im2col = ops[names == "aten::im2col"]
    for step in im2col["step_id"].unique():
        if _pairs(ops[ops["step_id"] == step].to_dict("records")):
            return True
    return False


def ops_as(ops: pd.DataFrame, captured: str, wanted: str) -> pd.DataFrame:
    """``ops`` captured with ``captured`` convolutions, as ``wanted`` ones (both in IMPLS)."""
    if captured == "unfold":
        ops = with_im2col_buffers(ops)
        return ops if wanted == "unfold" else to_library(ops)
    return to_unfold(ops) if wanted == "unfold" else ops
