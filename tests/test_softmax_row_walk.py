"""Round trips per pass of PyTorch's block-per-row softmax (archsim.perf.passes.ilp_row_trips:
ilpReduce's shift prologue, ILP-wide vector steps and scalar tail, from SoftMax.cu) and layer norm
(vectorized_layer_norm_kernel's block-strided vector loop). Values worked by hand; the kernel-level golden is on the dgx-h100 preset (132 SMs, 1980 MHz, DRAM 3350 GB/s at
343 ns, Hopper DRAM fraction 0.82, L1 hit 28 cycles)."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds
from archsim.perf.passes import ilp_row_trips, ilp_row_walk
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

H100 = load_hw("dgx-h100")
FORWARD = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
    "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>"
)
BACKWARD = "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float>"


def _trips(columns: int, threads: int = 1024, ilp: int = 8, size: int = 2) -> float:
    return float(ilp_row_trips(np.array([columns]), np.array([threads]), np.array([ilp]),
                               np.array([size]))[0])  # fmt: skip


def test_timesformer_rows_load_one_element_per_round_trip() -> None:
    # 3137 bf16 columns, 1024 threads, ILP 8: 3137 mod 8 = 1, so row r starts r mod 8 elements past
    # 16 B. Shift 0: size 3137 < 8192 = ILP x T, no vector step, ceil(3137 / 1024) = 4 scalar
    # steps. Shift s > 0: one prologue load, then 3137 + s - 1024 = 2113 + s < 8192 elements in
    # ceil((2113 + s) / 1024) = 3 scalar steps: 4. Every row: 4.
    assert _trips(3137) == 4.0
    trips, per_thread = ilp_row_walk(pd.Series([FORWARD]), pd.Series(["bfloat16"]),
                                     np.array([3137 * 2.0]), np.array([1.0]),
                                     np.array([1024.0]))  # fmt: skip
    assert trips[0] == 4.0
    # 6,274 B / (1024 threads x 4 steps) = 1.53 B, at least one 2-B element
    assert per_thread[0] == 2.0


def test_aligned_long_rows_use_the_vector_loop() -> None:
    # 10,000 bf16 columns (a multiple of 8: every row 16-B aligned): size 10,000, last = 10,000 mod
    # 8192 = 1808: one vector step and ceil(1808 / 1024) = 2 scalar steps = 3.
    assert _trips(10_000) == 3.0
    # exactly ILP x T: one vector step, no tail
    assert _trips(8192) == 1.0


def test_misaligned_rows_fall_back_to_scalar_steps() -> None:
    # 9,001 bf16 columns (9001 mod 8 = 1): shift 0 (1 row in 8): size 9001, last 809, one vector
    # step + 1 scalar = 2. Shift 1..7: prologue + (7977 + s) < 8192 elements scalar: 1 + 8 = 9.
    # Mean over the cycle of 8 rows: (2 + 7 x 9) / 8 = 8.125.
    assert _trips(9001) == pytest.approx(65 / 8)


def test_backward_row_is_one_of_its_two_tensors() -> None:
    # cunn_SoftMaxBackward<4, float> reads output and grad_output: 2 x 4,096 fp32 per row; one
    # tensor's row is 4,096 elements = ILP x T with 1024 threads: one vector step of 16 B a thread.
    trips, per_thread = ilp_row_walk(pd.Series([BACKWARD, "vectorized_layer_norm_kernel<float>"]),
                                     pd.Series(["float32", "float32"]),
                                     np.array([2 * 4096 * 4.0, 4096 * 4.0]), np.array([1.0, 1.0]),
                                     np.array([1024.0, 1024.0]))  # fmt: skip
    assert trips[0] == 1.0 and per_thread[0] == pytest.approx(2 * 4096 * 4 / 1024)
    # kernels outside ilpReduce keep one round trip per pass and their family's bytes in flight
    assert trips[1] == 1.0 and np.isnan(per_thread[1])


def test_timesformer_softmax_golden_through_the_kernel_model() -> None:
    # aten::_softmax on [8, 12, 3137, 3137] bf16: 301,152 rows, grid 301,152 x 1024 threads, 32
    # registers: 2 blocks per SM, 264 at once, ceil(301152 / 264) = 1,141 waves. Rows of 6,274 B
    # stay in L1. Per wave 4 x (343 ns + 2 x 28 / 1980 MHz) = 1.485 us of round trips; transfer
    # 2 x 1,889,427,648 B / (3350 GB/s x 0.82) = 1.3756 ms: 1141 x 1.485 us + 1.3756 ms = 3.070 ms.
    # Each wave also turns its blocks over and runs two block reductions (archsim.perf.block_sync):
    # turnover from the H100 PCIe stream table's two light rows, 64 and 128 threads x 114 SMs x 8 B
    # over 96 and 189 GB/s = 608.0 and 617.7 ns, median 612.8 less the 375-ns chase = 237.8 ns;
    # each reduction 10 x (4 + 4) + 2 x 23 = 126 cycles, two at 1980 MHz = 127.3 ns: 1141 x 365.1 ns
    # = 0.4166 ms more, 3.487 ms. Its passes re-read from L1 are bound by their instruction issue
    # (archsim.perf.issue_rate: SASS of SoftMax.cu's scalar loops, 17 and 31 instructions a
    # warp-iteration): 2 blocks x 99 warp-iterations x 17 / 4 sub-partitions = 841.5 cycles for the
    # sum pass against 4 x 28 of round trips, 368.4 ns more per wave; the write pass's 1,534.5
    # cycles (775.0 ns) less its output's transfer per wave (1,889,427,648 B / 1141 / (3350 GB/s x
    # 0.82) = 602.8 ns), less its 4 x 28 cycles of round trips, 115.6 ns more: 4.039 ms.
    read = 8 * 12 * 3137 * 3137 * 2.0
    row = {
        "kind": "kernel", "name": FORWARD, "op_class": "softmax", "dtype": "bfloat16",
        "bytes_read": read, "bytes_written": read, "flops": 5.0 * read / 2,
        "grid_x": 301_152, "grid_y": 1, "grid_z": 1, "block_x": 1024, "block_y": 1,
        "block_z": 1, "registers_per_thread": 32, "shared_memory_bytes": 128,
    }  # fmt: skip
    ops = conform(pd.DataFrame([row]), OPS_COLUMNS)
    waves = math.ceil(301_152 / 264)
    assert waves == 1141
    expected = waves * 4 * (343e-9 + 2 * 28 / 1980e6) + 2 * read / (3350e9 * 0.82)
    assert expected == pytest.approx(3.070e-3, rel=1e-3)
    turnover = (64 * 114 * 8 / 96 + 128 * 114 * 8 / 189) / 2 * 1e-9 - 375e-9
    expected += waves * (turnover + 2 * (10 * (4 + 4) + 2 * 23) / 1980e6)
    assert expected == pytest.approx(3.487e-3, rel=1e-3)
    write_transfer = read / waves / (3350e9 * 0.82)
    issue = (841.5 - 4 * 28) / 1980e6 + (1534.5 - 4 * 28) / 1980e6 - write_transfer
    expected += waves * issue
    assert expected == pytest.approx(4.039e-3, rel=1e-3)
    assert kernel_terms(ops, H100.gpu, frozenset(), H100.name)["lat"][0] == pytest.approx(expected)
    assert body_seconds(ops, H100)[0] == pytest.approx(expected)
    # idealizing DRAM latency removes the DRAM round trips but not the L1 ones, the turnover or
    # the reductions; perfect SM utilization removes those two
    fixed = turnover + 2 * (10 * (4 + 4) + 2 * 23) / 1980e6
    # (and the issue floors stay: compute, not DRAM)
    ideal = kernel_terms(ops, H100.gpu, frozenset({"dram_latency"}), H100.name)["lat"][0]
    # (the L1 round trips of both passes lie under their issue floors)
    issued = (841.5 + 1534.5) / 1980e6 - write_transfer
    assert ideal == pytest.approx(waves * (issued + fixed) + 2 * read / (3350e9 * 0.82))
    busy = kernel_terms(ops, H100.gpu, frozenset({"sm_utilization"}), H100.name)["lat"][0]
    assert busy == pytest.approx(expected - waves * (fixed + issue))


LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>"
)


def test_layer_norm_rows_step_by_the_block() -> None:
    # compute_stats: for (i = thrx; i < N / 4; i += blockDim.x * blockDim.y): 768 bf16 columns with
    # 128 threads are 192 vectors of 4, ceil(192 / 128) = 2 steps; 512 columns: 1; 4096 fp32 with
    # 256 threads: 1024 vectors, 4 steps. Its in-flight figure stays archsim.perf.in_flight's (NaN).
    names = pd.Series([LAYER_NORM] * 3)
    trips, per_thread = ilp_row_walk(names, pd.Series(["bfloat16", "bfloat16", "float32"]),
                                     np.array([768 * 2.0, 512 * 2.0, 4096 * 4.0]), np.ones(3),
                                     np.array([128.0, 128.0, 256.0]))  # fmt: skip
    assert list(trips) == [2.0, 1.0, 4.0]
    assert np.isnan(per_thread).all()
    # with recorded shapes the row is the first input over the blocks, whatever the bytes say
    # (gamma and beta's bytes on top of X): [8, 3137, 768] over 25,096 blocks = 768 columns
    dims = pd.Series(["[[8, 3137, 768], [768], [768], [768], []]"])
    trips, _ = ilp_row_walk(pd.Series([LAYER_NORM]), pd.Series(["bfloat16"]), np.array([3e9]),
                            np.array([25_096.0]), np.array([128.0]), dims)  # fmt: skip
    assert trips[0] == 2.0


def test_layer_norm_golden_through_the_kernel_model() -> None:
    # [8, 3137, 768] bf16 in 25,096 blocks of 32 x 4 threads, 34 registers: registers allow 12
    # blocks per SM (34 x 32 = 1,088 -> 1,280 per warp, x 4 warps = 5,120; 65,536 / 5,120), 1,584
    # at once, ceil(25096 / 1584) = 16 waves. Rows of 1,536 B stay in L1; per wave 2 x (343 ns +
    # 14.14 ns) of round trips; transfer 2 x 38.55 MB / (3350 GB/s x 0.82) = 28.06 us: 39.49 us.
    read = 8 * 3137 * 768 * 2.0
    row = {
        "kind": "kernel", "name": LAYER_NORM, "op_class": "normalization", "dtype": "bfloat16",
        "bytes_read": read, "bytes_written": read, "flops": 8.0 * read / 2,
        "grid_x": 25_096, "grid_y": 1, "grid_z": 1, "block_x": 32, "block_y": 4,
        "block_z": 1, "registers_per_thread": 34, "shared_memory_bytes": 24,
        "input_dims": "[[8, 3137, 768], [768], [768], [768], []]",
    }  # fmt: skip
    ops = conform(pd.DataFrame([row]), OPS_COLUMNS)
    expected = 16 * 2 * (343e-9 + 28 / 1980e6) + 2 * read / (3350e9 * 0.82)
    assert expected == pytest.approx(39.49e-6, rel=1e-3)
    # each wave's turnover (237.8 ns, the softmax golden above) and compute_stats' Welford reduction
    # over 4 warps: 5 x (4 + 8 + 3 x 4) shuffle steps + log2(4) x (23 + 20) tree steps + 23 = 229
    # cycles = 115.7 ns (archsim.perf.block_sync): 16 x 353.5 ns = 5.66 us more, 45.15 us.
    turnover = (64 * 114 * 8 / 96 + 128 * 114 * 8 / 189) / 2 * 1e-9 - 375e-9
    expected += 16 * (turnover + (5 * (4 + 8 + 3 * 4) + 2 * (23 + 8 + 3 * 4) + 23) / 1980e6)
    assert expected == pytest.approx(45.15e-6, rel=1e-3)
    assert body_seconds(ops, H100)[0] == pytest.approx(expected)


@settings(max_examples=200, deadline=None)
@given(
    columns=st.integers(1, 200_000),
    threads=st.sampled_from([32, 64, 128, 256, 512, 1024]),
    size=st.sampled_from([2, 4, 8]),
)
def test_trips_bounded_by_what_a_block_can_move(columns: int, threads: int, size: int) -> None:
    ilp = 16 // size
    trips = _trips(columns, threads, ilp, size)
    # a step moves at most ILP x T elements, so covering the row needs at least C / (ILP x T) of
    # them; at worst every element is scalar, plus the one-element shift prologue
    assert trips >= max(1.0, columns / (ilp * threads)) - 1e-9
    assert trips <= math.ceil(columns / threads) + 1 + 1e-9
