"""docs/PUBLISHED.md (benchmarks/published_results.py): its archsim column is archsim's output, not
typed in. Rows are recomputed here by hand from the same Python API calls, and the table and the
error are checked on small hand-made inputs."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from archsim.analysis.predict import predict_inference
from archsim.hw import load_hw
from archsim.sim.config import SimConfig
from archsim.sim.run import simulate
from archsim.trace.format import load

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


published = _load("published_results")


def _figure(key: str):
    """(Published, run) of the row named ``key``; building the list runs nothing."""
    return next((p, run) for p, run in published.published_figures() if p.key == key)


def test_relative_error_against_points_and_ranges():
    assert published.relative_error(27_776, 67_000, 67_000) == pytest.approx(27_776 / 67_000 - 1)
    assert published.relative_error(20.0, 11.7, 28.1) == 0.0  # inside a published range
    assert published.relative_error(3.6, 32.7, 58.9) == pytest.approx(3.6 / 32.7 - 1)  # below
    assert published.relative_error(60.0, 32.7, 58.9) == pytest.approx(60.0 / 58.9 - 1)  # above
    with pytest.raises(ValueError):
        published.relative_error(1.0, 2.0, 1.0)


def test_seed_row_is_the_simulators_frames_per_s():
    """SEED RL's row recomputed from one simulate call with its knobs written out here."""
    p, run = _figure("seed_r2d2")
    (row,) = published.measure([(p, run)])
    trace = load(ROOT / "traces" / "r2d2-seed-2x2-cpu")
    config = SimConfig(actors=256, envs_per_actor=1, inference="central", learner_batch=64)
    frames = simulate(trace, load_hw("dgx1-v100"), config).metrics["frames_per_s"]
    assert row.archsim == frames
    assert row.error == pytest.approx(frames / 67_000 - 1)
    line = published.table_lines([row])[-1]
    assert f"| {frames:,.0f} |" in line and f"{100 * (frames / 67_000 - 1):+.1f}%" in line


def test_r2d2_learner_row_is_updates_times_sequence_steps():
    """R2D2's learner row: updates/s of the unpaced simulator x 64 sequences x (20 + 10) steps, the
    trace's sequence length and burn-in (its meta), against 5 x 64 x (80 + 40)."""
    p, run = _figure("r2d2_learner")
    assert p.low == p.high == 5 * 64 * 120
    trace = load(ROOT / "traces" / "r2d2-seed-2x2-cpu")
    r2d2 = trace.meta["workload"]["settings"]["r2d2"]
    assert (r2d2["sequence_length"], r2d2["burn_in"]) == (20, 10)
    config = SimConfig(actors=256, inference="central", learner_batch=64, replay_ratio=None)
    updates = simulate(trace, load_hw("dgx1-v100"), config).metrics["learner_updates_per_s"]
    assert run() == pytest.approx(updates * 64 * 30)


def test_tx1_row_is_batch_over_predicted_gpu_seconds():
    p, run = _figure("tx1_alexnet_fp32_b1")
    result = predict_inference(
        load(ROOT / "traces" / "alexnet-b1-fp32"), load_hw("jetson-tx1"), source=None
    )
    assert run() == pytest.approx(1 / result["gpu_seconds"])
    assert p.low == 47.0  # the whitepaper's figure, the only typed-in number of the row


def _row(key: str, archsim: float, low: float, high: float, cause: str = "far") -> object:
    p = published.Published(key, "src", key, low, high, "u", "setup", "differs", "new", cause)
    return published.Row(p, archsim)


def test_table_shows_the_cause_only_when_far_off_and_summary_leaves_peaks_out():
    rows = [
        _row("near", 110.0, 100.0, 100.0),  # +10%: no cause
        _row("far", 300.0, 100.0, 100.0),  # +200%: its cause
        _row("range", 20.0, 11.7, 28.1),  # inside
        _row("peak_box", 1000.0, 1.0, 1.0),  # a data-sheet peak: not a workload row
    ]
    lines = published.table_lines(rows)
    assert lines[2].endswith("| +10.0% | setup | differs |  | new |")
    assert lines[3].endswith("| +200.0% | as #1 | as #1 | far | new |")  # same texts as row 1
    assert "| 11.7-28.1 | 20.0 | u | inside |" in lines[4]
    s = published.summary(rows)
    assert (s["rows"], s["within_20"], s["within_2x"]) == (3, 2, 2)
    assert s["best"].published.key == "range" and s["worst"].published.key == "far"
    page = published.page(rows)
    assert "farthest: #2 far (+200.0%)" in page
    assert published.BEGIN in page and published.END in page


def test_every_row_says_its_source_setup_and_differences():
    figures = published.published_figures()
    keys = [p.key for p, _ in figures]
    assert len(keys) == len(set(keys))
    for p, run in figures:
        assert p.source and p.setup and p.differs and p.before and callable(run)
        assert 0 <= p.low <= p.high or p.unit == "% cut"


def test_committed_page_holds_every_row_and_the_tx1_row_as_computed():
    """docs/PUBLISHED.md as committed: one table line per figure, in order, and a row that is cheap
    to recompute (TX1 AlexNet, batch 1) shows today's archsim figure."""
    text = (ROOT / "docs" / "PUBLISHED.md").read_text()
    table = text.split(published.BEGIN)[1].split(published.END)[0]
    rows = [line for line in table.splitlines() if line.startswith("| ") and line[2].isdigit()]
    figures = published.published_figures()
    assert [line.split(" | ")[1] for line in rows] == [p.figure for p, _ in figures]
    index = [p.key for p, _ in figures].index("tx1_alexnet_fp32_b1")
    _, run = figures[index]
    assert rows[index].split(" | ")[4] == published.fmt(run())
