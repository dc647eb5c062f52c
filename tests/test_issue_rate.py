"""Instruction issue floors (archsim.perf.issue_rate): cycles per warp-iteration worked by hand from
the SASS counts and the published rates, TensorIterator's coalesced dims of the H100 TimeSformer's
copies, the legacy copy's floor through the kernel model, and invariants (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.issue_rate import (
    LEGACY_COPY_ELEMENT,
    LEGACY_COPY_PER_DIM,
    LoopCount,
    coalesced_dims,
    copy_iteration_dims,
    ilp_row_warp_iterations,
    issue_seconds,
    legacy_copy_cycles,
    legacy_copy_issue_seconds,
    softmax_pass_cycles,
    warp_cycles,
)
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

H100 = load_hw("dgx-h100")
COPY = (
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::"
    "{lambda()#12}::operator()() const::{lambda(c10::BFloat16)#1}>(at::TensorIteratorBase&, ...)"
)
# aten::copy_ of the H100 TimeSformer: [8, 12, 3137, 64] into a contiguous tensor from a permuted one
DIMS = [[8, 12, 3137, 64], [8, 12, 3137, 64], []]
STRIDES = [[2409216, 200768, 64, 1], [7227648, 64, 2304, 1], []]


def test_warp_cycles_worked_by_hand() -> None:
    # 32 lanes x 4 sub-partitions over 64 integer results a clock: 2 cycles an integer op; over 16
    # MUFU results: 8 cycles; every instruction takes its dispatch slot
    assert warp_cycles(LoopCount(17, 6, 1)) == 17.0  # softmax sum pass: dispatch-bound
    assert warp_cycles(LoopCount(7, 5)) == 10.0  # softmax max pass: integer pipe
    assert warp_cycles(LoopCount(4, 0, 1)) == 8.0  # MUFU-bound
    # the legacy copy over 4 dims: 18 + 4 x 12 = 66 instructions, 7 + 4 x 7 = 35 integer: 70
    four = LEGACY_COPY_ELEMENT + LEGACY_COPY_PER_DIM.times(4)
    assert (four.instructions, four.int_ops) == (66, 35)
    assert legacy_copy_cycles(np.array([3.0, 4.0])) == pytest.approx([56.0, 70.0])


def test_coalesced_dims_of_the_timesformer_copies() -> None:
    assert coalesced_dims(DIMS[0], [STRIDES[0], STRIDES[1]]) == 4
    # [1, 224, 14, 8, 768] from strides [.., 10752, 768, 2409216, 1]: 224 and 14 merge in both
    out = [19267584, 86016, 6144, 768, 1]
    assert coalesced_dims([1, 224, 14, 8, 768], [out, [19273728, 10752, 768, 2409216, 1]]) == 3
    assert coalesced_dims([4, 5, 6], [[30, 6, 1], [30, 6, 1]]) == 1  # contiguous: one dim
    assert coalesced_dims([1, 1], [[1, 1], [1, 1]]) == 1
    assert copy_iteration_dims("aten::copy_", json.dumps(DIMS), json.dumps(STRIDES)) == 4
    # clone reads arg 0 into a row-major output
    assert copy_iteration_dims("aten::clone", "[[3136, 12, 8, 64]]", "[[768, 64, 2408448, 1]]") == 3
    assert copy_iteration_dims("aten::add", json.dumps(DIMS), json.dumps(STRIDES)) == 0
    assert copy_iteration_dims("aten::copy_", "not json", "[]") == 0


def test_softmax_row_walk_worked_by_hand() -> None:
    # 3,137 bf16 columns, 1,024 threads: never vectorized; 99 warp-iterations at every shift
    scalar, vector = ilp_row_warp_iterations(np.array([3137.0]), np.array([1024.0]),
                                             np.array([8.0]), np.array([2.0]))  # fmt: skip
    assert (scalar[0], vector[0]) == (99.0, 0.0)
    # 8,193 columns: row r starts r mod 8 elements past 16 B; shift 0 (1 row in 8) runs 8,192 /
    # (8 x 32) = 32 vector warp-iterations and a 1-element tail (1); shifts s = 1..7 walk 32
    # prologue warp-iterations, then a tail of 7,169 + s < 8,192 elements, ceil(/ 32) = 225
    scalar, vector = ilp_row_warp_iterations(np.array([8193.0]), np.array([1024.0]),
                                             np.array([8.0]), np.array([2.0]))  # fmt: skip
    assert scalar[0] == pytest.approx((1 + 7 * 257) / 8) and vector[0] == pytest.approx(32 / 8)
    cycles = softmax_pass_cycles(np.array([3137.0]), np.array([1024.0]), np.array([8.0]),
                                 np.array([2.0]))  # fmt: skip
    assert cycles[0] == pytest.approx([99 * 10, 99 * 17, 99 * 31])


def _copy_ops(blocks: int, dims: list, strides: list) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": COPY, "launch_op": "aten::copy_", "op_class": "copy",
        "dtype": "bfloat16", "bytes_read": 2.0 * blocks * 512, "bytes_written": 2.0 * blocks * 512,
        "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": 128, "block_y": 1, "block_z": 1,
        "input_dims": json.dumps(dims), "input_strides": json.dumps(strides),
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_legacy_copy_floor_golden() -> None:
    # 37,644 blocks of 128 threads x vt 4 on 132 SMs: the busiest runs 286 blocks, 286 x 4 warps x
    # 4 elements / 4 sub-partitions = 1,144 warp-elements x 70 cycles / 1980 MHz = 40.44 us
    ops = _copy_ops(37644, DIMS, STRIDES)
    floor = legacy_copy_issue_seconds(ops, np.array([37644.0]), np.array([128.0]), H100.gpu,
                                      "hopper", frozenset())  # fmt: skip
    assert floor[0] == pytest.approx(1144 * 70 / 1980e6)
    assert kernel_terms(ops, H100.gpu, frozenset(), H100.name)["comp"][0] == pytest.approx(floor[0])
    # no floor on AMD, and no tail under perfect SM utilization (37644 / 132 blocks)
    assert not legacy_copy_issue_seconds(ops, np.array([37644.0]), np.array([128.0]), H100.gpu,
                                         "cdna3", frozenset()).any()  # fmt: skip
    busy = legacy_copy_issue_seconds(ops, np.array([37644.0]), np.array([128.0]), H100.gpu,
                                     "hopper", frozenset({"sm_utilization"}))  # fmt: skip
    assert busy[0] == pytest.approx(37644 / 132 * 4 * 4 / 4 * 70 / 1980e6)


@settings(max_examples=60, deadline=None)
@given(
    counts=st.tuples(st.integers(1, 200), st.integers(0, 200), st.integers(0, 50)),
    rates=st.tuples(st.floats(0.25, 4), st.floats(8, 256), st.floats(4, 64)),
    faster=st.floats(1.0, 8.0),
)
def test_faster_issue_never_slower(counts: tuple, rates: tuple, faster: float) -> None:
    count = LoopCount(*counts)
    base = warp_cycles(count, *rates)
    for k in range(3):
        quicker = list(rates)
        quicker[k] *= faster
        assert warp_cycles(count, *quicker) <= base + 1e-9
    assert issue_seconds(10.0, base, 1980.0 * faster) <= issue_seconds(10.0, base, 1980.0)


@settings(max_examples=40, deadline=None)
@given(blocks=st.integers(1, 200_000), more=st.integers(1, 50_000), extra_dim=st.booleans())
def test_more_elements_never_faster(blocks: int, more: int, extra_dim: bool) -> None:
    def floor(n: int, dims: list, strides: list) -> float:
        ops = _copy_ops(n, dims, strides)
        return float(legacy_copy_issue_seconds(ops, np.array([float(n)]), np.array([128.0]),
                                               H100.gpu, "hopper", frozenset())[0])  # fmt: skip

    base = floor(blocks, DIMS, STRIDES)
    assert floor(blocks + more, DIMS, STRIDES) >= base
    # a 2-dim iteration space (rows contiguous in both) issues no more than the 4-dim one
    three = [[8, 12, 3137, 64], [8, 12, 3137, 64], []]
    three_strides = [[2409216, 200768, 64, 1], [2409216 * 3, 64 * 3137, 64, 1], []]
    if extra_dim:
        assert floor(blocks, three, three_strides) <= base


@settings(max_examples=40, deadline=None)
@given(row=st.integers(1, 8000), extra=st.integers(1, 4000), two_bytes=st.booleans())
def test_longer_scalar_rows_never_fewer_cycles(row: int, extra: int, two_bytes: bool) -> None:
    # below ILP x T every element is walked by the scalar loops: a longer row issues no less. Rows
    # of one alignment phase only (lengths equal mod 16 B / size): a length that is a multiple of
    # it starts every row aligned and skips the shift prologue (fp32: 2,784 columns walk 87 warp-
    # iterations a pass, 2,783 average 87.5), so across phases a longer row can issue less
    size, ilp = (2.0, 8.0) if two_bytes else (4.0, 4.0)
    limit, cycle = int(ilp * 1024) - 1, int(16 // size)
    a = min(row, limit)
    b = a + cycle * min(extra, (limit - a) // cycle)
    cycles = softmax_pass_cycles(np.array([a, b], dtype=float), np.full(2, 1024.0),
                                 np.full(2, ilp), np.full(2, size))  # fmt: skip
    assert (cycles[1] >= cycles[0] - 1e-9).all()
