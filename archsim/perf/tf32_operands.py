"""FP32 operands on tensor cores run at the TF32 rate (half the FP16 rate on Ampere and later).

WHY: a kernel named as a tensor-core kernel (``tensorop``, ``1688``, ``xmma``...) had been given
the full FP16/BF16 tensor rate unless its name says ``tf32``. cuBLAS's CUTLASS kernels for FP32
GEMMs with TF32 allowed say no such thing: ``cutlass_80_tensorop_s1688gemm_256x128_32x3_tn_align1``
(fixtures a100_train_shapes, a100_80gb_train_prewindow, nodevice_sampled_train: every one launched
by an ``aten::mm``/``addmm``/``bmm`` on float32 tensors). A tensor core cannot multiply FP32:
CUTLASS converts FP32 inputs to TF32 before its tensor-core instructions (NVIDIA/cutlass issue
466, "CUTLASS will use TF32 tensor core for FP32 input"), and a 16-bit or 8-bit operand type is
spelled in the kernel's name (CUTLASS's procedural names append the A type when it differs from
the accumulator: ``cutlass_80_tensorop_f16_s16816gemm_relu_f16_...``,
python/cutlass_library/gemm_operation.py, ``extended_name``; cuBLAS's own
``ampere_fp16_s16816gemm_fp16_...``, cuDNN's ``..._bf16bf16_...``). So a tensor-core kernel whose
operands are FP32 (the recorded dtype, or, with none recorded, a name without a narrower type)
multiplies at the TF32 rate: 156 of 312 TFLOP/s dense on the A100 (A100 whitepaper), half of FP16
on every preset with ``tf32`` (their datasheets, in hwconfigs/).

:func:`fp32_tensor_ops` says which kernels those are; ``archsim.perf.math_units.math_units``
applies the TF32 rate to them, the one place a kernel's math rate is decided (a tensor-core kernel
already at the TF32 rate, ``tf32`` in its name or an FP32 convolution, is not halved twice). On
GPUs without TF32 (Volta, Turing, CDNA2) FP32 operands never reach a tensor core: Volta's multiply
FP16 matrices only (V100 whitepaper, "Tensor Cores": A and B are FP16 matrices), Turing's add INT8
and INT4 to that (Turing whitepaper, "Turing Tensor Cores"), and cuBLAS runs FP32 GEMMs there on
its SIMT volta_sgemm_*/turing_sgemm_* kernels. So ``math_units`` prices such a kernel (an Ampere
trace's cutlass_80_tensorop_s1688gemm predicted on a T4) at the GPU's FP32 rate, as the SGEMM a
library picks there would run. On CDNA2 that rate is the FP32 matrix (MFMA) rate its presets give
as their FP32 rate (AMD CDNA2 whitepaper: MI250X FP32 matrix 95.7 TFLOP/s, twice FP32 vector), with
no reduced-precision FP32 format; CDNA3 has TF32 (xf32, MI300X datasheet 653.7 TFLOP/s) and is
priced like Ampere, as the kernel says: TF32 is opt-in in PyTorch on ROCm as on CUDA. By default
fp32 matmuls are strict FP32 (aten/src/ATen/Context.h: float32_matmul_precision defaults to
HIGHEST in ROCm builds too; from PyTorch 2.7 ROCm builds also asked for HIPBLASLT_ALLOW_TF32=1,
pytorch pull 144145, ROCm/pytorch pull 1803), and hipBLASLt then runs FP32 MFMA kernels
(Cijk_..._S_B_...), which math_units prices at the FP32 rate. Opted in (allow_tf32 = True or
set_float32_matmul_precision("high")), hipBLASLt's FAST_TF32 maps to CDNA3's XF32 instructions
(pytorch pull 180926) in kernels named ``_S_MX_`` (math_units.TF32_NAME_PATTERN), priced at xf32.
A GEMM that ran as TF32 on an NVIDIA GPU was opted in, so predicted on an MI300X it keeps the xf32
rate, as with current PyTorch, where allow_tf32 alone selects XF32 on gfx942 (pytorch pull 188168,
ROCm 7.2; ROCm/pytorch's Context.cpp of that time checks no environment switch); where the
HIPBLASLT_ALLOW_TF32 switch was required and unset it would run at the FP32 rate, 1/4 of that.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.perf.columns import by_unique

# Operand types narrower than 32 bits as NVIDIA libraries spell them in kernel names: CUTLASS
# (f16, bf16, s8/u8, e4m3/e5m2 and instruction shapes that exist only for 16-bit or narrower operands:
# m16n8k16 = "16816", m16n8k32 = "16832", PTX ISA "Matrix shape" table of mma), cuBLAS (fp16, hgemm,
# h884/h1688/h16816: half accumulate), cuDNN/xmma (f16f16, bf16bf16, int8, hmma); and as AMD's
# rocBLAS/hipBLASLt Tensile kernels do, in the data-type code right after the operand indices
# (Tensile documentation, "Precision Support": H half, B bfloat16, I8 int8, F8 fp8; S single is not
# narrow): Cijk_Ailk_Bljk_BBS_BH_... of fixture mi210_gpu_only is a bf16 GEMM. MIOpen's igemm
# convolutions spell fp16/bf16.
NARROW_OPERAND_PATTERN = (
    r"f16|bf16|fp16|half|hgemm|hmma|h884|h1688|h16816|16816|16832|int8|i8|s8|u8|e4m3|e5m2|fp8|"
    r"(?:^|_)cijk_a[a-z]+_b[a-z]+_(?:[hb]|f8)"
)
FP32_DTYPES = frozenset({"float32", "float", "torch.float32", "torch.float"})


def fp32_tensor_ops(names: pd.Series, dtypes: pd.Series) -> np.ndarray:
    """True where a kernel's operands are FP32: its recorded dtype is FP32, or none is recorded, and
    its name spells no narrower operand type (NARROW_OPERAND_PATTERN)."""
    names = names.astype("string").fillna("")
    dtypes = dtypes.astype("string").fillna("").str.lower()
    narrow = by_unique(
        names, lambda u: u.str.lower().str.contains(NARROW_OPERAND_PATTERN, regex=True)
    ).astype(bool)
    fp32 = (dtypes.isin(FP32_DTYPES) | (dtypes == "")).to_numpy(dtype=bool)
    return fp32 & ~narrow
