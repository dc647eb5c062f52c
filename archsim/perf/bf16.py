"""bfloat16 ops on a GPU without BF16 math (``GpuConfig.bf16`` false: NVIDIA Maxwell to Turing).

BF16 instructions and the BF16 tensor-core format arrived with Ampere (A100 whitepaper); PyTorch calls a
CUDA GPU bf16-capable without emulation only from compute capability 8.0
(``torch.cuda.is_bf16_supported(including_emulation=False)``, torch/cuda/__init__.py). Older GPUs still
run bf16 tensors: PyTorch's bf16 GEMMs call cublasGemmEx with CUDA_R_16BF operands and FP32 compute
on every architecture since pytorch/pytorch#50442 ("Enable BFloat support for gemms on arch other than
ampere"), and its element-wise loops widen bf16 to float (opmath). So the math runs on the FP32 pipes,
never on the FP16 tensor cores of a V100, T4 or RTX 2080 Ti: archsim.perf.math_units prices these ops
at the GPU's FP32 rate. That is optimistic, not exact: cuBLAS's bf16 GEMM on a V100 was measured at
9.6 TFLOP/s against 14.0 for FP32 at m = 2048 (lablup/mlxcel#1654), bf16 matmuls below FP32 speed on
a T4 (openxla/xla#12429), and some CUDA builds refuse bf16 GEMMs on a P100 (pytorch/pytorch#57773).
``emulated_bf16_note`` says so in one line wherever a prediction prices such ops.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import HardwareConfig
from archsim.perf.columns import by_unique
from archsim.perf.columns import strings as _strings
from archsim.perf.fp8 import fp8_ops

BF16_DTYPES = frozenset({"bfloat16", "torch.bfloat16", "c10::bfloat16"})
# A GPU trace's kernels without the launching op's dtype: cuBLAS/CUTLASS/cuDNN names say bf16
# (ampere_bf16_s16816gemm_*, sm80_xmma_gemm_bf16bf16_*), PyTorch's element-wise templates
# c10::BFloat16, Tensile's data-type code B (Cijk_Ailk_Bljk_BBS_*: Tensile "Precision Support") and
# MIOpen's igemm_*_bf16_*.
BF16_NAME_PATTERN = r"bf16|bfloat16|(?:^|_)cijk_a[a-z]+_b[a-z]+_b[a-z]*_"


def bf16_ops(ops: pd.DataFrame) -> np.ndarray:
    """True for ops whose dtype, or else whose kernel name, says bfloat16. An FP8 kernel naming a
    bf16 operand or output (cuBLASLt's sm90_xmma_gemm_e4m3bf16_*) is FP8 work (archsim.perf.fp8)."""
    dtype = by_unique(_strings(ops, "dtype"), lambda u: u.str.lower().isin(BF16_DTYPES))
    named = by_unique(
        _strings(ops, "name"), lambda u: u.str.lower().str.contains(BF16_NAME_PATTERN, regex=True)
    )
    return np.asarray(dtype, dtype=bool) | (np.asarray(named, dtype=bool) & ~fp8_ops(ops))


def emulated_bf16_note(ops: pd.DataFrame, hw: HardwareConfig) -> str | None:
    """One line when ``hw``'s GPU has no BF16 math and some of ``ops`` are bf16, else None."""
    if hw.gpu is None or hw.gpu.bf16 or ops.empty:
        return None
    count = int(bf16_ops(ops).sum())
    if not count:
        return None
    return (
        f"{count:,} of {len(ops):,} ops are bfloat16, which {hw.gpu.name} ({hw.name}) has no BF16 "
        "math for (NVIDIA GPUs before Ampere): priced at its FP32 rate, off the tensor cores, as "
        "PyTorch computes bf16 in FP32 there; an optimistic bound (cuBLAS bf16 GEMMs run below "
        "the FP32 rate on a V100)"
    )
