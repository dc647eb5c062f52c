"""Bytes of each kernel of a multi-kernel normalization op (archsim.trace.norm_traffic via
archsim.trace.gpu_costs.split_op): what the kernel's code reads and writes, so a statistics kernel
reads the whole input and the element-wise kernel after it reads it again (issue 12)."""

from __future__ import annotations

import functools
import json
import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.trace.flops import OpCost
from archsim.trace.gpu_costs import split_op
from archsim.trace.norm_traffic import NORM_KERNEL_TRAFFIC, kernel_traffic
from tests.conftest import kineto_fixture

# Real kernel names (mi300x_normalization_bench: PyTorch's native_batch_norm on ROCm).
STATS = (
    "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, float, float, "
    "float, int>(at::GenericPackedTensorAccessor<float const, 3>, float, float, "
    "at::GenericPackedTensorAccessor<float, 1>, at::GenericPackedTensorAccessor<float, 1>)"
)
RUNNING = (
    "void at::native::unrolled_elementwise_kernel_for_multi_outputs<3, "
    "at::native::batch_norm_update_stats_and_invert(...)::{lambda()#1}>"
)
TRANSFORM = "void at::native::batch_norm_transform_input_kernel<float, float, float, true, int>"
# PyTorch's element-wise gpu_kernel inside group norm's backward, as named in the MI300X trace
GROUP_NORM_BACKWARD = (
    "void at::native::elementwise_kernel_manual_unroll<128, 4, at::native::gpu_kernel_impl_nocast<"
    "at::native::(anonymous namespace)::GroupNormBackwardKernelImplInternal<float>(at::Tensor "
    "const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, at::Tensor const&, long, "
    "long, long, long, at::Tensor&, at::Tensor&, at::Tensor&)::{{lambda({operands})#1}}>"
)
GRAD_INPUT = (
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float, false>"
)
GAMMA_BETA = (
    "void at::native::(anonymous namespace)::GammaBetaBackwardSimpleCUDAKernel<float, float, "
    "false>(long, long, float const*, float const*, float const*, float const*, float*, float*)"
)


def test_pytorch_batch_norm_forward_by_hand() -> None:
    """native_batch_norm on [8, 16, 32, 32] fp32: input 8 x 16 x 1024 x 4 B = 524,288 B, plus
    weight, bias, running mean and var (4 x 16 x 4 B = 256 B): the op reads 524,544 B; it writes
    the output (524,288 B) and save_mean, save_invstd (2 x 16 x 4 B = 128 B): 524,416 B."""
    cost = OpCost("reduction", 1.0e6, 524_544.0, 524_416.0, True, "float32")
    names = [STATS, RUNNING, TRANSFORM]
    blocks = np.array([16.0, 1.0, 128.0])  # one block per channel; one; 16 x 8
    threads = np.array([1024.0, 256.0, 256.0])
    flops, read, written, shares = split_op(cost, names, blocks, threads, blocks * threads)
    # statistics: loops over every element of its channel (reads all of the op's input), writes
    # the channel's mean and invstd: 2 x 16 channels x 4 B = 128 B
    # running-stat update (not named): its own grid, 1 x 256 threads x 4 elements x 4 B = 4,096 B
    # transform: reads input, statistics and affine parameters, writes the output
    assert read.tolist() == [524_544.0, 4_096.0, 524_544.0]
    assert written.tolist() == [128.0, 4_096.0, 524_416.0]
    # the input is read twice: the kernels move more than the op's nominal bytes
    assert read.sum() == 2 * 524_544.0 + 4_096.0
    # FLOPs by launch size: 16,384, 256 and 32,768 of 49,408 thread slots
    np.testing.assert_allclose(flops, 1.0e6 * np.array([16_384, 256, 32_768]) / 49_408)
    assert shares.all()


def test_miopen_multi_kernel_batch_norm_by_hand() -> None:
    """MIOpen's spatial batch norm in three kernels (16 workgroups each): MeanVariance reads the
    input and stashes a mean and variance per workgroup (2 x 16 x 4 B = 128 B), FinalMeanVariance
    reads those 128 B and writes the channel statistics, Norm reads the input and writes the output."""
    cost = OpCost("reduction", 0.0, 524_544.0, 524_416.0, True, "float32")
    names = [
        "MIOpenBatchNormFwdTrainSpatialMeanVariance",
        "MIOpenBatchNormFwdTrainSpatialFinalMeanVariance",
        "MIOpenBatchNormFwdTrainSpatialNorm",
    ]
    blocks, threads = np.full(3, 16.0), np.full(3, 256.0)
    _, read, written, _ = split_op(cost, names, blocks, threads, blocks)
    assert read.tolist() == [524_544.0, 128.0, 524_544.0]
    assert written.tolist() == [128.0, 128.0, 524_416.0]


def test_layer_norm_backward_with_weights_reads_like_without() -> None:
    """layer_norm_grad_input_kernel reads dY and X whether or not GammaBetaBackward runs beside it
    (the issue's case: 131 KB of a 1.5 MB op with affine weights, all of it without). dY, X
    [8, 16384] fp32: 2 x 524,288 B; mean, rstd 2 x 8 x 4 B; gamma 65,536 B: 1,114,176 B read."""
    op_read = 2 * 524_288.0 + 64.0 + 65_536.0
    with_affine = OpCost("reduction", 0.0, op_read, 524_288.0 + 2 * 65_536.0, True, "float32")
    blocks, threads = np.array([8.0, 64.0]), np.array([256.0, 256.0])
    _, read, written, _ = split_op(
        with_affine, [GRAD_INPUT, GAMMA_BETA], blocks, threads, blocks * threads
    )
    # GammaBetaBackwardSimple: thread j sums column j over all 8 rows of dY and X, writes dg[j]
    # and db[j]: 64 x 256 = 16,384 columns x 2 x 4 B = 131,072 B
    assert read.tolist() == [op_read, op_read]
    assert written.tolist() == [524_288.0 + 2 * 65_536.0, 131_072.0]
    alone = OpCost("reduction", 0.0, 2 * 524_288.0 + 64.0, 524_288.0, True, "float32")
    _, read_alone, _, _ = split_op(alone, [GRAD_INPUT], blocks[:1], threads[:1])
    assert read_alone[0] == 2 * 524_288.0 + 64.0  # the same sweep, less gamma's 65,536 B


def test_two_stage_gamma_beta_reads_the_partials_by_hand() -> None:
    """cuComputePartGradGammaBeta (grid 16 x 64, blockDim.x 64: N = 1,024 columns, part_size 64)
    writes part_grad_gamma and part_grad_beta, 64 x 1,024 x 2 x 4 B = 524,288 B, which
    cuComputeGradGammaBeta (16 blocks x 64 columns) reads and sums into dgamma, dbeta (8,192 B)."""
    cost = OpCost("reduction", 0.0, 1_053_184.0, 528_384.0, True, "float32")
    names = [
        GRAD_INPUT.replace("<float, float, false>", "<float, float, true>"),
        "void at::native::(anonymous namespace)::cuComputePartGradGammaBeta<float, float, true>",
        "void at::native::(anonymous namespace)::cuComputeGradGammaBeta<float, float, true>",
    ]
    blocks = np.array([128.0, 1024.0, 16.0])
    threads = np.array([256.0, 256.0, 512.0])
    columns = blocks * np.array([256.0, 64.0, 64.0])
    _, read, written, _ = split_op(cost, names, blocks, threads, columns)
    assert read.tolist() == [1_053_184.0, 1_053_184.0, 524_288.0]
    assert written.tolist() == [528_384.0, 524_288.0, 8_192.0]


def test_group_norm_kernels_do_not_match_layer_norm_gamma_beta() -> None:
    """Group norm's GammaBetaBackwardCUDAKernel1 sums a few channels' ds, db: not the layer-norm
    kernel that sweeps dY and X."""
    assert kernel_traffic("void at::native::GammaBetaBackwardCUDAKernel1<float>(long, ...)") is None
    assert kernel_traffic("void at::native::GammaBetaBackwardCUDAKernel<float, float>(long)") == (
        "inputs",
        "columns",
        2,
    )


def test_group_norm_backward_by_hand() -> None:
    """native_group_norm_backward on [8, 16, 32, 32] fp32, G = 4, with gamma: dY and X 524,288 B
    each, mean and rstd 2 x 8 x 4 x 4 B, gamma 64 B: 1,048,896 B read; dX 524,288 B plus dgamma and
    dbeta 2 x 64 B written. ComputeInternalGradients (one block per (n, c): 128) reads dY and X and
    writes ds, db (2 x 128 x 4 B); the 2-operand gpu_kernel (c1 = rstd x gamma, 1 block of 128)
    and the fused-parameter and gamma/beta kernels move their own grids; the 5-operand gpu_kernel
    (256 blocks of 128) reads dY and X again and writes dX."""
    op_read, op_written = 2 * 524_288.0 + 256.0 + 64.0, 524_288.0 + 128.0
    cost = OpCost("reduction", 0.0, op_read, op_written, True, "float32")
    names = [
        "void at::native::(anonymous namespace)::ComputeInternalGradientsCUDAKernel<float>",
        GROUP_NORM_BACKWARD.format(operands="float, float"),
        "void at::native::(anonymous namespace)::ComputeBackwardFusedParamsCUDAKernel<float>",
        GROUP_NORM_BACKWARD.format(operands="float, float, float, float, float"),
        "void at::native::(anonymous namespace)::GammaBetaBackwardCUDAKernel1<float>",
    ]
    blocks = np.array([128.0, 1.0, 32.0, 256.0, 1.0])
    threads = np.array([512.0, 128.0, 64.0, 128.0, 256.0])
    _, read, written, _ = split_op(cost, names, blocks, threads, blocks * threads)
    # own grids: 1 x 128 x 4 x 4 B = 2,048; 32 x 64 x 4 x 4 B = 32,768; 1 x 256 x 4 x 4 B = 4,096
    assert read.tolist() == [op_read, 2_048.0, 32_768.0, op_read, 4_096.0]
    assert written.tolist() == [1_024.0, 2_048.0, 32_768.0, op_written, 4_096.0]


# One concrete name per kernel of NORM_KERNEL_TRAFFIC that sweeps the op's inputs.
INPUT_READERS = [
    STATS,
    TRANSFORM,
    "batch_norm_backward_reduce_kernel<float, float, float, int>",
    "batch_norm_backward_elemt_kernel<float, float, float, int>",
    "batch_norm_backward_kernel<float, float, float, int>",
    "RowwiseMomentsCUDAKernel<float>",
    "ComputeInternalGradientsCUDAKernel<float>",
    "LayerNormForwardCUDAKernel<float, float>",
    "vectorized_layer_norm_kernel<float, float, true>",
    GRAD_INPUT,
    GAMMA_BETA,
    "GammaBetaBackwardCUDAKernel_32x32<float, float>",
    "cuComputePartGradGammaBeta<float, float, true>",
    "MIOpenBatchNormFwdTrainSpatialMeanVariance",
    "MIOpenBatchNormFwdTrainSpatialNorm",
    GROUP_NORM_BACKWARD.format(operands="float, float, float, float, float"),
    "void (anonymous namespace)::groupnorm_kernel_dispatch_up<__hip_bfloat16, 1024u>(...)",
    "void (anonymous namespace)::groupnorm_kernel_dispatch_down<__hip_bfloat16, 1024u>(...)",
]


def test_input_readers_cover_the_table() -> None:
    """Every pattern of the table that reads the op's inputs has a name in INPUT_READERS."""
    for pattern, reads, _, _ in NORM_KERNEL_TRAFFIC:
        if reads == "inputs":
            assert any(re.search(pattern, name) for name in INPUT_READERS), pattern
    assert all(kernel_traffic(name)[0] == "inputs" for name in INPUT_READERS)


@settings(max_examples=60, deadline=None)
@given(
    picks=st.lists(st.sampled_from(INPUT_READERS + ["elementwise_kernel", "x"]), min_size=2,
                   max_size=5),
    launches=st.lists(st.tuples(st.integers(1, 4096), st.integers(1, 1024)), min_size=5,
                      max_size=5),
    flops=st.floats(0, 1e12),
    read=st.floats(0, 1e10),
    written=st.floats(0, 1e10),
    scale=st.integers(2, 50),
)  # fmt: skip
def test_each_kernel_reads_what_its_code_reads(picks, launches, flops, read, written, scale):
    """Invariants: FLOPs still sum to the op's; no kernel moves negative bytes; a kernel that sweeps
    the op's inputs reads all of them, whatever its siblings' launch sizes (a share would shrink
    as they grow), so with one such kernel the op's input is read at least once."""
    names, n = picks, len(picks)
    blocks, threads = (np.array(x[:n], dtype=float) for x in zip(*launches, strict=True))
    cost = OpCost("reduction", flops, read, written, True, "float32")
    f, r, w, _ = split_op(cost, names, blocks, threads)
    assert (f >= 0).all() and (r >= 0).all() and (w >= 0).all()
    sweeps = np.array([kernel_traffic(name) is not None for name in names])
    assert r[sweeps].tolist() == [read] * int(sweeps.sum())
    if sweeps.any():  # (otherwise a reduction's one-block final stage takes its partials' FLOPs)
        assert f.sum() == pytest.approx(flops, rel=1e-9, abs=1e-9)
        assert r.sum() >= read
    grown = np.where(sweeps, blocks, blocks * scale)
    _, r2, _, _ = split_op(cost, names, grown, threads)
    assert r2[sweeps].tolist() == r[sweeps].tolist()


@functools.cache
def _normalization_ops():
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture("mi300x_normalization_bench.json.gz")).ops


@pytest.mark.parametrize(
    "kernel",
    [
        "batch_norm_collect_statistics_kernel",
        "batch_norm_transform_input_kernel",
        "RowwiseMomentsCUDAKernel",
        "ComputeInternalGradientsCUDAKernel",
        "layer_norm_grad_input_kernel",
        "GammaBetaBackwardSimpleCUDAKernel",
        "MIOpenBatchNormFwdTrainSpatialMeanVariance",
        "MIOpenBatchNormFwdTrainSpatialNorm",
        "GroupNormKernelImplInternal<float>",
        "float, float, float, float, float)#",  # group norm backward's apply
    ],
)
def test_fixture_sweeping_kernels_read_the_whole_first_input(kernel: str) -> None:
    """On the MI300X normalization trace every kernel that sweeps the activation reads at least the
    op's first input (its recorded Input Dims x 4 B, fp32), in ops of one kernel or several."""
    ops = _normalization_ops()
    rows = ops[ops["name"].str.contains(kernel, regex=False)]
    assert len(rows) >= 3, f"fixture has no {kernel}"
    first = np.array([4.0 * np.prod(json.loads(d)[0]) for d in rows["input_dims"]])
    assert (rows["bytes_read"].to_numpy() >= first).all()
