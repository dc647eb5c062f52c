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


# ---------------------------------------------------------------- issue 13: new formulas -----------
def test_sdpa_matmul_flops_match_torchs_counter_plus_softmax_and_scale():
    # q [2, 3, 5, 8], k [2, 3, 7, 8], v [2, 3, 7, 4]: P = 2*3 heads x 5*7 pairs = 210 scores.
    # GEMMs 2 P (E + Ev) = 2 * 210 * 12 = 5,040 (torch's FlopCounterMode, second opinion);
    # plus scale (1) and softmax (5) per score: 6 * 210 = 1,260. Total 6,300.
    q, k, v = torch.randn(2, 3, 5, 8), torch.randn(2, 3, 7, 8), torch.randn(2, 3, 7, 4)
    with FlopCounterMode(display=False) as counter:
        torch.nn.functional.scaled_dot_product_attention(q, k, v)
    assert counter.get_total_flops() == 5_040
    dims = [[2, 3, 5, 8], [2, 3, 7, 8], [2, 3, 7, 4], [], [], [], []]
    types = ["float", "float", "float", "", "Scalar", "Scalar", ""]
    cost = op_cost(
        "aten::scaled_dot_product_attention", dims, types, ["", "", "", "", "0.", "False", ""]
    )
    assert cost.has_formula and cost.op_class == "attention"
    assert cost.flops == 5_040 + 6 * 210
    assert cost.bytes_written == 2 * 3 * 5 * 4 * 4  # output [2, 3, 5, 4] fp32


def test_causal_flash_attention_counts_the_lower_triangle():
    # L = S = 4, causal: rows see 1, 2, 3, 4 keys = 10 pairs of 16; 1 batch x 2 heads, E = Ev = 8:
    # 2 heads x 10 pairs x (2 x 16 + 6) = 760 FLOPs.
    dims = [[1, 2, 4, 8]] * 3 + [[]] * 4
    cost = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        dims,
        ["c10::Half"] * 3 + ["Scalar", "Scalar", "Scalar", ""],
        ["", "", "", "0.", "True", "False", ""],
    )
    assert cost.flops == 2 * 10 * (2 * 16 + 6) and cost.dtype == "float16"
    non_causal = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        dims,
        ["c10::Half"] * 3 + ["Scalar", "Scalar", "Scalar", ""],
        ["", "", "", "0.", "False", "False", ""],
    )
    assert non_causal.flops == 2 * 16 * (2 * 16 + 6)


def test_flash_attention_backward_is_five_gemms():
    # grad_out, q, k, v, out [1, 1, 3, 2]: P = 9; 2 P (3 E + 2 Ev) = 18 * 10 = 180 plus the softmax
    # recompute and backward (5 + 4) P = 81: 261 FLOPs; writes dq, dk, dv.
    t = [1, 1, 3, 2]
    cost = op_cost(
        "aten::_scaled_dot_product_flash_attention_backward",
        [t, t, t, t, t, [1, 1, 3]] + [[]] * 9,
        ["float"] * 6 + [""] * 9,
    )
    assert cost.flops == 261 and cost.bytes_written == 3 * 6 * 4


def test_embedding_bag_sum_and_mean():
    # weight [1000, 16], 12 indices in 4 bags (offsets [4]): 12 x 16 = 192 adds; mean adds 4 x 16
    # divides. Reads 12 int64 indices + 4 int64 offsets + 12 gathered fp32 rows; writes [4, 16] fp32.
    dims = [[1000, 16], [12], [4], [], [], [], [], [], []]
    types = ["float", "long int", "long int", "Scalar", "Scalar", "Scalar", "", "Scalar", "Scalar"]
    total = op_cost("aten::embedding_bag", dims, types, ["", "", "", "False", "0"] + [""] * 4)
    assert total.op_class == "reduction" and total.flops == 192
    assert total.bytes_read == 12 * 8 + 4 * 8 + 12 * 16 * 4 and total.bytes_written == 4 * 16 * 4
    mean = op_cost("aten::_embedding_bag", dims, types, ["", "", "", "False", "1"] + [""] * 4)
    assert mean.flops == 192 + 4 * 16


def test_layer_and_rms_norm_goldens():
    # x [8, 32] over the last dim, weight and bias [32]: layer norm (6 + 2) x 256 + 4 x 8 rows = 2,080;
    # native_layer_norm also writes the fp32 mean and rstd of 8 rows.
    dims = [[8, 32], [], [32], [32], []]
    types = ["float", "ScalarList", "float", "float", "Scalar"]
    layer = op_cost("aten::native_layer_norm", dims, types, ["", "[32]", "", "", "1e-05"])
    assert layer.flops == 8 * 256 + 4 * 8 and layer.bytes_written == 256 * 4 + 2 * 8 * 4
    # RMS norm with weight: (3 + 1) x 256 + 3 x 8 rows = 1,048; without weight 3 x 256 + 24 = 792.
    rms = op_cost("aten::rms_norm", dims[:3] + [[]], types[:3] + ["Scalar"], ["", "[32]", "", ""])
    assert rms.flops == 4 * 256 + 3 * 8
    bare = op_cost(
        "aten::rms_norm",
        [[8, 32], [], [], []],
        ["float", "ScalarList", "", ""],
        ["", "[32]", "", ""],
    )
    assert bare.flops == 3 * 256 + 3 * 8


def test_grouped_gemm_goldens():
    # 2-D x 3-D: 64 token rows split among 4 experts, K = 32, N = 16: 2 x 64 x 32 x 16 = 65,536.
    cost = op_cost(
        "aten::_grouped_mm",
        [[64, 32], [4, 32, 16], [4], [], []],
        ["c10::BFloat16"] * 2 + ["int", "", ""],
    )
    assert cost.op_class == "gemm" and cost.flops == 65_536
    assert cost.bytes_written == 64 * 16 * 2
    # 3-D x 3-D: 4 batched [8, 32] x [32, 16] GEMMs: 2 x 4 x 8 x 32 x 16 = 32,768, out [4, 8, 16].
    batched = op_cost(
        "aten::_grouped_mm", [[4, 8, 32], [4, 32, 16], [], [], []], ["c10::BFloat16"] * 2
    )
    assert batched.flops == 32_768 and batched.bytes_written == 4 * 8 * 16 * 2
    # 2-D x 2-D with K split into 4 groups: 2 x 8 x 64 x 16 = 16,384, one [8, 16] output per group.
    k_split = op_cost(
        "aten::_grouped_mm", [[8, 64], [64, 16], [4], [], []], ["c10::BFloat16"] * 2 + ["int"]
    )
    assert k_split.flops == 16_384 and k_split.bytes_written == 4 * 8 * 16 * 2


def test_legacy_convolution_needs_the_output_shape_it_did_not_record():
    # PyTorch 1.9 aten::cudnn_convolution: stride/padding are GenericList without values. With the
    # output [32, 64, 112, 112] from the autograd node: 2 x 25,690,112 outputs x 3 x 7 x 7 = 7.55 GFLOP.
    dims = [[32, 3, 224, 224], [64, 3, 7, 7], [], [], [], [], [], [], []]
    types = [
        "float",
        "float",
        "GenericList",
        "GenericList",
        "GenericList",
        "Int",
        "Bool",
        "Bool",
        "Bool",
    ]
    assert not op_cost("aten::cudnn_convolution", dims, types).has_formula
    cost = op_cost("aten::cudnn_convolution", dims, types, output_shape=(32, 64, 112, 112))
    assert cost.flops == 2 * 32 * 64 * 112 * 112 * 3 * 49
    # Its legacy backward (self, grad_output, weight, ...): both gradients = 2 x 2 x MACs.
    back = op_cost(
        "aten::cudnn_convolution_backward",
        [[32, 512, 7, 7], [32, 2048, 7, 7], [2048, 512, 1, 1]] + [[]] * 8,
        ["float"] * 3 + ["GenericList"] * 3 + ["Int", "Bool", "Bool", "Bool", "GenericList"],
    )
    assert back.flops == 2 * 2 * (32 * 2048 * 49) * 512


@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("_typeConvert", "other"),  # not a convolution
        ("void at::native::vectorized_elementwise_kernel<4, convert_functor>", "elementwise"),
        ("void implicit_convolve_sgemm<float, float, 128, 6>", "gemm"),
        ("volta_scudnn_128x64_relu_interior_nn_v1", "conv"),
        ("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>", "reduction"),
        ("cunn_SoftMaxForward<4, float>", "softmax"),
        ("pytorch_flash::flash_fwd_kernel<Flash_fwd_kernel_traits<64>>", "attention"),
        ("Cijk_Ailk_Bljk_BBS_BH_MT128x128x32", "gemm"),
        ("nchwToNhwcKernel", "other"),
    ],
)
def test_kernel_class_matches_whole_tokens(name, klass):
    assert kernel_class(name) == klass


def test_op_class_by_tokens():
    assert op_class("prims::convert_element_type") == "other"
    assert op_class("aten::slow_conv3d_forward") == "conv"
    assert op_class("aten::_scaled_dot_product_efficient_attention") == "attention"


_SIDES = st.integers(min_value=1, max_value=64)


@settings(max_examples=60, deadline=None)
@given(batch=_SIDES, length_q=_SIDES, length_k=_SIDES, head_dim=_SIDES)
def test_attention_invariants(batch, length_q, length_k, head_dim):
    # Causal attention never costs more than full attention, and more keys never cost less.
    def flops(length: int, causal: bool) -> float:
        dims = [[batch, 2, length_q, head_dim], [batch, 2, length, head_dim]] * 1
        dims = dims + [[batch, 2, length, head_dim], [], []]
        concrete = ["", "", "", "0.", str(causal), "False", ""]
        types = ["c10::BFloat16"] * 3 + ["Scalar", "Scalar"]
        return op_cost("aten::_scaled_dot_product_flash_attention", dims, types, concrete).flops

    assert 0 < flops(length_k, True) <= flops(length_k, False)
    assert flops(length_k + 1, False) > flops(length_k, False)
    # Full attention: exactly (4 E + 6) FLOPs per (query, key) pair and head.
    assert flops(length_k, False) == batch * 2 * length_q * length_k * (4 * head_dim + 6)
