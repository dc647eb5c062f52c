"""Nearest-neighbour upsampling's bytes (archsim.trace.flops.memory): PyTorch's
UpSampleNearest2d.cu stores every output element once, so its output, 4x its input at scale 2,
must be counted as written (issue 12)."""

from __future__ import annotations

import functools
import json

import numpy as np
import pytest

from archsim.trace.flops import op_cost
from tests.conftest import kineto_fixture

BF16 = "c10::BFloat16"


def test_vec_overload_by_hand() -> None:
    """upsample_nearest2d.vec([1, 512, 128, 128] bf16, None, [2., 2.]) as the SD3.5 VAE records it:
    reads 512 x 128 x 128 x 2 B = 16,777,216 B, writes 512 x 256 x 256 x 2 B = 67,108,864 B."""
    cost = op_cost(
        "aten::upsample_nearest2d", [[1, 512, 128, 128], [], []], [BF16, "", "ScalarList"],
        ["", "", "[2., 2.]"],
    )  # fmt: skip
    assert cost.has_formula and cost.op_class == "copy"
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (0, 16_777_216, 67_108_864)


def test_output_size_overload_by_hand() -> None:
    """upsample_nearest2d(input, output_size [1024, 1024], 2., 2.) on [1, 256, 512, 512] bf16:
    reads 256 x 512 x 512 x 2 B = 134,217,728 B, writes 256 x 1024 x 1024 x 2 B = 536,870,912 B.
    A recorded output_size wins over the scales."""
    cost = op_cost(
        "aten::upsample_nearest2d", [[1, 256, 512, 512], [], [], []],
        [BF16, "ScalarList", "Scalar", "Scalar"], ["", "[1024, 1024]", "3.", "3."],
    )  # fmt: skip
    assert (cost.bytes_read, cost.bytes_written) == (134_217_728, 536_870_912)


def test_1d_3d_exact_and_floor() -> None:
    """Scale 1.5 on 5 positions floors to 7 (interpolate: floor(5 x 1.5)); 1-d and 3-d alike."""
    one = op_cost("aten::upsample_nearest1d", [[2, 3, 5], [], []], ["float", "", "ScalarList"],
                  ["", "", "[1.5]"])  # fmt: skip
    assert (one.bytes_read, one.bytes_written) == (2 * 3 * 5 * 4, 2 * 3 * 7 * 4)
    three = op_cost("aten::_upsample_nearest_exact3d", [[1, 2, 2, 3, 4], [], []],
                    ["float", "", "ScalarList"], ["", "", "[2., 2., 2.]"])  # fmt: skip
    assert three.bytes_written == 8 * three.bytes_read


def test_backward_by_hand() -> None:
    """upsample_nearest2d_backward(grad_output [1, 8, 32, 32], output_size, input_size
    [1, 8, 16, 16], ...): reads 8,192 x 4 B = 32,768 B, adds each (8,192 FLOPs), writes
    2,048 x 4 B = 8,192 B."""
    cost = op_cost(
        "aten::upsample_nearest2d_backward", [[1, 8, 32, 32], [], [], [], []],
        ["float", "ScalarList", "ScalarList", "Scalar", "Scalar"],
        ["", "[32, 32]", "[1, 8, 16, 16]", "2.", "2."],
    )  # fmt: skip
    assert (cost.flops, cost.bytes_read, cost.bytes_written) == (8_192, 32_768, 8_192)


@pytest.mark.parametrize("scales", ["", "[2.]", "[0., 2.]", "[true, 2.]"])
def test_no_size_no_formula(scales: str) -> None:
    """Without an output size or a usable scale per spatial dim the op falls back to its reads."""
    cost = op_cost("aten::upsample_nearest2d", [[1, 2, 4, 4], [], []], ["float", "", "ScalarList"],
                   ["", "", scales])  # fmt: skip
    assert not cost.has_formula and cost.bytes_written == 0


@functools.cache
def _sd35_ops():
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture("mi300x_sd35_inference.json.gz")).ops


def test_fixture_kernels_write_the_upsampled_output() -> None:
    """The SD3.5 trace's three upsample_nearest2d_out_frame kernels write 4x what they read."""
    ops = _sd35_ops()
    rows = ops[ops["name"].str.contains("upsample_nearest2d_out_frame", regex=False)]
    assert len(rows) == 3
    first = np.array([2.0 * np.prod(json.loads(d)[0]) for d in rows["input_dims"]])
    assert (rows["bytes_read"].to_numpy() == first).all()
    assert (rows["bytes_written"].to_numpy() == 4 * first).all()
