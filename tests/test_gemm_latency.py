"""K-loop latency chain of traced tiled GEMMs (archsim.perf.gemm_latency): golden values worked by
hand, invariants, and the real MI300X fixture."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.gemm_latency import (
    chain_seconds,
    gemm_reduction_dim,
    k_iterations,
    k_loop_floor,
    k_step_of,
    split_k_slices,
)
from archsim.perf.kernel import body_seconds
from archsim.perf.terms import kernel_terms

MT64 = (
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x96x128_MI16x16x1_SN_LDSB1_NTD4_PGR2_PLR1"
    "_PKA1_WG16_8_2"
)
CUTLASS = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align4>"
MM_DIMS = "[[666, 2432], [2432, 2432]]"


@pytest.mark.parametrize(
    ("name", "step"),
    [
        (MT64, (64, 96, 128, 1)),  # PGR2: one iteration of cover (Tensile Common.py)
        (MT64.replace("_PGR2_", "_PGR1_"), (64, 96, 128, 1)),
        (MT64.replace("_PGR2_", "_PGR4_"), (64, 96, 128, 4)),  # DirectToLds: PGR iterations
        (CUTLASS, (256, 128, 32, 2)),  # 3 stages: 2 K-slices in flight
        ("volta_sgemm_128x64_nn", None),  # no depth or stage count in the name
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>", None),
    ],
)
def test_k_step_of_names(name, step):
    assert k_step_of(name) == step


def test_reduction_dim_and_split_k():
    assert gemm_reduction_dim("aten::mm", MM_DIMS) == 2432
    assert gemm_reduction_dim("aten::linear", "[[77, 1280], [5120, 1280], [5120]]") == 1280
    assert gemm_reduction_dim("aten::add", MM_DIMS) is None
    # 666 x 2432 output: 96 along M, 64 along N is 7 x 38 = 266 tiles; a grid of 532 is 2 slices
    assert split_k_slices(1, 666, 2432, (64, 96), 266) == 1
    assert split_k_slices(1, 666, 2432, (64, 96), 532) == 2
    assert split_k_slices(1, 666, 2432, (64, 96), 300) is None


def test_golden_mi300x_mt64x96x128():
    """Worked by hand: K = 2432 in 128-deep steps is ceil(2432 / 128) = 19 steps, 266 workgroups on
    304 CUs one wave, 434 ns per step (one iteration of cover), plus the fixed cost 2.0 - 0.434 us:
    1.566 + 19 x 0.434 = 9.812 us."""
    gpu = load_hw("mi300x").gpu
    steps, cover = k_iterations(MT64, "aten::mm", MM_DIMS, 266.0)
    assert (steps, cover) == (19, 1)
    chain = chain_seconds(np.array([steps]), np.array([cover]), np.array([266.0]),
                          np.array([1.0]), gpu)  # fmt: skip
    assert chain[0] == pytest.approx(9.812e-6, rel=1e-9)
    # split into 2 K-slices: ceil(1216 / 128) = 10 steps
    assert k_iterations(MT64, "aten::mm", MM_DIMS, 532.0) == (10, 1)
    # no chain under the dram_latency idealization
    assert chain_seconds(np.array([19]), np.array([1]), np.array([266.0]), np.array([1.0]), gpu,
                         frozenset({"dram_latency"}))[0] == 0.0  # fmt: skip


def gemm_op(name: str, k: int, blocks: int, m: int = 666, n: int = 2432) -> pd.DataFrame:
    """One traced bf16 ``aten::mm`` kernel of [m, k] x [k, n] on ``blocks`` workgroups (ROCm launch);
    the default m, n are an SD3.5 mid-size GEMM's. Shared with tests/test_gemm_prologue.py."""
    return pd.DataFrame(
        {
            "name": [name],
            "kind": ["kernel"],
            "op_class": ["gemm"],
            "launch_op": ["aten::mm"],
            "input_dims": [f"[[{m}, {k}], [{k}, {n}]]"],
            "dtype": ["bfloat16"],
            "flops": [2.0 * m * k * n],
            "bytes_read": [2.0 * (m * k + k * n)],
            "bytes_written": [2.0 * m * n],
            "grid_x": [float(blocks)],
            "grid_y": [1.0],
            "grid_z": [1.0],
            "block_x": [256.0],
            "block_y": [1.0],
            "block_z": [1.0],
            "launch_api": ["hipExtModuleLaunchKernel"],
        }
    )


def test_floor_reaches_the_latency_term():
    """A long-K GEMM on few tiles is bound by its chain: K = 2^20 is 8192 steps x 434 ns = 3.56 ms."""
    gpu = load_hw("mi300x").gpu
    ops = gemm_op(MT64, 1 << 20, 266)
    floor = k_loop_floor(ops, np.array([266.0]), np.array([1.0]), np.array([True]), gpu)
    assert floor[0] == pytest.approx(1.566e-6 + 8192 * 434e-9, rel=1e-9)
    assert kernel_terms(ops, gpu, config_name="mi300x")["lat"][0] >= floor[0]


@given(k=st.integers(1, 1 << 16), extra=st.integers(1, 1 << 16))
def test_more_k_never_faster(k, extra):
    hw = load_hw("mi300x")
    ops = pd.concat([gemm_op(MT64, k, 266), gemm_op(MT64, k + extra, 266)], ignore_index=True)
    seconds = body_seconds(ops, hw)
    assert seconds[1] >= seconds[0]


@given(k=st.integers(1, 1 << 16), blocks=st.integers(1, 4096), cus=st.integers(1, 303))
def test_more_cus_never_slower(k, blocks, cus):
    hw = load_hw("mi300x")
    fewer = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": cus})})
    more = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": cus + 1})})
    ops = gemm_op(MT64, k, blocks)
    assert body_seconds(ops, more)[0] <= body_seconds(ops, fewer)[0] * (1 + 1e-12)


@pytest.mark.parametrize(
    "fixture", ["mi300x_sd35_inference.json.gz", "a100_80gb_train_prewindow.json.gz"]
)
def test_chain_is_below_every_measured_kernel(fixture):
    """A floor: on real traces (hipBLASLt MT..._PGR2 kernels on an MI300X, CUTLASS multistage
    kernels on an A100) the chain applies to the named GEMMs and never exceeds the measured time."""
    from archsim.perf.blocks import tiled_engine
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.occupancy import blocks_per_sm
    from archsim.perf.source import source_hw_for_trace
    from archsim.perf.terms import launch_shape
    from archsim.trace.ingest import ingest
    from tests.conftest import kineto_fixture

    trace = ingest(kineto_fixture(fixture))
    gpu = source_hw_for_trace(trace).gpu
    ops = measured_ops(trace.ops).reset_index(drop=True)
    blocks, threads, registers, shared = launch_shape(ops)
    view = ops[["name", "dtype", "op_class"]].astype("string").fillna("")
    tiled = tiled_engine(view, ops["grid_x"].fillna(0).to_numpy() > 0, ops["flops"].to_numpy())
    resident = blocks_per_sm(threads, registers, shared, gpu)
    floor = k_loop_floor(ops, blocks, resident, tiled, gpu)
    applies = floor > 0
    assert applies.sum() >= 10
    assert (floor[applies] <= ops["dur_us"].to_numpy()[applies] * 1e-6).all()


def test_golden_a100_cutlass_multistage():
    """Worked by hand: cutlass 256x128_32x3 on a [1024, 1024] x [1024, 1024] mm: 4 x 8 = 32 tiles =
    the grid (no split), 1024 / 32 = 32 steps, 3 stages = 2 steps of cover; dgx-a100: L = 408 ns,
    T_min = 3.0 us: (3.0 - 0.408) + (1 + 31 / 2) x 0.408 = 2.592 + 6.732 = 9.324 us."""
    gpu = load_hw("dgx-a100").gpu
    assert k_iterations(CUTLASS, "aten::mm", "[[1024, 1024], [1024, 1024]]", 32.0) == (32, 2)
    chain = chain_seconds(np.array([32]), np.array([2]), np.array([32.0]), np.array([1.0]), gpu)
    assert chain[0] == pytest.approx(9.324e-6, rel=1e-9)
