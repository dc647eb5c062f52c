"""Phase and step markers that any PyTorch RL loop can place; ingest turns them into steps and phases.

``phase("act")`` and ``step("actor", actor=0)`` wrap ``torch.profiler.record_function`` with the names
agreed in the interfaces brief (``archsim::<phase>``, ``archsim::<role>_step#k=v,...``). When no
profiler is recording they return a shared no-op context, so they can stay in production loops.

While recording, each marker also measures its thread's CPU time (``time.thread_time_ns``; the whole
process's inside ``archsim.capture.cpu_clock.process_cpu_time``, as ``capture run`` does) and, just
before it closes, records it as a nested zero-work annotation ``archsim::cpu#us=<microseconds>``.
The profiler records wall time only: a phase that waited for a lock, the GIL or a descheduled core
looks as long as one that computed. Ingest attaches each CPU figure to its enclosing marker
(``<phase>_cpu_us``, ``cpu_us`` of the step), and the simulator charges CPU threads with CPU time.
A step also records, as ``archsim::cpu_gap#us=<microseconds>`` right after it opens, the CPU time its
thread spent since its previous recorded step closed: a loop's work outside every step (an inference
server's polling and request reads) that would otherwise be in no table (``gap_cpu_us``). A step
that runs unrecorded breaks the chain; two recordings with no step between them do not (the first
step of the second then counts the time between them).
During a capture, markers outside the recorded windows time their steps' CPU as well
(archsim.capture.unprofiled), so that the profiler's own cost can be taken out again.

torch's "is the profiler on" check is per thread: a profiler started with ``profile_all_threads``
records other threads too, but on those threads the check reads False. Code that profiles that way
wraps the run in :func:`all_threads_recording`, which turns the no-op shortcut off process-wide.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterable, Iterator

import torch
from torch.autograd.profiler import record_function

from archsim.capture import cpu_clock, unprofiled
from archsim.errors import ArchsimError
from archsim.trace.schema import PHASES, STEP_ROLES

PREFIX = "archsim::"
CPU_MARKER = PREFIX + "cpu"  # archsim::cpu#us=<float>: thread CPU time of the enclosing marker
# archsim::cpu_gap#us=<float>: thread CPU time from the thread's previous recorded step to this one
GAP_CPU_MARKER = PREFIX + "cpu_gap"
# archsim::batch#n=<int>: the enclosing step's batch, measured only as it closes (overrides its label's)
BATCH_MARKER = PREFIX + "batch"
_NOOP = contextlib.nullcontext()
_thread_profiler_enabled = torch._C._autograd._profiler_enabled
_all_threads_recorders = 0  # > 0 while a profile_all_threads profiler runs in this process


@contextlib.contextmanager
def all_threads_recording() -> Iterator[None]:
    """Emit markers on every thread while a ``profile_all_threads`` profiler is running."""
    global _all_threads_recorders
    _all_threads_recorders += 1
    try:
        yield
    finally:
        _all_threads_recorders -= 1


def _profiler_enabled() -> bool:
    return _all_threads_recorders > 0 or _thread_profiler_enabled()


def _check(name: str, allowed: Iterable[str], what: str) -> None:
    if name not in allowed:
        raise ArchsimError(f"unknown {what} {name!r} (expected one of: {', '.join(allowed)})")


class _TimedMarker:
    """``record_function(label)`` that also records the thread CPU time spent inside it."""

    __slots__ = ("_function", "_cpu_ns")

    def __init__(self, label: str) -> None:
        self._function = record_function(label)
        self._cpu_ns = 0

    def __enter__(self) -> _TimedMarker:
        self._function.__enter__()
        self._cpu_ns = cpu_clock.now_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        cpu_us = (cpu_clock.now_ns() - self._cpu_ns) / 1000.0
        with record_function(f"{CPU_MARKER}#us={cpu_us:.3f}"):
            pass
        self._function.__exit__(*exc)

    def cut(self) -> None:
        """Close without the CPU-time annotation: a step cut short (``capture run`` stopped by
        Ctrl-C mid-step) then lacks ``cpu_us``, which marks it cut (archsim.sim.step_work)."""
        self._function.__exit__(None, None, None)


class _StepEnds(threading.local):
    """Per thread: thread CPU time (ns) when its last recorded step closed, None when unknown."""

    cpu_ns: int | None = None


_step_ends = _StepEnds()


class _TimedStep(_TimedMarker):
    """A step marker that also records the thread's CPU time since its previous recorded step."""

    __slots__ = ()

    def __enter__(self) -> _TimedStep:
        self._function.__enter__()
        now_ns = cpu_clock.now_ns()
        last_ns = _step_ends.cpu_ns
        if last_ns is not None:
            with record_function(f"{GAP_CPU_MARKER}#us={(now_ns - last_ns) / 1000.0:.3f}"):
                pass
        self._cpu_ns = cpu_clock.now_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        super().__exit__(*exc)
        _step_ends.cpu_ns = cpu_clock.now_ns()


@contextlib.contextmanager
def outside_gaps() -> Iterator[None]:
    """The block is the capture's own work between two steps, not the program's (``capture run``'s
    profiler tick: 40 us of CPU median over 2,615 ticks of a CartPole DQN, where its loop code
    between two actor steps is a few us): its CPU time is left out of the next step's gap, recorded
    or not (archsim.capture.unprofiled)."""
    start_ns = cpu_clock.now_ns()
    try:
        yield
    finally:
        skip_gap_ns(cpu_clock.now_ns() - start_ns)


def skip_gap_ns(spent_ns: int) -> None:
    """Leave ``spent_ns`` of this thread's CPU, the capture's own work between two steps, out of
    the gap to its next step, recorded or not (archsim.capture.auto_markers brackets its tick)."""
    if _step_ends.cpu_ns is not None:
        _step_ends.cpu_ns += spent_ns
    times = unprofiled.active()
    if times is not None:
        times.skip_gap_ns(spent_ns)


def break_gaps() -> None:
    """This thread's next step takes no gap from the last one, recorded or not: what ran between
    them was not the marked loop (archsim.capture.bare_stretches's unmarked stretches)."""
    _step_ends.cpu_ns = None
    times = unprofiled.active()
    if times is not None:
        times.break_gap()


def phase(name: str) -> contextlib.AbstractContextManager:
    """Mark a phase of an actor/learner step (one of archsim.trace.schema.PHASES)."""
    _check(name, PHASES, "phase")
    if not _profiler_enabled():
        times = unprofiled.active()
        return _NOOP if times is None else unprofiled.UnprofiledPhase(times, name)
    return _TimedMarker(PREFIX + name)


def step_label(role: str, **attrs: int) -> str:
    """``archsim::<role>_step#k=v,...`` with integer attributes (actor index, batch size)."""
    _check(role, STEP_ROLES, "step role")
    for key, value in attrs.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArchsimError(f"step attribute {key}={value!r}: expected an integer")
    label = f"{PREFIX}{role}_step"
    if attrs:
        label += "#" + ",".join(f"{k}={v}" for k, v in attrs.items())
    return label


def step_batch(batch: int) -> None:
    """Record, inside the open step, its batch when it was measured only as the step ends (a
    learner step's gradient-accumulation micro-batches, archsim.capture.learner_markers)."""
    if _profiler_enabled():
        with record_function(f"{BATCH_MARKER}#n={int(batch)}"):
            pass


def step(role: str, **attrs: int) -> contextlib.AbstractContextManager:
    """Mark one actor, learner or inference step; phases inside it become its columns in steps."""
    label = step_label(role, **attrs)
    if not _profiler_enabled():
        times = unprofiled.active()
        _step_ends.cpu_ns = None  # the gap to the next recorded step would span this one
        return _NOOP if times is None else unprofiled.UnprofiledStep(times, role)
    times = unprofiled.active()
    if times is not None:
        times.break_gap()  # the gap to the next unprofiled step would span this one
    return _TimedStep(label)
