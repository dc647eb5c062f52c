"""cuBLAS's K = 1 GEMM kernel (archsim.perf.gemm_k1): work from its grid as an outer product
(element-wise in its outputs), not as K-deep tiles. Golden values worked by hand, invariants, and
the real traces: the shaped ones check the rule against the op's own FLOPs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.blocks import ASSUMED_TILE_K, estimate_work_from_launch, tiled_engine
from archsim.perf.calibrate import measured_ops
from archsim.perf.gemm_k1 import k1_gemm, k1_gemm_work
from archsim.perf.kernel import body_seconds, efficiency_class, kernel_terms
from archsim.perf.source import source_hw_for_trace
from archsim.trace.gpu_costs import launch_threads
from archsim.trace.ingest import ingest
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture

V100 = load_hw("dgx1-v100")
# As traced on the Quadro GP100 fixture (HolisticTraceAnalysis tests): grid [1, 1, 1], block 256,
# 22 registers, 1,024 B shared.
GEMMK1 = (
    "void gemmk1_kernel<int, float, 256, 5, false, false, false, false, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float, 0>(cublasGemmk1Params<float, "
    "cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, "
    "cublasGemvTensorStridedBatched<float>, float, biasType<cublasGemvTensorStridedBatched<float>"
    "::value_type, float>::type>)"
)


def gemmk1_ops(blocks: int = 1, name: str = GEMMK1) -> pd.DataFrame:
    row = {"kind": "kernel", "name": name, "op_class": "gemm", "dtype": "float32", "dur_us": 2.0,
           "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": 256, "block_y": 1, "block_z": 1,
           "registers_per_thread": 22.0, "shared_memory_bytes": 1024.0}  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_names() -> None:
    names = pd.Series([GEMMK1, "void gemmk1_kernel<float, 256, 5, false>(x)", "volta_sgemm_128x64_nn",
                       "void gemv2N_kernel<int, int, float>(p)", "ampere_sgemm_32x128_tn"])  # fmt: skip
    assert k1_gemm(names).tolist() == [True, True, False, False, False]


def test_one_block_golden() -> None:
    # 1 block x 256 threads x 4 outputs = 1,024 outputs; 2 FLOPs each = 2,048 FLOPs;
    # bytes: 1,024 outputs written + 256 staged operand values read, x 4 B = 5,120 B.
    flops, nbytes = k1_gemm_work(np.array([1.0]), np.array([256.0]), 4, np.array([4.0]))
    assert flops[0] == 2048 and nbytes[0] == 5120
    ops = gemmk1_ops()
    est_flops, est_bytes = estimate_work_from_launch(
        ops, np.array([1.0]), np.array([256.0]), (np.ones(1), np.ones(1), np.ones(1))
    )
    assert est_flops[0] == 2048 and est_bytes[0] == 5120
    # not a tiled engine, so no K-deep tile: the tile rule gave 2 x 128 x 128 x 512 FLOPs
    assert not tiled_engine(ops, np.array([True]))[0]
    assert str(efficiency_class(ops).iloc[0]) == "gemm_aux_grid"
    assert est_flops[0] * 8192 == 2 * 128 * 128 * ASSUMED_TILE_K


def test_one_block_time_is_the_kernel_floor_order() -> None:
    # 2,048 FLOPs and 5 KB: nothing but the fixed cost of a launch, on the V100 preset within a few
    # microseconds (the tile rule had priced the same launch at tens of microseconds of math).
    seconds = body_seconds(gemmk1_ops(), V100)[0]
    assert V100.gpu.kernel_min_us * 1e-6 <= seconds < 5e-6
    assert kernel_terms(gemmk1_ops(), V100.gpu)["comp"][0] < 1e-7


@given(st.integers(1, 4096), st.integers(1, 4096), st.sampled_from([1.0, 2.0, 4.0, 8.0]))
def test_more_blocks_never_less_work(small: int, extra: int, size: float) -> None:
    blocks = np.array([float(small), float(small + extra)])
    flops, nbytes = k1_gemm_work(blocks, np.full(2, 256.0), 4, np.full(2, size))
    assert flops[1] > flops[0] and nbytes[1] > nbytes[0]
    # an outer product never does more math than the tile rule's K-deep tiles of the same launch
    tile_flops = blocks * 2 * 128 * 128 * ASSUMED_TILE_K
    assert (flops < tile_flops).all()


@given(st.integers(1, 2000), st.integers(1, 2000))
def test_more_blocks_never_less_time(small: int, extra: int) -> None:
    ops = pd.concat([gemmk1_ops(small), gemmk1_ops(small + extra)], ignore_index=True)
    seconds = body_seconds(ops, V100)
    assert seconds[1] >= seconds[0] > 0


def test_shaped_fixtures_agree_with_the_grid_rule() -> None:
    # Where the launching op recorded its shapes, its FLOPs (2 M N at K = 1) never exceed the
    # rule's capacity of the grid (blocks x 256 threads x 4 outputs x 2), and full grids equal it:
    # nodevice_sampled_train's [1, 64, 1] launches of 131,072 FLOPs = 64 x 1,024 outputs x 2.
    ops = measured_ops(ingest(kineto_fixture("nodevice_sampled_train.json.gz")).ops)
    ops = ops[k1_gemm(ops["name"]) & (pd.to_numeric(ops["flops"], errors="coerce") > 0)]
    assert len(ops) >= 8
    blocks, threads = launch_threads(ops)
    capacity, _ = k1_gemm_work(blocks, threads, 4, np.full(len(ops), 4.0))
    flops = ops["flops"].to_numpy(dtype=float)
    assert (flops <= capacity).all()
    assert (flops == capacity).sum() >= 6


def test_gp100_launches_are_no_longer_priced_as_deep_tiles() -> None:
    # Quadro GP100: 15 one-block launches measured 2-3 us each (the tile rule: 105 us each).
    trace = ingest(kineto_fixture("gp100_user_annotation.json.gz"))
    hw = source_hw_for_trace(trace)
    ops = measured_ops(trace.ops).reset_index(drop=True)
    ops = ops[k1_gemm(ops["name"])].reset_index(drop=True)
    assert len(ops) == 15
    model = body_seconds(ops, hw)
    measured = ops["dur_us"].to_numpy(dtype=float) * 1e-6
    assert (model <= measured).all() and (model > 0).all()
