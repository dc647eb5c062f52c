"""Profiler noise is filtered from stderr (fd 2, children included); progress shows only on a tty."""

from __future__ import annotations

import os
import subprocess
import sys

from archsim.capture.progress import Progress
from archsim.capture.quiet import quiet_profiler_noise

USDT = "USDT:2026-11-24 01:16:43 28467:28467 SyncActivityProfilerHandler.cpp:52] profiler_start"


def test_usdt_lines_from_this_process_and_its_children_are_dropped(capfd):
    with quiet_profiler_noise():
        os.write(2, (USDT + "\nreal warning\n").encode())
        child = f"import os; os.write(2, b'{USDT}\\nchild error\\n')"
        subprocess.run([sys.executable, "-c", child], check=True)
        print("to stderr via sys", file=sys.stderr)
    err = capfd.readouterr().err.splitlines()
    assert err == ["real warning", "child error", "to stderr via sys"]


def test_stderr_is_restored_after_an_error(capfd):
    try:
        with quiet_profiler_noise():
            raise RuntimeError("boom")
    except RuntimeError:
        pass
    os.write(2, (USDT + "\n").encode())  # outside the block nothing is filtered
    assert capfd.readouterr().err.splitlines() == [USDT]


def test_progress_is_silent_off_a_terminal_and_counts_on_one(capsys):
    quiet = Progress(10, "capture", "step")  # pytest's stderr is not a tty
    quiet.update(3)
    assert quiet.done == 0
    quiet.close()
    assert capsys.readouterr().err == ""
    shown = Progress(10, "capture", "step", enabled=True)
    shown.update(4)
    shown.set_to(10)
    assert shown.done == 10
    shown.close()
    assert "capture" in capsys.readouterr().err
