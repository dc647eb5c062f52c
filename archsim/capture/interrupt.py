"""Ctrl-C during ``archsim capture run``: the program stops, what was recorded is kept.

A user stops a long capture with Ctrl-C. Python raises KeyboardInterrupt wherever the main thread
is; the program's own code may catch it (its checkpoint handler), else it ends the program and the
capture keeps the windows recorded so far (archsim.capture.run_script). Inside archsim's own step
between two program steps (the profiler stepping and exporting a window) an interrupt would cut a
window's file in half, so there it is held until that work is done and raised as it ends, in the
program's frames as if it had come a moment later.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from typing import Any


class Interrupts:
    """SIGINT as KeyboardInterrupt, held while :meth:`held` blocks run."""

    def __init__(self) -> None:
        self._depth = 0
        self._pending = False

    def _handler(self, signum: int, frame: Any) -> None:
        if self._depth:
            self._pending = True
        else:
            raise KeyboardInterrupt

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Use this handler for the block, when Python's default one is in place in the main
        thread (a program or host that set its own keeps it); the previous one after."""
        default = signal.getsignal(signal.SIGINT) is signal.default_int_handler
        if not default or threading.current_thread() is not threading.main_thread():
            yield
            return
        previous = signal.signal(signal.SIGINT, self._handler)
        try:
            yield
        finally:
            # the program may have replaced it meanwhile: put back Python's only if ours is there
            if signal.getsignal(signal.SIGINT) == self._handler:
                signal.signal(signal.SIGINT, previous)

    @contextlib.contextmanager
    def held(self) -> Iterator[None]:
        """A Ctrl-C inside the block is raised when it ends."""
        self._depth += 1
        try:
            yield
        finally:
            self._depth -= 1
            if not self._depth and self._pending:
                self._pending = False
                raise KeyboardInterrupt
