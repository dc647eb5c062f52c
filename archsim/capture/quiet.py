"""Keep the profiler's own chatter off stderr so that a capture's error stays one line.

Kineto (torch.profiler's C++ back end) prints a ``USDT: ... profiler_start`` / ``profiler_stop`` line
for every recorded window, straight to file descriptor 2, from C++ (so ``sys.stderr`` redirection and
``KINETO_LOG_LEVEL`` do not reach them). :func:`quiet_profiler_noise` points fd 2 at a pipe for the
duration of a capture; a thread copies every line to the real stderr except the known noise. Child
processes started inside (the R2D2 and Ape-X actors) inherit the pipe and are filtered too.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import threading
from collections.abc import Iterator

# Lines that say nothing to a user: Kineto's USDT probes, and its per-window activity-profiler notes.
NOISE = re.compile(rb"^(USDT:|STAGE:|\[W\d+ .*(kineto|ActivityProfiler))")
# A probe written while a progress bar is drawn lands after the bar's text, mid-line.
USDT_TAIL = re.compile(rb"USDT:\d{4}-\d\d-\d\d [^\r\n]*(\r?\n)?")
# A segment ends at a newline or a carriage return (a progress bar redraws its line after one).
SEGMENT = re.compile(rb"[^\r\n]*(?:\r\n|\r|\n)")
# Whether fd 2 was a terminal before quiet_profiler_noise pointed it at its pipe (None outside).
_outer_stderr_tty: bool | None = None


def outer_stderr_tty() -> bool | None:
    """Inside :func:`quiet_profiler_noise`: whether the real stderr is a terminal; else None."""
    return _outer_stderr_tty


def _filtered(buffer: bytes) -> tuple[bytes, bytes]:
    """(the complete segments of ``buffer`` without profiler noise, the incomplete rest)."""
    kept, end = [], 0
    for match in SEGMENT.finditer(buffer):
        segment = match.group()
        if not NOISE.match(segment):
            kept.append(USDT_TAIL.sub(b"", segment))
        end = match.end()
    return b"".join(kept), buffer[end:]


# How long the copier may take to drain the pipe after the capture (children that outlive the
# capture keep the pipe open; their later lines are dropped rather than hang the command).
DRAIN_TIMEOUT_S = 2.0


def _copy_lines(read_fd: int, write_fd: int) -> None:
    with os.fdopen(read_fd, "rb", buffering=0) as source:
        pending = b""
        while True:
            chunk = source.read(65536)
            if not chunk:
                break
            kept, pending = _filtered(pending + chunk)
            if kept:
                os.write(write_fd, kept)
        if pending and not NOISE.match(pending):
            os.write(write_fd, USDT_TAIL.sub(b"", pending))


@contextlib.contextmanager
def quiet_profiler_noise() -> Iterator[None]:
    """Filter profiler noise out of fd 2 (and ``sys.stderr``) inside the block."""
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):  # no usable fd 2 (embedded interpreters): nothing to filter
        yield
        return
    global _outer_stderr_tty
    outer = _outer_stderr_tty
    _outer_stderr_tty = os.isatty(saved)
    read_fd, write_fd = os.pipe()
    copier = threading.Thread(target=_copy_lines, args=(read_fd, saved), daemon=True)
    copier.start()
    os.dup2(write_fd, 2)
    os.close(write_fd)
    try:
        yield
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stderr.flush()
        os.dup2(saved, 2)  # closes the pipe's last write end held by this process
        _outer_stderr_tty = outer
        copier.join(DRAIN_TIMEOUT_S)
        if not copier.is_alive():  # else a child still holds the pipe: the copier keeps ``saved``
            os.close(saved)
