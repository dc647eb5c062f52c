"""MIOpen's kernels around an implicit-GEMM convolution (archsim.trace.gpu_costs.split_op): its
SetTensor kernel (``SubTensorOpWithScalar1d``, a grid-stride loop) zeroes the convolution's output,
so it writes the op's output, not its grid's elements (issue 12)."""

from __future__ import annotations

import functools
import json

import numpy as np

from archsim.trace.flops import OpCost, op_cost
from archsim.trace.gpu_costs import split_op
from tests.conftest import kineto_fixture

# The kernels of one aten::miopen_convolution in the MI300X SD3.5 trace, in launch order.
SET = "SubTensorOpWithScalar1d"
TRANSPOSE = "batched_transpose_32x32_half"
WEIGHTS = "batched_transpose_16x32_half"
ENGINE = (
    "igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x256x32_wt32x32x8_ws1x2_wr2x2_ta1x8x2x1_1x4x1x64_"
    "tb1x8x4x1_1x4x1x64"
)


def test_set_tensor_writes_the_output_by_hand() -> None:
    """3x3 convolution of [1, 256, 512, 512] bf16 to 256 channels (padding 1): output
    256 x 512 x 512 x 2 B = 134,217,728 B. SetTensor writes it and reads nothing; the transposes
    move their own grid (65,536 blocks x 256 threads x 4 elements x 2 B = 134,217,728 B each way;
    2,048 x 256 x 4 x 2 = 4,194,304 B for the weights'); the engine takes the op's FLOPs and bytes."""
    cost = OpCost("conv", 2.0e12, 135_397_376.0, 134_217_728.0, True, "bfloat16")
    names = [SET, TRANSPOSE, WEIGHTS, ENGINE, TRANSPOSE]
    blocks = np.array([256.0, 65_536.0, 2_048.0, 2_048.0, 65_536.0])
    threads = np.full(5, 256.0)
    flops, read, written, shares = split_op(cost, names, blocks, threads)
    assert shares.tolist() == [False, False, False, True, False]
    assert flops.tolist() == [0.0, 0.0, 0.0, 2.0e12, 0.0]
    assert read.tolist() == [0.0, 134_217_728.0, 4_194_304.0, 135_397_376.0, 134_217_728.0]
    assert written.tolist() == [134_217_728.0, 134_217_728.0, 4_194_304.0, 134_217_728.0,
                                134_217_728.0]  # fmt: skip


def test_only_the_set_kernel_name_is_taken() -> None:
    """A kernel that merely contains the name (a 2-d variant of another family) keeps its grid."""
    cost = OpCost("conv", 1.0e9, 4.0e6, 2.0e6, True, "float32")
    _, read, written, _ = split_op(
        cost, ["SubTensorOpWithScalar1d_custom", ENGINE], np.array([10.0, 100.0]),
        np.array([256.0, 256.0]),
    )  # fmt: skip
    assert (read[0], written[0]) == (40_960.0, 40_960.0)


@functools.cache
def _sd35_ops():
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture("mi300x_sd35_inference.json.gz")).ops


def test_fixture_set_tensor_writes_each_convolution_output() -> None:
    """On the MI300X SD3.5 trace every SubTensorOpWithScalar1d writes its convolution's output:
    N x K x H x W x 2 B (3x3 kernels, padding 1, stride 1: the input's spatial size), and reads
    nothing."""
    ops = _sd35_ops()
    rows = ops[ops["name"] == SET]
    assert len(rows) >= 10
    for dims_text, written, read in zip(rows["input_dims"], rows["bytes_written"],
                                        rows["bytes_read"], strict=True):  # fmt: skip
        dims = json.loads(dims_text)
        cost = op_cost("aten::miopen_convolution", dims, ["c10::BFloat16"] * 3 + ["ScalarList"] * 3
                       + ["Scalar"] * 3, ["", "", "", "[1, 1]", "[1, 1]", "[1, 1]", "1", "False",
                       "False"])  # fmt: skip
        n, _, h, w = dims[0]
        assert written == n * dims[1][0] * h * w * 2 == cost.bytes_written
        assert read == 0.0
