"""Kernel-time model: hand-worked golden values on the V100 preset, monotonic invariants (hypothesis),
measured-op scaling, batch scaling."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.kernel import (
    IDEALIZATIONS,
    cpu_launch_seconds,
    kernel_terms,
    predict_op_seconds,
    scale_ops_to_batch,
    source_hw_for_gpu_name,
)
from archsim.trace.schema import OPS_COLUMNS, conform

V100 = load_hw("dgx1-v100")


def make_ops(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


N = 2048
GEMM = {  # C[2048x2048] = A[2048x2048] @ B[2048x2048], fp32, captured on a CPU (no grid)
    "kind": "cpu",
    "op_class": "gemm",
    "dtype": "float32",
    "flops": 2.0 * N**3,  # 17,179,869,184
    "bytes_read": 2.0 * N * N * 4,  # 33,554,432
    "bytes_written": 1.0 * N * N * 4,  # 16,777,216
}
ADD_N = 2**24
ELEMENTWISE = {  # c = a + b over 2^24 fp32 elements
    "kind": "cpu",
    "op_class": "elementwise",
    "dtype": "float32",
    "flops": float(ADD_N),
    "bytes_read": 2.0 * ADD_N * 4,  # 134,217,728
    "bytes_written": 1.0 * ADD_N * 4,  # 67,108,864
}


def test_golden_gemm_on_v100() -> None:
    # T_math = 17,179,869,184 / (80 * 128 * 1.53e9) = 1.096550e-3 s. No grid was captured, so the model
    # tries the three cuBLAS tiles and keeps the fastest:
    # 128x128 (256 thr, 128 regs, 32 KB): 256 blocks; occupancy min(2048/256=8, regs 65536/(4096*8)=2,
    #   smem 98304/32768=3) = 2; busiest SM ceil(256/80)=4 blocks, 2*256=512 threads -> u=1;
    #   T_comp = T_math*80*4/256 = 1.370687e-3; L2 F/(128/4) = 536.9 MB / 2155e9 = 2.491e-4.
    # 64x64 (64 thr, 126 regs -> 16*256=4096 regs/warp, 8 KB): 1024 blocks; occupancy min(32,
    #   65536/(4096*2)=8, 98304/8192=12) = 8; busiest SM ceil(1024/80)=13, 8*64=512 threads -> u=1;
    #   T_comp = T_math*80*13/1024 = 1.113683e-3; L2 F/(64/4) = 1073.7 MB / 2155e9 = 4.983e-4.
    # 32x32 (128 thr, 86 regs -> 11*256=2816 regs/warp, 32 KB): 4096 blocks; occupancy min(16,
    #   65536/(2816*4)=5, 3) = 3; u = 3*128/512 = 0.75; T_comp = T_math*80*52/4096/0.75 = 1.4848e-3.
    # DRAM: 50,331,648 B / 900e9 = 5.592e-5 s (latency-hidden: >= 655 KB in flight / 317 ns > 900 GB/s).
    # Fastest: 64x64. Achieved (archsim.perf.efficiency, Volta): cuBLAS SGEMM at 0.85 of peak,
    # DRAM at 0.83: T_comp = 1.113683e-3 / 0.85 = 1.310215e-3 s, T_bw = 5.592405e-5 / 0.83.
    ops = make_ops([GEMM])
    terms = kernel_terms(ops, V100.gpu)
    assert terms["math"][0] == pytest.approx(1.096550e-3, rel=1e-5)
    assert terms["comp"][0] == pytest.approx(1.113683e-3 / 0.85, rel=1e-5)
    # the latency term with the pipeline fill (archsim.perf.pipeline_fill): two 317-ns round trips
    # plus the slower steady-state transfer, T_bw = 5.592405e-5 / 0.83 (still under T_comp)
    assert terms["lat"][0] == pytest.approx(2 * 317e-9 + 5.592405e-5 / 0.83, rel=1e-5)
    assert terms["bw"][0] == pytest.approx(5.592405e-5 / 0.83, rel=1e-5)
    assert terms["mem"][0] == pytest.approx(17_179_869_184 / 16 / 2155e9, rel=1e-6)
    assert predict_op_seconds(ops, V100)[0] == pytest.approx(1.310215e-3 + 0.75e-6, rel=1e-5)
    # with the 128x128 grid given explicitly (as a CUDA trace would), the 128x128 figures apply
    traced = make_ops([{**GEMM, "grid_x": 256, "block_x": 256, "registers_per_thread": 128,
                        "shared_memory_bytes": 32768}])  # fmt: skip
    assert kernel_terms(traced, V100.gpu)["comp"][0] == pytest.approx(1.370687e-3 / 0.85, rel=1e-5)


def test_golden_elementwise_on_v100() -> None:
    # Blocks: 2^24 / 512 = 32,768 blocks of 128 threads, 22 regs -> 3*256 = 768 regs per warp.
    # Occupancy: threads 2048/128 = 16, registers 65536/(768*4) = 21 -> a = 16; the busiest SM runs
    #   ceil(32768/80) = 410 blocks, 16 at a time (2048 threads >= 512, u = 1).
    # T_comp = 2^24 / 15.6672e12 * 80 * 410 / 32768 = 1.0719e-6 s
    # T_bw = 201,326,592 B / (900e9 x 0.83 achievable, Jia et al. 2018: 750 of 900 GB/s measured)
    #      = 2.695135e-4 s dominates (T_mem = 9.342e-5 s), plus the pipeline fill of two 317-ns
    #      DRAM round trips (archsim.perf.pipeline_fill). Element-wise math fraction 1.
    ops = make_ops([ELEMENTWISE])
    terms = kernel_terms(ops, V100.gpu)
    assert terms["comp"][0] == pytest.approx(2**24 / 15.6672e12 * 80 * 410 / 32768, rel=1e-6)
    assert terms["bw"][0] == pytest.approx(2.695135e-4, rel=1e-6)
    assert terms["mem"][0] == pytest.approx(201_326_592 / 2155e9, rel=1e-6)
    assert terms["lat"][0] == pytest.approx(2.695135e-4 + 2 * 317e-9, rel=1e-6)
    assert predict_op_seconds(ops, V100)[0] == pytest.approx(
        2.695135e-4 + 2 * 317e-9 + 0.75e-6, rel=1e-6
    )


def test_fp16_gemm_uses_tensor_cores_when_present() -> None:
    half = make_ops([{**GEMM, "dtype": "float16", "bytes_read": GEMM["bytes_read"] / 2}])
    t_v100 = kernel_terms(half, V100.gpu)["math"][0]
    # 17.18e9 FLOP / (80 * 1024 * 1.53e9) = 1.3707e-4 s on tensor cores
    assert t_v100 == pytest.approx(2.0 * N**3 / (80 * 1024 * 1.53e9), rel=1e-6)
    # no tensor cores: PyTorch's fp16 GEMM computes in FP32 (cublasGemmEx, CUDA_R_32F compute), so
    # the FP32 vector rate 2 * 256 * 998e6, not GM20B's half2 rate
    tx1 = load_hw("jetson-tx1")
    assert kernel_terms(half, tx1.gpu)["math"][0] == pytest.approx(2.0 * N**3 / (2 * 256 * 998e6))


def test_memcpy_uses_host_link_and_dtod_uses_dram() -> None:
    n = 100e6
    ops = make_ops(
        [
            {
                "kind": "memcpy",
                "name": "Memcpy HtoD (Pageable -> Device)",
                "bytes_read": n,
                "bytes_written": n,
            },
            {
                "kind": "memcpy",
                "name": "Memcpy DtoD (Device -> Device)",
                "bytes_read": n,
                "bytes_written": n,
            },
            {"kind": "memset", "name": "Memset (Device)", "bytes_written": n},
        ]
    )
    seconds = predict_op_seconds(ops, V100, include_launch=False)
    # pageable: link latency + the bytes beyond the first staged MiB at the 4.3 GB/s staging rate
    # (23.0 ms, more than the whole copy at the 12.6 GB/s pinned rate, 7.9 ms)
    assert seconds[0] == pytest.approx(1e-6 + (n - 2**20) / 4.3e9)
    # read + write through DRAM at the achievable 0.83 of 900 GB/s (a copy is a stream kernel)
    assert seconds[1] == pytest.approx(2 * n / (900e9 * 0.83))
    assert seconds[2] == pytest.approx(n / (900e9 * 0.83))


def test_measured_ops_on_their_own_gpu_keep_their_duration() -> None:
    ops = make_ops([{**GEMM, "kind": "kernel", "dur_us": 2500.0, "grid_x": 256, "block_x": 256}])
    own = predict_op_seconds(ops, V100, source=V100, include_launch=False)
    assert own[0] == pytest.approx(2500e-6)
    a100 = load_hw("dgx-a100")
    ratio = predict_op_seconds(ops, a100, source=V100, include_launch=False)[0] / 2500e-6
    model_ratio = (
        predict_op_seconds(ops, a100, include_launch=False)[0]
        / predict_op_seconds(ops, V100, include_launch=False)[0]
    )
    assert ratio == pytest.approx(model_ratio)
    assert ratio < 1  # A100 is faster on an fp32 GEMM: more SMs, more L2 bandwidth


def test_no_gpu_and_bad_idealization_are_errors() -> None:
    ops = make_ops([GEMM])
    with pytest.raises(ArchsimError, match="no GPU"):
        predict_op_seconds(ops, load_hw("dgx1-v100", []).model_copy(update={"gpu": None}))
    with pytest.raises(ArchsimError, match="unknown component"):
        predict_op_seconds(ops, V100, idealize=frozenset({"network"}))


def test_cpu_launch_cost_is_separate() -> None:
    ops = make_ops([GEMM, ELEMENTWISE])
    # the DGX-1 host's modelled launch cost, 5.22 us per kernel (archsim.perf.launch)
    assert cpu_launch_seconds(ops, V100) == pytest.approx([5.22e-6, 5.22e-6])


def test_scale_ops_to_batch() -> None:
    ops = make_ops(
        [
            {
                **ELEMENTWISE,
                "phase": "train_forward",
                "grid_x": 10000,
                "block_x": 128,
                "kind": "kernel",
                "dur_us": 50.0,
            },
            {
                **ELEMENTWISE,
                "phase": "optimizer_step",
                "grid_x": 10000,
                "block_x": 128,
                "kind": "kernel",
                "dur_us": 50.0,
            },
        ]
    )
    scaled = scale_ops_to_batch(ops, 32, 64)
    assert scaled["flops"].tolist() == [2 * ADD_N, ADD_N]
    assert scaled["grid_x"].tolist() == [20000, 10000]
    # the measured duration is rescaled by the model's own ratio on the source GPU: a bandwidth-bound
    # op with twice the bytes takes about twice as long
    seconds = predict_op_seconds(scaled, V100, source=V100, include_launch=False)
    assert seconds[0] == pytest.approx(2 * 50e-6, rel=0.02)
    assert seconds[1] == pytest.approx(50e-6)
    assert scale_ops_to_batch(scaled, 64, 32)["flops"].tolist() == [ADD_N, ADD_N]


def test_source_hw_for_gpu_name() -> None:
    assert source_hw_for_gpu_name("Tesla V100-SXM2-32GB", 80).name == "dgx1-v100"
    assert source_hw_for_gpu_name("NVIDIA A100-PG509-200", 108).gpu.sms == 108
    with pytest.raises(ArchsimError, match="no hardware preset"):
        source_hw_for_gpu_name("Voodoo2")


# ---- property tests -------------------------------------------------------------------------------
op_rows = st.fixed_dictionaries(
    {
        "kind": st.sampled_from(["cpu", "kernel"]),
        "op_class": st.sampled_from(["gemm", "conv", "elementwise", "reduction", "other"]),
        "dtype": st.sampled_from(["float32", "float16", "bfloat16"]),
        "flops": st.floats(0, 1e12),
        "bytes_read": st.floats(0, 1e10),
        "bytes_written": st.floats(0, 1e9),
        "grid_x": st.integers(1, 100_000),
        "block_x": st.sampled_from([32, 64, 128, 256, 512, 1024]),
        "registers_per_thread": st.floats(8, 255),
        "shared_memory_bytes": st.sampled_from([0.0, 4096.0, 49152.0]),
    }
)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(op_rows, min_size=1, max_size=8),
    preset=st.sampled_from(["dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1"]),
    sm_factor=st.floats(1.0, 4.0),
    bw_factor=st.floats(1.0, 4.0),
    clock_factor=st.floats(1.0, 2.0),
)
def test_more_sms_bandwidth_or_clock_is_never_slower(
    rows, preset, sm_factor, bw_factor, clock_factor
):
    ops = make_ops(rows)
    base_hw = load_hw(preset)
    base = predict_op_seconds(ops, base_hw)
    gpu = base_hw.gpu
    for override in (
        f"gpu.sms={max(gpu.sms, int(gpu.sms * sm_factor))}",
        f"gpu.dram_bw_gbs={gpu.dram_bw_gbs * bw_factor}",
        f"gpu.clock_mhz={gpu.clock_mhz * clock_factor}",
        f"gpu.l2_bw_gbs={gpu.l2_bw_gbs * bw_factor}",
    ):
        faster = predict_op_seconds(ops, load_hw(preset, [override]))
        assert np.all(faster <= base * (1 + 1e-12)), override


@settings(max_examples=40, deadline=None)
@given(
    rows=st.lists(op_rows, min_size=1, max_size=8),
    preset=st.sampled_from(["dgx1-v100", "dgx-a100"]),
)
def test_each_idealization_never_adds_time(rows, preset):
    ops = make_ops(rows)
    hw = load_hw(preset)
    previous = predict_op_seconds(ops, hw)
    applied: set[str] = set()
    for component in IDEALIZATIONS:
        applied.add(component)
        now = predict_op_seconds(ops, hw, idealize=frozenset(applied))
        assert np.all(now <= previous * (1 + 1e-12)), component
        assert np.all(now > 0)
        previous = now


def test_batch_scaling_keeps_weights_fixed() -> None:
    # aten::linear 9216 -> 4096 at batch 1: input [1, 9216] scales, weight [4096, 9216] and bias do not.
    linear = {
        "kind": "cpu", "op_class": "gemm", "dtype": "float32", "phase": "inference_batch",
        "input_dims": "[[1,9216],[4096,9216],[4096]]",
        "flops": 2.0 * 9216 * 4096, "bytes_read": 4.0 * (9216 + 4096 * 9216 + 4096),
        "bytes_written": 4.0 * 4096,
    }  # fmt: skip
    # weight gradient in backward: inputs [B, 4096] and [B, 9216] scale, output [4096, 9216] does not
    wgrad = {
        "kind": "cpu", "op_class": "gemm", "dtype": "float32", "phase": "train_backward",
        "input_dims": "[[4096,1],[1,9216]]", "flops": 2.0 * 9216 * 4096,
        "bytes_read": 4.0 * (4096 + 9216), "bytes_written": 4.0 * 4096 * 9216,
    }  # fmt: skip
    scaled = scale_ops_to_batch(make_ops([linear, wgrad]), 1, 128)
    assert scaled["flops"].tolist() == [128 * 2.0 * 9216 * 4096] * 2
    assert scaled["bytes_read"][0] == pytest.approx(4.0 * (128 * 9216 + 4096 * 9216 + 4096))
    assert scaled["bytes_written"][0] == 128 * 4.0 * 4096
    assert scaled["bytes_written"][1] == 4.0 * 4096 * 9216  # weight-shaped output stays
    # [4096, 1] is not batch-major at batch 1 (first dim 4096), [1, 9216] is: 9216 of 13312 elements
    assert scaled["bytes_read"][1] == pytest.approx(4.0 * (4096 + 128 * 9216))


def test_tf32_convolutions_need_aligned_channels() -> None:
    a100 = load_hw("dgx-a100")
    conv = {"kind": "cpu", "op_class": "conv", "dtype": "float32", "flops": 1e12,
            "bytes_read": 1e6, "bytes_written": 1e6}  # fmt: skip
    ops = make_ops(
        [
            {**conv, "input_dims": "[[128,64,27,27],[192,64,5,5],[192]]"},  # 64 % 4 == 0: TF32
            {**conv, "input_dims": "[[128,3,224,224],[64,3,11,11],[64]]"},  # 3 channels: FP32 pipes
        ]
    )
    math_s = kernel_terms(ops, a100.gpu)["math"]
    # TF32 = half the FP16 tensor rate: 1e12 / (108 * 1024 * 1.41e9); FP32: 1e12 / (108 * 128 * 1.41e9)
    assert math_s[0] == pytest.approx(1e12 / (108 * 1024 * 1.41e9))
    assert math_s[1] == pytest.approx(1e12 / (108 * 128 * 1.41e9))
    # the V100 has no TF32: fp32 convs stay on the FP32 pipes
    assert kernel_terms(ops, V100.gpu)["math"][0] == pytest.approx(1e12 / (80 * 128 * 1.53e9))


def test_inferred_work_has_its_own_efficiency_class() -> None:
    from archsim.perf.kernel import efficiency_class

    ops = make_ops(
        [
            {"kind": "kernel", "op_class": "gemm", "name": "volta_sgemm_128x64_nn", "grid_x": 8},
            {**GEMM, "kind": "kernel", "grid_x": 8},
            {"kind": "memcpy", "name": "Memcpy DtoH (Device -> Pinned)", "bytes_read": 8.0},
        ]
    )
    assert efficiency_class(ops).tolist() == ["gemm_grid", "gemm", "memcpy_dtoh"]


def test_tiny_kernels_take_the_measured_floor() -> None:
    # 1 KB of element-wise work: every term is far below the V100's 1.25 us floor
    # (T_lat = one DRAM round trip, 317 ns), so the op costs 1.25 us + 0.75 us launch.
    tiny = make_ops([{**ELEMENTWISE, "flops": 256.0, "bytes_read": 512.0, "bytes_written": 256.0}])
    assert predict_op_seconds(tiny, V100)[0] == pytest.approx(1.25e-6 + 0.75e-6)
    # a tiny measured kernel does not get faster on a bigger GPU: as one block, its element-wise
    # bytes are dependent DRAM round trips on both GPUs, so it scales by their DRAM latencies,
    # dgx-h100's 343 ns over dgx1-v100's 317 ns (both measured pointer chases)
    measured = make_ops([{**tiny.iloc[0].to_dict(), "kind": "kernel", "dur_us": 1.5, "grid_x": 1}])
    h100 = load_hw("dgx-h100")
    assert predict_op_seconds(measured, h100, V100, include_launch=False)[0] == pytest.approx(
        1.5e-6 * 343 / 317
    )


# Grid-less GEMM/conv rows (CPU captures): the model searches tiles and K-splits for these, and the
# search must keep the hardware monotonicity the traced rows above have.
gridless_rows = st.fixed_dictionaries(
    {
        "kind": st.just("cpu"),
        "op_class": st.sampled_from(["gemm", "conv", "matmul"]),
        "dtype": st.sampled_from(["float32", "float16"]),
        "flops": st.floats(1.0, 1e12),
        "bytes_read": st.floats(1.0, 1e9),
        "bytes_written": st.floats(4.0, 1e8),
    }
)


@settings(max_examples=25, deadline=None)  # 0.3 s an example: the suite's time budget
@given(
    rows=st.lists(gridless_rows, min_size=1, max_size=6),
    preset=st.sampled_from(["dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1"]),
    sm_factor=st.floats(1.0, 4.0),
    bw_factor=st.floats(1.0, 4.0),
)
def test_gridless_tiled_ops_never_slower_on_a_bigger_gpu(rows, preset, sm_factor, bw_factor):
    ops = make_ops(rows)
    base_hw = load_hw(preset)
    base = predict_op_seconds(ops, base_hw)
    gpu = base_hw.gpu
    for override in (
        f"gpu.sms={max(gpu.sms, int(gpu.sms * sm_factor))}",
        f"gpu.dram_bw_gbs={gpu.dram_bw_gbs * bw_factor}",
        f"gpu.clock_mhz={gpu.clock_mhz * bw_factor}",
    ):
        faster = predict_op_seconds(ops, load_hw(preset, [override]))
        assert np.all(faster <= base * (1 + 1e-12)), override
    applied: set[str] = set()
    previous = base
    for component in IDEALIZATIONS:
        applied.add(component)
        now = predict_op_seconds(ops, base_hw, idealize=frozenset(applied))
        assert np.all(now <= previous * (1 + 1e-12)), component
        previous = now
