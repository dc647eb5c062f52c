"""The kernel model's fast paths give the answers of the slow ones, bit for bit: the tile search's
one pass per tile (archsim.perf.tile_search) against one pass per candidate, by_unique's dict path
for small tables against pd.factorize's, and by_unique's memo for functions capturing constants
(archsim.perf.columns)."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf import columns
from archsim.perf.columns import by_unique
from archsim.perf.efficiency import generation
from archsim.perf.kernel import IDEALIZATIONS
from archsim.perf.loaded_latency import dram_load
from archsim.perf.tile_search import _one_pass_per_candidate, search_tiles

# dgx-b200: its search also tries the Blackwell cluster tile
_GPUS = {name: load_hw(name) for name in ("dgx1-v100", "dgx-a100", "mi300x", "dgx-b200")}


_row = st.tuples(
    st.floats(1e3, 1e13),  # FLOPs
    st.floats(1e2, 1e10),  # DRAM bytes
    st.floats(1.0, 1e8),  # output elements
    st.sampled_from([2.0, 4.0]),  # element bytes
    st.floats(0.2, 1.0),  # achieved math fraction
)


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(_row, min_size=1, max_size=6),
    preset=st.sampled_from(sorted(_GPUS)),
    idealize=st.sets(st.sampled_from(IDEALIZATIONS), max_size=2).map(frozenset),
    dram_fraction=st.floats(0.5, 1.0),
)
def test_stacked_tile_search_equals_one_pass_per_candidate(rows, preset, idealize, dram_fraction):
    hw = _GPUS[preset]
    flops, dram_bytes, out_elements, size, math_fraction = (
        np.array(c) for c in zip(*rows, strict=True)
    )
    rate = np.full(len(rows), hw.gpu.fp32_flops_per_clk_per_sm * hw.gpu.clock_mhz * 1e6)
    tiled = np.ones(len(rows), dtype=bool)
    args = (flops, dram_bytes, out_elements, rate, tiled, size)
    load = dram_load(hw.gpu.dram_bw_gbs, generation(hw.gpu, hw.name), idealize)
    got = search_tiles(*args, math_fraction, dram_fraction, hw.gpu, idealize, load)
    want = _one_pass_per_candidate(args, math_fraction, dram_fraction, hw.gpu, idealize, load)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)


names = st.lists(
    st.sampled_from(["sgemm_128x64", "relu", "", "cat_4", "Cijk_MT64x64x128", "x_12x34"]),
    min_size=1,
)


@given(values=names)
def test_small_table_path_equals_factorize_path(values):
    """A closure over a list is never remembered: both paths evaluate it, on the same distinct values
    in the same order, and spread the same rows back."""
    seen: list[list[str]] = []

    def digits(u: pd.Series) -> np.ndarray:
        seen.append(list(u))
        return u.str.extract(r"(\d+)")[0].astype(float).to_numpy()

    small = by_unique(pd.Series(values, dtype="string"), digits)
    repeats = columns._SMALL_TABLE_ROWS // len(values) + 1  # past the small-table limit
    large = by_unique(pd.Series(values * repeats, dtype="string"), digits)
    assert seen[0] == seen[1]
    np.testing.assert_array_equal(small, large[: len(values)])
    assert small.dtype == large.dtype


@given(
    values=st.lists(st.sampled_from(["sgemm_128x64", "relu", None]), min_size=1).filter(
        lambda v: any(x is not None for x in v)  # (all-missing rows: no value to spread)
    )
)
def test_small_table_path_equals_factorize_path_with_missing_values(values):
    """Missing values, pd.NA ("string") or NaN (pandas 3's "str"), take factorize's path either way."""
    lengths = lambda u: u.str.len().to_numpy(float)  # noqa: E731
    repeats = columns._SMALL_TABLE_ROWS // len(values) + 1
    for dtype in ("string", "str"):
        small = by_unique(pd.Series(values, dtype=dtype), lengths)
        large = by_unique(pd.Series(values * repeats, dtype=dtype), lengths)
        np.testing.assert_array_equal(small, large[: len(values)])


def _extractor(pattern: str, group: int):
    return lambda u: pd.to_numeric(u.str.extract(pattern)[group], errors="coerce").to_numpy(float)


def test_functions_capturing_constants_are_remembered_per_captured_value():
    values = pd.Series(["sgemm_128x64", "relu"], dtype="string")
    first = _extractor(r"(\d+)x(\d+)", 0)
    assert columns._memo_key(first) is not None
    assert columns._memo_key(first) == columns._memo_key(_extractor(r"(\d+)x(\d+)", 0))
    np.testing.assert_array_equal(by_unique(values, first), [128.0, np.nan])
    # another captured group or pattern is another function: its own results
    np.testing.assert_array_equal(by_unique(values, _extractor(r"(\d+)x(\d+)", 1)), [64.0, np.nan])
    np.testing.assert_array_equal(by_unique(values, _extractor(r"_(\d)", 0)), [1.0, np.nan])
    # a captured value keys with its type, and a function capturing a function keys through it
    assert columns._memo_key(_extractor("a", 1)) != columns._memo_key(_extractor("a", True))
    nested = lambda u: first(u)  # noqa: E731
    assert columns._memo_key(nested) is not None
    np.testing.assert_array_equal(by_unique(values, nested), [128.0, np.nan])


def test_functions_capturing_mutable_values_are_not_remembered():
    table = {"relu": 1.0}
    assert columns._memo_key(lambda u: u.map(table).to_numpy(float)) is None


def test_search_in_partial_groups_equals_one_pass_per_candidate():
    """Past a few hundred ops a pass holds fewer slice counts (1,500 ops: two; 5,000: one)."""
    hw = _GPUS["dgx-a100"]
    rng = np.random.default_rng(7)
    load = dram_load(hw.gpu.dram_bw_gbs, generation(hw.gpu, hw.name), frozenset())
    for n_rows in (1500, 5000):
        args = (10 ** rng.uniform(3, 13, n_rows), 10 ** rng.uniform(2, 10, n_rows),
                10 ** rng.uniform(0, 8, n_rows), np.full(n_rows, 1.2e11), np.ones(n_rows, bool),
                rng.choice([2.0, 4.0], n_rows))  # fmt: skip
        fraction = rng.uniform(0.2, 1.0, n_rows)
        got = search_tiles(*args, fraction, 0.8, hw.gpu, frozenset(), load)
        want = _one_pass_per_candidate(args, fraction, 0.8, hw.gpu, frozenset(), load)
        for key in want:
            np.testing.assert_array_equal(got[key], want[key], err_msg=key)
