"""FP32 GEMMs on CDNA (archsim.perf.math_units): strict FP32 unless the kernel says TF32/XF32.

PyTorch's fp32 matmuls default to strict FP32 on ROCm as on CUDA, and hipBLASLt runs them on FP32
MFMA (Tensile names Cijk_..._S_B_...); only when TF32 is opted in does it pick XF32 kernels, which
Tensile names with "_S_MX_" (archsim.perf.tf32_operands). Golden values worked by hand from the
MI300X datasheet (FP32 matrix 163.4, TF32 653.7 TFLOP/s) and the MI250X preset (no TF32)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw import load_hw
from archsim.perf.math_units import math_units

# hipBLASLt FP32 GEMM (no XF32): the name mi300x_sd35_inference's bf16 kernels follow, with S data.
HIPBLASLT_F32 = "Cijk_Ailk_Bljk_S_B_Bias_HA_S_SAV_UserArgs_MT128x128x16_MI16x16x4x1_SN_LDSB1"
# The same GEMM with F32XdlMathOp = XFloat32: "_M" + "X" after the data type (TensileLite naming).
HIPBLASLT_XF32 = "Cijk_Ailk_Bljk_S_MX_B_Bias_HA_S_SAV_UserArgs_MT128x128x32_MI16x16x8x1_SN_LDSB1"
CUSTOM_XF32 = "Custom_Cijk_Ailk_Bljk_S_MX_B_BIAS_HA_S_SAV_NTD_SK3_UserArgs_MT256x256x32_MI16x16x1"
ROCBLAS_F32 = "Cijk_Ailk_Bljk_SB_MT64x64x8_SN_MI16x16x1"
NV_TF32 = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_tn_align1>(Params)"


def _device_flops(names: list[str], preset: str) -> tuple[np.ndarray, np.ndarray]:
    ops = pd.DataFrame(
        {"name": names, "dtype": ["float32"] * len(names), "op_class": ["gemm"] * len(names)}
    )
    gpu = load_hw(preset).gpu
    per_sm, matrix = math_units(ops, gpu)
    return per_sm * gpu.sms, matrix


def test_mi300x_fp32_gemm_is_strict_fp32_unless_named_xf32():
    # By hand, MI300X preset: 304 CUs at 2,100 MHz. FP32 (FP32 MFMA): 256 FLOP/clk/CU
    # -> 304 x 256 x 2.1e9 = 163.4 TFLOP/s. XF32: half of 2,048 FP16 FLOP/clk/CU
    # -> 304 x 1,024 x 2.1e9 = 653.7 TFLOP/s (MI300X datasheet: 163.4 and 653.7).
    names = [HIPBLASLT_F32, ROCBLAS_F32, HIPBLASLT_XF32, CUSTOM_XF32, NV_TF32]
    flops, matrix = _device_flops(names, "mi300x")
    assert np.allclose(flops / 1e12, [163.4, 163.4, 653.7, 653.7, 653.7], atol=0.05)
    assert list(matrix) == [False, False, True, True, True]


def test_cdna2_has_no_xf32_so_every_fp32_gemm_runs_at_fp32():
    # MI250X preset (one GCD): 110 CUs x 256 FLOP/clk x 1.7e9 = 47.87 TFLOP/s, TF32 absent (CDNA2).
    flops, matrix = _device_flops([HIPBLASLT_F32, HIPBLASLT_XF32, NV_TF32], "mi250x")
    assert np.allclose(flops / 1e12, 47.87, atol=0.01)
    assert not matrix.any()


def test_no_fp32_gemm_beats_the_tf32_rate_and_plain_names_stay_at_fp32():
    # Invariant over the CDNA presets: an FP32 GEMM without a TF32/XF32 name never runs above the
    # preset's FP32 rate, and none runs above half the matrix (FP16) rate.
    for preset in ("mi300x", "mi250x", "mi210"):
        gpu = load_hw(preset).gpu
        flops, _ = _device_flops([HIPBLASLT_F32, ROCBLAS_F32, HIPBLASLT_XF32], preset)
        fp32 = gpu.sms * gpu.fp32_flops_per_clk_per_sm * gpu.clock_mhz * 1e6
        assert np.allclose(flops[:2], fp32)
        assert flops.max() <= max(
            fp32, gpu.sms * gpu.tensor_flops_per_clk_per_sm * 0.5 * gpu.clock_mhz * 1e6
        )
