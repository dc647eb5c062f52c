"""docs/ACCURACY.md's repeat-launch columns (benchmarks/accuracy_repeats.py): which launches count as
first (golden rows on a hand-built frame), the summary's arithmetic worked by hand, and the MI300X
normalization bench's figures against the same figures worked out here from the ops one by one."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.conftest import kineto_fixture

_spec = importlib.util.spec_from_file_location(
    "accuracy_repeats", Path(__file__).resolve().parents[1] / "benchmarks" / "accuracy_repeats.py"
)
repeats = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(repeats)


def _op(kind, name, start, grid=(1, 1, 1), dims="[[4]]", nbytes=0.0):
    return {
        "kind": kind,
        "name": name,
        "start_us": float(start),
        "grid_x": grid[0],
        "grid_y": grid[1],
        "grid_z": grid[2],
        "block_x": 256,
        "block_y": 1,
        "block_z": 1,
        "input_dims": dims,
        "bytes_read": nbytes if kind == "memcpy" else 0.0,
        "bytes_written": nbytes,
    }


def test_first_launches_golden_rows():
    ops = pd.DataFrame(
        [
            _op("kernel", "A", 10),  # 0: repeat of row 2, which starts earlier
            _op("kernel", "A", 20, grid=(2, 1, 1)),  # 1: first (another grid)
            _op("kernel", "A", 5),  # 2: first
            _op("kernel", "A", 30, dims="[[8]]"),  # 3: first (other input shapes)
            _op("memset", "Memset (Device)", 1),  # 4: first
            _op("memset", "Memset (Device)", 2, dims="[[8]]"),  # 5: first (no size: shapes)
            _op("memset", "Memset (Device)", 40),  # 6: repeat of row 4
            _op("memcpy", "Memcpy HtoD", 3, nbytes=64.0),  # 7: first
            _op("memcpy", "Memcpy HtoD", 50, dims="[[9]]", nbytes=64.0),  # 8: repeat (bytes)
            _op("memcpy", "Memcpy HtoD", 60, nbytes=128.0),  # 9: first (other size)
            _op("kernel", "B", 70),  # 10: first (other name)
            _op("memcpy", "Memcpy DtoH", 80, nbytes=64.0),  # 11: first (other direction)
        ]
    )
    first = repeats.first_launches(ops)
    assert np.flatnonzero(~first).tolist() == [0, 6, 8]


def test_repeat_summary_worked_by_hand():
    # kernel X: first 3 us (model 1), repeats 1 and 1 us (model 1 each); kernel Y once, 5 us
    # (model 4); a repeated memset 2 us (model 1).
    frame = pd.DataFrame(
        {
            "key": ["X", "X", "X", "Y", "M", "M"],
            "kernel": [True, True, True, True, False, False],
            "first": [True, False, False, True, True, False],
            "measured_s": [3.0, 1.0, 1.0, 5.0, 2.0, 2.0],
            "model_s": [1.0, 1.0, 1.0, 4.0, 1.0, 1.0],
        }
    )
    r = repeats.repeat_summary(frame)
    assert r["kept"] == pytest.approx(4.0 / 14.0)  # X's repeats and the memset's repeat
    assert r["error"] == pytest.approx(3.0 / 4.0 - 1)
    assert r["median_abs"] == pytest.approx(0.0)  # X's repeats exact
    assert r["first_median_abs"] == pytest.approx(np.median([2 / 3, 0.2]))
    assert (r["n_first"], r["n_repeat"], r["n_cold"]) == (2, 2, 1)
    assert r["cold_median"] == pytest.approx(3.0)  # X's first over its repeats' median
    assert r["cold_share"] == pytest.approx(2.0 / 14.0)
    assert repeats.judged(r)
    assert not repeats.meets(r, 0.20, 0.30) and repeats.meets(r, 0.25, 0.30)
    assert repeats.repeat_cells(r) == "29% | -25.0% | 0% |"
    # only the memset repeats (2 of 14 s kept, no kernel twice); one of X's repeats (1 of 14 s)
    once = repeats.repeat_summary(frame.assign(first=[True, True, True, True, True, False]))
    assert repeats.repeat_cells(once) == "14% | " + " | ".join([repeats.NOT_REPEATED] * 2) + " |"
    little = repeats.repeat_summary(frame.assign(first=[True, False, True, True, True, True]))
    assert repeats.repeat_cells(little) == "7% | " + " | ".join([repeats.TOO_LITTLE] * 2) + " |"
    assert not repeats.judged(once) and not repeats.judged(little)


def test_mi300x_bench_repeats_match_an_independent_count():
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.kernel import body_seconds
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest

    trace = ingest(kineto_fixture("mi300x_normalization_bench.json.gz"))
    ops = measured_ops(trace.ops)
    model = body_seconds(ops, source_hw_for_trace(trace))
    # Worked here row by row: walk the ops in start order, keep those already seen.
    seen: set = set()
    kept_measured = kept_model = all_measured = 0.0
    errors: list[float] = []
    for i in np.argsort(ops["start_us"].to_numpy(dtype=float), kind="stable"):
        row = ops.iloc[i]
        if row["kind"] == "kernel":
            key = (row["name"], row["grid_x"], row["grid_y"], row["grid_z"], row["block_x"],
                   row["block_y"], row["block_z"], row["input_dims"])  # fmt: skip
        else:  # this trace's memsets record no size: the launching op's shapes tell them apart
            assert row["bytes_written"] == 0
            key = (row["kind"], row["name"], row["input_dims"])
        dur_s = float(row["dur_us"]) * 1e-6
        all_measured += dur_s
        if key in seen:
            kept_measured += dur_s
            kept_model += model[i]
            if row["kind"] == "kernel":
                errors.append(abs(model[i] / dur_s - 1))
        seen.add(key)
    frame = pd.DataFrame(
        {
            "key": repeats.launch_keys(ops).to_numpy(),
            "first": repeats.first_launches(ops),
            "kernel": (ops["kind"].astype(str) == "kernel").to_numpy(),
            "measured_s": ops["dur_us"].to_numpy(dtype=float) * 1e-6,
            "model_s": model,
        }
    )
    r = repeats.repeat_summary(frame)
    assert r["kept"] == pytest.approx(kept_measured / all_measured, rel=1e-12)
    assert r["error"] == pytest.approx(kept_model / kept_measured - 1, rel=1e-12)
    assert r["median_abs"] == pytest.approx(float(np.median(errors)), rel=1e-12)
    assert r["n_repeat"] == len(errors) == 118
    # Measurements only, whatever the model: 62.6% of the time is in repeats (the 50 distinct
    # kernels' first launches and 3 first memsets hold the rest) and a first launch takes a median
    # 1.18x its own repeats' median.
    assert r["kept"] == pytest.approx(0.62605, abs=5e-5)
    assert r["cold_median"] == pytest.approx(1.176, abs=5e-4)
