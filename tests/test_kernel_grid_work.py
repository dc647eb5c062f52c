"""Kernels of real GPU traces without recorded shapes: work inferred from grid and kernel name
(archsim.perf.blocks.estimate_work_from_launch), GEMM engines versus the auxiliary kernels around them,
and the efficiency classes those rules fall in. Golden values worked out by hand below."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archsim.hw import load_hw
from archsim.perf.blocks import estimate_work_from_launch, tiled_engine
from archsim.perf.kernel import efficiency_class, kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

RTX = load_hw("rtx2080ti")
WINOGRAD = "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>(params)"
XMMA = (
    "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16"
    "_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn"
)


def make_ops(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def kernel(name: str, op_class: str, grid: tuple[int, int, int], threads: int, **extra) -> dict:
    return {"kind": "kernel", "name": name, "op_class": op_class, "dur_us": 10.0,
            "grid_x": grid[0], "grid_y": grid[1], "grid_z": grid[2], "block_x": threads,
            "block_y": 1, "block_z": 1, **extra}  # fmt: skip


# volta_sgemm_128x64_nn on the RTX 2080 Ti fixture's grid [8, 8, 2], 128 threads, 122 registers,
# 12,544 B shared (the A100 fixture's ampere_sgemm_128x64_nn launch parameters).
SGEMM = kernel("volta_sgemm_128x64_nn", "gemm", (8, 8, 2), 128, registers_per_thread=122.0,
               shared_memory_bytes=12544.0)  # fmt: skip


def test_gemm_engine_work_is_its_tiles_and_each_operand_once() -> None:
    # 8 x 8 tiles of 128 x 64 outputs, 2 K-slices of ASSUMED_TILE_K = 512:
    #   FLOPs = 128 blocks x 2 x 128 x 64 x 512 = 1,073,741,824
    #   M = 8 x 128 = 1024, N = 8 x 64 = 512, K = 512, fp32:
    #   DRAM bytes = 2 slices x (1024 x 512 + 512 x 512 + 1024 x 512) x 4 B = 10,485,760
    # (the old rule charged every block its own panels: 128 x ((128 + 64) x 512 + 128 x 64) x 4 B
    # = 54,525,952 B, five times more, as if no panel were shared through L2).
    ops = make_ops([SGEMM])
    blocks = np.array([128.0])
    grid = (np.array([8.0]), np.array([8.0]), np.array([2.0]))
    flops, dram = estimate_work_from_launch(ops, blocks, np.array([128.0]), grid)
    assert flops[0] == 1_073_741_824
    assert dram[0] == 10_485_760


def test_gemm_engine_saturates_an_sm_with_one_warp_per_scheduler() -> None:
    # On the RTX 2080 Ti (68 SMs, 128 FP32 FLOP/clk/SM at 1545 MHz = 197.76 GFLOP/s per SM):
    # 128 blocks on 68 SMs -> the busiest SM runs 2. Resident limit: 122 registers -> 3904 -> 4096 per
    # warp x 4 warps = 16,384 -> 4 blocks (threads 1024/128 = 8, shared 65,536/12,544 = 5) -> 2 resident
    # x 128 threads = 256 >= 128 (ENGINE_SATURATING_THREADS_PER_SM): u = 1.
    # T_comp = 2 blocks x 8,388,608 FLOPs / 197.76e9 = 84.836 us (u = 0.5 under the 512-thread rule
    # for low-ILP code would give 169.67 us; the fixture measures 112 us for this kernel).
    # T_bw = 10,485,760 / 616e9 = 17.02 us; T_lat: min(128, 68 x 4) x 128 threads x 16 B = 262,144 B
    # in flight / 317 ns = 827 GB/s, above the 616 GB/s of the pins -> 17.02 us; T_mem: L2 bytes
    # F / (2*128*64/192 / 4 B) =
    # 50,331,648 B / 1849e9 = 27.22 us. Body = T_comp. Achieved (archsim.perf.efficiency, Turing):
    # T_comp / 0.85 (cuBLAS SGEMM fraction) = 99.807 us, T_bw / 0.69 (T4 stream fraction) = 24.67 us.
    terms = kernel_terms(make_ops([SGEMM]), RTX.gpu)
    assert terms["comp"][0] == pytest.approx(2 * 8_388_608 / (128 * 1545e6) / 0.85, rel=1e-9)
    assert terms["comp"][0] == pytest.approx(84.836e-6 / 0.85, rel=1e-4)
    assert terms["bw"][0] == pytest.approx(10_485_760 / (616e9 * 0.69), rel=1e-9)
    assert 262_144 / 317e-9 > 616e9
    # the latency term with the pipeline fill (archsim.perf.pipeline_fill): two 317-ns round trips
    # plus the slower steady-state transfer, T_bw: 0.634 + 24.67 = 25.30 us
    assert terms["lat"][0] == pytest.approx(2 * 317e-9 + 10_485_760 / (616e9 * 0.69), rel=1e-9)
    assert terms["mem"][0] == pytest.approx(50_331_648 / 1849e9, rel=1e-9)
    # an element-wise kernel of the same threads still needs 512 threads per SM to saturate
    streaming = kernel("vectorized_elementwise_kernel<4, Functor>", "elementwise", (8, 8, 2), 128,
                       registers_per_thread=122.0, shared_memory_bytes=12544.0, flops=1.073741824e9,
                       bytes_read=1e6, bytes_written=1e6)  # fmt: skip
    comp = kernel_terms(make_ops([streaming]), RTX.gpu)["comp"][0]
    assert comp == pytest.approx(2 * 84.836e-6, rel=1e-4)


def test_auxiliary_kernels_of_a_conv_stream_like_elementwise_kernels() -> None:
    # cuDNN's non-fused Winograd data transform, grid [2, 256, 1] x 256 threads, under a conv op:
    # 512 blocks x 256 threads x 4 elements = 524,288 elements, 3 fp32 operands each = 6,291,456 B,
    # one FLOP per element. (Its name holds "4x4" and "winograd", which alone read as a tile engine.)
    rows = [
        kernel(WINOGRAD, "conv", (2, 256, 1), 256),
        kernel("void fft2d_r2c_32x32<float, false, 0u, false>(float2*)", "conv", (512, 1, 1), 512),
        kernel("void cudnn::ops::nchwToNhwcKernel<float>(params)", "conv", (6, 6, 128), 256),
        kernel("void cublasLt::splitKreduce_kernel<32, 16, int, float>(p)", "gemm", (32, 2, 1), 512),
        kernel("ampere_gcgemm_64x64_nt", "conv", (3, 2, 544), 256),
        kernel(XMMA, "conv", (2, 169, 1), 128),
        kernel("volta_sgemm_128x32_nt", "gemm", (16, 32, 1), 256),
        {"kind": "cpu", "name": "aten::linear", "op_class": "gemm", "flops": 1e9,
         "bytes_read": 1e6, "bytes_written": 1e6},
    ]  # fmt: skip
    ops = make_ops(rows)
    grid_known = np.array([True] * 7 + [False])
    assert tiled_engine(ops, grid_known).tolist() == [False] * 4 + [True] * 4
    flops, dram = estimate_work_from_launch(
        ops.iloc[:1], np.array([512.0]), np.array([256.0]), (np.array([2.0]), np.array([256.0]),
                                                             np.array([1.0]))
    )  # fmt: skip
    assert (flops[0], dram[0]) == (524_288, 6_291_456)
    assert efficiency_class(ops).tolist() == [
        "conv_aux_grid", "conv_aux_grid", "conv_aux_grid", "gemm_aux_grid",
        "conv_grid", "conv_grid", "gemm_grid", "gemm",
    ]  # fmt: skip


def test_pooling_kernels_have_their_own_efficiency_class() -> None:
    # Pooling kernels launch one thread per element (their grid shows their data); batch norm and
    # reduce_kernel loop over an extent the grid does not show: separate inferred scales.
    ops = make_ops(
        [
            kernel("void at::native::max_pool_forward_nchw<float, float>(int)", "reduction",
                   (23328, 1, 1), 256),
            kernel("void cudnn::bn_fw_tr_1C11_kernel_NCHW<float, float, int, 128>(p)", "reduction",
                   (256, 1, 1), 512),
            {"kind": "cpu", "name": "aten::max_pool2d", "op_class": "reduction", "flops": 1e6,
             "bytes_read": 4e6, "bytes_written": 1e6},
        ]
    )  # fmt: skip
    assert efficiency_class(ops).tolist() == ["reduction_pool_grid", "reduction_grid", "reduction"]


def test_engines_without_a_tile_in_their_name_get_64_outputs_per_thread() -> None:
    # cuDNN's dgrad_engine on the V100 fixture runs 64-thread blocks: a square tile of 64 x 64 = 64
    # threads x 64 outputs (a 128 x 128 tile would need 256 accumulators per thread, over the 255-
    # register limit). 256 threads without a tile in the name: 128 x 128, as before. Named: as named.
    from archsim.perf.blocks import tile_dims

    names = pd.Series(
        ["void cudnn::detail::dgrad_engine<float, 512, 6, 5, 3, 3, 3, false>(int)",
         "void wgrad_alg0_engine<float, 128, 6, 7, 3, 3, 5, false, 512>(int)",
         "volta_sgemm_32x128_tn"]
    )  # fmt: skip
    m, n = tile_dims(names, np.array([64.0, 256.0, 256.0]))
    assert m.tolist() == [64.0, 128.0, 32.0] and n.tolist() == [64.0, 128.0, 128.0]
    # dgrad_engine grid [18, 25, 32]: 14,400 blocks x 2 x 64 x 64 x 512 = 60,397,977,600 FLOPs
    # (four times less than with 128 x 128 tiles)
    ops = make_ops([kernel(names[0], "conv", (18, 25, 32), 64)])
    grid = (np.array([18.0]), np.array([25.0]), np.array([32.0]))
    flops, _ = estimate_work_from_launch(ops, np.array([14400.0]), np.array([64.0]), grid)
    assert flops[0] == 14400 * 2 * 64 * 64 * 512 == 60_397_977_600
