"""Which math unit runs each op and at what peak rate per SM: tensor/matrix cores for fp16/bf16 (and
TF32: FP32 operands, archsim.perf.tf32_operands) GEMMs and convolutions or kernels named as such,
the vector pipes otherwise (the fp16 rate only for kernels named as native-FP16 ones). Split out of
archsim.perf.terms (the kernel-time terms); the only place the math rate is decided."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.bf16 import bf16_ops
from archsim.perf.blocks import TILED_OP_CLASSES
from archsim.perf.columns import by_unique, parsed_input_dims
from archsim.perf.columns import strings as _strings
from archsim.perf.efficiency import generation, is_cdna
from archsim.perf.fp8 import TENSILE_FP8_NAME_PATTERN, fp8_ops
from archsim.perf.tf32_operands import fp32_tensor_ops

HALF_DTYPES = frozenset({"float16", "half", "bfloat16", "torch.float16", "torch.bfloat16"})
# Kernel names of cuBLAS/cuDNN/CUTLASS tensor-core kernels (HMMA instruction shapes 884/1688/16816,
# "tensorop", xmma, Hopper wgmma, TF32), and AMD CDNA matrix-core (MFMA) kernels on fp16/bf16 data:
# rocBLAS/hipBLASLt Tensile kernels name their data type right after the operand indices (Tensile
# documentation, "Precision Support": H half, B bfloat16, S single) and their MFMA instruction as
# "MI<m>x<n>x<k>" (the MatrixInstruction kernel parameter); MIOpen's assembly implicit-GEMM
# convolutions on MFMA ("xdlops") are igemm_<dir>_gtcx*_<layout>_<type>_*. An fp32 MFMA kernel
# (Cijk_..._SB_..._MI16x16x1) runs at the FP32 matrix rate, which CDNA presets give as their fp32
# rate, so only fp16/bf16 names are matched. Needed for traces without the launching op's dtype
# (fixture mi210_gpu_only: bf16 igemm kernels had been priced on the FP32 rate, 1/4 of bf16 MFMA).
# hipBLASLt's hand-tuned kernels prefix the Tensile name (Custom_Cijk_..., CustomGSUs_Cijk_...: ROCm/
# hipBLASLt tensilelite/Tensile/CustomKernels, e.g. Custom_Cijk_Ailk_Bljk_BBS_BH_Bias_HA_S_SAV_NTD_SK3_
# UserArgs_MT256x256x64_MI16x16x1_shortname0_gfx950), so "cijk_" is matched at the start or after "_".
CDNA_HALF_MATRIX_NAME_PATTERN = (
    r"(?:^|_)cijk_a[a-z]+_b[a-z]+_[hb][a-z]*_.*_mi\d+x\d+x\d+"
    r"|^igemm_[a-z]+_gtcx\d*_[a-z]+_(?:fp16|bf16)_"
)
# NVIDIA MMA kernels spell the accumulator type and the MMA instruction shape before the operation:
# CUTLASS's core name is <accumulator><shape>[<math type>]<kind> (python/cutlass_library:
# ShortDataTypeNames h f16, s f32, i s32, d f64, z cf64; gemm_operation.py core_name; generator.py
# lists h1688gemm, s1688gemm_bf16, i8816gemm, i16832gemm, d884gemm, z884gemm, c1688tf32gemm), as do
# cuBLAS (volta_h884gemm_64x64_ldg8_nn, volta_fp16_s884gemm_fp16_*, ampere_h16816gemm_*) and cuDNN
# (volta_fp16_s884cudnn_fp16_*, turing_fp16_s1688cudnn_fp16_*; TensorFlow's profiler names these
# prefixes, tensorflow/core/profiler/utils/kernel_stats_utils.cc IsKernelUsingTensorCore). Anchored to
# that spelling, not the bare digits, which a size ("_1688_") or an index can hold. FP16 (h), FP32 (s,
# FP16 or TF32 operands) and INT8/INT4 (i, priced at the FP16 tensor rate: Turing whitepaper gives
# INT8 twice FP16, so a lower bound) accumulators only.
NVIDIA_MMA_NAME_PATTERN = (
    r"(?<![a-z0-9])[hsi](?:884|1688|16816|16832|8816|8832|16864)"
    r"(?:tf32|bf16|f16)?(?:sp)?(?:gemm|cudnn|fprop|dgrad|wgrad|deconv)"
)
# FP64 matrix kernels (CUTLASS d884gemm/z884gemm DMMA; cuBLAS sm90_xmma_gemm_f64f64_f64f64_f64_* on
# Hopper DMMA) are not FP16/TF32 tensor work, though their names say "tensorop"/"xmma". archsim has no
# FP64 rate: they run at the vector (FP32) rate, which equals the FP64 tensor peak on the A100 (19.5
# TFLOP/s, A100 whitepaper) and H100 SXM (67, H100 datasheet); the A100's TF32 rate (156), which
# the bare "884" had given them, is 8x that.
FP64_MATRIX_NAME_PATTERN = r"tensorop_g?[dz]\d|(?<![a-z0-9])g?[dz](?:884|16816|1688)gemm|f64f64"
# hipBLASLt's FP8 GEMMs (Cijk_..._F8BS_...: archsim.perf.fp8) are matrix kernels by name too.
TENSOR_CORE_NAME_PATTERN = (
    rf"^(?!.*(?:{FP64_MATRIX_NAME_PATTERN})).*(?:hmma|{NVIDIA_MMA_NAME_PATTERN}|tensorop|xmma|"
    rf"wgmma|tf32|{CDNA_HALF_MATRIX_NAME_PATTERN}|{TENSILE_FP8_NAME_PATTERN})"
)
# Kernels whose name says they multiply FP32 data in a reduced-precision FP32 format: NVIDIA's
# "tf32", AMD's "xf32" and hipBLASLt's Tensile XF32 GEMMs, which TensileLite names by appending
# "_M" + the F32XdlMathOp type char ("X" for XFloat32) after the single-precision data type
# (ProblemType naming in hipBLASLt's TensileLite SolutionStructs: Cijk_Ailk_Bljk_S_MX_B_...).
# hipBLASLt picks those only for the compute type HIPBLAS_COMPUTE_32F_FAST_TF32
# (rocblaslt_compute_f32_fast_xf32 -> setF32XdlMathOp(XFloat32), rocblaslt tensile_host.cpp),
# which PyTorch asks for only when TF32 is opted in (archsim.perf.tf32_operands): an FP32 Tensile
# GEMM without "_MX_" (Cijk_Ailk_Bljk_S_B_..., rocBLAS's ..._SB_...) runs on FP32 MFMA, the FP32
# rate CDNA presets give. hipBLASLt's hand-tuned kernels prefix the name (Custom_Cijk_..._S_MX_...).
TF32_NAME_PATTERN = r"tf32|xf32|(?:^|_)cijk_a[a-z]+_b[a-z]+_s_mx_"
# fp16 on vector pipes: the "FP16 = 2x FP32" rates of GM20B, GP100 and later vector pipes need packed
# __half2 math (CUDA C Programming Guide, "Arithmetic Instructions"). PyTorch's fp16 kernels do not
# use it: GEMMs call cublasGemmEx with CUDA_R_16F operands and CUDA_R_32F compute (rocblas_gemm_ex
# with f32 compute on ROCm; aten/src/ATen/cuda/CUDABlas.cpp, gemm<at::Half>), convolutions set
# cuDNN's math type to CUDNN_DATA_FLOAT for half data (aten/src/ATen/cudnn/Descriptors.h,
# ConvolutionDescriptor::set), element-wise and reduction loops compute in opmath_type<Half> =
# float. So no op class runs fp16 math at the half2 rate: fp16 halves their bytes, and their math
# runs at the FP32 rate unless they reach matrix units. The 2x applies to kernels that are named as
# native-FP16 cuBLAS/cuDNN kernels in a GPU trace (maxwell_hgemm_*, *_hcudnn_*; the fp16-storage,
# fp32-compute ones are *_fp16_sgemm_* / *_fp16_scudnn_*), as called by frameworks that ask for
# FP16 compute (NVIDIA's Caffe FP16 path of the Tegra X1 whitepaper).
HALF2_CLASSES: frozenset[str] = frozenset()
HALF2_KERNEL_PATTERN = r"hgemm|hcudnn"


def math_rate_per_sm(ops: pd.DataFrame, gpu: GpuConfig) -> np.ndarray:
    """FLOP/s of one SM for each op (see :func:`math_units`)."""
    return math_units(ops, gpu)[0]


def math_units(ops: pd.DataFrame, gpu: GpuConfig) -> tuple[np.ndarray, np.ndarray]:
    """(FLOP/s of one SM, runs on matrix units) for each op: tensor cores for fp16/bf16 GEMM/conv (or
    a tensor-core kernel name) when the GPU has them, at half that rate (TF32) for FP32 operands
    where the GPU has TF32, never for FP32 operands where it has not; else the vector pipes: the
    fp16 rate only for kernels named as native-FP16 ones (HALF2_KERNEL_PATTERN), the fp32 rate for
    every other op. The one source of the math rate: archsim.perf.terms prices this rate, and
    nothing adjusts it afterwards."""
    half = by_unique(_strings(ops, "dtype"), lambda u: u.str.lower().isin(HALF_DTYPES)).astype(bool)
    tiled = by_unique(_strings(ops, "op_class"), lambda u: u.isin(TILED_OP_CLASSES)).astype(bool)
    names = _strings(ops, "name")
    half2 = by_unique(_strings(ops, "op_class"), lambda u: u.isin(HALF2_CLASSES)).astype(bool)
    half2 |= by_unique(
        names, lambda u: u.str.lower().str.contains(HALF2_KERNEL_PATTERN, regex=True)
    ).astype(bool)
    named_tensor = by_unique(
        names, lambda u: u.str.lower().str.contains(TENSOR_CORE_NAME_PATTERN, regex=True)
    ).astype(bool)
    # FP8 operands (archsim.perf.fp8): matrix work like fp16's, at the FP8 rate where the part has
    # one (hipBLASLt's FP8 GEMMs are matrix kernels by name: TENSOR_CORE_NAME_PATTERN)
    fp8 = fp8_ops(ops)
    if not gpu.bf16:
        # No BF16 math (Maxwell to Turing): bf16 reaches neither tensor cores nor packed-half pipes;
        # PyTorch computes it in FP32 there, at the FP32 rate (archsim.perf.bf16).
        emulated = bf16_ops(ops)
        half &= ~emulated
        named_tensor &= ~emulated
    # fp32 convolutions run in TF32 on tensor cores when the GPU has it: PyTorch's default
    # torch.backends.cudnn.allow_tf32 = True (fp32 matmuls default to allow_tf32 = False).
    # Tensor-core convolutions need input channels in multiples of 8 (FP16) or 4 (TF32) (NVIDIA Deep
    # Learning Performance Guide, "Channels In and Out"); cuDNN falls back to FP32 kernels otherwise,
    # as for AlexNet's 3-channel conv1 in the A100 fixture (cudnn_ampere_scudnn_128x64, not xmma).
    channels = _conv_input_channels(ops)
    # FP8: multiples of 16, the guide's figure for INT8, the other 1-byte operand type (assumed)
    multiple = np.where(fp8, 16, np.where(half, 8, 4))
    aligned = np.isnan(channels) | (np.nan_to_num(channels) % multiple == 0)
    conv = (_strings(ops, "op_class") == "conv").to_numpy(dtype=bool)
    # Not on ROCm: there TF32 is opt-in and PyTorch's MIOpen convolutions run strict FP32
    # (pytorch/pytorch pull 190711, 2026: "On ROCm, TF32 is strictly opt-in: conv/RNN precision
    # flags default to full fp32"; MIOpen's math-type knob was not wired to allow_tf32 before it),
    # so an MI300X's fp32 igemm_fwd_gtcx_nhwc_fp32 convolution runs at its FP32 rate, not xf32.
    conv_fp32 = conv & ~half & ~fp8 & aligned & (not is_cdna(generation(gpu)))
    tf32 = by_unique(
        names, lambda u: u.str.lower().str.contains(TF32_NAME_PATTERN, regex=True)
    ).astype(bool)
    tf32 = (tf32 | conv_fp32) & gpu.tf32
    half_tensor = (half | fp8) & tiled & (aligned | ~conv)
    # A tensor-core kernel whose operands are FP32 (recorded dtype, or none and no narrower type in
    # its name) multiplies them as TF32 where the GPU has it (archsim.perf.tf32_operands: cuBLAS's
    # cutlass_80_tensorop_s1688gemm_* on float32). Without TF32 no FP32 operand reaches a tensor
    # core (Volta/Turing tensor cores take FP16, INT8, INT4: V100 and Turing whitepapers): the
    # kernel runs as the library's FP32 kernel would there (volta_sgemm_*), at the FP32 rate, which
    # CDNA2 presets give as their FP32 MFMA rate. Applied here only: every caller prices the same.
    fp32_operands = fp32_tensor_ops(names, _strings(ops, "dtype"))
    named_tensor &= gpu.tf32 | ~fp32_operands
    use_tensor = (half_tensor | named_tensor | tf32) & (gpu.tensor_flops_per_clk_per_sm > 0)
    tf32 |= use_tensor & gpu.tf32 & fp32_operands
    tf32 &= ~fp8
    # TF32 runs at half the FP16 tensor rate (A100 whitepaper: 156 vs 312 TFLOP/s dense); FP8 at the
    # part's FP8 rate, or the FP16 tensor rate where it has none (GpuConfig.fp8_matrix_flops_...)
    per_clk = np.where(
        use_tensor,
        np.where(
            fp8,
            gpu.fp8_matrix_flops_per_clk_per_sm,
            gpu.tensor_flops_per_clk_per_sm * np.where(tf32, 0.5, 1.0),
        ),
        np.where(half & half2, gpu.fp16_flops_per_clk_per_sm, gpu.fp32_flops_per_clk_per_sm),
    )
    return per_clk * gpu.clock_mhz * 1e6, use_tensor


def _conv_input_channels(ops: pd.DataFrame) -> np.ndarray:
    """Input channels (dim 1 of the first input) of conv ops with recorded Input Dims, else NaN."""
    out = np.full(len(ops), np.nan)
    conv = (_strings(ops, "op_class") == "conv").to_numpy(dtype=bool)
    dims = _strings(ops, "input_dims")
    wanted = conv & (dims != "").to_numpy(dtype=bool)
    parsed = {text: _first_input_channels(text) for text in dims[wanted].unique()}
    out[wanted] = [parsed[text] for text in dims[wanted]]
    return out


def _first_input_channels(input_dims: str) -> float:
    try:
        return float(parsed_input_dims(input_dims)[0][1])
    except (ValueError, TypeError, IndexError, KeyError):
        return math.nan
