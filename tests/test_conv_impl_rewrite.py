"""--conv-impl (issue 15 item 5): a trace's convolutions rewritten as the other implementation
(archsim.perf.conv_rewrite) and priced by the kernel model; refusals in one line."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw.presets import load_hw
from archsim.perf.conv_impl import NATURE_DQN_CONVS, trace_with_conv_impl
from archsim.perf.conv_rewrite import (
    captured_impl,
    has_conv_layers,
    to_library,
    to_unfold,
    with_im2col_buffers,
)
from archsim.perf.kernel import predict_op_seconds
from archsim.sim.config import SimConfig
from archsim.sim.run import simulate
from archsim.trace import save
from tests.test_sim_support import tiny_trace

F = 4  # fp32 bytes


def _row(op_id, step_id, phase, name, op_class, flops, read, written, dims) -> dict:
    return dict(
        op_id=op_id,
        kind="cpu",
        name=name,
        launch_op=name,
        op_class=op_class,
        phase=phase,
        step_id=step_id,
        dtype="float32",
        flops=float(flops),
        bytes_read=float(read),
        bytes_written=float(written),
        has_formula=True,
        dur_us=10.0,
        input_dims=json.dumps(dims, separators=(",", ":")),
    )


def library_ops(step_id: int, n: int, backward: bool, first_id: int = 0) -> list[dict]:
    """Nature DQN's convolutions as the ingest records a library capture: conv2d FLOPs 2 N O L Ck^2
    + N O L (bias), reads input + weights + bias, writes the output; the backward (layer 1 without
    the input gradient) reads grad output + input + weights, writes weights (+ input)."""
    rows, k = [], first_id
    phase = "act" if not backward else "train_forward"
    for lay in NATURE_DQN_CONVS:
        c, h, o, kk = lay.in_channels, lay.in_side, lay.out_channels, lay.kernel
        pixels = lay.out_side**2
        gemm = 2 * n * o * pixels * c * kk * kk
        inp, w, out = n * c * h * h * F, o * c * kk * kk * F, n * o * pixels * F
        dims = [[n, c, h, h], [o, c, kk, kk], [o], [], [], [], []]
        rows.append(
            _row(k, step_id, phase, "aten::conv2d", "conv", gemm + n * o * pixels,
                 inp + w + o * F, out, dims)
        )  # fmt: skip
        k += 1
    if backward:
        for i, lay in enumerate(NATURE_DQN_CONVS):
            c, h, o, kk = lay.in_channels, lay.in_side, lay.out_channels, lay.kernel
            side = lay.out_side
            gemm = 2 * n * o * side * side * c * kk * kk
            inp, w, g = n * c * h * h * F, o * c * kk * kk * F, n * o * side * side * F
            grad_input = i > 0  # the frames need no gradient
            dims = [[n, o, side, side], [n, c, h, h], [o, c, kk, kk], *[[]] * 8]
            rows.append(
                _row(k, step_id, "train_backward", "aten::convolution_backward", "conv",
                     (2 if grad_input else 1) * gemm + n * o * side * side, g + inp + w,
                     w + (inp if grad_input else 0), dims)
            )  # fmt: skip
            k += 1
    return rows


def test_library_rows_match_the_captured_formulas():
    # Worked by hand, and as ingested from a real DQN capture (conv1 at batch 1):
    # 2 x 1 x 32 x 400 x 256 + 1 x 32 x 400 = 6,566,400 FLOPs; 112,896 + 32,768 + 128 read; 51,200 written
    row = library_ops(0, 1, False)[0]
    assert (row["flops"], row["bytes_read"], row["bytes_written"]) == (6566400, 145792, 51200)


def test_library_to_unfold_by_hand():
    ops = pd.DataFrame(library_ops(0, 32, True))
    unf = to_unfold(ops)
    fwd = unf[unf["phase"] == "train_forward"]
    assert list(fwd["name"][:3]) == ["aten::im2col", "aten::matmul", "aten::add"]
    # conv1 at batch 32: buffer = 32 x 256 x 400 x 4 = 13,107,200 B (k^2/s^2 = 4x the input)
    assert fwd.iloc[0]["bytes_read"] == 32 * 4 * 84 * 84 * F
    assert fwd.iloc[0]["bytes_written"] == 13_107_200
    assert fwd.iloc[1]["bytes_read"] == 13_107_200 + 32 * 256 * F
    # FLOPs are conserved phase by phase; each layer's forward moves buffer + output more each way
    # (im2col writes the buffer the GEMM reads; the bias add re-reads and re-writes the output)
    for phase in ("train_forward", "train_backward"):
        assert (
            unf[unf["phase"] == phase]["flops"].sum() == ops[ops["phase"] == phase]["flops"].sum()
        )
    extra = sum(
        32 * lay.in_channels * lay.kernel**2 * lay.out_side**2 * F
        + 32 * lay.out_channels * lay.out_side**2 * F
        for lay in NATURE_DQN_CONVS
    )
    lib_fwd = ops[ops["phase"] == "train_forward"]
    assert fwd["bytes_read"].sum() == lib_fwd["bytes_read"].sum() + extra
    assert fwd["bytes_written"].sum() == lib_fwd["bytes_written"].sum() + extra
    # backward: conv1 (no input gradient) -> bias sum + one GEMM; conv2/3 -> sum, 2 GEMMs, col2im
    bwd = unf[unf["phase"] == "train_backward"]["name"].tolist()
    assert bwd.count("aten::col2im") == 2 and bwd.count("aten::mm") == 5
    assert unf["op_id"].is_unique


def test_unfold_to_library_round_trip_is_exact():
    ops = pd.DataFrame(library_ops(0, 1, False) + library_ops(1, 32, True, first_id=3))
    back = to_library(to_unfold(ops))
    cols = ["step_id", "phase", "name", "op_class", "flops", "bytes_read", "bytes_written"]
    key = ["step_id", "phase", "name", "flops"]
    a = ops[cols].sort_values(key).reset_index(drop=True)
    b = back[cols].sort_values(key).reset_index(drop=True)
    pd.testing.assert_frame_equal(a, b, check_dtype=False)


def test_a_captured_unfold_trace_gets_its_column_buffers():
    unf = to_unfold(pd.DataFrame(library_ops(0, 1, False)))
    unf.loc[unf["name"] == "aten::im2col", "bytes_written"] = 0.0  # as the op formulas give it
    fixed = with_im2col_buffers(unf)
    written = fixed.loc[fixed["name"] == "aten::im2col", "bytes_written"].tolist()
    by_hand = [lay.in_channels * lay.kernel**2 * lay.out_side**2 * F for lay in NATURE_DQN_CONVS]
    assert written == by_hand
    assert captured_impl(None, unf) == "unfold" and captured_impl({}, fixed) == "unfold"
    assert captured_impl({"workload": {"settings": {"conv_impl": "cudnn"}}}, unf) == "cudnn"


@pytest.mark.parametrize("preset", ["jetson-tx1", "jetson-agx-orin", "dgx1-v100"])
@pytest.mark.parametrize("batch", [1, 32])
def test_unfold_never_beats_the_library_layer_by_layer(preset, batch):
    hw = load_hw(preset)
    lib = pd.DataFrame(library_ops(0, batch, True))
    for row in lib.to_dict("records"):
        one = pd.DataFrame([row])
        library_s = predict_op_seconds(one, hw).sum()
        unfold_s = predict_op_seconds(to_unfold(one), hw).sum()
        assert unfold_s >= library_s, row["name"]


@settings(max_examples=40, deadline=None)
@given(
    n=st.sampled_from([1, 2, 8, 32, 128]),
    c=st.sampled_from([1, 3, 4, 16, 64]),
    o=st.sampled_from([8, 32, 64, 256]),
    k=st.integers(1, 8),
    stride_frac=st.floats(0.0, 1.0),
    extra=st.integers(0, 80),
    preset=st.sampled_from(["jetson-tx1", "jetson-agx-orin", "dgx1-v100", "dgx-h100"]),
)
def test_unfold_is_never_faster_for_any_layer(n, c, o, k, stride_frac, extra, preset):
    """Physics: unfold does the library's FLOPs and moves more bytes in more kernels."""
    s = 1 + int(stride_frac * (k - 1))  # 1 <= stride <= kernel: every input pixel is read
    h = k + extra
    pixels = ((h - k) // s + 1) ** 2
    row = _row(0, 0, "train_forward", "aten::conv2d", "conv",
               2 * n * o * pixels * c * k * k + n * o * pixels,
               (n * c * h * h + o * c * k * k + o) * F, n * o * pixels * F,
               [[n, c, h, h], [o, c, k, k], [o], [], [], [], []])  # fmt: skip
    one, hw = pd.DataFrame([row]), load_hw(preset)
    assert predict_op_seconds(to_unfold(one), hw).sum() >= predict_op_seconds(one, hw).sum()


def _dqn_trace():
    """tiny_trace's steps with Nature DQN convolutions (library format) as its ops."""
    trace = tiny_trace()
    rows, k = [], 0
    for step in trace.steps.itertuples():
        new = library_ops(step.step_id, int(step.batch_size), step.role == "learner", k)
        rows += new
        k += len(new)
    return dataclasses.replace(trace, ops=pd.DataFrame(rows))


def test_simulated_unfold_is_slower_and_trace_default_is_unchanged():
    trace, hw = _dqn_trace(), load_hw("jetson-tx1")
    config = SimConfig(actors=2, inference="local", sim_seconds=0.2)
    as_captured = simulate(trace, hw, config).metrics
    library = simulate(trace, hw, config.replace(conv_impl="cudnn")).metrics
    unfold = simulate(trace, hw, config.replace(conv_impl="unfold")).metrics
    assert library["learner_updates_per_s"] == as_captured["learner_updates_per_s"]
    assert unfold["learner_updates_per_s"] < library["learner_updates_per_s"]
    assert np.isfinite(unfold["frames_per_s"])


def test_refusals_name_the_flag():
    tx1 = load_hw("jetson-tx1")
    with pytest.raises(ArchsimError, match="--conv-impl unfold: the trace has no convolution"):
        trace_with_conv_impl(tiny_trace(), tx1, "unfold")  # conv ops without input shapes
    trace = _dqn_trace()
    no_gpu = tx1.model_copy(update={"gpu": None})
    with pytest.raises(ArchsimError, match="--conv-impl cudnn: hardware config jetson-tx1 has no"):
        trace_with_conv_impl(trace, no_gpu, "cudnn")
    gpu_ops = trace.ops.assign(kind="kernel")
    with pytest.raises(ArchsimError, match="captured on a GPU"):
        trace_with_conv_impl(dataclasses.replace(trace, ops=gpu_ops), tx1, "unfold")
    assert has_conv_layers(trace.ops) and not has_conv_layers(tiny_trace().ops)
    # "trace" never refuses: a trace without convolutions is left as it is
    assert trace_with_conv_impl(tiny_trace(), no_gpu, "trace").ops is not None


def test_cli_refuses_an_unknown_value_in_one_line(tmp_path, capsys):
    path = save(_dqn_trace(), tmp_path / "dqn")
    out = str(tmp_path / "out")
    code = main(
        ["simulate", str(path), "--hw", "jetson-tx1", "--conv-impl", "winograd", "--out", out]
    )
    assert code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["archsim: error: --conv-impl: 'winograd' is not a valid cudnn|unfold"]
