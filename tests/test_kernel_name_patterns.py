"""Kernel-name patterns that pick the math unit (archsim.perf.math_units, tf32_operands, bf16): real
names that must and must not match, each from a fixture or the public source it is quoted from, and
every tensor-core kernel of the bundled fixtures still recognised."""

from __future__ import annotations

import re

import pandas as pd
import pytest

from archsim.hw import load_hw
from archsim.perf.bf16 import BF16_NAME_PATTERN
from archsim.perf.math_units import (
    CDNA_HALF_MATRIX_NAME_PATTERN,
    TENSOR_CORE_NAME_PATTERN,
    TF32_NAME_PATTERN,
    math_units,
)
from archsim.perf.tf32_operands import NARROW_OPERAND_PATTERN
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

TENSOR_CORE_NAMES = [
    # fixtures a100_train_shapes, h100_timesformer_inference, a100_alexnet_forward
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x128_32x3_nn_align1>(Params)",
    "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>(Params)",
    "cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8",
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1",
    # cuBLAS (cuda-memcheck output in public docs), cuDNN (nvprof listings), CUTLASS library names
    "volta_h884gemm_64x64_ldg8_nn",
    "volta_fp16_s884gemm_fp16_128x128_ldg8_f2f_mods_nt",
    "volta_fp16_s884cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc2nchw_tn_v1",
    "turing_fp16_s1688cudnn_fp16_256x128_ldg8_relu_f2f_exp_small_nhwc_tn_v1",
    "ampere_h16816gemm_128x128_ldg8_stages_64x3_nn",
    "cutlass_tensorop_h884gemm_128x256_32x2_tn_align8",
    "cutlass_tensorop_i8816gemm_s8_64x128_64x2_tn_align4",
    "cutlass_75_tensorop_i8816gemm_s8_128x128_tn_align16",
]
NOT_TENSOR_CORE_NAMES = [
    # digits of a size, an index or a hash, not an MMA shape
    "void at::native::vectorized_elementwise_kernel<4, add_1688_kernel>",
    "triton_poi_fused_add_884",
    "gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, false, false>_16816",
    "ampere_sgemm_128x64_nn",  # fixture a100_train_shapes: SIMT SGEMM
    "cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1",  # fixture a100_alexnet_forward
    # FP64 DMMA: not FP16/TF32 tensor work (cuBLAS kernels named in public nsys listings)
    "cutlass_80_tensorop_d884gemm_128x64_16x3_nn_align1",
    "cutlass_tensorop_z884gemm_64x64_16x4_nn_align1",
    "sm90_xmma_gemm_f64f64_f64f64_f64_nt_n_tilesize128x128x16_stage3_warpsize4x2x1_tensor16x8x16",
]
# hipBLASLt hand-tuned kernels (ROCm/hipBLASLt tensilelite/Tensile/CustomKernels file names; the
# first as quoted in a TraceLens test of a real trace)
CUSTOM_BF16 = "Custom_Cijk_Alik_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT64x16x64_MI16x16x1_SN_LDSB0"
CUSTOM_HALF = "CustomGSUs_Cijk_Ailk_Bljk_HHS_BH_MT16x128x16_MI16x16x1_prefetch2"
CUSTOM_XF32 = "Custom_Cijk_Ailk_Bjlk_S_MX_B_BIAS_HA_S_SAV_NTD_SK3_UserArgs_MT256x256x32_MI16x16x1_shortname0_gfx950"


def _matches(pattern: str, name: str) -> bool:
    return re.search(pattern, name.lower()) is not None


@pytest.mark.parametrize("name", TENSOR_CORE_NAMES)
def test_real_tensor_core_names_match(name):
    assert _matches(TENSOR_CORE_NAME_PATTERN, name)


@pytest.mark.parametrize("name", NOT_TENSOR_CORE_NAMES)
def test_sizes_hashes_simt_and_fp64_names_do_not_match(name):
    assert not _matches(TENSOR_CORE_NAME_PATTERN, name)


def test_hipblaslt_custom_cijk_kernels_are_matrix_kernels():
    for name in (CUSTOM_BF16, CUSTOM_HALF):
        assert _matches(CDNA_HALF_MATRIX_NAME_PATTERN, name)
        assert _matches(TENSOR_CORE_NAME_PATTERN, name)
        assert _matches(NARROW_OPERAND_PATTERN, name)
    assert _matches(BF16_NAME_PATTERN, CUSTOM_BF16)
    assert not _matches(BF16_NAME_PATTERN, CUSTOM_HALF)
    # an FP32 (XF32) custom kernel is not a half-precision one; its TF32 pattern already took the prefix
    assert not _matches(CDNA_HALF_MATRIX_NAME_PATTERN, CUSTOM_XF32)
    assert _matches(TF32_NAME_PATTERN, CUSTOM_XF32)


def test_custom_cijk_bf16_gemm_runs_at_the_mi300x_matrix_rate():
    # By hand: a bf16 GEMM with no recorded dtype on mi300x runs on its matrix units, like the
    # un-prefixed Cijk_Ailk_Bljk_BBS_BH_ kernel of fixture mi300x_sd35_inference.
    gpu = load_hw("mi300x").gpu
    plain = CUSTOM_BF16.removeprefix("Custom_")
    ops = pd.DataFrame({"name": [CUSTOM_BF16, plain], "dtype": ["", ""], "op_class": ["gemm"] * 2})
    rate, tensor = math_units(ops, gpu)
    assert tensor.tolist() == [True, True]
    assert rate[0] == rate[1] == gpu.tensor_flops_per_clk_per_sm * gpu.clock_mhz * 1e6


@pytest.mark.parametrize(
    "fixture",
    ["a100_train_shapes", "h100_timesformer_inference", "mi210_gpu_only", "mi300x_sd35_inference"],
)
def test_fixture_tensor_kernels_unchanged_by_anchoring(fixture):
    # Every kernel the bare-digit pattern called a tensor-core kernel in these fixtures still is one.
    old = r"hmma|884|1688|16816|tensorop|xmma|wgmma|tf32|^cijk_a[a-z]+_b[a-z]+_[hb][a-z]*_.*_mi\d+x\d+x\d+|^igemm_[a-z]+_gtcx\d*_[a-z]+_(?:fp16|bf16)_"
    names = (
        ingest(kineto_fixture(f"{fixture}.json.gz"))
        .ops["name"]
        .astype(str)
        .str.lower()
        .drop_duplicates()
    )
    before = names.str.contains(old, regex=True)
    after = names.str.contains(TENSOR_CORE_NAME_PATTERN, regex=True)
    assert before.any()
    assert (before == after).all(), names[before != after].tolist()
