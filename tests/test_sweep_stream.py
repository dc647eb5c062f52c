"""sweep.parquet streamed as points finish (issue 17 item 3): an interrupted sweep leaves its finished
points readable in sweep.partial.parquet and no sweep.parquet; the resumed sweep runs only the points
left and renames a complete sweep.parquet into place; an older sweep.csv without
seconds_per_1000_steps resumes with the column derived."""

from __future__ import annotations

import csv

import pandas as pd
import pytest

from archsim.analysis.sweep import SweepSpec, run_sweep
from archsim.analysis.sweep_results import ADDED_COLUMN
from archsim.analysis.sweep_store import PARQUET_NAME, PARTIAL_PARQUET_NAME
from archsim.trace import save
from tests.test_sim_support import tiny_trace


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return save(tiny_trace(), tmp_path_factory.mktemp("trace") / "tiny")


def _spec(trace_dir) -> SweepSpec:
    knobs = {"actors": [4, 6, 8, 10, 12], "seed": [0, 1], "inference_batch": [4]}
    return SweepSpec(trace=trace_dir, hw="dgx1-v100", knobs={**knobs, "sim_seconds": [0.02]})


def _stop_after(count: int, seen: list):
    def on_row(row):
        seen.append(row)
        if len(seen) == count:
            raise KeyboardInterrupt

    return on_row


def test_interrupted_stream_is_readable_and_resume_runs_only_the_rest(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    spec = _spec(trace_dir)
    seen: list = []
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, progress=False, on_row=_stop_after(3, seen))
    assert not (out / PARQUET_NAME).exists()  # complete only when every point is in
    partial = pd.read_parquet(out / PARTIAL_PARQUET_NAME)
    logged = pd.read_csv(out / "sweep.csv")
    assert len(partial) == len(logged) >= 3  # every point finished before the stop, readable
    assert list(partial.columns) == list(logged.columns)
    merged = partial.merge(logged, on=["actors", "seed"], suffixes=("", "_csv"))
    assert list(merged["frames_per_s"]) == list(merged["frames_per_s_csv"])
    assert partial["actors"].dtype.kind == "i"  # typed columns, not the CSV's text
    assert all(isinstance(engine, str) for engine in partial["path"])

    ran: list = []
    table = run_sweep(spec, out, progress=False, on_row=ran.append)
    done_before = {(int(a), int(s)) for a, s in zip(logged["actors"], logged["seed"], strict=True)}
    ran_now = {(int(r["actors"]), int(r["seed"])) for r in ran}
    assert ran_now.isdisjoint(done_before)  # no finished point simulated again
    assert len(ran) + len(logged) == len(spec.points()) == 10
    final = pd.read_parquet(out / PARQUET_NAME)
    assert not (out / PARTIAL_PARQUET_NAME).exists()
    assert sorted(zip(final["actors"], final["seed"], strict=True)) == sorted(
        zip(table["actors"], table["seed"], strict=True)
    )
    assert len(final) == 10
    # seconds_per_1000_steps is its row's 1000 / env_steps_per_s, the simulator's definition
    assert list(final[ADDED_COLUMN]) == pytest.approx(list(1000.0 / final["env_steps_per_s"]))
    assert not list(out.glob(".sweep.parquet.tmp-*"))


def test_a_stream_killed_without_a_footer_is_replaced_on_resume(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    spec = _spec(trace_dir)
    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, progress=False, on_row=_stop_after(2, []))
    # What SIGKILL leaves: the stream's temporary without its footer, and no partial file.
    (out / PARTIAL_PARQUET_NAME).rename(out / ".sweep.parquet.tmp-killed1")
    with open(out / ".sweep.parquet.tmp-killed1", "r+b") as handle:
        handle.truncate(100)
    table = run_sweep(spec, out, progress=False)
    assert len(table) == 10 and len(pd.read_parquet(out / PARQUET_NAME)) == 10
    assert sorted(p.name for p in out.iterdir()) == ["sweep.csv", "sweep.json", "sweep.parquet"]


def test_an_older_csv_without_seconds_per_1000_steps_resumes(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    spec = _spec(trace_dir)
    run_sweep(spec, out, progress=False)
    with open(out / "sweep.csv", newline="") as handle:
        rows = list(csv.DictReader(handle))
    old_columns = [c for c in rows[0] if c != ADDED_COLUMN]
    with open(out / "sweep.csv", "w", newline="") as handle:  # as an earlier archsim wrote it
        writer = csv.DictWriter(handle, fieldnames=old_columns, extrasaction="ignore")
        writer.writeheader()
        writer.writerows(rows[:6])  # six points finished, four left
    (out / PARQUET_NAME).unlink()
    ran: list = []
    table = run_sweep(spec, out, progress=False, on_row=ran.append)
    assert len(ran) == 4 and len(table) == 10
    assert list(table[ADDED_COLUMN]) == pytest.approx(list(1000.0 / table["env_steps_per_s"]))
    old = {(r["actors"], r["seed"]): float(r[ADDED_COLUMN]) for r in rows[:6]}
    for _, row in table.iterrows():  # the derived values are the ones the simulator gave
        key = (str(row["actors"]), str(row["seed"]))
        if key in old:
            assert row[ADDED_COLUMN] == pytest.approx(old[key], rel=1e-12)


def test_a_large_sweep_prints_its_best_points_not_every_row(trace_dir, tmp_path, capsys):
    from archsim.cli import main
    from archsim.commands.sweep import SUMMARY_ROWS

    out = tmp_path / "sweep"
    argv = ["sweep", str(trace_dir), "--actors", "4,5,6,7,8,9", "--seed", "0,1,2,3,4,5,6"]
    argv += ["--inference-batch", "4", "--sim-seconds", "0.005", "--no-progress", "--out", str(out)]
    assert main(argv) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[0] == f"42 points; the {SUMMARY_ROWS} with the most frames/s:"
    rows = printed[2 : 2 + SUMMARY_ROWS]  # after the column header
    frames = [float(line.split()[2].replace(",", "")) for line in rows]
    assert frames == sorted(frames, reverse=True)  # best first
    assert printed[2 + SUMMARY_ROWS].startswith("wrote ")
    assert len(pd.read_parquet(out / PARQUET_NAME)) == 42
