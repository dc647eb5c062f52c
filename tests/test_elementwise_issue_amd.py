"""Instruction issue of ROCm PyTorch's element-wise loops (archsim.perf.elementwise_issue_amd):
cycles worked by hand from the gfx940 counts, TensorIterator's coalesced dims of MI300X SD3.5
records, the floor through the kernel model, and invariants (hypothesis).

mi300x preset: 304 CUs, 2100 MHz."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.elementwise_issue_amd import (
    ELEMENTWISE_COUNTS,
    call_count,
    coalesced_iteration_dims,
    elementwise_issue_seconds,
    loop_key,
)
from archsim.perf.issue_rate_amd import WaveCount
from archsim.perf.occupancy import blocks_per_sm
from archsim.perf.terms import kernel_terms, launch_shape
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
ADD = (
    "void at::native::elementwise_kernel_manual_unroll<128, 8, at::native::gpu_kernel_impl_nocast<"
    "at::native::CUDAFunctor_add<c10::BFloat16> >(at::TensorIteratorBase&, at::native::"
    "CUDAFunctor_add<c10::BFloat16> const&)::{lambda(int, bool)#1}>(int, ...)"
)
VEC_ADD = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
# MI300X SD3.5's largest bias add: aten::add_ of [1,256,1024,1024] bf16 with a [1,256,1,1] bias
BIAS_DIMS = "[[1,256,1024,1024],[1,256,1,1],[]]"
BIAS_STRIDES = "[[268435456,1048576,1024,1],[256,1,1,1],[]]"


def _launch(blocks: float, threads: float, resident: float):
    return np.array([blocks]), np.array([threads]), np.array([resident])


def _op(name: str, blocks: int, threads: int, dims: str, strides: str) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": name, "launch_op": "aten::add_", "op_class": "elementwise",
        "dtype": "bfloat16", "bytes_read": 536871424.0, "bytes_written": 536870912.0,
        "flops": 268435456.0, "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": threads,
        "block_y": 1, "block_z": 1, "input_dims": dims, "input_strides": strides,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_bias_add_dims_and_issue_worked_by_hand() -> None:
    # W and H merge in every operand (bias stride 0 continues 0), C does not: 2 coalesced dims
    assert coalesced_iteration_dims(BIAS_DIMS, BIAS_STRIDES) == 2
    assert loop_key(ADD) == ("mu_add_bf16", 8)
    ops = _op(ADD, 262144, 128, BIAS_DIMS, BIAS_STRIDES)
    # interior blocks 262,143 over 304 CUs: 863 on the busiest; 16 resident a round (8 waves a
    # SIMD of 2-wave blocks): 54 rounds of 8 waves a SIMD x 201 VALU x 4 cycles = 6,432 cycles
    # (above one wave's 249 instructions x 4 = 996): 54 x 6,432 / 2.1 GHz = 165.39 us
    seconds = elementwise_issue_seconds(ops, _launch(262144, 128, 16), MI300X.gpu, "cdna3",
                                        frozenset())  # fmt: skip
    assert seconds[0] == pytest.approx(54 * 6432 / 2.1e9)
    assert seconds[0] * 1e6 == pytest.approx(165.39, abs=0.01)
    # one SM's work divided by 304 under perfect SM utilization: 262,143 / 304 blocks in one
    # round, 2 waves each over 4 SIMDs, 804 cycles a wave
    ideal = elementwise_issue_seconds(ops, _launch(262144, 128, 16), MI300X.gpu, "cdna3",
                                      frozenset({"sm_utilization"}))  # fmt: skip
    assert ideal[0] == pytest.approx(262143 / 304 * 2 / 4 * 804 / 2.1e9)


def test_vectorized_add_worked_by_hand() -> None:
    # 32,768 blocks of 256 threads (SD3.5's [1,256,1024,1024] bf16 add): 108 interior blocks on
    # the busiest CU, 8 resident (32 waves a CU): 14 rounds of 8 waves a SIMD x 140 x 4 cycles
    ops = _op(VEC_ADD, 32768, 256, "[[1,256,1024,1024],[1,256,1024,1024],[]]", "")
    seconds = elementwise_issue_seconds(ops, _launch(32768, 256, 8), MI300X.gpu, "cdna3",
                                        frozenset())  # fmt: skip
    assert seconds[0] == pytest.approx(14 * 8 * 140 * 4 / 2.1e9)


def test_uncounted_kernels_dims_and_generations_get_no_floor() -> None:
    launch = _launch(262144, 128, 16)
    ops = _op(ADD, 262144, 128, BIAS_DIMS, BIAS_STRIDES)
    assert elementwise_issue_seconds(ops, launch, MI300X.gpu, "hopper", frozenset())[0] == 0.0
    # 3 coalesced dims take OffsetCalculator's general loop: not counted
    three = ("[[2,4,8,16],[2,4,8,16],[]]", "[[512,128,16,1],[512,1,64,4],[]]")
    assert coalesced_iteration_dims(*three) == 3
    assert elementwise_issue_seconds(_op(ADD, 4, 128, *three), _launch(4, 128, 16), MI300X.gpu,
                                     "cdna3", frozenset())[0] == 0.0  # fmt: skip
    other = _op("void at::native::elementwise_kernel_manual_unroll<128, 4, at::native::"
                "gpu_kernel_impl_nocast<at::native::CUDAFunctor_add<long> >(...)", 64, 128,
                BIAS_DIMS, BIAS_STRIDES)  # fmt: skip
    assert elementwise_issue_seconds(other, _launch(64, 128, 16), MI300X.gpu, "cdna3",
                                     frozenset())[0] == 0.0  # fmt: skip
    # a single block is the bounds-checked tail: no interior call counted
    assert elementwise_issue_seconds(ops, _launch(1, 128, 16), MI300X.gpu, "cdna3",
                                     frozenset())[0] == 0.0  # fmt: skip
    assert coalesced_iteration_dims("not json", "[]") == 0


def test_sd35_channels_last_add_and_copy_dims() -> None:
    # add_ of an NCHW tensor with a channels-last one: H and W merge in both, C does not
    assert coalesced_iteration_dims("[[1,64,256,256],[1,64,256,256],[]]",
                                    "[[4194304,65536,256,1],[64,1,16384,64],[]]") == 2  # fmt: skip
    # copy_ of a [1,77,2048] slice (row stride 4096) into a contiguous tensor: rows stay apart
    assert coalesced_iteration_dims("[[1,77,2048],[1,77,2048],[]]",
                                    "[[315392,4096,1],[157696,2048,1],[]]") == 2  # fmt: skip
    # a 0-dim operand broadcasts everywhere: a contiguous tensor times it is one dim
    assert coalesced_iteration_dims("[[],[1,16,128,128]]", "[[],[262144,16384,128,1]]") == 1


def test_floor_through_the_kernel_model() -> None:
    ops = _op(ADD, 262144, 128, BIAS_DIMS, BIAS_STRIDES)
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), "mi300x")
    blocks, threads, registers, shared = launch_shape(ops)
    resident = blocks_per_sm(threads, registers, shared, MI300X.gpu)
    floor = elementwise_issue_seconds(ops, (blocks, threads, resident), MI300X.gpu, "cdna3",
                                      frozenset())  # fmt: skip
    assert floor[0] > 0.0
    assert terms["comp"][0] >= floor[0] * (1 - 1e-12)


def test_more_dims_never_fewer_instructions() -> None:
    for (_, key), table in ELEMENTWISE_COUNTS.items():
        if key.startswith("mu_"):
            assert table[2].instructions >= table[1].instructions
            assert table[2].valu >= table[1].valu


@settings(max_examples=25, deadline=None)
@given(
    blocks=st.integers(2, 400_000),
    more=st.integers(1, 100_000),
    threads=st.sampled_from([64, 128, 256]),
    resident=st.integers(1, 32),
)
def test_more_blocks_never_fewer_cycles(
    blocks: int, more: int, threads: int, resident: int
) -> None:
    ops = pd.concat([_op(ADD, blocks, threads, BIAS_DIMS, BIAS_STRIDES)] * 2, ignore_index=True)
    launch = (np.array([blocks, blocks + more], dtype=float), np.full(2, float(threads)),
              np.full(2, float(resident)))  # fmt: skip
    for idealize in (frozenset(), frozenset({"sm_utilization"})):
        seconds = elementwise_issue_seconds(ops, launch, MI300X.gpu, "cdna3", idealize)
        assert seconds[1] >= seconds[0] > 0.0


@settings(max_examples=25, deadline=None)
@given(blocks=st.integers(2, 400_000), factor=st.floats(1.0, 3.0))
def test_faster_clock_never_slower(blocks: int, factor: float) -> None:
    ops = _op(ADD, blocks, 128, BIAS_DIMS, BIAS_STRIDES)
    fast = MI300X.gpu.model_copy(update={"clock_mhz": MI300X.gpu.clock_mhz * factor})
    launch = _launch(blocks, 128, 16)
    slow_s = elementwise_issue_seconds(ops, launch, MI300X.gpu, "cdna3", frozenset())[0]
    fast_s = elementwise_issue_seconds(ops, launch, fast, "cdna3", frozenset())[0]
    assert fast_s <= slow_s * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(sizes=st.lists(st.integers(2, 64), min_size=1, max_size=4))
def test_contiguous_and_bias_operands_coalesce(sizes: list[int]) -> None:
    strides = [int(np.prod(sizes[d + 1 :])) for d in range(len(sizes))]
    dims = json.dumps([sizes, sizes, []])
    assert coalesced_iteration_dims(dims, json.dumps([strides, strides, []])) == 1
    # a bias broadcast along every dim but the outermost ([C, 1, 1] against [C, H, W]): the inner
    # dims merge (the bias's stride 0 continues 0), the outermost does not
    bias = [sizes[0]] + [1] * (len(sizes) - 1)
    got = coalesced_iteration_dims(json.dumps([sizes, bias, []]),
                                   json.dumps([strides, [1] * len(sizes), []]))  # fmt: skip
    assert got == min(2, len(sizes))


def test_call_count_lookup() -> None:
    assert call_count("cdna3", "mu_add_bf16", 2) == WaveCount(201, 0, 1, 47)
    assert call_count("cdna3", "vec_add_bf16", 7) == WaveCount(140, 0, 14, 19)
    assert call_count("cdna3", "mu_add_bf16", 3) is None
    assert call_count("hopper", "mu_add_bf16", 2) is None
