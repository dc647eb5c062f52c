"""archsim.trace.kernel_dtype: the element type a kernel's name spells, for kernels whose launching op
recorded no dtype (record_shapes off, GPU-only traces), and the kernel model pricing them in it."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.blocks import DTYPE_BYTES, estimate_work_from_launch
from archsim.perf.kernel import body_seconds, work_inferred
from archsim.perf.math_units import math_rate_per_sm
from archsim.trace.info import format_summary, summarize
from archsim.trace.ingest import ingest
from archsim.trace.kernel_dtype import kernel_name_dtype, named_dtypes, with_named_dtypes
from tests.conftest import kineto_fixture

# Real kernel names as the traces record them (fixture or public trace named last), and the
# element type each spells; None where the name spells none (or one no element size exists for).
REAL_NAMES = [
    (
        "Cijk_Ailk_Bljk_BBS_BH_Bias_HAS_SAV_UserArgs_MT16x64x64_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_DTVA0_DTVB0_EPS0_FDSI0_GRPM1_GRVWA4_GRVWB4_GSUAMB_GLS0_ISA90a_IU1_K1_LBSPPA256_LBSPPB128_LBSPPM0_LPA16_LPB16_LPM0_LRVW8_LWPMn1_MIAV0_MIWT1_1_MO40_NTn1_NTA0_NTB0_NTC0_NTD0_NTM0_NEPBS2_NLCA1_NLCB1_ONLL1_PGR2_PLR1_PKA1_SIA3_SS1_SPO1_SRVW0_SSO0_SVW1_SK0_SKXCCM0_TLDS1_ULSGRO0_USL1_UIOFGRO0_USFGROn1_VSn1_VWA1_VWB1_WSGRA0_WSGRB1_WS64_WG16_16_1",
        "bfloat16",
        "mi210_gpu_only",
    ),
    (
        "igemm_wrw_gtcx2_nhwc_bf16_bx0_ex1_bt128x64x32_wt32x32x8_ws1x1_wr1x2_ta1x4x1x4_1x8x1x32_tb1x4x1x2_1x8x1x32_gkgs",
        "bfloat16",
        "mi210_gpu_only",
    ),
    ("batched_transpose_16x64_pack_1x4_ediv_1x2_half", "float16", "mi210_gpu_only"),
    (
        "void at::native::batch_norm_backward_kernel<c10::BFloat16, c10::BFloat16, float, int>(at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 3ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<c10::BFloat16 const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float const, 1ul, at::DefaultPtrTraits, int>, at::GenericPackedTensorAccessor<float const, 1ul, at::DefaultPtrTraits, int>, bool, float)",
        "bfloat16",
        "mi210_gpu_only",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)",
        "bfloat16",
        "h100_timesformer_inference",
    ),
    ("SubTensorOpWithScalar1d", None, "mi210_gpu_only"),
    (
        "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw_tilesize128x128x16_stage4_warpsize2x2x1_g1_tensor16x8x8_alignc4_execute_kernel_cudnn",
        "float32",
        "a100_alexnet_forward",
    ),
    ("ampere_sgemm_32x32_sliced1x4_tn", "float32", "a100_alexnet_forward"),
    ("ampere_gcgemm_64x64_nt", None, "a100_alexnet_forward"),
    ("cudnn_ampere_scudnn_128x64_relu_xregs_large_nn_v1", "float32", "a100_alexnet_forward"),
    (
        "void fft2d_r2c_32x32<float, false, 5u, true>(float2*, float const*, int, int, int, int, int, int, int, int, int, cudnn::reduced_divisor, bool, int2, int, int)",
        "float32",
        "a100_alexnet_forward",
    ),
    (
        "void cask_cudnn::computeOffsetsKernel<false, false>(cask_cudnn::ComputeOffsetsParams)",
        None,
        "a100_alexnet_forward",
    ),
    ("ncclKernel_SendRecv_RING_SIMPLE_Sum_int8_t(ncclWorkElem)", "int8", "a100_train_shapes"),
    ("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)", "float32", "a100_train_shapes"),
    (
        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1>(cutlass_80_tensorop_s1688gemm_256x128_32x3_nn_align1::Params)",
        "float32",
        "a100_80gb_train_prewindow",
    ),
    ("volta_sgemm_64x64_nt", "float32", "v100_cnn_ddp_train"),
    ("cudnn_infer_volta_scudnn_128x64_relu_medium_nn_v1", "float32", "v100_cnn_ddp_train"),
    (
        "void cudnn::bn_bw_1C11_kernel_new<float, float, float2, 128, true, 1>(float, float, float, float, cudnnTensorStruct, float const*, cudnnTensorStruct, float const*, cudnnTensorStruct, float*, float const*, float*, float*, float const*, float const*, float)",
        "float32",
        "v100_cnn_ddp_train",
    ),
    (
        "void gemmk1_kernel<int, float, 256, 5, false, false, false, false, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, 0>(cublasGemmk1Params<float, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float const>, cublasGemvTensorStridedBatched<float>, float, biasType<cublasGemvTensorStridedBatched<float>::value_type, float>::type>)",
        "float32",
        "gp100_user_annotation",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctorOnSelf_add<long>, at::detail::Array<char*, 2> >(int, at::native::CUDAFunctorOnSelf_add<long>, at::detail::Array<char*, 2>)",
        "int64",
        "a100_80gb_train_prewindow",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<bool>, at::detail::Array<char*, 1> >(int, at::native::FillFunctor<bool>, at::detail::Array<char*, 1>)",
        "bool",
        "nodevice_sampled_train",
    ),
    (
        "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_segment_k_off_kernel__5x_cublas",
        "bfloat16",
        "h100_timesformer_inference",
    ),
    (
        "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)",
        "bfloat16",
        "h100_timesformer_inference",
    ),
    (
        "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_32x1_nn_align8>(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_32x1_nn_align8::Params)",
        "bfloat16",
        "h100_timesformer_inference",
    ),
    (
        "void split_embedding_codegen_forward_unweighted_kernel<c10::Half, c10::Half, float, false, long, 2ul, 32ul>(at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 1ul, at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<c10::Half, 2ul, at::RestrictPtrTraits, long>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, fbgemm_gpu::FixedDivisor, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<long, 1ul, at::RestrictPtrTraits, int>, long, at::GenericPackedTensorAccessor<int, 1ul, at::RestrictPtrTraits, int>, at::GenericPackedTensorAccessor<float, 2ul, at::RestrictPtrTraits, long>)",
        "float16",
        "nodevice_sampled_train",
    ),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<double>, at::detail::Array<char*, 3> >(int, at::native::CUDAFunctor_add<double>, at::detail::Array<char*, 3>)",
        "float64",
        "a100_80gb_train_prewindow",
    ),
    ("triton_poi_fused_addmm_silu_2", None, "mi300x_sd35_inference"),
    (
        "void at::native::(anonymous namespace)::CatArrayBatchedCopy_contig<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 1, 128, 1>(at::native::(anonymous namespace)::OpaqueType<4u>*, at::native::(anonymous namespace)::CatArrInputTensorMetadata<at::native::(anonymous namespace)::OpaqueType<4u>, unsigned int, 128, 1>, at::native::(anonymous namespace)::TensorSizeStride<unsigned int, 4u>, int, unsigned int)",
        None,
        "mi300x_sd35_inference",
    ),
    ("attn_fwd", None, "mi300x_sd35_inference"),
    ("MIOpenBatchNormFwdTrainSpatialNorm", None, "mi300x_normalization_bench"),
    ("flash_fwd_splitkv_kernel_bf16", None, "tracelens_sdpa_flash_bf16"),
    (
        "void at::native::vectorized_elementwise_kernel<4, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2> >(int, at::native::(anonymous namespace)::launch_clamp_scalar(at::TensorIteratorBase&, c10::Scalar, c10::Scalar, at::native::detail::ClampLimits)::{lambda()#1}::operator()() const::{lambda()#7}::operator()() const::{lambda(float)#1}, at::detail::Array<char*, 2>)",
        "float32",
        "a100_80gb_train_prewindow",
    ),
    (
        "void multi_tensor_apply_kernel<TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float, int, int>(int, int volatile*, TensorListMetadata<4>, AdamFunctor<float>, float, float, float, float, float, float, adamMode_t, float, int, int)",
        "float32",
        "a100_train_shapes",
    ),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<int, at::native::ArgMaxOps<int>, unsigned int, long, 4, 4> >(at::native::ReduceOp<int, at::native::ArgMaxOps<int>, unsigned int, long, 4, 4>)",
        "int32",
        "mi300x_sd35_inference",
    ),
    (
        "sm80_xmma_gemm_f16f16_f16f32_f32_nn_n_tilesize96x128x32_stage4_warpsize2x2x1_tensor16x8x16_execute_kernel__5x_cublas",
        "float16",
        "GPUModel trace3.json",
    ),
    (
        "Cijk_Alik_Bljk_SB_Bias_AS_SAV_UserArgs_MT64x16x32_MI16x16x1_SN_LDSB0_AFC1_AFEM1_AFEM1_ASEM1_CLR1_CADS0_EPS0_GRVWA2_GRVWB2_GSUAMB_ISA90a_IU",
        "float32",
        "mi250_mlp_train",
    ),
]
# Spellings documented by the libraries (see archsim.trace.kernel_dtype) but in no trace here.
DOCUMENTED_NAMES = [
    ("maxwell_hgemm_128x64_nn", "float16"),
    ("ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_64x3_nn", "float16"),
    ("ampere_bf16_s16816gemm_bf16_64x64_ldg8_f2f_stages_64x5_tn", "bfloat16"),
    ("volta_h884gemm_64x128_ldg8_nn", "float16"),
    ("turing_h1688cudnn_256x64_sliced1x2_ldg8_relu_exp_small_nhwc_tn_v1", "float16"),
    ("ampere_dgemm_64x64_tn", "float64"),
    ("ampere_s16816gemm_64x64_nn", None),  # 16-bit-only mma shape without a 16-bit operand
    ("Cijk_Ailk_Bljk_HHS_BH_MT128x128x32_MI32x32x8x1_SN_1LDSB0", "float16"),
    ("Cijk_Ailk_Bljk_I8II_BH_MT128x128x64_MI32x32x16x1_SN", "int8"),
    ("Cijk_Ailk_Bljk_ZB_MT64x64x8_SN", None),
    ("Cijk_Ailk_Bljk_F8H_HHS_BH_MT128x128x64", "float8_e4m3fn"),  # 1 byte (archsim.perf.fp8)
    ("cutlass_80_tensorop_s8_i16832gemm_s8_256x128_64x3_tn_align16", "int8"),
    ("cutlass3x_sm90_tensorop_gemm_f16_f16_f32_f16_f16_128x256x64_1x2x1_0_tnn_align8", "float16"),
    ("ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)", "bfloat16"),
    ("ncclKernel_AllReduce_RING_LL_Sum_half(ncclWorkElem)", "float16"),
    (
        "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<c10::complex<float>, at::native::func_wrapper_t<c10::complex<float>, at::native::sum_functor<c10::complex<float>, c10::complex<float>, c10::complex<float> >::operator()(at::TensorIterator&)::{lambda(c10::complex<float>, c10::complex<float>)#1}>, unsigned int, c10::complex<float>, 4> >(at::native::ReduceOp<c10::complex<float>, at::native::func_wrapper_t<c10::complex<float>, at::native::sum_functor<c10::complex<float>, c10::complex<float>, c10::complex<float> >::operator()(at::TensorIterator&)::{lambda(c10::complex<float>, c10::complex<float>)#1}>, unsigned int, c10::complex<float>, 4>)",
        None,
    ),
    (
        "void at::native::index_elementwise_kernel<128, 4, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1}>(long, at::native::gpu_index_kernel<at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1}>(at::TensorIteratorBase&, c10::ArrayRef<long>, c10::ArrayRef<long>, at::native::index_put_kernel_impl<at::native::OpaqueType<4> >(at::TensorIterator&, c10::ArrayRef<long>, c10::ArrayRef<long>)::{lambda(char*, char const*, long)#1} const&, bool)::{lambda(int)#1})",
        None,
    ),
]


@pytest.mark.parametrize(("name", "dtype", "source"), REAL_NAMES)
def test_real_kernel_names(name: str, dtype: str | None, source: str) -> None:
    assert kernel_name_dtype(name) == dtype, source


@pytest.mark.parametrize(("name", "dtype"), DOCUMENTED_NAMES)
def test_documented_spellings(name: str, dtype: str | None) -> None:
    assert kernel_name_dtype(name) == dtype


def _kernel(name: str, dtype: str = "", op_class: str = "elementwise", grid=(1024, 1, 1),
            block=(128, 1, 1), kind: str = "kernel") -> pd.DataFrame:  # fmt: skip
    """One shape-less op as a record_shapes=False trace gives it: a launch grid, no FLOPs, no bytes."""
    return pd.DataFrame(
        [{"name": name, "kind": kind, "op_class": op_class, "dtype": dtype, "flops": 0.0,
          "bytes_read": 0.0, "bytes_written": 0.0, "grid_x": grid[0], "grid_y": grid[1],
          "grid_z": grid[2], "block_x": block[0], "block_y": block[1], "block_z": block[2]}]
    )  # fmt: skip


BF16_ADD = next(n for n, _, _ in REAL_NAMES if "CUDAFunctor_add<c10::BFloat16>" in n)


def test_named_bf16_elementwise_moves_two_bytes_an_element() -> None:
    """1,024 blocks x 128 threads x 4 elements (vectorized_elementwise_kernel<4, ...>) = 524,288
    elements, 3 operands each (two inputs, one output) at 2 B (bf16): 3,145,728 B, not the
    6,291,456 B of 4-byte elements; priced as the same op with bfloat16 recorded."""
    assert "std::array<char*, 3ul>" in BF16_ADD
    ops = _kernel(BF16_ADD)
    named = with_named_dtypes(ops, work_inferred(ops))
    assert named["dtype"].tolist() == ["bfloat16"]
    flops, dram = estimate_work_from_launch(named, np.array([1024.0]), np.array([128.0]))
    assert flops[0] == 524_288 and dram[0] == 3_145_728
    a100 = load_hw("dgx-a100")
    priced = body_seconds(ops, a100)[0]
    assert priced == body_seconds(_kernel(BF16_ADD, "bfloat16"), a100)[0]
    assert priced < body_seconds(_kernel(BF16_ADD, "float32"), a100)[0]  # recorded dtype wins


def test_named_half_gemm_runs_at_the_fp16_rate() -> None:
    """A shape-less maxwell_hgemm_* (cuBLAS's native-FP16 GEMM) on a P100: 256 FP16 FLOP per clock
    per SM (P100 whitepaper: FP16 at twice the FP32 rate) x 1,480 MHz = 3.7888e11 FLOP/s per SM,
    where an unnamed dtype had read 128 x 1,480e6 = 1.8944e11 (FP32)."""
    p100 = load_hw("dgx1-p100")
    ops = _kernel("maxwell_hgemm_128x64_nn", op_class="gemm", grid=(4, 4, 1), block=(256, 1, 1))
    named = with_named_dtypes(ops, work_inferred(ops))
    assert math_rate_per_sm(ops, p100.gpu)[0] == pytest.approx(1.8944e11)
    assert math_rate_per_sm(named, p100.gpu)[0] == pytest.approx(3.7888e11)
    priced = body_seconds(ops, p100)[0]
    recorded = _kernel("maxwell_hgemm_128x64_nn", "float16", "gemm", (4, 4, 1), (256, 1, 1))
    fp32 = _kernel("maxwell_hgemm_128x64_nn", "float32", "gemm", (4, 4, 1), (256, 1, 1))
    assert priced == body_seconds(recorded, p100)[0] < body_seconds(fp32, p100)[0]


def test_only_empty_dtypes_of_kernels_in_rows_are_filled() -> None:
    ops = pd.concat(
        [_kernel(BF16_ADD), _kernel(BF16_ADD, "float32"), _kernel(BF16_ADD, kind="memcpy"),
         _kernel("triton_poi_fused_add_0"), _kernel(BF16_ADD)], ignore_index=True
    )  # fmt: skip
    rows = np.array([True, True, True, True, False])
    assert named_dtypes(ops, rows).tolist() == ["bfloat16", "float32", "", "", ""]
    unchanged = ops.iloc[[1, 3]]
    assert with_named_dtypes(unchanged) is unchanged  # nothing to fill: no copy


def test_trace_info_reports_dtypes_read_from_names() -> None:
    """mi210_gpu_only records no shapes: its kernels' dtypes come from their names."""
    trace = ingest(kineto_fixture("mi210_gpu_only.json.gz"))
    counts = summarize(trace)["kernel_dtypes"]
    assert counts["recorded"] == {}
    assert counts["from_kernel_names"]["bfloat16"] > counts["from_kernel_names"]["float16"] > 0
    assert counts["unknown"] > 0  # SubTensorOpWithScalar1d and kin name no type
    assert "kernel dtypes read from kernel names" in format_summary(summarize(trace))


_FRAGMENTS = st.sampled_from(
    ["Cijk_A", "ilk_B", "ljk_", "BBS", "_BH", "4xi8", "F8", "xmma_", "f16", "bf16", "tf32f32",
     "cutlass_", "cutlass3x_", "80_", "tensorop_", "s1688", "16816", "gemm", "cudnn", "ampere_",
     "volta_", "sm80_", "igemm_", "_nhwc_", "batched_transpose_", "_half", "ncclKernel_", "_Sum_",
     "int8_t", "<", ">", "(", ")", "::", ", ", "c10::Half", "c10::BFloat16", "float", "double",
     "long", "unsigned ", "char*", "c10::complex<", "{lambda(", "#1}", "_", " ", "\x00", "é"]
)  # fmt: skip
_ALLOWED = set(DTYPE_BYTES) | {None}


_NAMES = st.one_of(st.text(max_size=400), st.lists(_FRAGMENTS, max_size=40).map("".join))


@settings(max_examples=150, deadline=None)
@given(_NAMES)
def test_odd_names_never_raise(name: str) -> None:
    assert kernel_name_dtype(name) in _ALLOWED


@settings(max_examples=15, deadline=None)
@given(st.lists(_NAMES, min_size=1, max_size=20))
def test_odd_names_in_a_trace_table(names: list[str]) -> None:
    """A table of such kernels: each empty dtype filled with what its name spells, or left empty."""
    ops = pd.concat([_kernel(name) for name in names], ignore_index=True)
    filled = named_dtypes(ops, work_inferred(ops))
    assert filled.tolist() == [kernel_name_dtype(name) or "" for name in names]


@pytest.mark.parametrize("value", [None, float("nan"), 3, b"ampere_sgemm", "", "   "])
def test_non_names_read_nothing(value: object) -> None:
    assert kernel_name_dtype(value) is None
