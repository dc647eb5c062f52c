"""Recurrent cells and sequences (LSTM, GRU, plain RNN)."""

from __future__ import annotations

import math

from archsim.trace.flops.args import Formula, OpArgs

# Per hidden unit and row, an LSTM cell applies 3 sigmoids, 1 tanh (gates), f*c, i*g, their sum,
# tanh(c), o*tanh(c) = 9 operations; a GRU cell: 2 sigmoids, r*h_n, +, tanh, 1-z, *, z*h, + = 9.
RNN_CELL_OPS_PER_HIDDEN = 9


def _rnn_cell(args: OpArgs) -> tuple[float, float, float] | None:
    """lstm_cell / gru_cell(input[B,I], hx, w_ih[G*H,I], w_hh[G*H,H], b_ih, b_hh)."""
    x, w_ih, w_hh = args.tensor(0), args.tensor(2), args.tensor(3)
    if x is None or w_ih is None or w_hh is None or len(w_hh.shape) != 2:
        return None
    rows, hidden = math.prod(x.shape[:-1]), w_hh.shape[1]
    gates = w_ih.shape[0]
    flops = 2.0 * rows * gates * (w_ih.shape[1] + hidden)  # the two gate GEMMs
    flops += 2.0 * rows * gates  # both biases
    flops += RNN_CELL_OPS_PER_HIDDEN * rows * hidden
    return flops, args.read_bytes(), 2.0 * rows * hidden * args.itemsize


def _rnn_sequence(args: OpArgs) -> tuple[float, float, float] | None:
    """lstm/gru/_cudnn_rnn(input[T,B,I] or packed [sum T, I], ..., weights TensorList, ...): the
    weight list holds (w_ih [G*H, I_l], w_hh [G*H, H]) pairs per layer and direction."""
    x = args.tensor(0)
    if x is None or not x.shape:
        return None
    mats = [t for v in args.values if isinstance(v, list) for t in v if len(t.shape) == 2]
    if len(mats) < 2:
        return None
    tokens = math.prod(x.shape[:-1])  # T*B: the same for batch_first or not
    flops, written = 0.0, 0.0
    for w_ih, w_hh in zip(mats[0::2], mats[1::2], strict=False):
        gates, hidden = w_ih.shape[0], w_hh.shape[1]
        flops += 2.0 * tokens * gates * (w_ih.shape[1] + hidden) + 2.0 * tokens * gates
        flops += RNN_CELL_OPS_PER_HIDDEN * tokens * hidden
        written += tokens * hidden * args.itemsize
    return flops, args.read_bytes(), written


def _fused_rnn_cell(args: OpArgs) -> tuple[float, float, float] | None:
    """_thnn_fused_lstm_cell/_gru_cell(input_gates, hidden_gates, cx/hx, ...): gate GEMMs already
    done; adds the two gate tensors (1 per element) then the cell update per hidden unit."""
    gi, hx = args.tensor(0), args.tensor(2)
    if gi is None or hx is None:
        return None
    flops = float(gi.numel) + RNN_CELL_OPS_PER_HIDDEN * hx.numel
    return flops, args.read_bytes(), 2.0 * hx.nbytes


FORMULAS: dict[str, tuple[str, Formula]] = {
    "lstm_cell": ("rnn", _rnn_cell),
    "gru_cell": ("rnn", _rnn_cell),
    **{
        name: ("rnn", _rnn_sequence)
        for name in ("lstm", "gru", "rnn_tanh", "rnn_relu", "_cudnn_rnn")
    },
    "_thnn_fused_lstm_cell": ("rnn", _fused_rnn_cell),
    "_thnn_fused_gru_cell": ("rnn", _fused_rnn_cell),
}
