"""Issue floor of Shape.cu's cat kernels (archsim.perf.issue_rate.cat_issue_seconds): the H100
TimeSformer's contiguous cat worked by hand from the SASS counts and the published rates, through
the kernel model, the share of its threads with loads in flight, and invariants (hypothesis)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.in_flight import cat_busy_share
from archsim.perf.issue_rate import (
    CAT_COPY_LOOPS,
    cat_copy_count,
    cat_issue_seconds,
    warp_cycles,
)
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

H100 = load_hw("dgx-h100")
_NS = "at::native::(anonymous namespace)::"
CONTIG = (
    f"void {_NS}CatArrayBatchedCopy_contig<{_NS}OpaqueType<2u>, unsigned int, 3, 128, 1>"
    f"({_NS}OpaqueType<2u>*, {_NS}CatArrInputTensorMetadata<{_NS}OpaqueType<2u>, unsigned int, "
    f"128, 1>, {_NS}TensorSizeStride<unsigned int, 4u>, int, unsigned int)"
)
STRIDED = CONTIG.replace("_contig<", "<").replace("3, 128, 1>(", "3, 64, 64>(")
# 8 x 3137 x 768 bf16 output (the H100 TimeSformer's aten::cat), grid 264 x 2 of 512 threads
WRITTEN = 2.0 * 8 * 3137 * 768


def _cat_ops(name: str, written: float, blocks: int = 528) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": name, "launch_op": "aten::cat", "op_class": "copy",
        "dtype": "float32", "bytes_read": written, "bytes_written": written,
        "grid_x": blocks // 2, "grid_y": 2, "grid_z": 1, "block_x": 512, "block_y": 1, "block_z": 1,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _floor(name: str, written: float, blocks: int = 528, clock_mhz: float | None = None,
           generation: str = "hopper", idealize: frozenset[str] = frozenset()) -> float:  # fmt: skip
    gpu = H100.gpu if clock_mhz is None else H100.gpu.model_copy(update={"clock_mhz": clock_mhz})
    ops = _cat_ops(name, written, blocks)
    return float(cat_issue_seconds(ops, np.array([float(blocks)]), gpu, generation, idealize)[0])


def test_cat_counts_worked_by_hand() -> None:
    # contiguous, 2-byte, 3 dims: 34 instructions, 31 integer: 31 x 32 x 4 / 64 = 62 cycles
    assert warp_cycles(cat_copy_count(False, 2, 3)) == 62.0
    # strided: 60 instructions, 56 integer: 112 cycles
    assert warp_cycles(cat_copy_count(True, 2, 3)) == 112.0
    # 16-byte elements take the 8-byte figures; 3-byte ones the 4-byte; dims outside 1-4: none
    assert cat_copy_count(False, 16, 2) == CAT_COPY_LOOPS[(False, 8, 2)]
    assert cat_copy_count(True, 3, 4) == CAT_COPY_LOOPS[(True, 4, 4)]
    assert cat_copy_count(False, 2, 5) is None and cat_copy_count(False, 2, 0) is None


def test_timesformer_cat_floor_golden() -> None:
    # 19,268,352 elements over 528 blocks; the busiest SM holds ceil(528 / 132) = 4 of them:
    # 4 / 528 x 19,268,352 / 32 lanes / 4 sub-partitions = 1,140.4 warp-elements x 62 cycles
    # / 1980 MHz = 35.71 us (strided: 112 cycles, 64.51 us)
    warp_elements = 4 / 528 * (WRITTEN / 2) / 32 / 4
    assert _floor(CONTIG, WRITTEN) == pytest.approx(warp_elements * 62 / 1980e6)
    assert _floor(STRIDED, WRITTEN) == pytest.approx(warp_elements * 112 / 1980e6)
    ops = _cat_ops(CONTIG, WRITTEN)
    comp = kernel_terms(ops, H100.gpu, frozenset(), H100.name)["comp"][0]
    assert comp == pytest.approx(_floor(CONTIG, WRITTEN))
    # no tail under perfect SM utilization: 528 / 132 = 4 exactly, the same here
    assert _floor(CONTIG, WRITTEN, idealize=frozenset({"sm_utilization"})) == pytest.approx(
        _floor(CONTIG, WRITTEN)
    )


def test_no_floor_where_the_counts_do_not_apply() -> None:
    assert _floor(CONTIG, WRITTEN, generation="cdna3") == 0.0
    assert _floor(CONTIG, WRITTEN, generation="maxwell") == 0.0
    # Pascal issues at least sm_90's instructions at the same SM rates: the same floor, a bound
    assert _floor(CONTIG, WRITTEN, generation="pascal") == _floor(CONTIG, WRITTEN) > 0.0
    assert _floor(CONTIG, 0.0) == 0.0  # no written bytes: no element count
    # the vectorized kernels of later releases are other loops, not counted
    aligned = CONTIG.replace("CatArrayBatchedCopy_contig<", "CatArrayBatchedCopy_alignedK_contig<")
    assert _floor(aligned, WRITTEN) == 0.0
    assert _floor(CONTIG.replace(", 3, 128, 1>", ", 5, 128, 1>"), WRITTEN) == 0.0


@settings(max_examples=40, deadline=None)
@given(
    elements=st.integers(1, 50_000_000),
    more=st.integers(1, 10_000_000),
    blocks=st.integers(1, 5000),
    faster=st.floats(1.0, 4.0),
    strided=st.booleans(),
    dims=st.integers(1, 3),
)
def test_cat_floor_invariants(
    elements: int, more: int, blocks: int, faster: float, strided: bool, dims: int
) -> None:
    name = (STRIDED if strided else CONTIG).replace(", 3, ", f", {dims}, ")
    base = _floor(name, 2.0 * elements, blocks)
    assert base > 0.0
    assert _floor(name, 2.0 * (elements + more), blocks) >= base  # more elements: never faster
    assert _floor(name, 2.0 * elements, blocks, 1980.0 * faster) <= base  # faster clock
    deeper = name.replace(f", {dims}, ", f", {dims + 1}, ")
    assert _floor(deeper, 2.0 * elements, blocks) >= base  # one more dim: never fewer cycles
    assert _floor(STRIDED.replace(", 3, ", f", {dims}, "), 2.0 * elements, blocks) >= _floor(
        CONTIG.replace(", 3, ", f", {dims}, "), 2.0 * elements, blocks
    )  # a second offset per element: never faster


def test_cat_busy_share_of_the_timesformer_cat() -> None:
    # a 768-element class token beside 25,088 x 768: that slice's blocks leave at once, so over
    # the large input's run (768 / 19,267,584 + 1) / 2 of the resident threads have loads in flight
    names = pd.Series([CONTIG, CONTIG, CONTIG, "void other_kernel<float>()"])
    dims = pd.Series(["[[[1,1,768],[1,25088,768]],[]]"] * 3 + ["[[[4],[4]],[]]"])
    share = cat_busy_share(names, dims, np.array([2.0, 3.0, 2.0, 2.0]),
                           np.array([True, True, False, True]))  # fmt: skip
    assert share[0] == pytest.approx((768 / 19267584 + 1) / 2)
    # grid y not one slice per recorded input, blocks waiting for a slot, another kernel: 1
    assert share[1:].tolist() == [1.0, 1.0, 1.0]
    # through the kernel model: half the threads in flight make the round trips slower than
    # with two equal inputs (every slice busy to the end), the same bytes moved
    written = 2.0 * 25089 * 768
    lone = _cat_ops(CONTIG, written).assign(input_dims="[[[1,1,768],[1,25088,768]],[]]")
    even = _cat_ops(CONTIG, written).assign(input_dims="[[[1,12544,768],[1,12545,768]],[]]")
    lat = [kernel_terms(o, H100.gpu, frozenset(), H100.name)["lat"][0] for o in (lone, even)]
    assert lat[0] > lat[1]


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.integers(0, 10**8), min_size=2, max_size=8))
def test_cat_busy_share_is_a_share(sizes: list[int]) -> None:
    dims = json.dumps([[[n] for n in sizes], []])
    share = cat_busy_share(pd.Series([CONTIG]), pd.Series([dims]), np.array([float(len(sizes))]),
                           np.array([True]))[0]  # fmt: skip
    assert 0.0 < share <= 1.0
    if max(sizes) > 0:  # the largest slice is busy throughout: at least 1 / slices
        assert share >= 1.0 / len(sizes) - 1e-12
