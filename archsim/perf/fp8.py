"""FP8 (e4m3/e5m2) matrix kernels: which ops they are, and the one-line note when a part has no FP8.

WHY: FP8 GEMMs are common in modern training and inference traces on the parts that have FP8 matrix
units (H100/H200, B200, L4, RTX 4090, MI300X: ``gpu.fp8_flops_per_clk_per_sm`` of their presets,
twice their dense FP16 tensor rate on every datasheet). Their operands move 1 byte an element
(archsim.perf.blocks.DTYPE_BYTES) and their math runs at the FP8 rate (archsim.perf.math_units).

An FP8 op is one whose recorded dtype is an FP8 type (ingest's ``float8_*`` from c10::Float8_*), or,
with none recorded, whose kernel name says so: CUTLASS 3 ``cutlass3x_sm90_tensorop_gemm_e4m3_e4m3_
f32_...`` (NVIDIA/cutlass python/cutlass_library, GemmOperation.procedural_name), cuBLASLt's
``sm90_xmma_gemm_e4m3bf16_e4m3f32_f32_...`` and hipBLASLt's Tensile ``Cijk_Alik_Bljk_F8BS_BH_...``,
``Custom_Cijk_Alik_Bljk_F8B8BS_...`` (Tensile data-type codes F8/B8/F8N/B8N/F8B8/B8F8, ROCm/Tensile
DataTypes TypeAbbrev). A Tensile FP8 name is a matrix (MFMA) kernel as the NVIDIA ones are tensor-core
kernels by name (math_units.TENSOR_CORE_NAME_PATTERN).

On a part without FP8 units (A100, V100, T4, MI210/MI250X, Orin) an FP8 trace's GEMMs are priced at
the FP16 tensor rate, what a port to that GPU would run (FP16 or BF16 operands); its bytes stay the
trace's 1 byte an element, so the port is an optimistic bound. ``fp8_port_note`` says so once.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import HardwareConfig
from archsim.perf.blocks import TILED_OP_CLASSES
from archsim.perf.columns import by_unique
from archsim.perf.columns import strings as _strings

# torch's FP8 dtypes (torch.float8_e4m3fn, float8_e5m2 of NVIDIA/OCP; the *fnuz variants of MI300,
# c10/util/Float8_e4m3fnuz.h). float8_e8m0fnu is a block scale, not an operand type.
FP8_DTYPES = frozenset(
    {
        name
        for base in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
        for name in (base, f"torch.{base}")
    }
)
# Tensile's FP8 GEMMs: the data-type code right after the operand indices is F8/B8 (+N, or mixed
# F8B8/B8F8), "(?:^|_)" for hipBLASLt's hand-tuned Custom_Cijk_... names.
TENSILE_FP8_NAME_PATTERN = r"(?:^|_)cijk_a[a-z]+_b[a-z]+_[fb]8"
# An FP8 operand type in a kernel name (lower-cased): CUTLASS/xmma e4m3/e5m2, the C++ types
# c10::Float8_*, __nv_fp8_*, __hip_fp8_*, and Tensile's codes.
FP8_NAME_PATTERN = rf"e4m3|e5m2|float8_|_fp8_|{TENSILE_FP8_NAME_PATTERN}"


def fp8_ops(ops: pd.DataFrame) -> np.ndarray:
    """True for ops whose dtype, or else (none recorded) whose kernel name, says FP8."""
    dtypes = _strings(ops, "dtype")
    recorded = by_unique(dtypes, lambda u: u.str.lower().isin(FP8_DTYPES)).astype(bool)
    named = by_unique(
        _strings(ops, "name"), lambda u: u.str.lower().str.contains(FP8_NAME_PATTERN, regex=True)
    ).astype(bool)
    unrecorded = (dtypes == "").to_numpy(dtype=bool)
    return np.asarray(recorded, dtype=bool) | (np.asarray(named, dtype=bool) & unrecorded)


def fp8_port_note(ops: pd.DataFrame, hw: HardwareConfig) -> str | None:
    """One line when ``hw``'s GPU has no FP8 matrix units and some of ``ops`` are FP8 ops that
    archsim.perf.math_units runs as matrix (GEMM/convolution) work, else None."""
    from archsim.perf.math_units import math_units  # it imports this module

    gpu = hw.gpu
    if gpu is None or ops.empty or gpu.fp8_flops_per_clk_per_sm > 0:
        return None
    fp8 = fp8_ops(ops)
    if not fp8.any():
        return None
    tiled = by_unique(_strings(ops, "op_class"), lambda u: u.isin(TILED_OP_CLASSES)).astype(bool)
    count = int((fp8 & (math_units(ops, gpu)[1] | tiled)).sum())
    if not count:
        return None
    rate = "FP16 tensor" if gpu.tensor_flops_per_clk_per_sm > 0 else "FP32 (no tensor cores)"
    return (
        f"{count:,} of {len(ops):,} ops are FP8 matrix ops, which {gpu.name} ({hw.name}) has no "
        f"FP8 units for: priced at its {rate} rate, as a port to it would run, with the trace's "
        "1-byte operands (an optimistic bound)"
    )
