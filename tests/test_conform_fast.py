"""conform's shortcut for columns that already have their schema dtype gives exactly what converting
every column gives (values, dtypes, index, column order), for whole, filtered and odd tables."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archsim.trace import load
from archsim.trace.schema import OPS_COLUMNS, STEPS_COLUMNS, conform

TRACES = Path(__file__).resolve().parents[1] / "traces"


def _convert_every_column(df: pd.DataFrame, columns: dict) -> pd.DataFrame:
    """conform without the shortcut: fill, convert and renumber every column."""
    out = {}
    for name, (dtype, fill) in columns.items():
        if name in df.columns:
            series = df[name]
            if dtype in ("int64", "bool"):
                series = series.fillna(fill)
            out[name] = series.astype(dtype).reset_index(drop=True)
        else:
            out[name] = pd.Series([fill] * len(df), dtype=dtype)
    return pd.DataFrame(out)


def _variants(table: pd.DataFrame):
    yield table  # as loaded: already conforming
    yield table[table.index % 3 == 1]  # filtered: index not 0..n-1
    yield table.iloc[::-1]  # reversed
    named = table.copy()
    named.index.name = "row"
    yield named  # a named 0..n-1 index
    mixed = table.copy()
    mixed[mixed.columns[1]] = mixed[mixed.columns[1]].astype(object)  # a column to convert
    yield mixed.drop(columns=mixed.columns[-1])  # and a column missing
    yield table.head(0)


@pytest.mark.parametrize("name", sorted(p.name for p in TRACES.iterdir() if p.is_dir()))
def test_shortcut_equals_converting_every_column(name):
    trace = load(TRACES / name)
    for table, columns in ((trace.ops, OPS_COLUMNS), (trace.steps, STEPS_COLUMNS)):
        for variant in _variants(table):
            before = variant.copy()
            got = conform(variant, columns)
            pd.testing.assert_frame_equal(got, _convert_every_column(variant, columns))
            assert got.index.equals(pd.RangeIndex(len(variant))) and got.index.name is None
            pd.testing.assert_frame_equal(variant, before)  # the input is left as it was
    assert np.all(conform(trace.ops, OPS_COLUMNS).columns == list(OPS_COLUMNS))
