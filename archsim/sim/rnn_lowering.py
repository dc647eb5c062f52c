"""An ``aten::lstm`` op captured on a CPU, as the kernels a GPU runs for it, so the kernel model can
price them (it prices one op as one kernel; a whole LSTM as one launch would look latency-bound).

cuDNN's LSTM (Appleyard, Keasler, Yang 2016, "Optimizing Performance of Recurrent Neural Networks on
GPUs", arXiv:1604.01946, Sec. 3): one GEMM for the input-to-hidden projection of every step at once,
then per step a recurrent GEMM [B, H] x [H, 4H] and one fused element-wise kernel for the gates.
Training adds the backward pass: per step the recurrent data-gradient GEMM and the gates' backward
element-wise kernel, then one input data-gradient GEMM and two weight-gradient GEMMs over all steps.
The CPU capture records the LSTM's backward (mkldnn_rnn_layer_backward) under autograd without
shapes, so it is rebuilt here from the forward op of the trained unroll.
"""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

# The LSTM's 4 gates (input, forget, cell, output): weights are [4H, I] and [4H, H].
GATES = 4
# Element-wise work per hidden unit and row of one LSTM cell: 3 sigmoids, 1 tanh on the gates, f*c,
# i*g, their sum, tanh(c), o*tanh(c) (archsim.trace.flops.RNN_CELL_OPS_PER_HIDDEN).
CELL_OPS_PER_HIDDEN = 9


def lower_lstm_ops(ops: pd.DataFrame, backward_steps: int | None = None) -> pd.DataFrame:
    """``ops`` with each batch-first, single-layer ``aten::lstm`` (op_class rnn, input [B, T, I]) replaced
    by its GPU kernels. Forward ops whose T equals ``backward_steps`` (the trained unroll) also get
    their backward kernels, in phase train_backward. Other ops pass through unchanged."""
    if "op_class" not in ops.columns or not (ops["op_class"] == "rnn").any():
        return ops
    rnn = ops["op_class"] == "rnn"
    parts = [ops[~rnn]]
    for _, row in ops[rnn].iterrows():
        shape = _lstm_shape(row.get("input_dims"))
        if shape is None:
            parts.append(row.to_frame().T)
            continue
        rows = _forward_rows(*shape)
        if backward_steps is not None and shape[1] == backward_steps:
            rows += [(*r, "train_backward") for r in _backward_rows(*shape)]
        parts.append(_expand(row, rows))
    out = pd.concat(parts, ignore_index=True)
    return out.astype({c: ops[c].dtype for c in ops.columns}, errors="ignore")


def _lstm_shape(input_dims: object) -> tuple[int, int, int, int] | None:
    """(B, T, I, H) of a batch-first single-layer LSTM's Input Dims, else None."""
    try:
        dims = json.loads(str(input_dims))
        batch, steps, inputs = dims[0]
        weights = dims[2]
        hidden = int(weights[1][1])
        if len(weights) != 4 or weights[0] != [GATES * hidden, inputs]:
            return None
        return int(batch), int(steps), int(inputs), hidden
    except (ValueError, TypeError, IndexError, KeyError):
        return None


# (name, op_class, flops, elements read, elements written, input dims)
Kernel = tuple[str, str, float, float, float, list]


def _gemm(name: str, m: int, k: int, n: int, a: list, b: list) -> Kernel:
    return (name, "gemm", 2.0 * m * k * n, m * k + k * n, m * n, [a, b])


def _forward_rows(batch: int, steps: int, inputs: int, hidden: int) -> list[Kernel]:
    g = GATES * hidden
    rows = [
        _gemm("lstm_input_gemm", batch * steps, inputs, g, [batch * steps, inputs], [g, inputs])
    ]
    for _ in range(steps):
        rows.append(_gemm("lstm_recurrent_gemm", batch, hidden, g, [batch, hidden], [g, hidden]))
        rows.append(_cell("lstm_cell", batch, hidden))
    return rows


def _backward_rows(batch: int, steps: int, inputs: int, hidden: int) -> list[Kernel]:
    g = GATES * hidden
    rows = []
    for _ in range(steps):
        rows.append(_cell("lstm_cell_backward", batch, hidden))
        rows.append(_gemm("lstm_recurrent_dgrad", batch, g, hidden, [batch, g], [g, hidden]))
    bt = batch * steps
    rows.append(_gemm("lstm_input_dgrad", bt, g, inputs, [bt, g], [g, inputs]))
    # Weight gradients contract the batch: [4H, B*T] x [B*T, I]; the leading operand is not batch-major.
    rows.append(_gemm("lstm_wgrad_input", g, bt, inputs, [g, bt], [bt, inputs]))
    rows.append(_gemm("lstm_wgrad_recurrent", g, bt, hidden, [g, bt], [bt, hidden]))
    return rows


def _cell(name: str, batch: int, hidden: int) -> Kernel:
    """Gates [B, 4H] and cell state [B, H] in; new cell and hidden state [B, 2H] out."""
    return (
        name,
        "elementwise",
        float(CELL_OPS_PER_HIDDEN * batch * hidden),
        batch * (GATES + 1) * hidden,
        batch * 2 * hidden,
        [[batch, GATES * hidden], [batch, hidden]],
    )


def _expand(row: pd.Series, kernels: list) -> pd.DataFrame:
    """One row per kernel, copying the op's other columns (step, phase, dtype, ...)."""
    frame = pd.DataFrame([row.to_dict()] * len(kernels))
    size = float(row["bytes_written"]) / max(_written_elements(row), 1.0)
    size = size if np.isfinite(size) and size > 0 else 4.0
    frame["name"] = [k[0] for k in kernels]
    frame["op_class"] = [k[1] for k in kernels]
    frame["flops"] = [k[2] for k in kernels]
    frame["bytes_read"] = [k[3] * size for k in kernels]
    frame["bytes_written"] = [k[4] * size for k in kernels]
    frame["input_dims"] = [json.dumps(k[5], separators=(",", ":")) for k in kernels]
    frame["phase"] = [k[6] if len(k) > 6 else row["phase"] for k in kernels]
    frame["dur_us"] = float(row["dur_us"]) / len(kernels)
    return frame


def _written_elements(row: pd.Series) -> float:
    """Elements of the LSTM's output [B, T, H] (its bytes_written / this = bytes per element)."""
    shape = _lstm_shape(row.get("input_dims"))
    if shape is None:
        return 1.0
    batch, steps, _, hidden = shape
    return float(batch * steps * hidden)


def lower_trace_ops(trace) -> pd.DataFrame:
    """Every op of ``trace`` with its LSTMs lowered; the trained unroll (a recurrent trace's
    meta.workload.settings.r2d2.sequence_length) gets its backward kernels too."""
    from archsim.sim.recorded import sequence_settings

    sequence = sequence_settings(trace)
    return lower_lstm_ops(trace.ops, backward_steps=sequence[0] if sequence else None)
