"""Sector traffic of elementwise kernels with strided operands (archsim.perf.sectors): golden values
worked by hand for the fixtures' channels-last add and broadcast bias add, TensorIterator's walk
order, and invariants (contiguous costs nothing extra, larger strides never fewer bytes, more
bandwidth never slower)."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds
from archsim.perf.sectors import (
    elementwise_read_sectors,
    iteration_order,
    strided_traffic,
)
from archsim.trace.schema import OPS_COLUMNS, conform

BF16 = "c10::BFloat16"
MB = 2**20


def contiguous(shape: list[int]) -> list[int]:
    return [math.prod(shape[i + 1 :]) for i in range(len(shape))]


def add_op(dims: list, strides: list, types: list, launch: str = "aten::add_") -> dict:
    itemsize = 2 if types[0] == BF16 else 4
    out = math.prod(dims[0])
    return {
        "kind": "kernel",
        "name": "void at::native::elementwise_kernel_manual_unroll<128, 8>",
        "launch_op": launch,
        "op_class": "elementwise",
        "dtype": "bfloat16" if itemsize == 2 else "float32",
        "input_dims": json.dumps(dims),
        "input_strides": json.dumps(strides),
        "input_types": json.dumps(types),
        "bytes_read": float(sum(math.prod(d) for d in dims if d) * itemsize),
        "bytes_written": float(out * itemsize),
        "flops": float(out),
        "grid_x": out / 1024,
        "grid_y": 1,
        "grid_z": 1,
        "block_x": 128,
        "block_y": 1,
        "block_z": 1,
    }


SHAPE = [1, 64, 256, 256]
CHANNELS_LAST = [64 * 256 * 256, 1, 256 * 64, 64]  # [N, C, H, W] stored N, H, W, C


def test_channels_last_add_into_nchw_by_hand():
    # MI300X SD3.5: x.add_(y), x contiguous NCHW, y channels-last, bf16. The walk follows x (arg 0):
    # W innermost, where y's stride is 64 elements = 128 B: each of a wavefront's 64 lanes reads its
    # own 64-B line, where a contiguous read takes 64 x 2 B = 2 lines: 32x. y's walk reads
    # 4,194,304 x 2 B = 8 MiB, so 31 x 8 MiB extra; a line holds 32 channels, the next channel read
    # 256 x 256 elements later, each moving one line meanwhile: 65,536 x 64 B = 4 MiB apart.
    dims = json.dumps([SHAPE, SHAPE, []])
    strides = json.dumps([contiguous(SHAPE), CHANNELS_LAST, []])
    types = json.dumps([BF16, BF16, "Scalar"])
    extra, gap = elementwise_read_sectors(dims, strides, types, 2, 64, 64)
    assert extra == 31 * 8 * MB
    assert gap == 4 * MB
    # NVIDIA sectors: 32 B, 32 lanes: 16 elements per sector, 16x, next use 65,536 x 32 B later
    extra, gap = elementwise_read_sectors(dims, strides, types, 2, 32, 32)
    assert (extra, gap) == (15 * 8 * MB, 2 * MB)
    # 4 MiB fits MI300X's 32 MB L2: the L2 serves the lines; a 2-MiB L2 would not hold them
    ops = conform(pd.DataFrame([add_op([SHAPE, SHAPE, []], [contiguous(SHAPE), CHANNELS_LAST, []],
                                       [BF16, BF16, "Scalar"])]), OPS_COLUMNS)  # fmt: skip
    assert [a[0] for a in strided_traffic(ops, True, 32 * MB)] == [0.0, 31 * 8 * MB]
    assert [a[0] for a in strided_traffic(ops, True, 2 * MB)] == [31 * 8 * MB, 0.0]


def test_broadcast_bias_read_across_the_walk_by_hand():
    # H100 TimeSformer: x [196, 128, 768] at strides [768, 151296, 1] plus b [1, 128, 768] at
    # [98304, 1, 128]. x orders the walk: 128 outer, 196, 768 innermost, where b strides 128 x 2 B
    # = 256 B: one 32-B sector per lane, 16x. b's walk reads x's 19,267,584 elements x 2 B; its
    # sector is re-read along the broadcast 196 every 768 elements: 768 x 32 B = 24 KiB apart.
    dims = json.dumps([[196, 128, 768], [1, 128, 768], []])
    strides = json.dumps([[768, 151296, 1], [98304, 1, 128], []])
    extra, gap = elementwise_read_sectors(dims, strides, json.dumps([BF16, BF16, "Scalar"]), 2, 32,
                                          32)  # fmt: skip
    assert extra == 15 * 196 * 128 * 768 * 2
    assert gap == 768 * 32


def test_iteration_order_follows_arg0_then_the_next_operand():
    # arg 0 contiguous NCHW decides: N, C, H, W; arg 0 channels-last decides: N, H, W, C
    nchw, nhwc = contiguous(SHAPE), CHANNELS_LAST
    assert iteration_order([SHAPE, SHAPE], [nchw, nhwc]) == [0, 1, 2, 3]
    assert iteration_order([SHAPE, SHAPE], [nhwc, nchw]) == [0, 2, 3, 1]
    # a broadcast (stride 0) arg 0 dim defers to the next operand
    assert iteration_order([[4, 8], [4, 8]], [[0, 1], [1, 4]]) == [1, 0]


def test_same_layout_and_broadcast_rows_cost_nothing_extra():
    types = json.dumps([BF16, BF16, "Scalar"])
    for second, stride in (
        ([1, 64, 256, 256], CHANNELS_LAST),
        ([1, 1, 1, 256], [256, 256, 256, 1]),
    ):
        first = CHANNELS_LAST if stride == CHANNELS_LAST else contiguous(SHAPE)
        got = elementwise_read_sectors(json.dumps([SHAPE, second, []]),
                                       json.dumps([first, stride, []]), types, 2, 32, 32)  # fmt: skip
        assert got == (0.0, 0.0)
    for bad in ("", "not json", json.dumps([[3, 4], [5, 4]])):
        assert elementwise_read_sectors(json.dumps([[3, 4], [5, 4]]), bad, "", 4, 32, 32)[0] == 0.0


@settings(max_examples=40, deadline=None)
@given(
    shape=st.lists(st.integers(1, 24), min_size=1, max_size=4),
    seed=st.integers(0, 1000),
    amd=st.booleans(),
    bf16=st.booleans(),
)
def test_contiguous_operands_cost_exactly_the_old_bytes(shape, seed, amd, bf16):
    # same permuted-dense layout for both operands: the walk follows it, nothing extra
    perm = np.random.default_rng(seed).permutation(len(shape))
    base = contiguous([shape[p] for p in perm])
    strides = [0] * len(shape)
    for k, p in enumerate(perm):
        strides[p] = base[k]
    types = [BF16 if bf16 else "float", BF16 if bf16 else "float", "Scalar"]
    ops = conform(pd.DataFrame([add_op([shape, shape, []], [strides, strides, []], types)]),
                  OPS_COLUMNS)  # fmt: skip
    dram, l2 = strided_traffic(ops, amd, 32 * MB)
    assert dram[0] == 0.0 and l2[0] == 0.0


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 64),
    cols=st.integers(2, 300),
    stride=st.integers(1, 40),
    amd=st.booleans(),
)
def test_a_larger_stride_never_moves_fewer_bytes(rows, cols, stride, amd):
    # arg 1 read along the walk's inner dim at stride s (rows s x cols apart, never overlapping)
    sector, lanes = (64, 64) if amd else (32, 32)
    shape = [rows, cols]
    types = json.dumps([BF16, BF16])

    def extra(s: int) -> float:
        strides = json.dumps([contiguous(shape), [cols * s, s]])
        return elementwise_read_sectors(json.dumps([shape, shape]), strides, types, 2, sector,
                                        lanes)[0]  # fmt: skip

    assert extra(1) == 0.0
    assert extra(stride + 1) >= extra(stride) >= 0.0


@settings(max_examples=20, deadline=None)
@given(scale=st.floats(1.0, 8.0), fit=st.booleans())
def test_more_bandwidth_is_never_slower(scale, fit):
    hw = load_hw("mi300x")
    ops = conform(pd.DataFrame([add_op([SHAPE, SHAPE, []], [contiguous(SHAPE), CHANNELS_LAST, []],
                                       [BF16, BF16, "Scalar"])]), OPS_COLUMNS)  # fmt: skip
    gpu = hw.gpu.model_copy(update={"l2_size_mb": 32.0 if fit else 2.0})
    slow = hw.model_copy(update={"gpu": gpu})
    fast_gpu = gpu.model_copy(update={"l2_bw_gbs": gpu.l2_bw_gbs * scale,
                                      "dram_bw_gbs": gpu.dram_bw_gbs * scale})  # fmt: skip
    fast = hw.model_copy(update={"gpu": fast_gpu})
    assert body_seconds(ops, fast)[0] <= body_seconds(ops, slow)[0] * (1 + 1e-12)
    # and the strided read is never cheaper than the same add with both operands contiguous
    plain = conform(pd.DataFrame([add_op([SHAPE, SHAPE, []], [contiguous(SHAPE)] * 2 + [[]],
                                         [BF16, BF16, "Scalar"])]), OPS_COLUMNS)  # fmt: skip
    assert body_seconds(ops, slow)[0] >= body_seconds(plain, slow)[0]
