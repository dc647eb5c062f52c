"""Bytes in flight per thread by kernel family (archsim.perf.in_flight): golden values worked by hand
from the kernels' source, and the invariant that more bytes in flight never makes a kernel slower."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.in_flight import DEFAULT_BYTES_PER_THREAD, bytes_in_flight_per_thread
from archsim.perf.launch_terms import launch_terms as _terms

H100 = load_hw("dgx-h100").gpu
FIXTURE = (
    Path(__file__).resolve().parents[2]
    / "shared"
    / "fixtures"
    / "kineto"
    / "h100_timesformer_inference.json.gz"
)

VEC_ADD = (
    "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<c10::BFloat16>, "
    "std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char*, 3ul>)"
)
LEGACY_COPY = (
    "void at::native::elementwise_kernel<128, 4, at::native::gpu_kernel_impl_nocast<at::native::"
    "direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}>(int, ...)"
)
CAT = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy_contig<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(...)"
)
SOFTMAX = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
    "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>(c10::BFloat16*, "
    "c10::BFloat16 const*, int)"
)
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>(int, "
    "float, c10::BFloat16 const*, c10::BFloat16 const*, c10::BFloat16 const*, float*, float*, "
    "c10::BFloat16*)"
)
REDUCE = (
    "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<c10::BFloat16, at::native::MeanOps"
    "<c10::BFloat16, float, float, c10::BFloat16>, unsigned int, c10::BFloat16, 4> >(...)"
)
BN_STATS = (
    "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, float, float>(...)"
)
CUTLASS = (
    "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1>"
    "(cutlass_80_tensorop_s1688gemm_64x64_32x4_nn_align1::Params)"
)
WMMA = (
    "void cutlass::Kernel2<cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_32x1_nn_align8>"
    "(cutlass_80_wmma_tensorop_bf16_s161616gemm_bf16_16x16_32x1_nn_align8::Params)"
)
SM90 = (
    "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64_warpgroupsize1x1x1_execute_"
    "segment_k_off_kernel__5x_cublas"
)
NO_K_TILE = (
    "void cutlass::Kernel2<cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1>"
    "(cutlass_75_tensorop_bf16_s1688gemm_bf16_128x128_nn_align1::Params)"
)

# (name, dtype, bytes LOADED (stores are posted), blocks, threads, bytes per thread worked by hand)
GOLDEN = [
    # 4 elements per thread (the launch: 512 per 128-thread block) x 2 input operands x 2 B, all
    # loaded before the store: the whole share, 10 blocks x 128 threads x 16 B
    (VEC_ADD, "bfloat16", 10 * 128 * 16.0, 10, 128, 16.0),
    # vt = 4 serialized steps of one element of the 1 input operand x 2 B: 2 B per round trip
    (LEGACY_COPY, "bfloat16", 10 * 128 * 4 * 2.0, 10, 128, 2.0),
    # one OpaqueType<2u> loaded per round trip (its store posted)
    (CAT, "bfloat16", 1e6, 528, 512, 2.0),
    # ILP 8 x 2 B
    (SOFTMAX, "bfloat16", 1e6, 100, 1024, 16.0),
    # vec_size 4 x 2 B
    (LAYER_NORM, "bfloat16", 1e6, 100, 128, 8.0),
    # reductions: their dependent steps are archsim.perf.memory_parallelism's; the flat figure here
    (REDUCE, "bfloat16", 1e6, 2, 128, DEFAULT_BYTES_PER_THREAD),
    (BN_STATS, "float32", 1e6, 64, 512, DEFAULT_BYTES_PER_THREAD),
    # (stages - 1) x (m + n) x k x 4 B per block / 128 threads = 3 x 128 x 32 x 4 / 128
    (CUTLASS, "float32", 1e6, 100, 128, 384.0),
    # single stage: (16 + 16) x 32 x 2 B / 32 threads
    (WMMA, "bfloat16", 1e6, 100, 32, 64.0),
    # one stage: (128 + 128) x 64 x 2 B / 384 threads
    (SM90, "bfloat16", 1e6, 120, 384, 256 * 64 * 2 / 384),
    # no k-tile or stage count in the name: the flat assumption
    (NO_K_TILE, "bfloat16", 1e6, 100, 128, DEFAULT_BYTES_PER_THREAD),
    ("", "", 1e6, 100, 128, DEFAULT_BYTES_PER_THREAD),
]


@pytest.mark.parametrize("name,dtype,dram,blocks,threads,expected", GOLDEN)
def test_golden_bytes_per_thread(name, dtype, dram, blocks, threads, expected):
    got = bytes_in_flight_per_thread(
        pd.Series([name]), pd.Series([dtype]), np.array([dram]), np.array([blocks]),
        np.array([threads]),
    )  # fmt: skip
    assert got[0] == pytest.approx(expected)


def test_cutlass_little_law_by_hand():
    """cutlass 64x64_32x4 fp32 on the H100 preset, 64 resident blocks in all (fewer than one wave):
    in flight 64 x 128 x 384 B = 3.1 MB; at its latency that reaches C / L, above or below W."""
    bytes_per_thread = 384.0
    blocks, threads, dram = 64.0, 128.0, 64e6
    terms = _terms(np.array([0.0]), np.array([dram]), np.array([blocks]), np.array([threads]),
                   np.array([64.0]), np.array([0.0]), np.array([1e12]), np.array([True]),
                   np.array([64.0]), H100, frozenset(), 1.0, np.array([bytes_per_thread]))  # fmt: skip
    in_flight = blocks * threads * bytes_per_thread
    reachable = min(H100.dram_bw_gbs * 1e9, in_flight / (H100.dram_latency_ns * 1e-9))
    assert terms["lat"][0] == pytest.approx(dram / reachable)


@settings(max_examples=60, deadline=None)
@given(
    per_thread=st.floats(1.0, 4096.0),
    extra=st.floats(0.0, 4096.0),
    blocks=st.integers(1, 200_000),
    threads=st.sampled_from([32, 64, 128, 256, 512, 1024]),
    dram=st.floats(1e3, 1e10),
)
def test_more_bytes_in_flight_never_slower(per_thread, extra, blocks, threads, dram):
    def body(bytes_per_thread: float) -> tuple[float, float]:
        t = _terms(np.array([1e9]), np.array([dram]), np.array([float(blocks)]),
                   np.array([float(threads)]), np.array([32.0]), np.array([0.0]),
                   np.array([1e12]), np.array([False]), np.array([64.0]), H100, frozenset(), 1.0,
                   np.array([bytes_per_thread]))  # fmt: skip
        return t["lat"][0], max(t["comp"][0], t["bw"][0], t["lat"][0], t["mem"][0])

    lat_lo, body_lo = body(per_thread)
    lat_hi, body_hi = body(per_thread + extra)
    assert lat_hi <= lat_lo * (1 + 1e-12)
    assert body_hi <= body_lo * (1 + 1e-12)
    # and never faster than the bandwidth allows
    assert lat_hi >= dram / (H100.dram_bw_gbs * 1e9) * (1 - 1e-12)


def test_h100_fixture_families():
    """Every kernel of the H100 TimeSformer fixture gets a positive figure; the named families
    get theirs (not the flat default)."""
    if not FIXTURE.exists():
        pytest.skip("fixture h100_timesformer_inference.json.gz absent (../shared/fixtures/kineto)")
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.terms import launch_shape
    from archsim.trace.ingest import ingest

    ops = measured_ops(ingest(FIXTURE).ops).reset_index(drop=True)
    ops = ops[ops["kind"] == "kernel"].reset_index(drop=True)
    blocks, threads, _, _ = launch_shape(ops)
    got = bytes_in_flight_per_thread(ops["name"], ops["dtype"], ops["bytes_read"].fillna(0).to_numpy(),
                                     blocks, threads)  # fmt: skip
    assert (got > 0).all()
    named = ops["name"].str.contains("cunn_SoftMaxForward<8|layer_norm|tilesize128x128x64")
    assert (got[named.to_numpy()] != DEFAULT_BYTES_PER_THREAD).any()
    softmax = ops["name"].str.contains("cunn_SoftMaxForward<8").to_numpy()
    assert np.allclose(got[softmax], 16.0)  # ILP 8 x bf16
