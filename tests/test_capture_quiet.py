"""Profiler noise is filtered from stderr (fd 2, children included); progress shows only on a tty."""

from __future__ import annotations

import os
import subprocess
import sys

from archsim.capture.progress import Progress, stderr_is_terminal
from archsim.capture.quiet import outer_stderr_tty, quiet_profiler_noise

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


def test_usdt_line_after_a_progress_bars_text_is_dropped_and_the_bar_kept(capfd):
    """tqdm redraws after a carriage return and ends no line, so a probe printed while a bar is
    drawn starts mid-line (``archsim capture alexnet`` printed '...2/13 [...]USDT:...')."""
    with quiet_profiler_noise():
        os.write(2, b"\rbar 1/3")
        os.write(2, b"\rbar 2/3" + USDT.encode() + b"\n")
        os.write(2, b"\rbar 3/3\nreal warning\n")
    assert capfd.readouterr().err == "\rbar 1/3\rbar 2/3\rbar 3/3\nreal warning\n"


def test_progress_asks_the_stderr_the_filter_writes_to():
    """Inside the filter fd 2 is its pipe; a bar is shown when the user's stderr is a terminal."""
    assert outer_stderr_tty() is None
    with quiet_profiler_noise():  # pytest's fd 2 is a file, not a terminal
        assert outer_stderr_tty() is False and not stderr_is_terminal()
    master, slave = os.openpty()
    saved = os.dup(2)
    os.dup2(slave, 2)
    try:
        with quiet_profiler_noise():
            on_terminal = stderr_is_terminal()
            assert not os.isatty(2)  # the pipe
    finally:
        os.dup2(saved, 2)
        for fd in (saved, slave, master):
            os.close(fd)
    assert on_terminal and outer_stderr_tty() is None


def test_alexnet_capture_off_a_terminal_prints_no_bar_and_no_probe(tmp_path, capfd):
    from archsim.cli import main

    out = tmp_path / "alexnet"
    assert main(["capture", "alexnet", "--batch", "1", "--out", str(out)]) == 0
    err = capfd.readouterr().err
    assert "alexnet passes" not in err and "USDT" not in err
