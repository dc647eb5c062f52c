"""The element type a GPU kernel works on, read from its name, for ops whose dtype was not recorded.

WHY: a trace captured with ``record_shapes`` off (or a GPU-only trace) records no ``Input type``, so
its kernels' dtype is empty and the kernel model prices their grid-inferred bytes at 4 B an element
and their math as FP32 (archsim.perf.blocks.estimate_work_from_launch, archsim.perf.math_units),
while the libraries spell the type in the kernel's name: a bf16 batch norm on an MI210 (fixture
mi210_gpu_only) is ``batch_norm_backward_kernel<c10::BFloat16, ...>``. This module reads it.

Rules, tried in order, each one library's naming (``_RULES``; the C++ template scan last); a name
no rule reads gives None, and the caller keeps "unknown". The result is always a torch dtype name
that archsim.perf.blocks.DTYPE_BYTES sizes (float32, float16, bfloat16, float64, int64, int32,
int16, int8, uint8, bool, and the FP8 types float8_e4m3fn, float8_e5m2, float8_e4m3fnuz,
float8_e5m2fnuz at 1 byte): types it cannot size (complex, unsigned 32/64-bit) give None rather than
a wrong element size. Storage, not math mode: a TF32 kernel works on float32 tensors
(the TF32 rate is archsim.perf.math_units' business, from the name), an fp16 GEMM accumulating in
FP32 on float16 ones. Pure; never raises, whatever the name.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import numpy as np
import pandas as pd

from archsim.perf.columns import by_unique

# The short type names libraries put in kernel names, as torch dtype names (None: no element size
# in archsim.perf.blocks.DTYPE_BYTES for it, so the caller keeps "unknown").
_SHORT = {
    "f16": "float16",
    "fp16": "float16",
    "half": "float16",
    "h": "float16",
    "bf16": "bfloat16",
    "tf32": "float32",  # TF32 math on float32 tensors
    "f32": "float32",
    "fp32": "float32",
    "s": "float32",
    "f64": "float64",
    "d": "float64",
    "i8": "int8",
    "s8": "int8",
    "int8": "int8",
    "u8": "uint8",
    "e4m3": "float8_e4m3fn",  # CUTLASS's/cuBLASLt's FP8 operand types (OCP FP8, torch's names)
    "e5m2": "float8_e5m2",
    "c": None,  # complex single
    "z": None,  # complex double
    "gc": None,  # cuBLAS's complex GEMMs of cuDNN's FFT convolutions (ampere_gcgemm_*)
}
# Tensile's data-type codes (ROCm/Tensile, Tensile/Source/lib/source/DataTypes.cpp, TypeAbbrev):
# S float, D double, C/Z complex, H half, B bfloat16, X xfloat32 (float32 data), I int32, I64
# int64, I8 and 4xi8 (int8x4) int8, F8/B8/F8N/B8N/F8B8/B8F8 the fp8 formats: F8 e4m3, B8 ("bf8")
# e5m2, the mixed ones named by A's type. Whether a kernel's FP8 is OCP or MI300's fnuz is not told
# apart here (hipBLASLt's gfx942 libraries, whose FP8 is fnuz, name it F8: aquavanjaram942_Cijk_
# Alik_Bljk_F8F8S_BH.yaml): same 1-byte size and matrix rate.
_TENSILE = {
    "S": "float32",
    "D": "float64",
    "C": None,
    "Z": None,
    "H": "float16",
    "B": "bfloat16",
    "X": "float32",
    "I": "int32",
    "I64": "int64",
    "I8": "int8",
    "4xi8": "int8",
    "F8": "float8_e4m3fn",
    "B8": "float8_e5m2",
    "F8N": "float8_e4m3fn",
    "B8N": "float8_e5m2",
    "F8B8": "float8_e4m3fn",
    "B8F8": "float8_e5m2",
}
_NCCL = {  # NCCL/RCCL's reduction types, old spelling (int8_t...) and NCCL 2.19's (i8...)
    "int8_t": "int8",
    "i8": "int8",
    "uint8_t": "uint8",
    "u8": "uint8",
    "int32_t": "int32",
    "i32": "int32",
    "int64_t": "int64",
    "i64": "int64",
    "half": "float16",
    "f16": "float16",
    "float": "float32",
    "f32": "float32",
    "double": "float64",
    "f64": "float64",
    "__nv_bfloat16": "bfloat16",
    "hip_bfloat16": "bfloat16",
    "bf16": "bfloat16",
}
_NARROW_SHAPES = ("16816", "16832")  # mma shapes for 16-bit or narrower operands only (PTX ISA)


def _arch_library(match: re.Match[str]) -> str | None:
    """cuBLAS/cuDNN kernels named ``<arch>_[<operand type>_]<letter><mma shape>gemm|cudnn``."""
    operand, letter, shape = match.group(1), match.group(2), match.group(3)
    if operand:
        return _SHORT.get(operand)
    if letter == "s" and shape in _NARROW_SHAPES:
        return None  # contradictory (FP32 operands on a 16-bit-only shape): say nothing
    return _SHORT.get(letter)


def _first_group(table: dict[str, str | None]) -> Callable[[re.Match[str]], str | None]:
    return lambda match: table.get(match.group(1))


# (pattern, reader, who names kernels so and where that is documented or seen). Matched on the
# name as traced (case kept: Tensile's codes are case-sensitive).
_RULES: tuple[tuple[re.Pattern[str], Callable[[re.Match[str]], str | None], str], ...] = (
    # rocBLAS/hipBLASLt (Tensile): Cijk_<A indices>_<B indices>_<data type><B beta><H HPA>...,
    # ProblemType.__str__ in ROCm/Tensile Tensile/SolutionStructs.py; seen: Cijk_Ailk_Bljk_BBS_BH_*
    # (fixtures mi210_gpu_only, mi300x_sd35_inference), Cijk_Alik_Bljk_SB_* (fixture
    # mi250_mlp_train); hipBLASLt's hand-tuned kernels prefix it (Custom_Cijk_Alik_Bljk_F8B8BS_...,
    # archsim.perf.math_units.CDNA_HALF_MATRIX_NAME_PATTERN).
    (
        re.compile(
            r"(?:^|_)Cijk_A[A-Za-z]+_B[A-Za-z]+_(4xi8|I8|I64|F8B8|B8F8|F8N|B8N|F8|B8|[SDCZHBXI])"
        ),
        _first_group(_TENSILE),
        "Tensile",
    ),
    # cuBLASLt/cuDNN xmma kernels: sm<arch>_xmma_<op>_<A type><B type>_<C type><acc type>_...;
    # seen: sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_* (fixture
    # a100_alexnet_forward), sm90_xmma_gemm_bf16bf16_bf16f32_f32_* (fixture
    # h100_timesformer_inference), sm80_xmma_gemm_f16f16_f16f32_f32_* (public trace
    # JeremyMorlier/GPUModel trace3.json, recorded without shapes).
    (
        re.compile(
            r"xmma_(?:[a-z0-9]+_)*?(bf16|f16|tf32|f32|f64|i8|s8|e4m3|e5m2)"
            r"(?:bf16|f16|tf32|f32|f64|i8|s8|e4m3|e5m2)_"
        ),
        _first_group(_SHORT),
        "cuBLASLt/cuDNN xmma",
    ),
    # CUTLASS 3 procedural names: cutlass3x_sm90_tensorop_<shape>gemm_<A>_<B>_<acc>_<C>_<D>_...
    # (NVIDIA/cutlass python/cutlass_library/gemm_operation.py, GemmOperation.procedural_name).
    (
        re.compile(r"cutlass3x_\w*?gemm_(bf16|f16|tf32|f32|f64|s8|u8|e4m3|e5m2)_"),
        _first_group(_SHORT),
        "CUTLASS 3",
    ),
    # CUTLASS 2 procedural names: cutlass_[<arch>_]<opclass>_[<A type>_]<acc letter><mma shape>
    # gemm|fprop|dgrad|wgrad_... (gemm_operation.py and conv2d_operation.py there, extended_name:
    # the A type only when it differs from the accumulator's); seen: cutlass_80_tensorop_s1688gemm_*
    # (fixtures a100_train_shapes, a100_80gb_train_prewindow), cutlass_tensorop_bf16_s16816fprop_*
    # (fixture h100_timesformer_inference).
    (
        re.compile(
            r"cutlass_(?:[a-z0-9]+_)*?(?:(bf16|f16|tf32|s8|u8|e4m3|e5m2)_)?"
            r"([hsdczi])(\d*)(?:gemm|conv|fprop|dgrad|wgrad)"
        ),
        _arch_library,
        "CUTLASS 2",
    ),
    # cuBLAS/cuDNN's own kernels: <arch>_[<operand type>_]<acc letter>[<mma shape>]gemm|cudnn, the
    # operand type named when it differs (ampere_fp16_s16816gemm_fp16_*, volta_fp16_scudnn_fp16_*);
    # seen: ampere_sgemm_*, ampere_gcgemm_*, cudnn_ampere_scudnn_* (fixture a100_alexnet_forward),
    # volta_sgemm_*, cudnn_infer_volta_scudnn_* (fixture v100_cnn_ddp_train),
    # ampere_h16816gemm_*, maxwell_hgemm_*, turing_h1688cudnn_* (archsim.perf.math_units).
    (
        re.compile(
            r"(?:^|_)(?:maxwell|pascal|volta|turing|ampere|ada|hopper|blackwell|sm\d+)_"
            r"(?:(fp16|bf16|int8|i8|tf32)_)?(gc|[hsdcz])(\d*)(?:gemm|cudnn)"
        ),
        _arch_library,
        "cuBLAS/cuDNN",
    ),
    # MIOpen's assembly implicit-GEMM convolutions: igemm_<dir>_gtc*_<layout>_<type>_...
    # (ROCm/MIOpen src/solver/conv_asm_implicit_gemm_gtc_*.cpp); seen:
    # igemm_wrw_gtcx2_nhwc_bf16_* (fixture mi210_gpu_only).
    (
        re.compile(r"^igemm_\w*?_(fp32|fp16|bf16|int8)_"),
        _first_group(_SHORT),
        "MIOpen igemm",
    ),
    # MIOpen's batched transposes name their element SIZE (dword 4 B, half 2 B, byte 1 B:
    # ROCm/MIOpen src/batched_transpose_sol.cpp, GetKernelName/GetNameTrait), not the type: half
    # reads as float16, the 2-byte element bf16 data also has (a transpose does no math); seen:
    # batched_transpose_16x64_pack_1x4_ediv_1x2_half (fixture mi210_gpu_only).
    (
        re.compile(r"^batched_transpose_\w*?_(half|dword|byte)$"),
        _first_group({"half": "float16", "dword": "float32", "byte": "uint8"}),
        "MIOpen batched transpose",
    ),
    # NCCL/RCCL collectives: ncclKernel_<coll>_<algo>_<proto>_<op>_<type> (NCCL 2.x
    # src/collectives/device/common.h, NCCL_KERN_NAME) and ncclDevKernel_<coll>_<op>_<type>_<algo>_
    # <proto> (NCCL 2.19+, src/device/generate.py); seen: ncclKernel_AllReduce_RING_LL_Sum_float
    # and ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t (fixture a100_train_shapes).
    (
        re.compile(
            r"^(?:nccl|rccl)(?:Dev)?Kernel_\w*?_(?:Sum|Prod|Min|Max|MinMax|Avg|PreMulSum|SumPostDiv)_"
            r"(int8_t|uint8_t|int32_t|int64_t|__nv_bfloat16|hip_bfloat16|half|float|double|"
            r"bf16|f16|f32|f64|i8|u8|i32|i64)(?![A-Za-z0-9])"
        ),
        _first_group(_NCCL),
        "NCCL/RCCL",
    ),
)

# C++ scalar types in demangled template and parameter lists (ATen, cuDNN's templated kernels,
# cuBLAS's gemv/gemmk1, Apex): PyTorch's c10 names (c10/core/ScalarType.h: c10::Half,
# c10::BFloat16, c10::Float8_*), CUDA's and HIP's (__half, __nv_bfloat16, __hip_bfloat16), the
# built-in ones. Complex (c10::complex<T>) is not sized: None. cuFFT's float2 complex
# beside a float (fft2d_r2c_32x32<float, ...>(float2*, float const*, ...)) reads as float32.
_CPP_FLOATING = (  # narrowest first: a mixed-precision kernel names its accumulator type beside
    # its storage type (batch_norm_backward_kernel<c10::BFloat16, c10::BFloat16, float, int>)
    # fp8 (c10/util/Float8_e4m3fn.h and kin; CUDA's cuda_fp8.h __nv_fp8_e4m3/__nv_fp8_e5m2, HIP's
    # amd_hip_fp8.h __hip_fp8_e4m3_fnuz/__hip_fp8_e5m2_fnuz and OCP __hip_fp8_e4m3/_e5m2): 1 byte,
    # named by _fp8_cpp_type; c10::Float8_e8m0fnu (an MX block scale) is not an operand: None
    (re.compile(r"c10::Float8_\w+|__nv_fp8_\w+|__hip_fp8_\w+"), "fp8"),
    # ATen's c10::Half (seen: split_embedding_codegen_forward_unweighted_kernel<c10::Half, ...>,
    # fixture nodevice_sampled_train), CUDA's __half (cuda_fp16.h), Apex's/NCCL's half
    (re.compile(r"c10::Half\b|\b__half\b|\bhalf\b|\bat::Half\b"), "float16"),
    # ATen's c10::BFloat16 (seen: fixtures mi210_gpu_only, h100_timesformer_inference), cuBLAS's
    # and cuDNN's __nv_bfloat16 (seen: internal::gemvx::kernel<int, int, __nv_bfloat16, ...>,
    # cudnn::engines_precompiled::nchwToNhwcKernel<__nv_bfloat16, ...>, h100_timesformer_inference)
    (
        re.compile(r"c10::BFloat16\b|\b__nv_bfloat16\b|\b__hip_bfloat16\b|\bat::BFloat16\b"),
        "bfloat16",
    ),
    # float (seen: AdamFunctor<float>, a100_train_shapes; cudnn::bn_bw_1C11_kernel_new<float, ...>,
    # v100_cnn_ddp_train; gemmk1_kernel<int, float, ...>, gp100_user_annotation; ATen's
    # launch_clamp_scalar(...)::{lambda(float)#1}, a100_80gb_train_prewindow)
    (re.compile(r"(?<![\w:])float(?![\w:])"), "float32"),
    # double (seen: CUDAFunctor_add<double>, a100_80gb_train_prewindow)
    (re.compile(r"(?<![\w:])double(?![\w:])"), "float64"),
)
_CPP_COMPLEX = re.compile(r"c10::complex<|thrust::complex<|\bcuComplex\b|\bcuDoubleComplex\b")
# Integer element types where no floating type appears: the first one named in a template list
# (the functor's type comes first in ATen's kernels: CUDAFunctorOnSelf_add<long>,
# FillFunctor<int>, ReduceOp<bool, ...>). Parameter lists, a lambda's included, are skipped: they
# hold sizes and offsets ({lambda(char*, char const*, long)#1} of ATen's index kernels). Bare
# ``char`` is ATen's byte pointer (at::detail::Array<char*, N>), and unsigned int/long ATen's and
# cuBLAS's index types (ReduceOp<..., unsigned int, ...>): not element types. Seen: long
# (CUDAFunctorOnSelf_add<long>, a100_80gb_train_prewindow), int (ReduceOp<int, ArgMaxOps<int>,
# ...>, mi300x_sd35_inference), bool (FillFunctor<bool>, nodevice_sampled_train). A heuristic:
# where the first integer is an index type the read is wrong (vectorized_gather_kernel<16, long>
# of mi300x_sd35_inference gathers rows of any type by int64 indices: read int64).
_CPP_INTEGER = re.compile(
    r"(?<![\w:])((?:unsigned |signed )?(?:long long|long|char|short|int)|int64_t|uint8_t|int8_t|"
    r"int16_t|int32_t|bool)(?![\w:])"
)
_CPP_INTEGER_DTYPES = {
    "long long": "int64",
    "long": "int64",
    "int64_t": "int64",
    "unsigned char": "uint8",
    "uint8_t": "uint8",
    "signed char": "int8",
    "int8_t": "int8",
    "short": "int16",
    "int16_t": "int16",
    "bool": "bool",
    "int32_t": "int32",
    "int": "int32",
}
_PARENTHESIZED = re.compile(r"\([^()]*\)")


def _without_parameter_lists(name: str) -> str:
    for _ in range(16):  # nested lists: innermost first; demangled names nest a few levels
        stripped = _PARENTHESIZED.sub("", name)
        if stripped == name:
            break
        name = stripped
    return name


def _fp8_cpp_type(spelled: str) -> str | None:
    """torch's name of a C++ FP8 type (c10::Float8_e4m3fnuz, __nv_fp8_e5m2, __hip_fp8_e4m3_fnuz)."""
    lowered = spelled.lower()
    fnuz = "fnuz" in lowered
    if "e4m3" in lowered:
        return "float8_e4m3fnuz" if fnuz else "float8_e4m3fn"
    if "e5m2" in lowered:
        return "float8_e5m2fnuz" if fnuz else "float8_e5m2"
    return None  # e8m0 (a block scale) or an unknown spelling: no element size


def _cpp_types(name: str) -> str | None:
    """The element type a demangled C++ kernel name spells in its template or parameter lists."""
    if "<" not in name and "(" not in name:
        return None
    if _CPP_COMPLEX.search(name):
        return None
    for pattern, dtype in _CPP_FLOATING:
        found = pattern.search(name)
        if found:
            return _fp8_cpp_type(found.group(0)) if dtype == "fp8" else dtype
    for found in _CPP_INTEGER.finditer(_without_parameter_lists(name)):
        dtype = _CPP_INTEGER_DTYPES.get(found.group(1))
        if dtype:
            return dtype
    return None


def kernel_name_dtype(name: object) -> str | None:
    """The torch dtype name a kernel's name says it works on, or None where it says nothing."""
    if not isinstance(name, str) or not name:
        return None
    try:
        for pattern, read, _library in _RULES:
            match = pattern.search(name)
            if match:
                return read(match)
        return _cpp_types(name)
    except (re.error, IndexError, KeyError, RecursionError):  # never let a name stop a model
        return None


def _names_dtypes(names: pd.Series) -> np.ndarray:
    return np.array([kernel_name_dtype(n) or "" for n in names], dtype=object)


def named_dtypes(ops: pd.DataFrame, rows: np.ndarray | None = None) -> pd.Series:
    """Each op's dtype: the recorded one, else (kernels only, and only in ``rows`` when given) the
    one its name spells, else "" as before."""
    index = ops.index
    dtype = (
        ops["dtype"].astype("string").fillna("")
        if "dtype" in ops.columns
        else pd.Series("", index=index, dtype="string")
    )
    kind = ops["kind"].astype("string").fillna("") if "kind" in ops.columns else None
    wanted = (dtype == "").to_numpy(dtype=bool)
    if kind is not None:
        wanted &= (kind == "kernel").to_numpy(dtype=bool)
    if rows is not None:
        wanted &= np.asarray(rows, dtype=bool)
    if not wanted.any() or "name" not in ops.columns:
        return dtype
    names = ops["name"].astype("string").fillna("")[wanted]
    read = by_unique(names.reset_index(drop=True), _names_dtypes)
    out = dtype.copy()
    out.iloc[np.flatnonzero(wanted)] = read
    return out


def with_named_dtypes(ops: pd.DataFrame, rows: np.ndarray | None = None) -> pd.DataFrame:
    """``ops`` with :func:`named_dtypes` as its dtype column (a copy only where one changes)."""
    if "name" not in ops.columns:
        return ops
    filled = named_dtypes(ops, rows)
    if "dtype" in ops.columns and filled.equals(ops["dtype"].astype("string").fillna("")):
        return ops
    out = ops.copy()
    out["dtype"] = filled
    return out


def kernel_dtype_counts(
    ops: pd.DataFrame, rows: np.ndarray | None = None
) -> dict[str, dict[str, int] | int]:
    """Kernels by element type and where it comes from, for ``trace info``: ``recorded`` (the
    launching op's Input type), ``from_kernel_names`` (kernels in ``rows`` whose name spells it:
    the kernel model passes its shape-less ones) and ``unknown`` (neither: 4 B an element)."""
    if "kind" not in ops.columns or "dtype" not in ops.columns:
        return {"recorded": {}, "from_kernel_names": {}, "unknown": 0}
    kernel = (ops["kind"].astype("string") == "kernel").to_numpy(dtype=bool)
    recorded = ops["dtype"].astype("string").fillna("")[kernel]
    filled = named_dtypes(ops, rows)[kernel]
    named = (recorded == "") & (filled != "")

    def counts(values: pd.Series) -> dict[str, int]:
        return {str(k): int(v) for k, v in values.value_counts().items()}

    return {
        "recorded": counts(recorded[recorded != ""]),
        "from_kernel_names": counts(filled[named]),
        "unknown": int((filled == "").sum()),
    }
