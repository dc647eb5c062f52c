"""What is computed once and reused must equal computing it again: by_unique's per-value results of
closure-free functions (archsim.perf.columns), preset YAML parsed once (archsim.hw.presets), and
ingest of an unchanged file (archsim.trace.ingest_cache)."""

from __future__ import annotations

import gzip
import json
import re

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf import columns
from archsim.perf.columns import by_unique
from archsim.trace.ingest import _ingest, ingest

_SEEN: list[str] = []  # values each remembered function below was evaluated on
_DIGITS = re.compile(r"(\d+)")


def _tile_digits(u: pd.Series) -> np.ndarray:
    _SEEN.extend(u)
    return u.str.extract(r"(\d+)")[0].astype(float).to_numpy()


def _per_row(values: list[str]) -> np.ndarray:
    """The same function, one value at a time in plain Python: what by_unique must give."""
    found = [_DIGITS.search(v) for v in values]
    return np.array([float(m.group(1)) if m else np.nan for m in found])


names = st.lists(st.sampled_from(["gemm_128x64", "relu", "cat_4", "", "sm90_7", "x"]), max_size=12)


@given(first=names, second=names)
def test_remembered_results_equal_fresh_ones(first, second):
    for values in (first, second):  # the second call mixes values seen and unseen
        got = by_unique(pd.Series(values, dtype="string"), _tile_digits)
        np.testing.assert_array_equal(got, _per_row(values))
        assert got.dtype == np.float64 and got.shape == (len(values),)


def test_a_value_seen_before_is_not_evaluated_again():
    values = pd.Series(["k_11", "k_12", "k_11"], dtype="string")
    by_unique(values, _tile_digits)
    _SEEN.clear()
    again = by_unique(pd.Series(["k_12", "k_13"], dtype="string"), _tile_digits)
    assert _SEEN == ["k_13"]  # only the new name
    np.testing.assert_array_equal(again, [12.0, 13.0])


def test_closures_and_non_numeric_results_are_evaluated_every_time():
    calls = []

    def closure(u: pd.Series) -> np.ndarray:  # captures `calls`: never remembered
        calls.append(len(u))
        return u.str.len().to_numpy()

    values = pd.Series(["ab", "c", "ab"], dtype="string")
    for _ in range(2):
        np.testing.assert_array_equal(by_unique(values, closure), [2, 1, 2])
    assert calls == [2, 2]
    upper = by_unique(values, lambda u: u.str.upper().to_numpy())  # strings: not remembered
    assert list(upper) == ["AB", "C", "AB"]
    assert list(by_unique(values, lambda u: u.str.upper().to_numpy())) == ["AB", "C", "AB"]


def test_two_column_results_are_remembered_row_by_row():
    def pair(u: pd.Series) -> np.ndarray:
        return np.stack([u.str.len().to_numpy(float), u.str.count("a").to_numpy(float)], axis=1)

    by_unique(pd.Series(["aa", "b"], dtype="string"), pair)
    got = by_unique(pd.Series(["b", "aaa", "aa"], dtype="string"), pair)
    np.testing.assert_array_equal(got, [[1, 0], [3, 3], [2, 2]])


def test_memo_is_bounded(monkeypatch):
    monkeypatch.setattr(columns, "_MEMO_LIMIT", 3)
    by_unique(pd.Series([f"a{i}" for i in range(3)], dtype="string"), _tile_digits)
    got = by_unique(pd.Series(["b7", "b8"], dtype="string"), _tile_digits)
    np.testing.assert_array_equal(got, [7.0, 8.0])
    # cleared once past the limit, then holding at most the limit plus one call's new values
    assert sum(len(e[1]) for e in columns._MEMO.values() if e is not columns._UNCACHED) <= 3 + 2


PATTERN = "relu"


def _named(u: pd.Series) -> np.ndarray:
    return u.str.contains(PATTERN, regex=False).to_numpy(bool)


def test_a_replaced_module_constant_is_not_served_stale(monkeypatch):
    import sys

    values = pd.Series(["relu_kernel", "gemm_kernel"], dtype="string")
    assert by_unique(values, _named).tolist() == [True, False]
    monkeypatch.setattr(sys.modules[__name__], "PATTERN", "gemm")
    assert by_unique(values, _named).tolist() == [False, True]


def test_overrides_do_not_leak_into_later_loads():
    plain = load_hw("dgx-a100")
    changed = load_hw("dgx-a100", ["gpu.sms=40", "gpu.dram_bw_gbs=1000"])
    assert (changed.gpu.sms, changed.gpu.dram_bw_gbs) == (40, 1000)
    assert load_hw("dgx-a100") == plain and plain.gpu.sms != 40


def test_an_edited_yaml_file_is_read_again(tmp_path):
    preset = tmp_path / "mine.yaml"
    source = load_hw("dgx-a100").model_dump(mode="json")
    preset.write_text(json.dumps(source))  # JSON is YAML
    assert load_hw(str(preset)).gpu.sms == source["gpu"]["sms"]
    source["gpu"]["sms"] = 12
    preset.write_text(json.dumps(source))
    assert load_hw(str(preset)).gpu.sms == 12


def _tiny_kineto(kernel_us: float) -> dict:
    return {
        "traceEvents": [
            {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 1, "tid": 1, "ts": 0,
             "dur": 10, "args": {"External id": 1}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1, "tid": 1,
             "ts": 2, "dur": 3, "args": {"correlation": 7, "External id": 1}},
            {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 7, "ts": 20,
             "dur": kernel_us, "args": {"correlation": 7, "device": 0, "stream": 7,
                                        "grid": [4, 1, 1], "block": [128, 1, 1]}},
        ]
    }  # fmt: skip


def test_ingest_again_is_an_independent_equal_copy(tmp_path):
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(_tiny_kineto(5.0)).encode()))
    first = ingest(path)
    first.ops["added"] = 1  # a caller editing its trace in place
    first.meta["workload"] = "edited"
    again = ingest(path)
    assert "added" not in again.ops.columns and again.meta.get("workload") != "edited"
    assert again == _ingest(path, None, None) and again.raw_path == path
    assert list(again.ops.dtypes) == list(_ingest(path, None, None).ops.dtypes)


def test_ingest_of_a_rewritten_file_reads_the_new_bytes(tmp_path):
    # Same path, same size, rewritten at once (within one tick of the file clock): a key on the
    # modification time would serve the old trace.
    path = tmp_path / "t.json.gz"
    durations = []
    for kernel_us in (5.0, 6.0):
        path.write_bytes(gzip.compress(json.dumps(_tiny_kineto(kernel_us)).encode()))
        durations.append(float(ingest(path).ops["dur_us"].iloc[0]))
    assert durations == [5.0, 6.0]


def test_ingest_cache_holds_at_most_its_table_bytes(tmp_path, monkeypatch):
    # Three small traces under a cap that fits two of them: the least recently used is dropped, and
    # a trace whose tables alone exceed the cap is never kept (ingested anew, still equal).
    from archsim.trace import ingest_cache

    paths = []
    for i, kernel_us in enumerate((5.0, 6.0, 7.0)):
        path = tmp_path / f"t{i}.json.gz"
        path.write_bytes(gzip.compress(json.dumps(_tiny_kineto(kernel_us)).encode()))
        paths.append(path)
    one = ingest_cache.table_bytes(_ingest(paths[0], None, None))
    monkeypatch.setattr(ingest_cache, "_CACHE", type(ingest_cache._CACHE)())
    monkeypatch.setattr(ingest_cache, "MAX_CACHED_TABLE_BYTES", 2 * one + one // 2)
    for path in paths:
        ingest(path)
    assert len(ingest_cache._CACHE) == 2
    assert ingest_cache.cached_table_bytes() <= ingest_cache.MAX_CACHED_TABLE_BYTES
    assert ingest_cache.cached(ingest_cache.cache_key(paths[0])) is None  # oldest dropped
    assert ingest_cache.cached(ingest_cache.cache_key(paths[2])) is not None
    monkeypatch.setattr(ingest_cache, "MAX_CACHED_TABLE_BYTES", one // 2)
    big = tmp_path / "big.json.gz"
    big.write_bytes(gzip.compress(json.dumps(_tiny_kineto(8.0)).encode()))
    assert ingest(big) == _ingest(big, None, None)
    assert ingest_cache.cached(ingest_cache.cache_key(big)) is None
