"""The CPU clock the markers read: this thread's CPU time by default, the whole process's on request.

A phase marker measures CPU time so the simulator can charge CPU threads with work rather than wall
time (archsim.capture.markers). The bundled workloads run actors and learners on threads of their own,
so each marker reads its own thread's clock (``time.thread_time_ns``). A captured single-threaded
program (``archsim capture run``) does its work on one Python thread plus torch's intra-op threads,
whose CPU time the thread clock misses (a 2-thread run looked 2x cheaper than it was): there the
markers read the process clock (``time.process_time_ns``, every thread of the process).

Callers read ``cpu_clock.now_ns()`` (a module attribute, so switching costs nothing per call).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator

now_ns = time.thread_time_ns


@contextlib.contextmanager
def process_cpu_time() -> Iterator[None]:
    """Inside the block, markers measure the CPU time of the whole process (all threads)."""
    from archsim.capture import markers  # imports this module: import here, not at the top

    global now_ns
    previous, now_ns = now_ns, time.process_time_ns
    # A step's gap is measured from the previous step's end: never across two clocks.
    markers._step_ends.cpu_ns = None
    try:
        yield
    finally:
        now_ns = previous
        markers._step_ends.cpu_ns = None
