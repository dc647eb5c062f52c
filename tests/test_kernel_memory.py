"""Memory side of the kernel model (issue 12): block-per-row kernels that re-read their row
(archsim.perf.passes), per-architecture kernel floors, and the datasheet bandwidth of a GPU whose
name says its memory. Values worked by hand on the dgx-h100 preset (132 SMs, 1980 MHz, 228 KB
shared memory per SM, 50 MB L2 at 9780 GB/s, DRAM 3350 GB/s at 343 ns, L2 hit 141.5 ns, Hopper DRAM
fraction 0.82)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds
from archsim.perf.passes import reread_terms, row_passes
from archsim.perf.source import source_hw_for_gpu_name
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

H100 = load_hw("dgx-h100")
SOFTMAX = "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, float, float, float>"
SOFTMAX_SMEM = "void at::native::(anonymous namespace)::cunn_SoftMaxForwardSmem<4, float, float>"
WARP_SOFTMAX = "void (anonymous namespace)::softmax_warp_forward<float, float, float, 10>"


def _kernel(name: str, read: float, blocks: int, threads: int = 1024) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": name, "op_class": "softmax", "dtype": "float32",
        "bytes_read": read, "bytes_written": read, "flops": 5.0 * read / 4,
        "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": threads, "block_y": 1,
        "block_z": 1, "registers_per_thread": 32, "shared_memory_bytes": 128,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_passes_from_kernel_names() -> None:
    names = pd.Series([SOFTMAX, SOFTMAX_SMEM, WARP_SOFTMAX, "cunn_SoftMaxBackward<4, float>",
                       "vectorized_layer_norm_kernel<float>", "elementwise_kernel"])  # fmt: skip
    assert list(row_passes(names)) == [3, 1, 0, 2, 2, 0]


def test_row_in_l1_costs_no_extra_traffic_only_latency() -> None:
    # 264 blocks of 8 KB rows, 2 resident per SM: one wave; 8 KB <= 228 KB / 2 stays in L1.
    extra_dram, extra_l2, latency = reread_terms(
        np.array([3.0]), np.array([264 * 8192.0]), np.array([264.0]), np.array([2.0]),
        H100.gpu, "hopper", frozenset(),
    )  # fmt: skip
    assert extra_dram[0] == 0 and extra_l2[0] == 0
    # one wave: a DRAM round trip (dgx-h100's 343 ns) + two L1 hits (28 cycles at 1980 MHz = 14.14 ns each)
    assert latency[0] == pytest.approx(343e-9 + 2 * 28 / 1980e6)


def test_row_beyond_l1_rereads_from_l2_or_dram() -> None:
    gpu = H100.gpu
    # 132 blocks, 1 per SM, 300 KB rows: beyond 228 KB of L1; 132 x 300 KB = 39.6 MB fits the 50 MB
    # L2, so the two re-reads come from L2: 2 x 39.6 MB of L2 traffic, latency 343 ns + 2 L2 hits of
    # dgx-h100's l2_latency_ns (141.5 ns).
    read = 132 * 300e3
    extra_dram, extra_l2, latency = reread_terms(
        np.array([3.0]), np.array([read]), np.array([132.0]), np.array([1.0]), gpu, "hopper",
        frozenset(),
    )  # fmt: skip
    assert extra_dram[0] == 0
    assert extra_l2[0] == pytest.approx(2 * read)
    assert latency[0] == pytest.approx(343e-9 + 2 * 141.5e-9)
    # 400 KB rows: 132 x 400 KB = 52.8 MB > 50 MB of L2: both re-reads go to DRAM, 3 DRAM round trips
    read = 132 * 400e3
    extra_dram, extra_l2, latency = reread_terms(
        np.array([3.0]), np.array([read]), np.array([132.0]), np.array([1.0]), gpu, "hopper",
        frozenset(),
    )  # fmt: skip
    assert extra_dram[0] == pytest.approx(2 * read) and extra_l2[0] == 0
    assert latency[0] == pytest.approx(3 * 343e-9)


def test_softmax_bytes_golden_through_the_kernel_model() -> None:
    # cunn_SoftMaxForward over 132 rows of 400 KB (fp32, 102,400 columns): reads 3 x 52.8 MB and
    # writes 52.8 MB from DRAM = 211.2 MB at 3350 GB/s x 0.82 = 76.88 us.
    read = 132 * 400e3
    terms = kernel_terms(_kernel(SOFTMAX, read, 132), H100.gpu, frozenset(), H100.name)
    assert terms["bw"][0] == pytest.approx(4 * read / (3350e9 * 0.82))
    # the same rows in shared memory (cunn_SoftMaxForwardSmem): one read, one write = 38.44 us
    smem = kernel_terms(_kernel(SOFTMAX_SMEM, read, 132), H100.gpu, frozenset(), H100.name)
    assert smem["bw"][0] == pytest.approx(2 * read / (3350e9 * 0.82))
    # rows that fit in L1 (8 KB): no extra DRAM bytes, the same as the one-pass kernel
    small = kernel_terms(_kernel(SOFTMAX, 264 * 8192.0, 264), H100.gpu, frozenset(), H100.name)
    assert small["bw"][0] == pytest.approx(2 * 264 * 8192.0 / (3350e9 * 0.82))


def test_passes_add_latency_to_transfer() -> None:
    # cunn_SoftMaxForward, 528 blocks of 1024 threads x 32 registers: 2 per SM, two waves of 8 KB
    # rows (in L1). Its blocks wait at each pass's barrier. A row is 2,048 fp32 elements, 16-B
    # aligned, shorter than ILP x T = 8,192: ilpReduce's tail loop makes 2 scalar round trips per
    # pass, so per wave 2 x (343 ns + 2 x 14.14 ns) of round trips, plus the transfer
    # 2 x 4.33 MB / (3350 GB/s x 0.82) = 3.149 us: 4.634 us, and each wave's block turnover and two
    # block reductions, 237.8 + 127.3 ns (archsim.perf.block_sync; worked in
    # test_softmax_row_walk's H100 golden): 5.364 us; its sum pass, re-read from L1, is bound by its
    # instruction issue (archsim.perf.issue_rate: fp32 scalar loop, 16 instructions a
    # warp-iteration), 2 blocks x 64 warp-iterations x 16 / 4 sub-partitions = 512 cycles against
    # 2 x 28 of round trips (the write pass's 2 x 64 x 30 / 4 = 960 hide under its 0.79-us output
    # transfer): 2 x 456 cycles more, 5.825 us in all.
    read = 528 * 8192.0
    ops = _kernel(SOFTMAX, read, 528)
    expected = 2 * 2 * (343e-9 + 2 * 28 / 1980e6) + 2 * read / (3350e9 * 0.82)
    assert expected == pytest.approx(4.634e-6, rel=1e-3)
    turnover = ((64 * 114 * 8 / 96 + 128 * 114 * 8 / 189) / 2 - 375) * 1e-9
    expected += 2 * (turnover + 2 * 126 / 1980e6)
    assert expected == pytest.approx(5.364e-6, rel=1e-3)
    expected += 2 * (2 * 64 * 16 / 4 - 2 * 28) / 1980e6
    assert expected == pytest.approx(5.825e-6, rel=1e-3)
    assert kernel_terms(ops, H100.gpu, frozenset(), H100.name)["lat"][0] == pytest.approx(expected)
    assert body_seconds(ops, H100)[0] == pytest.approx(expected)
    # the one-pass warp softmax on the same bytes is bandwidth-bound: the transfer, not the sum of
    # the passes' round trips and it, plus the pipeline fill of two DRAM round trips
    # (archsim.perf.pipeline_fill): 2 x 343 ns + 3.149 us = 3.835 us
    warp = body_seconds(_kernel(WARP_SOFTMAX, read, 528), H100)[0]
    assert warp == pytest.approx(2 * 343e-9 + 2 * read / (3350e9 * 0.82))


def test_floor_bound_kernel_on_mi300x() -> None:
    # a 512-byte copy kernel of one workgroup: every term is under the MI300X floor of 2.0 us. Its
    # loads are back after one 434-ns round trip, its last byte T_bw = 1024 B / (5300 GB/s x 0.754)
    # = 0.256 ns after the first, its stores acknowledged one round trip later (pipeline fill,
    # archsim.perf.pipeline_fill: 868.256 ns), in series with CDNA3's fixed cost 2.0 us - 2 x 434 ns
    # (archsim.perf.dispatch_overhead): the floor and 0.256 ns
    mi300x = load_hw("mi300x")
    ops = _kernel("void at::native::vectorized_elementwise_kernel<4>", 512.0, 1, 128)
    assert body_seconds(ops, mi300x)[0] == pytest.approx(2.0e-6 + 1024 / (5300e9 * 0.754))
    assert mi300x.gpu.kernel_min_us == 2.0
    assert load_hw("mi210").gpu.kernel_min_us == load_hw("mi250x").gpu.kernel_min_us == 3.7


def test_a100_80gb_gets_its_own_bandwidth() -> None:
    assert source_hw_for_gpu_name("NVIDIA A100-SXM4-80GB").gpu.dram_bw_gbs == 2039
    assert source_hw_for_gpu_name("NVIDIA A100-SXM4-40GB").gpu.dram_bw_gbs == 1555
    assert source_hw_for_gpu_name("NVIDIA A100-SXM4-80GB", 98).gpu.sms == 98


@settings(max_examples=60, deadline=None)
@given(
    row_kb=st.floats(1, 4096),
    blocks=st.integers(1, 100_000),
    factor=st.floats(1.0, 8.0),
    name=st.sampled_from([SOFTMAX, SOFTMAX_SMEM, WARP_SOFTMAX]),
)
def test_more_bandwidth_or_l2_never_slower(
    row_kb: float, blocks: int, factor: float, name: str
) -> None:
    ops = _kernel(name, row_kb * 1024 * blocks, blocks)
    base = body_seconds(ops, H100)[0]
    for key in ("dram_bw_gbs", "l2_size_mb", "l2_bw_gbs"):
        value = getattr(H100.gpu, key) * factor
        faster = load_hw("dgx-h100", [f"gpu.{key}={value}"])
        assert body_seconds(ops, faster)[0] <= base * (1 + 1e-12), key
