"""Sector traffic of strided copies (archsim.perf.sectors): golden values by hand, invariants, and
the recorded strides carried through ingest."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.perf.sectors import (
    SAMPLED_WARPS,
    reuse_gap_bytes,
    sector_factor,
    strided_traffic,
    warp_sectors,
)

FIXTURE = (
    Path(__file__).resolve().parents[2]
    / "shared/fixtures/kineto/h100_timesformer_inference.json.gz"
)


def contiguous_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(math.prod(shape[i + 1 :]) for i in range(len(shape)))


def test_transpose_of_n_by_64_bf16_by_hand():
    # out[i, j] = src[j, i], src a contiguous [N, 64] bf16 tensor: lanes walk j at 64 x 2 = 128 B
    # apart, one 32-B sector each (32 a warp), where a contiguous warp reads 32 x 2 B = 2 sectors.
    n = 1024
    strided, contiguous = warp_sectors((64, n), (1, 64), 2)
    assert (strided, contiguous) == (SAMPLED_WARPS * 32, SAMPLED_WARPS * 2)  # of 2048 warps
    assert sector_factor((64, n), (1, 64), 2) == 16.0  # 32 B moved per 2 useful
    # a sector holds 16 consecutive i; the next i is read n output elements later, each moving at
    # most one sector meanwhile: n sectors between consecutive uses
    assert reuse_gap_bytes((64, n), (1, 64), 2) == n * 32
    # AMD: 64-lane wavefronts, 64-B lines: 32 elements per line, so 32x
    assert sector_factor((64, n), (1, 64), 2, 64, 64) == 32.0


def test_narrow_inner_dim_shares_sectors_within_a_warp():
    # [.., 64, 8] read with strides (1, 2304): a warp covers 4 x 8, 8 sectors of 4 bf16 each,
    # against 2 sectors contiguous: 4x (the H100 TimeSformer's k-transpose copies)
    assert sector_factor((3136, 12, 64, 8), (18432, 64, 1, 2304), 2) == 4.0


@settings(max_examples=60, deadline=None)
@given(
    shape=st.lists(st.integers(1, 40), min_size=1, max_size=4),
    itemsize=st.sampled_from([1, 2, 4, 8]),
    seed=st.integers(0, 1000),
    amd=st.booleans(),
)
def test_moved_at_least_useful_and_contiguous_is_useful(shape, itemsize, seed, amd):
    sector, lanes = (64, 64) if amd else (32, 32)
    shape = tuple(shape)
    assert sector_factor(shape, contiguous_strides(shape), itemsize, sector, lanes) == 1.0
    perm = np.random.default_rng(seed).permutation(len(shape))
    base = contiguous_strides(tuple(shape[p] for p in perm))
    strides = [0] * len(shape)
    for k, p in enumerate(perm):
        strides[p] = base[k]
    strided, contiguous = warp_sectors(shape, tuple(strides), itemsize, sector, lanes)
    assert sector_factor(shape, tuple(strides), itemsize, sector, lanes) >= 1.0
    assert strided * sector >= contiguous * sector > 0


def _copy_ops(strides: list | None) -> pd.DataFrame:
    frame = {
        "op_class": ["copy"],
        "launch_op": ["aten::copy_"],
        "input_dims": [json.dumps([[64, 4096], [64, 4096], []])],
        "input_types": [json.dumps(["c10::BFloat16", "c10::BFloat16", "Scalar"])],
        "dtype": ["bfloat16"],
        "bytes_read": [64 * 4096 * 2.0],
    }
    if strides is not None:
        frame["input_strides"] = [json.dumps(strides)]
    return pd.DataFrame(frame)


def test_strided_traffic_prices_a_transposed_copy_and_leaves_the_rest():
    read = 64 * 4096 * 2.0
    # destination contiguous, source the transpose of a contiguous [4096, 64]: 16x reads
    ops = _copy_ops([[4096, 1], [1, 64], []])
    dram, l2 = strided_traffic(ops, amd=False, l2_bytes=50 * 2**20)
    assert (dram[0], l2[0]) == (0.0, 15 * read)  # reuse gap 4096 x 32 B = 128 KB fits the L2
    dram, l2 = strided_traffic(ops, amd=False, l2_bytes=2**16)  # does not fit a 64-KB L2
    assert (dram[0], l2[0]) == (15 * read, 0.0)
    for ops in (_copy_ops([[4096, 1], [4096, 1], []]), _copy_ops(None), _copy_ops([])):
        dram, l2 = strided_traffic(ops, amd=False, l2_bytes=50 * 2**20)
        assert dram[0] == 0.0 and l2[0] == 0.0


@pytest.mark.skipif(not FIXTURE.exists(), reason="shared kineto fixtures not present")
def test_ingest_carries_input_strides_onto_copy_kernels():
    from archsim.trace.ingest import ingest

    ops = ingest(FIXTURE).ops
    copies = ops[(ops.kind == "kernel") & (ops.op_class == "copy")]
    recorded = copies.input_strides.astype(str)
    assert (recorded != "").all()
    assert "[[2409216,200768,3137,1],[7227648,64,1,2304],[]]" in set(recorded)
