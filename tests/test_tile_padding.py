"""Padded work of traced GEMM kernels (archsim.perf.tile_padding): golden values worked by hand."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.perf.blocks import tiled_engine
from archsim.perf.calibrate import measured_ops
from archsim.perf.terms import launch_shape
from archsim.perf.tile_padding import gemm_output_dims, padding_factor, tile_of, tile_padding
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

MT320 = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT320x224x64_MI16x16x1_SN_LDSB0_WG64_4_1"
MT128 = "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x96x128_MI16x16x1_SN_WG16_8_2"


@pytest.mark.parametrize(
    ("name", "tile"),
    [
        (MT320, (320, 224)),
        ("igemm_fwd_gtcx3_nhwc_bf16_bx0_ex1_bt128x256x32_wt32x32x8_ws1", (128, 256)),
        (
            "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x64x64_warpgroupsize1x1x1",
            (128, 64),
        ),
        (
            "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>",
            (128, 128),
        ),
        ("volta_sgemm_128x64_nn", (128, 64)),
        ("void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add>", None),
    ],
)
def test_tile_from_kernel_name(name: str, tile: tuple[int, int] | None) -> None:
    assert tile_of(name) == tile


def test_output_dims_of_gemm_ops() -> None:
    assert gemm_output_dims("aten::mm", "[[8192,2432],[2432,2432]]") == (1, 8192, 2432)
    # addmm(bias, A, B): the matrices are the second and third arguments
    assert gemm_output_dims("aten::addmm", "[[2432],[666,2432],[2432,9728],[],[]]") == (
        1,
        666,
        9728,
    )
    assert gemm_output_dims("aten::bmm", "[[96,3137,64],[96,64,3137]]") == (96, 3137, 3137)
    # linear(x [2, 77, 768], w [3072, 768]): 154 rows of 3072 outputs
    assert gemm_output_dims("aten::linear", "[[2,77,768],[3072,768],[3072]]") == (1, 154, 3072)
    assert gemm_output_dims("aten::add", "[[4,4],[4,4]]") is None
    assert gemm_output_dims("aten::mm", "") is None
    assert gemm_output_dims("aten::mm", "not json") is None
    assert gemm_output_dims("aten::mm", "[[8192],[2432,2432]]") is None


def test_padding_of_ragged_tiles_worked_by_hand() -> None:
    # mi300x_sd35_inference: mm [8192, 2432] x [2432, 2432] on MT320x224, grid 296.
    # 320 along M: ceil(8192/320) = 26 x ceil(2432/224) = 11 = 286 tiles; 296 % 286 != 0.
    # 224 along M: ceil(8192/224) = 37 x ceil(2432/320) = 8 = 296 tiles = the grid:
    # 296 x 320 x 224 = 21,217,280 computed outputs over 8192 x 2432 = 19,922,944.
    assert padding_factor(1, 8192, 2432, (320, 224), 296) == pytest.approx(21_217_280 / 19_922_944)
    assert padding_factor(1, 8192, 2432, (320, 224), 296) == pytest.approx(1.064967, abs=1e-6)


def test_split_k_grid_is_not_read_as_padding() -> None:
    # mm [666, 9728] x [9728, 2432] on MT128x96x128 with grid 266: 96 along M gives
    # ceil(666/96) = 7 x ceil(2432/128) = 19 = 133 tiles, split in two along K (266 = 2 x 133);
    # 128 along M gives 6 x 26 = 156, which does not divide 266. Padding 133 x 96 x 128 /
    # (666 x 2432) = 1,634,304 / 1,619,712, not the 2.02 that blocks x tile / outputs would say.
    assert padding_factor(1, 666, 2432, (128, 96), 266) == pytest.approx(1_634_304 / 1_619_712)


def test_grid_that_matches_no_tiling_gives_no_padding() -> None:
    # A swizzled grid (200 x 4 x 96 = 76,800 blocks) for bmm 96 x [3137, 64] x [64, 3137] on
    # 128 x 128 tiles: 96 x 25 x 25 = 60,000 tiles does not divide it, so the op's FLOPs stand.
    assert padding_factor(96, 3137, 3137, (128, 128), 76_800) == 1.0
    assert padding_factor(1, 100, 100, (64, 64), 3) == 1.0  # fewer blocks than tiles


@given(
    st.integers(1, 4),
    st.integers(1, 5000),
    st.integers(1, 5000),
    st.sampled_from([(16, 16), (64, 96), (128, 128), (256, 224), (320, 224)]),
    st.integers(1, 8),
)
def test_padding_is_at_least_one_and_exact_when_the_grid_matches(
    batch: int, m: int, n: int, tile: tuple[int, int], splits: int
) -> None:
    tiles = batch * math.ceil(m / tile[0]) * math.ceil(n / tile[1])
    factor = padding_factor(batch, m, n, tile, tiles * splits)
    assert factor >= 1.0
    exact = tiles * tile[0] * tile[1] / (batch * m * n)
    assert factor <= exact + 1e-12  # the smaller of the matching assignments, never above this one
    if m % tile[0] == 0 and n % tile[1] == 0:
        assert factor == pytest.approx(1.0)


def test_only_traced_tiled_gemm_kernels_are_padded() -> None:
    ops = pd.DataFrame(
        {
            "name": [MT320, MT320, MT320, MT128],
            "launch_op": ["aten::mm", "aten::mm", "aten::mm", "aten::addmm"],
            "input_dims": ["[[8192,2432],[2432,2432]]"] * 3 + ["[[2432],[666,9728],[9728,2432]]"],
            "grid_x": [296.0, np.nan, 296.0, 266.0],
        }
    )
    blocks = np.array([296.0, 296.0, 296.0, 266.0])
    tiled = np.array([True, True, False, True])
    got = tile_padding(ops, blocks, tiled)
    assert got[0] == pytest.approx(21_217_280 / 19_922_944)
    assert got[1] == 1.0  # no traced grid (a CPU capture): the candidate tiles pad it instead
    assert got[2] == 1.0  # not a tiled engine
    assert got[3] == pytest.approx(1_634_304 / 1_619_712)
    bare = pd.DataFrame({"name": [MT320]})  # a table without grid, launch op or dims
    assert tile_padding(bare, np.array([296.0]), np.array([True])).tolist() == [1.0]


def test_sd35_fixture_gemms_padded_by_their_own_shapes() -> None:
    """mi300x_sd35_inference: every traced hipBLASLt GEMM gets a padding >= 1; the MT320x224 mm of
    [8192, 2432] x [2432, 2432] gets the hand-worked 1.065 and the split-K MT128x96x128 addmm of
    [666, 9728] x [9728, 2432] on 266 workgroups 1.009, not 2."""
    ops = measured_ops(ingest(kineto_fixture("mi300x_sd35_inference.json.gz")).ops)
    ops = ops.reset_index(drop=True)
    blocks = launch_shape(ops)[0]
    view = ops[["name", "dtype", "op_class"]].astype(str)
    traced = ops["grid_x"].fillna(0).to_numpy(dtype=float) > 0
    tiled = tiled_engine(view, traced, ops["flops"].to_numpy(dtype=float))
    padding = tile_padding(ops, blocks, tiled)
    assert (padding >= 1.0).all()
    names = ops["name"].astype(str)
    dims = ops["input_dims"].astype(str)
    mt320 = names.str.contains("MT320x224x64") & (dims == "[[8192,2432],[2432,2432],[8192,2432]]")
    assert mt320.any()
    assert padding[mt320.to_numpy()] == pytest.approx(21_217_280 / 19_922_944)
    split = names.str.contains("MT128x96x128") & dims.str.startswith("[[666,9728],[9728,2432]")
    split &= pd.Series(blocks == 266)
    assert split.any()
    assert padding[split.to_numpy()] == pytest.approx(1_634_304 / 1_619_712)
