"""``archsim sweep --force`` over finished results: the old results stay whole until the new sweep is
complete, whatever instant a kill lands at."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DQN = ROOT / "traces" / "dqn-pong-cpu"


def _sweep(out: Path, actors: str, *extra: str) -> list[str]:
    return [
        sys.executable, "-m", "archsim", "sweep", str(DQN), "--hw", "dgx1-v100", "--actors", actors,
        "--sim-seconds", "0.05", "--jobs", "1", "--no-progress", "--out", str(out), *extra,
    ]  # fmt: skip


def test_killed_forced_sweep_keeps_the_old_results(tmp_path):
    out = tmp_path / "sweep"
    subprocess.run(_sweep(out, "2,4"), check=True, capture_output=True)
    old = (out / "sweep.csv").read_text()
    # many points, so the kill lands while the new sweep is being built beside the old one, even when
    # this loop is starved on a loaded machine (60 points failed once at load ~7)
    proc = subprocess.Popen(
        _sweep(out, ",".join(str(a) for a in range(1, 121)), "--force"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120
    building = []
    while time.monotonic() < deadline and proc.poll() is None:
        building = [
            p for p in tmp_path.glob(".sweep.tmp-*/sweep.csv") if p.read_text().count("\n") > 2
        ]
        if building:
            break
        time.sleep(0.05)
    assert building, "the forced sweep never started writing beside the old results"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    assert (out / "sweep.csv").read_text() == old  # the old results, whole
    # the next run removes the killed run's leftovers and replaces the old results when it finishes
    subprocess.run(_sweep(out, "2,8", "--force"), check=True, capture_output=True)
    assert [line.split(",")[0] for line in (out / "sweep.csv").read_text().splitlines()] == [
        "actors", "2", "8",
    ]  # fmt: skip
    assert not list(tmp_path.glob(".sweep.tmp-*"))
