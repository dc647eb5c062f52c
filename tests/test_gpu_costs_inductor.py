"""In-place writes of TorchInductor's Triton pointwise kernels (archsim.trace.inductor_args): golden
values worked by hand from the recorded call, and the ingested real MI300X trace."""

from __future__ import annotations

import numpy as np

from archsim.trace.inductor_args import inplace_written_bytes
from tests.conftest import kineto_fixture

BF16, F32, SCALAR = "c10::BFloat16", "float", "Scalar"


def _call(dims, types, concrete, kwargs: str | None = None) -> dict:
    args = {"Input Dims": dims, "Input type": types, "Concrete Inputs": concrete}
    if kwargs is not None:
        args["kernel_kwargs"] = kwargs
    return args


def test_bias_gelu_epilogue_writes_its_first_buffer_back() -> None:
    # triton_poi_fused_addmm_gelu_view_15 (mi300x_sd35_inference): (in_out_ptr0 [2,4096,9728],
    # in_ptr0 [9728], xnumel). The last tensor (9,728 elements) is smaller than xnumel
    # = 2 x 4096 x 9728 = 79,691,776, so it is an input, no out_ptr exists and the first buffer
    # is written back: 79,691,776 x 2 B = 159,383,552 B.
    args = _call([[2, 4096, 9728], [9728], []], [BF16, BF16, SCALAR], ["", "", "79691776"])
    assert inplace_written_bytes("triton_poi_fused_addmm_gelu_view_15", args) == 159_383_552.0
    # the same call with the trace's kernel_kwargs (one axis: XBLOCK) gives the same answer
    with_kwargs = dict(args, kernel_kwargs="XBLOCK=4096")
    assert (
        inplace_written_bytes("triton_poi_fused_addmm_gelu_view_15", with_kwargs) == 159_383_552.0
    )


def test_tiled_kernel_counts_both_axes_from_kwargs() -> None:
    # ynumel 32 x xnumel 64 = 2,048 iterations; first tensor 64 x 32 = 2,048 fp32 elements, last
    # tensor 32 < 2,048: 2,048 x 4 B = 8,192 B written back.
    args = _call([[64, 32], [32], [], []], [F32, F32, SCALAR, SCALAR], ["", "", "32", "64"],
                 "XBLOCK=64,YBLOCK=32")  # fmt: skip
    assert inplace_written_bytes("triton_poi_fused_add_0", args) == 8192.0


def test_not_provable_gives_zero() -> None:
    # last tensor as large as the iterations: it may be an out_ptr (the timestep embedding's
    # [2] -> [2, 256] kernel writes its last argument), so nothing is added
    out_last = _call([[2], [2, 256], []], [F32, F32, SCALAR], ["", "", "512"])
    assert inplace_written_bytes("triton_poi_fused_arange_cos_0", out_last) == 0.0
    # two scalars and no kernel_kwargs: xnumel cannot be told from a size variable
    two = _call([[64, 32], [32], [], []], [F32, F32, SCALAR, SCALAR], ["", "", "32", "64"])
    assert inplace_written_bytes("triton_poi_fused_add_0", two) == 0.0
    # reductions and non-Triton ops are out of the rule's scope
    red = _call(
        [[8192, 2432], [2432], [], []], [BF16, BF16, SCALAR, SCALAR], ["", "", "8192", "2432"]
    )
    assert inplace_written_bytes("triton_red_fused_native_layer_norm_1", red) == 0.0
    gelu = _call([[2, 4096, 9728], [9728], []], [BF16, BF16, SCALAR], ["", "", "79691776"])
    assert inplace_written_bytes("aten::gelu", gelu) == 0.0
    # malformed records are ignored, not raised on
    assert inplace_written_bytes("triton_poi_x", {"Input Dims": "junk"}) == 0.0


def test_real_trace_pointwise_epilogues_write_back() -> None:
    from archsim.trace.ingest import ingest

    ops = ingest(kineto_fixture("mi300x_sd35_inference.json.gz")).ops
    gelu = ops[ops["name"] == "triton_poi_fused_addmm_gelu_view_15"]
    assert len(gelu) == 152
    assert np.all(gelu["bytes_written"].to_numpy() == 159_383_552.0)
    # read stays every recorded tensor once: 159,383,552 + 9,728 x 2 = 159,403,008 B
    assert np.all(gelu["bytes_read"].to_numpy() == 159_403_008.0)
    # a transpose writing its last argument ([2,4096,2432] as out_ptr0) gains nothing
    move = ops[ops["name"] == "triton_poi_fused__unsafe_view_clone_slice_transpose_11"]
    assert len(move) > 0 and np.all(move["bytes_written"].to_numpy() == 0.0)
