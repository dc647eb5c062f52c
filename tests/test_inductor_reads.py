"""Reads and classes of TorchInductor's Triton kernels (archsim.trace.inductor_args.read_bytes,
archsim.trace.flops.op_class): a kernel reads each buffer as deep as its iterations, so the source
of a slice or crop is not counted in full, and the fused ops in a kernel's name do not make it a
convolution (issue 12). Golden values worked by hand from the MI300X SD3.5 trace's records."""

from __future__ import annotations

import functools
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.trace.flops import op_class
from archsim.trace.inductor_args import read_bytes
from tests.conftest import kineto_fixture
from tests.test_gpu_costs_inductor import BF16, F32, SCALAR, _call


def test_slice_of_the_joint_sequence_by_hand() -> None:
    """triton_poi_fused__unsafe_view_clone_slice_transpose_13: (in_ptr0 [2, 38, 4429, 64],
    out_ptr0 [2, 333, 2432], xnumel 1,619,712): the last 333 of 4,429 tokens. Each tensor is read
    at most xnumel deep: 1,619,712 x 2 B twice = 6,478,848 B, not the source's 43,085,312 B."""
    args = _call([[2, 38, 4429, 64], [2, 333, 2432], []], [BF16, BF16, SCALAR],
                 ["", "", "1619712"], "XBLOCK=1024")  # fmt: skip
    assert read_bytes("triton_poi_fused__unsafe_view_clone_slice_transpose_13", args) == 6_478_848


def test_looped_reduction_counts_x_and_r_axes_by_hand() -> None:
    """triton_red_fused__unsafe_view_add_addmm_clone_convolution_mul_native_layer_norm_..._12:
    kwargs XBLOCK=64, R0_BLOCK=128: two counts, xnumel 8,192 x r0_numel 2,432 = 19,922,944
    iterations. Tensors (bf16): [2, 4096, 2432] 19,922,944; [2, 2432, 64, 64] 19,922,944; [2432];
    the [1, 36864, 2432] position table, 89,653,248, read 19,922,944 deep; [2, 14592] 29,184;
    [14592]; [2432]; [2, 4096, 2432]. Elements 4 x 19,922,944 + 2,432 + 29,184 + 14,592 + 2,432
    = 79,740,416: 159,480,832 B."""
    dims = [[2, 4096, 2432], [2, 2432, 64, 64], [2432], [1, 36864, 2432], [2, 14592], [14592],
            [2432], [2, 4096, 2432], [], []]  # fmt: skip
    args = _call(dims, [BF16] * 8 + [SCALAR] * 2, [""] * 8 + ["8192", "2432"],
                 "XBLOCK=64,R0_BLOCK=128")  # fmt: skip
    assert read_bytes("triton_red_fused_x_12", args) == 159_480_832


def test_persistent_reduction_adds_r0_numel_by_hand() -> None:
    """triton_per_... (XBLOCK=16 only; R0_BLOCK is a constexpr): xnumel 8,192 x r0_numel 19 =
    155,648 iterations; three [2, 4096, 1, 19] fp32 tensors (155,648 each) and two [2, 4096, 1]
    (8,192): (3 x 155,648 + 2 x 8,192) x 4 B = 1,933,312 B, all within the iterations."""
    args = _call([[2, 4096, 1, 19]] * 3 + [[2, 4096, 1]] * 2 + [[], []], [F32] * 5 + [SCALAR] * 2,
                 [""] * 5 + ["8192", "19"], "XBLOCK=16")  # fmt: skip
    assert read_bytes("triton_per_fused_x_5", args) == 1_933_312


def test_unknown_iterations_or_other_ops_give_none() -> None:
    dims, types = [[8, 8], [8], [], []], [F32, F32, SCALAR, SCALAR]
    # two scalars and no kwargs: the iterations cannot be told from a size variable
    assert read_bytes("triton_poi_fused_add_0", _call(dims, types, ["", "", "8", "64"])) is None
    assert read_bytes("triton_red_fused_sum_0", _call(dims, types, ["", "", "8", "8"])) is None
    assert read_bytes("aten::add", _call(dims, types, ["", "", "8", "64"], "XBLOCK=8")) is None
    assert read_bytes("triton_poi_x", {"Input Dims": "junk"}) is None


@settings(max_examples=80, deadline=None)
@given(
    shapes=st.lists(st.lists(st.integers(1, 64), min_size=1, max_size=3), min_size=1, max_size=4),
    iterations=st.integers(1, 10**6),
    more=st.integers(1, 10**6),
)
def test_reads_bounded_by_tensors_and_iterations(shapes, iterations, more) -> None:
    """Invariants: never more than every tensor in full, nor more than the iterations per
    tensor; more iterations never read less."""
    n = len(shapes)

    def reads(count: int) -> float:
        args = _call([*shapes, []], [F32] * n + [SCALAR], [""] * n + [str(count)], "XBLOCK=1")
        got = read_bytes("triton_poi_k", args)
        assert got is not None
        return got

    full = 4 * sum(math.prod(s) for s in shapes)
    got = reads(iterations)
    assert 0 < got <= full and got <= 4 * n * iterations
    assert reads(iterations + more) >= got


def test_inductor_kernels_are_classed_by_their_kind_not_their_fused_ops() -> None:
    name = "triton_red_fused__unsafe_view_add_clone_convolution_native_layer_norm_slice_view_4"
    assert op_class(name) == "reduction"
    assert op_class("triton_per_fused__to_copy_add_mean_mul_pow_rsqrt_9") == "reduction"
    assert op_class("triton_poi_fused__scaled_dot_product_flash_attention_cat_10") == "elementwise"
    # not Inductor's: the token rule stands
    assert op_class("aten::convolution") == "conv"
    assert op_class("my_triton_poi_conv") == "conv"


@functools.cache
def _sd35_ops():
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture("mi300x_sd35_inference.json.gz")).ops


def test_fixture_crop_of_the_position_table_is_read_as_deep_as_the_kernel_runs() -> None:
    """Ingest keeps kernel_kwargs, so the SD3.5 patch-embedding kernels read the 4,096 cropped rows
    of the [1, 36864, 2432] position table, not all 36,864 (and are reductions or element-wise,
    not a convolution's auxiliary kernels)."""
    ops = _sd35_ops()
    rows = ops[
        ops["name"].str.startswith("triton_red_fused__unsafe_view_add_addmm_clone_convolution")
    ]
    assert len(rows) == 4
    assert (rows["bytes_read"].to_numpy() == 159_480_832).all()
    assert (rows["op_class"] == "reduction").all()
    table = math.prod([1, 36864, 2432]) * 2
    assert (rows["bytes_read"].to_numpy() < table).all()
    sliced = ops[ops["name"] == "triton_poi_fused__unsafe_view_clone_slice_transpose_13"]
    assert len(sliced) == 148 and np.all(sliced["bytes_read"].to_numpy() == 6_478_848)
