"""Achieved-rate kernel model (archsim.perf.efficiency): a GEMM and an element-wise op worked by hand on
V100, A100, MI300X and Jetson TX1 with the published achieved fractions; fp16 without tensor cores
gains only where kernels vectorize (half2); every fraction in (0, 1]; more bandwidth or clock never
slower; `calibrate` never reports an efficiency above 1 on any GPU fixture."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.calibrate import MAX_EFFICIENCY, calibration_document, fit_table
from archsim.perf.efficiency import ACHIEVED, generation
from archsim.perf.kernel import kernel_terms, predict_op_seconds
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture


def make_ops(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


K = 4096
ADD_N = 2**24
# c = a + b over 2^24 fp32 elements, captured on a CPU: 201,326,592 B of DRAM traffic, bandwidth-bound
# on every GPU below (compute, L2 and Little's-law latency terms checked smaller by hand).
ELEMENTWISE = {"kind": "cpu", "op_class": "elementwise", "dtype": "float32", "flops": float(ADD_N),
               "bytes_read": 8.0 * ADD_N, "bytes_written": 4.0 * ADD_N}  # fmt: skip
ADD_BYTES = 12.0 * ADD_N


def traced_sgemm(sms: int) -> dict:
    """A 4096^3 fp32 GEMM as traced: 4 blocks per SM of 256 threads (one wave of 4 per SM, no tail),
    so T_comp = T_math / u with u = 1 (256 threads >= the 128 a tiled engine needs)."""
    return {"kind": "kernel", "name": "sgemm_128x128_nn", "op_class": "gemm", "dtype": "float32",
            "flops": 2.0 * K**3, "bytes_read": 2.0 * K * K * 4, "bytes_written": 1.0 * K * K * 4,
            "grid_x": 4 * sms, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1,
            "block_z": 1, "registers_per_thread": 64.0, "shared_memory_bytes": 16384.0}  # fmt: skip


# preset: (SMs, FP32 FLOP/clk/SM, clock MHz, DRAM GB/s, achieved DRAM, achieved SGEMM, launch us,
#          kernel floor T_min us, DRAM latency L ns)
GOLDEN = {
    # Volta: Jia et al. 2018 (750 of 900 GB/s; SGEMM 0.85)
    "dgx1-v100": (80, 128, 1530, 900, 0.83, 0.85, 0.75, 1.25, 317),
    # Ampere: BabelStream A100 (~1.37 of 1.555 TB/s); fp32 matmuls stay FP32 (allow_tf32 False)
    "dgx-a100": (108, 128, 1410, 1555, 0.88, 0.85, 1.0, 3.0, 408),
    # CDNA3: gpu-benches gpu-stream on an MI300X (scale, 3997 of 5300 GB/s); packed FP32 256 FLOP/clk/CU;
    # no launch gap: in mi300x_sd35_inference a kernel queued behind another starts when it ends
    # (median gap 0.001 us over 4,285 pairs, hwconfigs/mi300x.yaml launch_latency_us)
    "mi300x": (304, 256, 2100, 5300, 0.754, 0.85, 0.0, 2.0, 434),
    # Maxwell GM20B: P100's DRAM fraction (0.70), the Volta SGEMM fraction (assumed)
    "jetson-tx1": (2, 256, 998, 25.6, 0.70, 0.85, 1.0, 1.25, 317),
}


@pytest.mark.parametrize("preset", sorted(GOLDEN))
def test_golden_sgemm_and_add(preset: str) -> None:
    sms, fp32, clock, dram_gbs, dram_fraction, gemm_fraction, launch_us, t_min_us, latency_ns = (
        GOLDEN[preset]
    )
    hw = load_hw(preset)
    assert (hw.gpu.kernel_min_us, hw.gpu.dram_latency_ns) == (t_min_us, latency_ns)
    # GEMM: T_math = 2 * 4096^3 / (SMs * FP32 FLOP/clk * clock); achieved = T_math / 0.85.
    # V100: 1.374e11 / (80 * 128 * 1.53e9) = 8.772 ms -> 10.320 ms; A100: 7.055 ms -> 8.300 ms;
    # MI300X: 0.8407 ms -> 0.9891 ms; TX1: 268.98 ms -> 316.45 ms.
    gemm = make_ops([traced_sgemm(sms)])
    t_math = 2.0 * K**3 / (sms * fp32 * clock * 1e6)
    terms = kernel_terms(gemm, hw.gpu)
    assert terms["math"][0] == pytest.approx(t_math, rel=1e-9)
    assert terms["comp"][0] == pytest.approx(t_math / gemm_fraction, rel=1e-9)
    # In series with the math (archsim.perf.gemm_latency.prologue_seconds, a traced tiled kernel):
    # the fixed cost T_min - L plus one DRAM round trip per round of resident blocks. 4 blocks on the
    # busiest SM, and 4 fit (64 registers x 256 threads = 16,384 of 65,536; MI300X: 8 fit in 131,072
    # and 2048 threads), so ceil(4 / 4) = 1 round: (T_min - L) + 1 x L = T_min. V100 and TX1: 1.25
    # - 0.317 + 0.317 = 1.25 us; A100: 3.0 - 0.408 + 0.408 = 3.0 us; MI300X: 2.0 - 0.434 + 0.434 =
    # 2.0 us. No epilogue term: the op records no dims, so the grid is not confirmed as the tile count.
    latency_s = latency_ns * 1e-9
    prologue_s = (t_min_us * 1e-6 - latency_s) + 1 * latency_s
    assert terms["serial"][0] == pytest.approx(prologue_s, rel=1e-9)
    # MI300X (CDNA3) carries its fixed cost outside the terms (archsim.perf.dispatch_overhead):
    # T_fixed = 2.0 - 2 x 0.434 = 1.132 us in series with the body, whose terms see the minimal
    # kernel's body 2 L = 0.868 us as their floor (its loads back at L, its stores acknowledged at
    # 2 L: archsim.perf.pipeline_fill), so the prologue there is (0.868 - 0.434) + 0.434 = 0.868 us:
    # 1.132 + 0.868 = 2.0 us in all, the same T_min as on the other GPUs.
    gemm_s = predict_op_seconds(gemm, hw)[0]
    expected_gemm = t_math / gemm_fraction + prologue_s + launch_us * 1e-6
    if preset == "mi300x":
        t_fixed = t_min_us * 1e-6 - 2 * latency_s
        terms_floor = 2 * latency_s
        expected_gemm = t_math / gemm_fraction + t_fixed + (terms_floor - latency_s) + latency_s
        expected_gemm += launch_us * 1e-6
    assert gemm_s == pytest.approx(expected_gemm, rel=1e-9)
    # add: 201,326,592 B / (DRAM x achieved fraction). V100: / 747 GB/s = 269.5 us; A100: / 1368.4
    # GB/s = 147.1 us; MI300X: / 3996.2 GB/s = 50.4 us; TX1: / 17.92 GB/s = 11.235 ms; plus the
    # pipeline fill of a bandwidth-bound kernel, two DRAM round trips (archsim.perf.pipeline_fill:
    # the first load's before the stream, the last store's after it): V100 and TX1 2 x 317 ns,
    # A100 2 x 408 ns, MI300X 2 x 434 ns. MI300X (CDNA3) adds its fixed cost in series with the body
    # (archsim.perf.dispatch_overhead): T_fixed = T_min - 2 L = 2.0 - 2 x 0.434 = 1.132 us.
    add = make_ops([ELEMENTWISE])
    add_s = predict_op_seconds(add, hw)[0]
    fill_s = 2 * latency_s
    expected = ADD_BYTES / (dram_gbs * 1e9 * dram_fraction) + fill_s + launch_us * 1e-6
    if preset == "mi300x":
        expected += t_min_us * 1e-6 - 2 * latency_s
    assert add_s == pytest.approx(expected, rel=1e-9)
    bw_s = kernel_terms(add, hw.gpu)["bw"][0]
    assert bw_s == pytest.approx(ADD_BYTES / (dram_gbs * 1e9 * dram_fraction), rel=1e-9)


def test_generations_of_presets_and_trace_configs() -> None:
    assert generation(load_hw("dgx1-v100").gpu) == "volta"
    assert generation(load_hw("jetson-tx1").gpu) == "maxwell"
    assert generation(load_hw("mi300x").gpu) == "cdna3"
    assert generation(load_hw("mi210").gpu) == "cdna2"
    assert generation(load_hw("t4").gpu) == "turing"
    assert generation(load_hw("dgx-h100").gpu) == "hopper"
    assert generation(load_hw("dgx-a100").gpu, "trace-sm_80") == "ampere"


def test_every_fraction_is_a_fraction() -> None:
    for row in ACHIEVED.values():
        assert 0 < row.dram <= 1 and 0 < row.gemm <= 1 and 0 < row.gemm_tensor <= 1, row


def test_fp16_without_tensor_cores_gains_only_where_kernels_vectorize() -> None:
    tx1 = load_hw("jetson-tx1")  # Maxwell GM20B: no tensor cores, FP16 = 2x FP32 only as half2
    assert tx1.gpu.tensor_flops_per_clk_per_sm == 0
    n = 2.0e9
    rows = [{"kind": "cpu", "op_class": cls, "dtype": dtype, "flops": n, "bytes_read": 1e3,
             "bytes_written": 1e3} for cls in ("gemm", "elementwise", "reduction", "softmax")
            for dtype in ("float32", "float16")]  # fmt: skip
    math_s = kernel_terms(make_ops(rows), tx1.gpu)["math"]
    fp32_s, fp16_s = math_s[0::2], math_s[1::2]
    speedup = dict(
        zip(("gemm", "elementwise", "reduction", "softmax"), fp32_s / fp16_s, strict=True)
    )
    # PyTorch's fp16 GEMMs (cublasGemmEx, FP32 compute), convolutions (cuDNN math type FLOAT) and
    # element-wise/reduction loops (opmath float) all compute in FP32: no math gain, only bytes
    assert speedup == pytest.approx({"gemm": 1.0, "elementwise": 1.0, "reduction": 1.0,
                                     "softmax": 1.0})  # fmt: skip
    assert fp32_s[0] == pytest.approx(n / (2 * 256 * 998e6))
    # a traced native-FP16 HGEMM (cublasHgemm: half2 FMAs) runs at the 2x FP16 rate; the
    # fp16-storage, fp32-compute kernel at the FP32 rate
    traced = [
        {**rows[1], "kind": "kernel", "name": name}
        for name in ("maxwell_hgemm_128x64_nn", "maxwell_fp16_sgemm_fp16_128x64_nn")
    ]
    hgemm_s, sgemm_fp16_s = kernel_terms(make_ops(traced), tx1.gpu)["math"]
    assert fp32_s[0] / hgemm_s == pytest.approx(2.0)
    assert fp32_s[0] / sgemm_fp16_s == pytest.approx(1.0)


@settings(max_examples=15, deadline=None)
@given(
    preset=st.sampled_from(sorted(GOLDEN)),
    factor=st.floats(1.0, 3.0),  # within docs/LIMITS.md ranges
    field=st.sampled_from(["dram_bw_gbs", "clock_mhz"]),
    flops=st.floats(1e6, 1e12),
    nbytes=st.floats(1e3, 1e10),
)
def test_more_bandwidth_or_clock_is_never_slower(preset, factor, field, flops, nbytes) -> None:
    base = load_hw(preset)
    faster = load_hw(preset, [f"gpu.{field}={getattr(base.gpu, field) * factor}"])
    ops = make_ops([{"kind": "cpu", "op_class": cls, "dtype": "float32", "flops": flops,
                     "bytes_read": nbytes, "bytes_written": nbytes / 2}
                    for cls in ("gemm", "elementwise", "conv", "reduction")])  # fmt: skip
    assert (predict_op_seconds(ops, faster) <= predict_op_seconds(ops, base) * (1 + 1e-12)).all()


GPU_FIXTURES = [
    "v100_cnn_ddp_train.json.gz",
    "a100_alexnet_forward.json.gz",
    "a100_event_sync_multistream.json.gz",
    "rtx2080ti_mlp_train.json.gz",
    "a100_train_shapes.json.gz",
    "h100_timesformer_inference.json.gz",
    "mi300x_normalization_bench.json.gz",
    "mi250_mlp_train.json.gz",
    "v100_resnet50_train_2021.json.gz",
    "gp100_user_annotation.json.gz",
    "mi210_gpu_only.json.gz",
    "nodevice_sampled_train.json.gz",
]


@pytest.mark.parametrize("name", GPU_FIXTURES)
def test_calibrate_never_reports_an_efficiency_above_one(name: str) -> None:
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest

    trace = ingest(kineto_fixture(name))
    hw = source_hw_for_trace(trace)
    table = fit_table(trace.ops, hw)
    assert (table["efficiency"] <= MAX_EFFICIENCY).all() and (table["efficiency"] > 0).all()
    document = calibration_document(table, name, hw)
    assert all(0 < e <= MAX_EFFICIENCY for e in document["efficiency"].values())
    # a clipped class keeps its unclipped ratio in the provenance: nothing hidden
    above = table.drop(index="all").query("model_over_measured > 1").index
    assert set(document["provenance"]["unclipped_efficiency"]) == {str(c) for c in above}


def _rocm_gemm(name: str, grid_x: int, flops: float) -> dict:
    return {"kind": "kernel", "name": name, "op_class": "gemm", "dtype": "bfloat16", "flops": flops,
            "bytes_read": 1e8, "bytes_written": 5e7, "grid_x": grid_x, "grid_y": 1, "grid_z": 1,
            "block_x": 256, "block_y": 1, "block_z": 1, "registers_per_thread": 128.0,
            "shared_memory_bytes": 32768.0}  # fmt: skip


def test_rocm_module_kernel_grids_read_as_work_items_only_where_blocks_are_impossible() -> None:
    mi300x = load_hw("mi300x")
    big = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT320x224x64_MI16x16x1_SN"
    # fixture mi300x_sd35_inference: grid 75,776 x block 256, 9.69e10 FLOPs. As blocks: 75,776 tiles
    # of 320 x 224 outputs, depth 9.69e10 / (2 x 75,776 x 71,680) = 8.9 < the 64-deep tile step:
    # impossible, so it is 75,776 / 256 = 296 workgroups, as a trace with grid 296 says directly.
    as_items = kernel_terms(make_ops([_rocm_gemm(big, 75_776, 9.69e10)]), mi300x.gpu)["comp"][0]
    as_blocks = kernel_terms(make_ops([_rocm_gemm(big, 296, 9.69e10)]), mi300x.gpu)["comp"][0]
    assert as_items == pytest.approx(as_blocks, rel=1e-12)
    # same fixture: MT64x64x128 with grid 256 and 8.6e9 FLOPs is 256 workgroups (depth 4096 as blocks)
    small = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x64x128_MI16x16x1_SN"
    grid_256 = kernel_terms(make_ops([_rocm_gemm(small, 256, 8.59e9)]), mi300x.gpu)["comp"][0]
    one_block = kernel_terms(make_ops([_rocm_gemm(small, 1, 8.59e9)]), mi300x.gpu)["comp"][0]
    assert grid_256 < one_block / 100
    # NVIDIA traces record blocks: the same grid stays 75,776 blocks there
    a100 = load_hw("dgx-a100").gpu
    nvidia = kernel_terms(make_ops([_rocm_gemm(big, 75_776, 9.69e10)]), a100)["comp"][0]
    nvidia_296 = kernel_terms(make_ops([_rocm_gemm(big, 296, 9.69e10)]), a100)["comp"][0]
    assert nvidia != pytest.approx(nvidia_296, rel=1e-3)
