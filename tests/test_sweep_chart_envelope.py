"""A sweep with many combinations of its other knobs is drawn as their median and range, not a line
each (archsim.report.sweep_charts.generic_chart)."""

from __future__ import annotations

import itertools

import pandas as pd

from archsim.report.sweep_charts import MAX_SWEEP_LINES, generic_chart, sweep_envelope


def _table() -> pd.DataFrame:
    rows = [
        {"actors": x, "sms": a, "seed": b, "frames_per_s": 100.0 * x + 10 * a + b}
        for x, a, b in itertools.product([1, 2, 3], range(4), range(4))
    ]
    return pd.DataFrame(rows)


def test_envelope_by_hand():
    band = sweep_envelope(_table(), "actors").set_index("actors")
    # at 1 actor the 16 values are 100..103, 110..113, 120..123, 130..133: median (113 + 120) / 2
    assert band.loc[1].tolist() == [100.0, 116.5, 133.0]
    assert band.loc[3].tolist() == [300.0, 316.5, 333.0]


def test_many_combinations_render_as_a_band(tmp_path):
    table = _table()
    assert table.groupby(["sms", "seed"]).ngroups > MAX_SWEEP_LINES
    png, _svg = generic_chart(table, ["actors", "sms", "seed"], tmp_path, "actors x sms x seed")
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    few = table[table["seed"] == 0]  # 4 combinations: a line each
    png_few, _svg = generic_chart(few, ["actors", "sms"], tmp_path / "few", "actors x sms")
    assert png_few.stat().st_size > 0
