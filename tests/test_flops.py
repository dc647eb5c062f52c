"""FLOP and byte formulas: hand-worked goldens, torch's own FLOP counter as a second opinion, and
property tests."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.utils.flop_counter import FlopCounterMode

from archsim.trace.flops import (
    METADATA_OPS,
    is_metadata_op,
    kernel_class,
    op_class,
    op_cost,
    op_key,
)

CONV_TYPES = ["float", "float", "float", "ScalarList", "ScalarList", "ScalarList", "Scalar"]


def _convolution_args(x, w, stride, padding, bias=True, groups=1):
    """Input Dims / Input type / Concrete Inputs as torch.profiler records aten::convolution."""
    dims = [list(x), list(w), [w[0]] if bias else [], [], [], [], [], [], []]
    types = ["float", "float", "float" if bias else "", *["ScalarList"] * 3, "Scalar"]
    types += ["ScalarList", "Scalar"]
    concrete = ["", "", "", str(list(stride)), str(list(padding)), "[1, 1]", "False", "[0, 0]"]
    concrete.append(str(groups))
    return dims, types, concrete


def test_conv_golden_nature_dqn_first_layer():
    # Nature DQN conv1 (REFERENCE.md): batch 32, 4x84x84 input, 32 filters 8x8, stride 4, no padding.
    # Output side (84 - 8) / 4 + 1 = 20, so 32 * 32 * 20 * 20 = 409,600 output elements.
    # Each sums 4 channels x 8 x 8 = 256 products: 2 * 409,600 * 256 = 209,715,200 FLOPs,
    # plus one bias add per output: 209,715,200 + 409,600 = 210,124,800.
    dims, types, concrete = _convolution_args((32, 4, 84, 84), (32, 4, 8, 8), (4, 4), (0, 0))
    cost = op_cost("aten::convolution", dims, types, concrete)
    assert cost.has_formula and cost.op_class == "conv" and cost.dtype == "float32"
    assert cost.flops == 210_124_800
    # Reads x (32*4*84*84*4 B = 3,612,672), w (32*4*8*8*4 = 32,768), bias (128): 3,645,568 B.
    assert cost.bytes_read == 3_645_568
    assert cost.bytes_written == 409_600 * 4


def test_conv_backward_golden():
    # convolution_backward of the same layer (grad_output [32,32,20,20]), mask [False, True, True]
    # as the first layer's grads are recorded by torch: grad_weight costs the forward's MACs,
    # 2 * 409,600 * 256 = 209,715,200, and grad_bias sums grad_output: + 409,600 = 210,124,800.
    dims = [[32, 32, 20, 20], [32, 4, 84, 84], [32, 4, 8, 8], [], [], [], [], [], [], [], []]
    types = ["float"] * 3 + ["ScalarList"] * 4 + ["Scalar", "ScalarList", "Scalar", "ScalarList"]
    concrete = ["", "", "", "[32]", "[4, 4]", "[0, 0]", "[1, 1]", "False", "[0, 0]", "1"]
    concrete.append("[False, True, True]")
    cost = op_cost("aten::convolution_backward", dims, types, concrete)
    assert cost.op_class == "conv"
    assert cost.flops == 210_124_800
    assert cost.bytes_written == 32 * 4 * 8 * 8 * 4  # only grad_weight is materialised


def test_gemm_golden_nature_dqn_fc():
    # fc 3136 -> 512 at batch 32 as aten::addmm(bias[512], x[32,3136], w_t[3136,512]):
    # 2 * 32 * 3136 * 512 = 102,760,448 FLOPs + 32 * 512 = 16,384 bias adds = 102,776,832.
    dims = [[512], [32, 3136], [3136, 512], [], []]
    types = ["float", "float", "float", "Scalar", "Scalar"]
    cost = op_cost("aten::addmm", dims, types, ["", "", "", "1", "1"])
    assert cost.op_class == "gemm"
    assert cost.flops == 102_776_832
    # Reads 512*4 + 32*3136*4 + 3136*512*4 = 2,048 + 401,408 + 6,422,528 = 6,825,984 B.
    assert cost.bytes_read == 6_825_984
    assert cost.bytes_written == 32 * 512 * 4


def test_half_precision_gemm_and_batched_matmul():
    # bmm of [8, 64, 32] by [8, 32, 16] in fp16: 2 * 8 * 64 * 32 * 16 = 524,288 FLOPs;
    # reads (8*64*32 + 8*32*16) * 2 B = (16,384 + 4,096) * 2 = 40,960 B; writes 8*64*16*2 = 16,384 B.
    cost = op_cost("aten::bmm", [[8, 64, 32], [8, 32, 16]], ["c10::Half", "c10::Half"])
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (524_288, 40_960, 16_384)
    assert cost.dtype == "float16"
    # matmul broadcasting a [5, 10, 20] batch against a [20, 30] matrix: 2 * 5 * 10 * 20 * 30.
    assert op_cost("aten::matmul", [[5, 10, 20], [20, 30]], ["float", "float"]).flops == 60_000
    # linear(x[4, 7, 16], w[8, 16], b[8]): 2 * 28 * 16 * 8 + 28 * 8 = 7,168 + 224 = 7,392.
    linear = op_cost("aten::linear", [[4, 7, 16], [8, 16], [8]], ["float"] * 3)
    assert linear.flops == 7_392


def test_lstm_cell_golden():
    # lstm_cell(input[2,6], (h,c), w_ih[64,6], w_hh[64,16], b_ih[64], b_hh[64]) with H = 16:
    # gate GEMMs 2 * 2 * 64 * (6 + 16) = 5,632; biases 2 * 2 * 64 = 256; cell update 9 * 2 * 16 = 288.
    dims = [[2, 6], [[2, 16], [2, 16]], [64, 6], [64, 16], [64], [64]]
    types = ["float", "TensorList", "float", "float", "float", "float"]
    cost = op_cost("aten::lstm_cell", dims, types, [""] * 6)
    assert cost.op_class == "rnn"
    assert cost.flops == 5_632 + 256 + 288


def test_elementwise_reduction_softmax_loss_copy_optimizer():
    add = op_cost("aten::add", [[4, 1, 5], [3, 1], []], ["float", "float", "Scalar"])
    assert add.flops == 4 * 3 * 5  # broadcast [4,1,5] + [3,1] -> [4,3,5]
    assert add.bytes_written == 60 * 4
    total = op_cost("aten::sum", [[5, 128], [], [], []], ["float", "ScalarList", "Scalar", ""])
    assert total.flops == 640 and total.bytes_written == 4
    by_row = op_cost(
        "aten::sum", [[5, 128], [], [], []], ["float", "ScalarList", "Scalar", ""], ["", "[0]"]
    )
    assert by_row.bytes_written == 128 * 4  # summing over dim 0 leaves 128 values
    soft = op_cost("aten::_softmax", [[32, 10], [], []], ["float", "Scalar", "Scalar"])
    assert soft.op_class == "softmax" and soft.flops == 5 * 320
    mse = op_cost(
        "aten::mse_loss", [[32, 6], [32, 6], []], ["float", "float", "Scalar"], ["", "", "1"]
    )
    assert mse.op_class == "loss" and mse.flops == 3 * 192 and mse.bytes_written == 4
    back = op_cost(
        "aten::mse_loss_backward", [[], [32, 6], [32, 6], []], ["float", "float", "float", "Scalar"]
    )
    assert back.flops == 3 * 192 and back.bytes_written == 192 * 4
    copy = op_cost("aten::copy_", [[10, 10], [10, 10], []], ["c10::Half", "float", "Scalar"])
    assert (copy.op_class, copy.flops, copy.bytes_read, copy.bytes_written) == ("copy", 0, 400, 200)
    # Adam over two parameter tensors of 128*128 and 128 elements: 12 ops * 16,512 elements.
    lists = [[[128, 128], [128]]] * 4
    adam = op_cost("aten::_fused_adam_", [*lists, []], ["TensorList"] * 4 + ["TensorList"])
    assert adam.op_class == "optimizer" and adam.flops == 12 * 16_512


def test_ops_without_formula_get_input_bytes_and_no_flops():
    cost = op_cost("aten::some_custom_op", [[10, 10], [3]], ["float", "long int"])
    assert not cost.has_formula and cost.flops == 0
    assert cost.bytes_read == 10 * 10 * 4 + 3 * 8 and cost.bytes_written == 0
    unrecorded = op_cost("aten::addmm", None)
    assert not unrecorded.has_formula and unrecorded.op_class == "gemm"
    # A strided convolution without Concrete Inputs has an unknown output size: no formula.
    assert not op_cost("aten::convolution", [[1, 4, 84, 84], [32, 4, 8, 8], [32]]).has_formula


def test_backward_nodes_and_kernels_map_to_their_family():
    assert op_key("ConvolutionBackward0") == "convolution_backward"
    assert op_key("autograd::engine::evaluate_function: MseLossBackward0") == "mse_loss_backward"
    assert op_key("aten::add_") == "add"
    assert op_key("aten::__and__") == "__and__" and op_class("aten::__and__") == "elementwise"
    assert op_key("aten::_foreach_add_") == "_foreach_add"
    assert op_class("ConvolutionBackward0") == "conv"
    assert op_class("AddmmBackward0") == "gemm"
    assert op_class("MseLossBackward0") == "loss"
    assert op_class("aten::cudnn_convolution") == "conv"
    assert op_class("aten::_foreach_addcdiv_") == "optimizer"
    assert kernel_class("volta_sgemm_128x64_nn") == "gemm"
    assert kernel_class("Cijk_Alik_Bljk_SB_MT64x16x32") == "gemm"
    assert kernel_class("cudnn::bn_fw_tr_1C11_kernel_NCHW<float>") == "reduction"
    assert is_metadata_op("aten::view") and is_metadata_op("aten::resize_")
    assert not is_metadata_op("aten::copy_")
    assert "copy" not in METADATA_OPS


def _torch_conv_flops(x_shape, w_shape, stride, padding):
    x, w = torch.zeros(x_shape), torch.zeros(w_shape)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.conv2d(x, w, stride=stride, padding=padding)
    return counter.get_total_flops()


@settings(max_examples=25, deadline=None)
@given(
    batch=st.integers(1, 3),
    c_in=st.integers(1, 4),
    c_out=st.integers(1, 5),
    side=st.integers(5, 12),
    kernel=st.integers(1, 4),
    stride=st.integers(1, 3),
    padding=st.integers(0, 2),
)
def test_conv_formula_matches_torch_flop_counter(batch, c_in, c_out, side, kernel, stride, padding):
    # torch.utils.flop_counter counts 2 * MACs and no bias, so compare without a bias.
    dims, types, concrete = _convolution_args(
        (batch, c_in, side, side),
        (c_out, c_in, kernel, kernel),
        (stride, stride),
        (padding,) * 2,
        bias=False,
    )
    ours = op_cost("aten::convolution", dims, types, concrete).flops
    assert ours == _torch_conv_flops(
        (batch, c_in, side, side), (c_out, c_in, kernel, kernel), stride, padding
    )


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 40), k=st.integers(1, 40), n=st.integers(1, 40), b=st.integers(1, 4))
def test_gemm_formulas_match_torch_flop_counter(m, k, n, b):
    with FlopCounterMode(display=False) as counter:
        torch.bmm(torch.zeros(b, m, k), torch.zeros(b, k, n))
    assert op_cost("aten::bmm", [[b, m, k], [b, k, n]], ["float", "float"]).flops == (
        counter.get_total_flops()
    )
    with FlopCounterMode(display=False) as counter:
        torch.mm(torch.zeros(m, k), torch.zeros(k, n))
    assert op_cost("aten::mm", [[m, k], [k, n]], ["float", "float"]).flops == (
        counter.get_total_flops()
    )


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 6), min_size=1, max_size=4),
    scale=st.integers(1, 5),
)
def test_elementwise_flops_grow_linearly_with_the_leading_dimension(shape, scale):
    small = op_cost("aten::mul", [shape, shape], ["float", "float"])
    big_shape = [shape[0] * scale, *shape[1:]]
    big = op_cost("aten::mul", [big_shape, big_shape], ["float", "float"])
    assert small.flops == math.prod(shape)
    assert big.flops == scale * small.flops
    assert big.bytes_read == scale * small.bytes_read


@pytest.mark.parametrize(
    "name", ["aten::conv2d", "aten::mkldnn_convolution", "aten::cudnn_convolution"]
)
def test_every_convolution_entry_point_reads_its_own_argument_order(name):
    # The same 3x3 stride-2 pad-1 conv of [2, 4, 10, 10] -> [2, 8, 5, 5]: 2 * 200 * 36 = 14,400 MAC FLOPs.
    x, w = [2, 4, 10, 10], [8, 4, 3, 3]
    if name == "aten::conv2d":  # (input, weight, bias, stride, padding, dilation, groups)
        dims, conc = [x, w, [], [], [], [], []], ["", "", "", "[2, 2]", "[1, 1]", "[1, 1]", "1"]
    elif (
        name == "aten::mkldnn_convolution"
    ):  # (input, weight, bias, padding, stride, dilation, groups)
        dims, conc = [x, w, [], [], [], [], []], ["", "", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"]
    else:  # cudnn_convolution(self, weight, padding, stride, dilation, groups, ...)
        dims, conc = [x, w, [], [], [], []], ["", "", "[1, 1]", "[2, 2]", "[1, 1]", "1"]
    types = ["float", "float"] + [""] * (len(dims) - 2)
    assert op_cost(name, dims, types, conc).flops == 2 * (2 * 8 * 5 * 5) * 36


def test_lstm_sequence_golden_from_recorded_shapes():
    # What torch.profiler records for nn.LSTM(8, 16, num_layers=2) on input [T=5, B=3, 8].
    dims = [
        [5, 3, 8],
        [[2, 3, 16], [2, 3, 16]],
        [[64, 8], [64, 16], [64], [64], [64, 16], [64, 16], [64], [64]],
        *[[]] * 6,
    ]
    types = ["float", "TensorList", "TensorList", *["Scalar"] * 6]
    concrete = ["", "", "", "True", "2", "0.", "True", "False", "False"]
    cost = op_cost("aten::lstm", dims, types, concrete)
    # 15 tokens (T*B), H = 16, 4 gates: layer 1 GEMMs 2*15*64*(8+16) = 46,080; layer 2
    # 2*15*64*(16+16) = 61,440; biases 2 * (2*15*64) = 3,840; cell updates 2 * 9*15*16 = 4,320.
    assert cost.op_class == "rnn"
    assert cost.flops == 46_080 + 61_440 + 3_840 + 4_320
