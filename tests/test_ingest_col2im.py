"""F.unfold's backward (``aten::col2im`` under ``Im2ColBackward0``) is kept by CPU ingest with its own
cost: before it had a formula, it was dropped as a parent of compute ops (its ``contiguous`` copy),
and only that inner copy's time stayed in ops.parquet."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.profiler import ProfilerActivity, profile, record_function

from archsim.trace.flops import op_cost
from archsim.trace.ingest import ingest

SCALARS = ["ScalarList"] * 5


def _col2im(cols: list[int], size, kernel, dilation, padding, stride):
    concrete = ["", *(str(list(v)) for v in (size, kernel, dilation, padding, stride))]
    return op_cost("aten::col2im", [cols, [], [], [], [], []], ["float", *SCALARS], concrete)


def _im2col(image: list[int], kernel, dilation, padding, stride):
    concrete = ["", *(str(list(v)) for v in (kernel, dilation, padding, stride))]
    return op_cost("aten::im2col", [image, [], [], [], []], ["float", *SCALARS[:4]], concrete)


def test_col2im_golden_with_padding():
    # 2 images x 3 channels of 4x4, kernel 3, padding 1, stride 1: L = 16 positions, 27 rows.
    # Per axis, offset k at position o hits image index o - 1 + k in [0, 4): k=0 -> 3 positions,
    # k=1 -> 4, k=2 -> 3: 10; both axes 100 of the 144 (offset, position) pairs per channel.
    cost = _col2im([2, 27, 16], [4, 4], [3, 3], [1, 1], [1, 1], [1, 1])
    assert cost.has_formula and cost.op_class == "copy"
    assert cost.flops == 2 * 3 * 100  # one add per in-image column element
    assert cost.bytes_read == 2 * 27 * 16 * 4
    assert cost.bytes_written == 2 * 3 * 4 * 4 * 4


def test_im2col_golden_nature_dqn_first_layer():
    # 4 x 84 x 84 frame, kernel 8, stride 4: 20 x 20 positions, 4 * 64 rows (Nature DQN conv1).
    cost = _im2col([1, 4, 84, 84], [8, 8], [1, 1], [0, 0], [4, 4])
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (0, 4 * 84 * 84 * 4, 256 * 400 * 4)


def test_col2im_without_its_geometry_falls_back_to_input_bytes():
    cost = op_cost("aten::col2im", [[2, 27, 16], [], [], [], [], []], ["float", *SCALARS])
    assert not cost.has_formula and cost.bytes_read == 2 * 27 * 16 * 4


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 4),
    side=st.integers(3, 12),
    kernel=st.integers(1, 3),
    dilation=st.integers(1, 2),
    padding=st.integers(0, 2),
    stride=st.integers(1, 3),
)
def test_fold_is_unfold_mirrored(n, c, side, kernel, dilation, padding, stride):
    out = (side + 2 * padding - dilation * (kernel - 1) - 1) // stride + 1
    if out < 1:
        return
    k2, geometry = (kernel, kernel), ((dilation,) * 2, (padding,) * 2, (stride,) * 2)
    unfold = _im2col([n, c, side, side], k2, *geometry)
    fold = _col2im([n, c * kernel * kernel, out * out], (side, side), k2, *geometry)
    assert unfold.has_formula and fold.has_formula
    # col2im reads what im2col writes and writes an image of the size im2col reads.
    assert fold.bytes_read == unfold.bytes_written and fold.bytes_written == unfold.bytes_read
    # One add per column element that lands in the image: never more than the columns hold, and
    # all of them without padding.
    assert 0 < fold.flops <= n * c * kernel * kernel * out * out
    if padding == 0:
        assert fold.flops == n * c * kernel * kernel * out * out


def test_real_unfold_backward_is_kept_with_its_cost(tmp_path):
    # A convolution written as unfold + matmul (the DQN workload's --conv-impl unfold): the columns'
    # gradient comes back transposed, so col2im first makes it contiguous (a clone and copy_ inside
    # it). Without a formula col2im was then a parent of compute ops and was dropped, its clone kept.
    torch.manual_seed(0)
    x = torch.randn(2, 3, 9, 9, requires_grad=True)
    weight = torch.randn(27, 4)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(2):
            with record_function("archsim::learner_step#batch_size=2"):
                with record_function("archsim::train_forward"):
                    cols = torch.nn.functional.unfold(x, 3, padding=1)
                    loss = cols.transpose(1, 2).matmul(weight).sum()
                with record_function("archsim::train_backward"):
                    loss.backward()
    path = tmp_path / "unfold.json"
    prof.export_chrome_trace(str(path))
    ops = ingest(path).ops
    col2im = ops[ops["name"] == "aten::col2im"]
    if not len(col2im):
        pytest.fail("no aten::col2im kept from a real F.unfold backward")
    assert len(col2im) == 2 and col2im["has_formula"].all()
    assert set(col2im["phase"]) == {"train_backward"}
    assert "aten::clone" not in set(ops["name"])  # the copy inside col2im is part of its time
    # [2, 27, 81] columns onto 2 x 3 images of 9x9, kernel 3, padding 1: per axis 8 + 9 + 8 = 25
    # in-image (offset, position) pairs, 625 per channel.
    assert set(col2im["flops"]) == {2 * 3 * 625}
    assert set(col2im["bytes_read"]) == {2 * 27 * 81 * 4}
    # Kept ops never overlap on a thread: nothing inside col2im is kept beside it.
    for _, op in col2im.iterrows():
        same = ops[(ops["tid"] == op["tid"]) & (ops.index != op.name)]
        inside = (same["start_us"] >= op["start_us"]) & (
            same["start_us"] < op["start_us"] + op["dur_us"]
        )
        assert not inside.any(), same[inside]["name"].tolist()
