"""Thread CPU time of the steps a capture does NOT record, so the profiler's own cost can be removed.

Recording every aten op with its input shapes costs CPU time inside the very phases it measures: a
Nature-DQN forward pass on one observation took 0.42 ms of CPU unprofiled and 0.58-0.64 ms profiled
on the development machine (2026-11-22, 3 repeats), a 32-sample training step 5-45% more. A capture
with a schedule runs most steps unprofiled (60 of every 70 by default), so while it runs the markers
time those steps too (two CPU clock reads per marker, only during a capture: the thread's clock,
or the process's under archsim.capture.cpu_clock.process_cpu_time) and the
capture stores, per role and phase, the median CPU time per step over them. The simulator scales the
profiled phases down to those medians (archsim.sim.profiler_cost). ``capture run`` also times the
CPU between two unprofiled steps (GAP_KEY, the recorded steps' ``gap_cpu_us``: the markers' own
bookkeeping and any loop code outside every step), which costs more profiled too (a CartPole DQN's:
19 us unprofiled, 21-30 us recorded).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator

import numpy as np

from archsim.capture import cpu_clock

STEP_KEY = "step"  # the whole step's CPU time, next to its phases
# CPU time between the previous step's end and this step's start (the loop's code outside every
# step; a recorded step's ``gap_cpu_us``, which archsim.sim.profiler_cost scales by this figure)
GAP_KEY = "gap"
# Samples kept per (role, phase): enough for a stable median, bounded memory on long captures.
MAX_SAMPLES = 20_000


class UnprofiledTimes:
    """Per (role, phase or STEP_KEY): CPU microseconds per step of unprofiled steps."""

    def __init__(self, gaps: bool = False) -> None:
        self.samples: dict[tuple[str, str], list[float]] = {}
        # the step being timed on this thread: {phase: cpu us}; and ``end_ns``, the CPU clock when
        # its last unprofiled step ended (None: unknown, or a recorded step ran since)
        self._local = threading.local()
        self._lock = threading.Lock()
        self.gaps = gaps  # also time GAP_KEY: the CPU between two unprofiled steps

    def break_gap(self) -> None:
        """A step ran that is not timed here (a recorded one): no gap spans it."""
        self._local.end_ns = None

    def skip_gap_ns(self, spent_ns: int) -> None:
        """Leave ``spent_ns`` of CPU (the capture's own, archsim.capture.markers.outside_gaps) out
        of the gap to this thread's next step."""
        end_ns = getattr(self._local, "end_ns", None)
        if end_ns is not None:
            self._local.end_ns = end_ns + spent_ns

    def _add(self, role: str, key: str, cpu_us: float) -> None:
        with self._lock:
            values = self.samples.setdefault((role, key), [])
            if len(values) < MAX_SAMPLES:
                values.append(cpu_us)

    def summary(self) -> dict[str, dict[str, dict[str, float]]]:
        """{role: {phase: {"median_us": ..., "mean_us": ..., "steps": n}}}, YAML-able."""
        out: dict[str, dict[str, dict[str, float]]] = {}
        for (role, key), values in sorted(self.samples.items()):
            out.setdefault(role, {})[key] = {
                "median_us": round(float(np.median(values)), 3),
                "mean_us": round(float(np.mean(values)), 3),
                "steps": len(values),
            }
        return out


_active: UnprofiledTimes | None = None


@contextlib.contextmanager
def timing_unprofiled_steps(gaps: bool = False) -> Iterator[UnprofiledTimes]:
    """While the block runs, markers outside profiler recording time their steps' CPU (``gaps``:
    and the CPU between them, GAP_KEY)."""
    global _active
    previous, _active = _active, UnprofiledTimes(gaps)
    try:
        yield _active
    finally:
        _active = previous


def active() -> UnprofiledTimes | None:
    return _active


class UnprofiledStep:
    """A step the profiler is not recording: its CPU time and its phases' go to ``times``."""

    __slots__ = ("_times", "_role", "_cpu_ns")

    def __init__(self, times: UnprofiledTimes, role: str) -> None:
        self._times, self._role, self._cpu_ns = times, role, 0

    def __enter__(self) -> UnprofiledStep:
        local = self._times._local
        local.phases = {}
        self._cpu_ns = cpu_clock.now_ns()
        end_ns = getattr(local, "end_ns", None)
        if self._times.gaps and end_ns is not None:
            self._times._add(self._role, GAP_KEY, (self._cpu_ns - end_ns) / 1000.0)
        return self

    def __exit__(self, *exc: object) -> None:
        end_ns = cpu_clock.now_ns()  # one read ends the step and starts the gap to the next
        cpu_us = (end_ns - self._cpu_ns) / 1000.0
        phases = getattr(self._times._local, "phases", None) or {}
        self._times._local.phases = None
        self._times._local.end_ns = None if exc[0] is not None else end_ns
        if exc[0] is not None:
            return  # an interrupted step is not a sample
        self._times._add(self._role, STEP_KEY, cpu_us)
        for name, value in phases.items():
            self._times._add(self._role, name, value)


class UnprofiledPhase:
    """A phase of an unprofiled step: adds its CPU time to the step's (phases repeat, e.g. K envs)."""

    __slots__ = ("_times", "_name", "_cpu_ns")

    def __init__(self, times: UnprofiledTimes, name: str) -> None:
        self._times, self._name, self._cpu_ns = times, name, 0

    def __enter__(self) -> UnprofiledPhase:
        self._cpu_ns = cpu_clock.now_ns()
        return self

    def __exit__(self, *exc: object) -> None:
        cpu_us = (cpu_clock.now_ns() - self._cpu_ns) / 1000.0
        phases = getattr(self._times._local, "phases", None)
        if phases is not None:  # outside a step (or on another thread): nothing to add it to
            phases[self._name] = phases.get(self._name, 0.0) + cpu_us
