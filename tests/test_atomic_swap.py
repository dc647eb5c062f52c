"""``--force`` never loses an output (issue 11 item 9): the new output is written beside the old and
swapped in, so a process killed with SIGKILL at any instant leaves the old or the new output
complete, on both swap paths (renameat2 RENAME_EXCHANGE, and the two renames with a backup that the
next run puts back). The kills land at random instants of a real process replacing its output in a
loop, and of real ``archsim simulate --force`` runs."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from archsim.atomic import (
    NO_EXCHANGE_ENV,
    atomic_output_dir,
    backup_path,
    check_output_dir,
    recover_output_dir,
    replace_dir,
)
from tests.conftest import PROJECT_ROOT

FILES = 40  # files per generation: removing the old directory takes a while, so kills land there
# Replaces OUT with generation 1, 2, 3, ... forever: each generation is FILES files holding its
# number, and a "complete" file written last.
REPLACER = f"""
import sys
from pathlib import Path
from archsim.atomic import atomic_output_dir
out = Path(sys.argv[1])
generation = 0
while True:
    generation += 1
    with atomic_output_dir(out, force=True) as tmp:
        for i in range({FILES}):
            (tmp / f"part{{i}}").write_text(str(generation))
        (tmp / "complete").write_text(str(generation))
"""


def _generation(directory: Path) -> int:
    """The generation a directory holds; fails the test unless it is complete and of one piece."""
    names = sorted(p.name for p in directory.iterdir())
    assert names == sorted([*(f"part{i}" for i in range(FILES)), "complete"]), names
    values = {(directory / name).read_text() for name in names}
    assert len(values) == 1, values
    return int(values.pop())


def _env(exchange: bool) -> dict[str, str]:
    env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
    env.pop(NO_EXCHANGE_ENV, None)
    if not exchange:
        env[NO_EXCHANGE_ENV] = "1"
    return env


@pytest.mark.parametrize("exchange", [True, False], ids=["rename-exchange", "backup-renames"])
def test_a_kill_at_any_instant_leaves_the_old_or_the_new_output_complete(tmp_path, exchange):
    if exchange and not sys.platform.startswith("linux"):
        pytest.skip("renameat2(RENAME_EXCHANGE) is Linux's")
    out = tmp_path / "out"
    rng = random.Random(11)
    last = 0
    for _ in range(12):
        proc = subprocess.Popen(
            [sys.executable, "-c", REPLACER, str(out)], env=_env(exchange), cwd=tmp_path
        )
        while not out.exists() and proc.poll() is None:  # the first generation is in place
            time.sleep(0.01)
        time.sleep(rng.uniform(0.0, 0.3))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        backup = backup_path(out)
        if out.exists():
            generation = _generation(out)
        else:  # only between the two renames of the fallback: the old output is the backup
            assert not exchange
            generation = _generation(backup)
        assert generation >= 1
        # What the next run sees first: the interrupted swap finished, the output in place.
        recover_output_dir(out)
        assert _generation(out) == generation and not backup.exists()
        assert list(tmp_path.glob(".out.tmp-*")) == []  # the killed run's temporaries are gone
        last = generation
    assert last >= 1


def test_replace_dir_leaves_only_the_new_output_on_both_paths(tmp_path, monkeypatch):
    for exchange in (True, False):
        monkeypatch.setenv(NO_EXCHANGE_ENV, "0" if exchange else "1")
        out = tmp_path / f"out-{exchange}"
        for generation in (1, 2):
            with atomic_output_dir(out, force=True) as tmp:
                (tmp / "value").write_text(str(generation))
        assert (out / "value").read_text() == "2"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out-False", "out-True"]
    new = tmp_path / "new"
    new.mkdir()
    replace_dir(new, tmp_path / "fresh")  # nothing to replace: a plain rename
    assert (tmp_path / "fresh").is_dir() and not new.exists()


def test_a_backup_left_by_a_kill_is_put_back_or_removed(tmp_path):
    out = tmp_path / "out"
    backup = backup_path(out)
    backup.mkdir()
    (backup / "value").write_text("old")
    check_output_dir(out, force=True)  # every writer checks first: the old output comes back
    assert (out / "value").read_text() == "old" and not backup.exists()
    backup.mkdir()
    (backup / "half").write_text("old, half removed")
    recover_output_dir(out)  # the new one was in place: the rest of the old one goes
    assert (out / "value").read_text() == "old" and not backup.exists()
    # A temporary of a live run (this process) stays; one of a finished process goes.
    done = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], text=True,
                          capture_output=True, check=True)  # fmt: skip
    live = tmp_path / f".out.tmp-{os.getpid()}-abcd1234"
    dead = tmp_path / f".out.tmp-{done.stdout.strip()}-abcd1234"
    live.mkdir()
    dead.mkdir()
    recover_output_dir(out)
    assert live.is_dir() and not dead.exists()


def test_a_failed_block_keeps_the_old_output(tmp_path):
    out = tmp_path / "out"
    with atomic_output_dir(out) as tmp:
        (tmp / "value").write_text("old")
    with pytest.raises(RuntimeError), atomic_output_dir(out, force=True) as tmp:
        (tmp / "value").write_text("new, half")
        raise RuntimeError("the run failed")
    assert (out / "value").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]


def test_simulate_force_killed_at_random_instants_keeps_a_complete_metrics_file(
    trace_dir, tmp_path
):
    out = tmp_path / "run"
    base = [sys.executable, "-m", "archsim", "simulate", str(trace_dir), "--actors", "4"]
    base += ["--inference-batch", "4", "--sim-seconds", "0.02", "--out", str(out)]
    started = time.monotonic()
    subprocess.run([*base, "--seed", "0"], check=True, capture_output=True, timeout=300)
    whole_run_s = time.monotonic() - started  # to spread the kills over one run, not to assert
    seeds = {0}
    rng = random.Random(7)
    for seed in (1, 2, 3):
        proc = subprocess.Popen(
            [*base, "--seed", str(seed), "--force"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.5, 1.2) * whole_run_s)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        if not out.exists():
            recover_output_dir(out)
        record = json.loads((out / "metrics.json").read_text())  # complete: it parses
        assert record["seed"] in seeds | {seed}
        assert (out / "metrics.csv").read_text().count("\n") == 2  # header and one row
        seeds.add(record["seed"])
