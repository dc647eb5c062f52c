"""``archsim sweep`` on bad input and interruptions: nothing is written before the settings, hardware
and trace check out; a point that fails keeps the finished ones and says so, and leaves nothing when
none had finished; a sweep killed with SIGKILL takes its pool workers with it, and its rerun neither
loses nor redoes a finished point."""

from __future__ import annotations

import csv
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pandas as pd
import pytest

from archsim.analysis.sweep import SweepSpec, run_sweep
from archsim.cli import main
from archsim.sim.limits import usable_cpus
from archsim.trace import Trace, save
from tests.conftest import PROJECT_ROOT, error_line
from tests.test_sim_support import tiny_trace

BASE = ["--inference-batch", "4", "--sim-seconds", "0.02", "--no-progress"]


def _rows(out: Path) -> list[dict[str, str]]:
    with open(out / "sweep.csv", newline="") as handle:
        return list(csv.DictReader(handle))


@pytest.mark.parametrize(
    "flags, needles",
    [
        (["--sim-seconds", "inf"], ["sim_seconds=inf", "finite duration"]),
        (["--hw", "dgx-9000"], ["unknown hardware preset"]),
        (["--set", "gpu.smz=1"], ["--set gpu.smz"]),
        (["--hw", "local", "--sms", "4,8"], ["sweep point", "sms=4", "no gpu section"]),
    ],
)
def test_settings_and_hardware_are_checked_before_anything_is_written(
    trace_dir, tmp_path, capsys, flags, needles
):
    out = tmp_path / "sweep"
    assert main(["sweep", str(trace_dir), "--actors", "4,8", *BASE, *flags, "--out", str(out)]) == 2
    line = error_line(capsys)
    for needle in needles:
        assert needle in line
    assert list(tmp_path.iterdir()) == []


def test_a_trace_that_does_not_load_writes_nothing(tmp_path, capsys):
    broken = tmp_path / "cut.json.gz"
    broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    out = tmp_path / "sweep"
    assert main(["sweep", str(broken), "--actors", "4,8", *BASE, "--out", str(out)]) == 2
    assert str(broken) in error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cut.json.gz"]


def test_a_trace_without_actor_steps_leaves_no_sweep_behind(tmp_path, capsys):
    trace = tiny_trace()
    no_actors = Trace(
        meta=trace.meta, ops=trace.ops, steps=trace.steps[trace.steps.role != "actor"]
    )
    path = save(no_actors, tmp_path / "learner-only")
    out = tmp_path / "sweep"
    assert main(["sweep", str(path), "--actors", "4,8", *BASE, "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "sweep point actors=4" in line and str(path) in line and "no actor steps" in line
    assert sorted(p.name for p in tmp_path.iterdir()) == ["learner-only"]
    # the same failure into a directory the user made: the directory stays, empty
    out.mkdir()
    assert main(["sweep", str(path), "--actors", "4,8", *BASE, "--out", str(out)]) == 2
    capsys.readouterr()
    assert out.is_dir() and list(out.iterdir()) == []


def test_a_failing_point_keeps_the_finished_ones_and_says_so(trace_dir, tmp_path, capsys):
    # The tiny trace's hardware has 80 threads: the second point cannot run.
    out = tmp_path / "sweep"
    argv = ["sweep", str(trace_dir), "--actors", "4", "--cpu-threads", "40,1000", *BASE]
    assert main([*argv, "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "sweep point cpu_threads=1000, actors=4" in line and "--cpu-threads: 1000" in line
    assert f"1 finished points are kept in {out / 'sweep.csv'}" in line
    assert [r["cpu_threads"] for r in _rows(out)] == ["40"]


def test_a_sweep_killed_before_its_first_point_restarts_with_new_settings(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    knobs = {"actors": [4, 8], "sim_seconds": [0.02], "inference_batch": [4]}
    run_sweep(SweepSpec(trace_dir, "dgx1-v100", knobs={**knobs, "seed": [1]}), out, progress=False)
    # What SIGKILL before the first row leaves: sweep.json and the header line of sweep.csv.
    header = (out / "sweep.csv").read_text().splitlines(keepends=True)[0]
    (out / "sweep.csv").write_text(header)
    # No "different settings" error: nothing finished, so nothing can be lost by starting over.
    spec = SweepSpec(trace_dir, "dgx1-v100", knobs={**knobs, "seed": [2]})
    table = run_sweep(spec, out, progress=False)
    assert sorted(table["actors"]) == [4, 8] and set(table["seed"]) == {2}


def test_a_header_that_does_not_match_names_the_column(trace_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", str(trace_dir), "--actors", "4,8", *BASE, "--out", str(out)]
    assert main(argv) == 0
    text = (out / "sweep.csv").read_text()
    (out / "sweep.csv").write_text(text.replace("frames_per_s", "fps", 1))
    capsys.readouterr()
    assert main(argv) == 2
    line = error_line(capsys)
    assert "header column" in line and "'fps'" in line and "'frames_per_s'" in line


def test_resuming_on_another_trace_says_so(trace_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    assert main(["sweep", str(trace_dir), "--actors", "4,8", *BASE, "--out", str(out)]) == 0
    other = save(tiny_trace(), tmp_path / "other")
    other_steps = other / "steps.parquet"
    steps = pd.read_parquet(other_steps)
    steps.loc[0, "dur_us"] = steps.loc[0, "dur_us"] + 1.0
    steps.to_parquet(other_steps)
    capsys.readouterr()
    assert main(["sweep", str(other), "--actors", "4,8", *BASE, "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "another trace" in line and str(other) in line and str(trace_dir) in line


def test_unreachable_scheduler_is_one_line(trace_dir, tmp_path, capsys):
    import dask
    import distributed  # noqa: F401  (its config defaults must exist before they are overridden)

    out = tmp_path / "sweep"
    argv = ["sweep", str(trace_dir), "--actors", "4,8", *BASE, "--backend", "dask"]
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert main([*argv, "--scheduler", "tcp://127.0.0.1:1", "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "--scheduler tcp://127.0.0.1:1: cannot connect" in line
    assert list(tmp_path.iterdir()) == []


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "zombie" not in status


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs /proc to find the pool workers")
def test_sigkilled_sweep_takes_its_workers_along_and_resumes_without_loss(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    argv = [sys.executable, "-m", "archsim", "sweep", str(trace_dir)]
    argv += ["--actors", "4,5,6,7,8,9,10,11", "--inference-batch", "4", "--sim-seconds", "0.3"]
    argv += ["--jobs", "2", "--no-progress", "--out", str(out)]
    with open(tmp_path / "stderr", "w") as err:
        process = subprocess.Popen(argv, cwd=PROJECT_ROOT, stdout=subprocess.DEVNULL, stderr=err)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if (out / "sweep.csv").exists() and len(_rows(out)) >= 2:
            break
        time.sleep(0.05)
    workers = [pid for pid in _children(process.pid) if _alive(pid)]
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    finished = {r["actors"]: r["frames_per_s"] for r in _rows(out)}
    assert len(finished) >= 2 and workers
    # workers look for their parent every 0.5 s (sweep_exec.PARENT_POLL_S); a generous deadline
    # that only catches workers that never go (a loaded machine can hold a poll back seconds)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and any(_alive(pid) for pid in workers):
        time.sleep(0.1)
    assert not any(_alive(pid) for pid in workers), "pool workers outlived the killed sweep"
    # Rerun: every point once, the finished ones untouched.
    done = subprocess.run(argv, cwd=PROJECT_ROOT, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    rows = _rows(out)
    assert sorted(int(r["actors"]) for r in rows) == list(range(4, 12))
    for actors, frames in finished.items():
        assert [r["frames_per_s"] for r in rows if r["actors"] == actors] == [frames]
    # the killed run's Parquet stream (no footer) is replaced by a complete one with every point
    assert sorted(pd.read_parquet(out / "sweep.parquet")["actors"]) == list(range(4, 12))
    assert not list(out.glob(".sweep.parquet.tmp-*"))


def _refused(capsys, argv: list[str], *needles: str) -> str:
    assert main(argv) == 2
    line = error_line(capsys)
    for needle in needles:
        assert needle in line
    return line


def test_output_paths_that_cannot_be_written_are_refused_before_any_point(
    trace_dir, tmp_path, capsys
):
    argv = ["sweep", str(trace_dir), "--actors", "4,8", *BASE, "--out"]
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    _refused(capsys, [*argv, str(blocker)], "exists and is not a directory")
    _refused(capsys, [*argv, str(blocker / "sweep")], f"{blocker} is a file, not a directory")
    _refused(capsys, [*argv, str(tmp_path / ("n" * 300))], "output name too long (300 bytes")
    deep = tmp_path.joinpath(*["d" * 200] * 21)  # 4,200 bytes: over Linux's PATH_MAX
    _refused(capsys, [*argv, str(deep)], "output path too long")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]  # nothing was created


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory anyway")
def test_an_unwritable_output_directory_is_refused_before_any_point(trace_dir, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o555)
    try:
        argv = ["sweep", str(trace_dir), "--actors", "4,8", *BASE, "--out"]
        _refused(capsys, [*argv, str(locked / "s")], f"cannot write in {locked}")
        _refused(capsys, [*argv, str(locked)], f"cannot write in {locked}")  # written in place
    finally:
        locked.chmod(0o755)


def test_results_that_are_not_utf8_are_named_not_a_traceback(trace_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", str(trace_dir), "--actors", "4,8", *BASE, "--out", str(out)]
    assert main(argv) == 0
    capsys.readouterr()
    rows = (out / "sweep.csv").read_bytes()
    (out / "sweep.csv").write_bytes(rows + b"\xff\xfe garbage\n")
    _refused(capsys, argv, f"{out / 'sweep.csv'}: not UTF-8 text", "0xff", "--force")
    (out / "sweep.csv").write_bytes(rows)
    (out / "sweep.json").write_bytes(b"\x80{}")
    _refused(capsys, argv, f"{out / 'sweep.json'}: not UTF-8 text", "0x80")
    assert main([*argv, "--force"]) == 0  # --force starts over without reading them
    assert len(_rows(out)) == 2


@pytest.mark.skipif(usable_cpus() < 2, reason="needs 2 usable CPUs for --jobs 2")
def test_never_more_workers_than_points_left(trace_dir, tmp_path):
    import multiprocessing

    knobs = {"actors": [4, 8], "sim_seconds": [0.02], "inference_batch": [4]}
    spec = SweepSpec(trace_dir, "dgx1-v100", knobs=knobs)
    out = tmp_path / "sweep"
    workers: list[int] = []

    def count(row) -> None:
        workers.append(len(multiprocessing.active_children()))

    run_sweep(spec, out, jobs=2, progress=False, on_row=count)
    assert max(workers) == 2  # two points, two workers
    lines = (out / "sweep.csv").read_text().splitlines(keepends=True)
    (out / "sweep.csv").write_text("".join(lines[:2]))  # one point finished, one left to resume
    workers.clear()
    table = run_sweep(spec, out, jobs=2, progress=False, on_row=count)
    assert workers == [0]  # the one point left ran without a pool
    assert sorted(table["actors"]) == [4, 8]
