"""The runners' start/stop flag: a child SIGKILLed while polling it never blocks the parent's set().

With ``multiprocessing.Event`` the same scenario left ``set()`` blocked in about half the trials
(the Event's process-shared lock stays held by the dead poller); that is how a capture whose
child was killed hung past its test's 180-s limit."""

from __future__ import annotations

import multiprocessing
import os
import signal
import threading
import time

from workloads.shared_flag import SharedFlag


def _poll_until_set(flag: SharedFlag, polling: SharedFlag) -> None:
    polling.set()
    while not flag.is_set():
        pass


def _set_then(flag: SharedFlag, returned: threading.Event) -> None:
    flag.set()
    returned.set()


def test_set_returns_after_a_polling_child_is_killed():
    ctx = multiprocessing.get_context("spawn")
    for _ in range(3):
        flag, polling = SharedFlag(ctx), SharedFlag(ctx)
        child = ctx.Process(target=_poll_until_set, args=(flag, polling))
        child.start()
        assert polling.wait(120.0), "the child never started polling"
        time.sleep(0.2)
        os.kill(child.pid, signal.SIGKILL)
        child.join()
        returned = threading.Event()
        threading.Thread(target=_set_then, args=(flag, returned), daemon=True).start()
        # generous: set() is one store; only a lock left held by the dead child could delay it
        assert returned.wait(60.0), "set() blocked after the polling child was killed"
        assert flag.is_set()


def test_a_child_sees_the_parents_set_and_wait_times_out_until_then():
    ctx = multiprocessing.get_context("spawn")
    go, seen = SharedFlag(ctx), SharedFlag(ctx)
    child = ctx.Process(target=_poll_until_set, args=(go, seen))
    child.start()
    assert seen.wait(120.0)
    assert go.wait(0.01) is False and not go.is_set()
    go.set()
    child.join(120.0)
    assert child.exitcode == 0
    assert go.wait(0.0) is True
