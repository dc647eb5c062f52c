"""``aten::cat`` records its inputs as "TensorList" with no dtype: its bytes come from the element size
its kernel's name carries (CatArrayBatchedCopy<OpaqueType<N>>), not the fp32 default."""

from __future__ import annotations

import json

import numpy as np

from archsim.perf.calibrate import measured_ops
from archsim.trace.flops.args import untyped_list_element_bytes
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

CAT2 = (
    "void at::native::(anonymous namespace)::CatArrayBatchedCopy<at::native::(anonymous "
    "namespace)::OpaqueType<2u>, unsigned int, 3, 128, 1>(...)"
)


def test_element_size_from_the_kernel_only_where_no_dtype_was_recorded() -> None:
    assert untyped_list_element_bytes({"Input type": ["TensorList", "Scalar"]}, [CAT2]) == 2.0
    # A recorded tensor dtype wins; a kernel without OpaqueType says nothing.
    assert (
        untyped_list_element_bytes({"Input type": ["TensorList", "c10::BFloat16"]}, [CAT2]) is None
    )
    assert (
        untyped_list_element_bytes({"Input type": ["TensorList"]}, ["elementwise_kernel"]) is None
    )
    assert untyped_list_element_bytes({}, [CAT2]) is None


def test_h100_cat_of_bf16_tensors_moves_two_bytes_an_element() -> None:
    # h100_timesformer_inference's cats join bf16 tensors (one kernel each): a cat reads its inputs
    # once and writes them once, 2 bytes an element (4 before: the fp32 default).
    trace = ingest(kineto_fixture("h100_timesformer_inference.json.gz"))
    ops = measured_ops(trace.ops)
    cat = ops[ops["name"].astype(str).str.contains("CatArrayBatchedCopy")]
    assert len(cat)
    dims = cat["input_dims"].astype(str)
    for (_, row), text in zip(cat.iterrows(), dims, strict=True):
        shapes = [s for s in json.loads(text)[0] if s]
        elements = sum(int(np.prod(s)) for s in shapes)
        assert row["bytes_read"] == 2 * elements and row["bytes_written"] == 2 * elements
