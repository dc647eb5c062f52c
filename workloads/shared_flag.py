"""A set-once flag shared by spawned processes that a SIGKILL can never leave locked.

The capture runners tell their processes when to start and stop through a flag that every
process polls (actors once per env step). ``multiprocessing.Event`` guards its state with a
process-shared lock, taken by ``is_set()`` as well as ``set()``: a process killed by SIGKILL
while inside ``is_set()`` leaves that lock held for good, and the parent's ``set()`` then blocks
forever, so a run whose child was killed never ends. (Reproduced here: a child polling
``Event.is_set()`` in a loop, killed after 0.5 s, left the parent's ``set()`` blocked in 5 of 10
trials.) One shared byte, written only by ``set()`` and never cleared, needs no lock: a reader
sees False until the write lands, then True.
"""

from __future__ import annotations

import ctypes
import time
from typing import Any

WAIT_POLL_S = 0.005  # how often wait() looks at the flag: a start skew far below a run's seconds


class SharedFlag:
    """``set`` / ``is_set`` / ``wait`` of ``multiprocessing.Event``, lock-free; no ``clear``.

    Pass it to processes as a ``Process`` argument (like an Event: shared memory is handed over
    only while spawning)."""

    def __init__(self, ctx: Any) -> None:
        self._value = ctx.RawValue(ctypes.c_bool, False)

    def set(self) -> None:
        self._value.value = True

    def is_set(self) -> bool:
        return bool(self._value.value)

    def wait(self, timeout_s: float | None = None) -> bool:
        """True once set; False if ``timeout_s`` passed first (None: wait as long as it takes)."""
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        while not self.is_set():
            if deadline is not None:
                left_s = deadline - time.monotonic()
                if left_s <= 0:
                    return False
                time.sleep(min(WAIT_POLL_S, left_s))
            else:
                time.sleep(WAIT_POLL_S)
        return True
