"""The CPU between two steps (a step's ``gap_cpu_us``) as ``capture run`` records it: the capture's own
profiler tick is left out (it was 40 us median of a CartPole DQN's gaps of ~50 us between two actor
steps, and the sequential loop charged it as the program's work), and the gaps of unprofiled steps
are timed too (``unprofiled_cpu_us.<role>.gap``), so that the simulator takes the profiler's cost
out of the loop's code between steps (a Polyak target update) as it does out of the steps. Timed in
thread CPU time (archsim.capture.cpu_clock's default), not wall time."""

from __future__ import annotations

import time

import torch

from archsim.capture import markers, unprofiled
from archsim.capture.unprofiled import GAP_KEY


def _burn_cpu_ms(ms: float) -> None:
    """Spend ``ms`` of this thread's CPU time (a busy machine stretches the wall time, not this)."""
    end_ns = time.thread_time_ns() + int(ms * 1e6)
    while time.thread_time_ns() < end_ns:
        pass


def _gap_us(events) -> list[float]:
    prefix = markers.GAP_CPU_MARKER + "#us="
    return [float(e.name[len(prefix) :]) for e in events if e.name.startswith(prefix)]


def test_the_capture_tick_is_not_in_an_unprofiled_gap():
    """Three unprofiled steps with 2 ms of the loop's code and 5 ms of the capture's tick between
    each: two gaps of 2 ms (not 7). (About 0.03 s of CPU.)"""
    with unprofiled.timing_unprofiled_steps(gaps=True) as times:
        for _ in range(3):
            with markers.step("actor", actor=0):
                pass
            _burn_cpu_ms(2.0)
            with markers.outside_gaps():
                _burn_cpu_ms(5.0)
    gaps = times.samples[("actor", GAP_KEY)]
    assert len(gaps) == 3 - 1
    assert all(2000.0 <= gap < 5000.0 for gap in gaps), gaps
    assert times.summary()["actor"][GAP_KEY]["steps"] == 2


def test_the_capture_tick_is_not_in_a_recorded_gap():
    """The same between recorded steps: each ``archsim::cpu_gap`` reads 2 ms, not 7. (A step
    outside the profiler, before and after, breaks this thread's chain of recorded steps: no gap
    from or to another test's.)"""
    with markers.step("learner"):
        pass
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(3):
            with markers.step("learner"):
                pass
            _burn_cpu_ms(2.0)
            with markers.outside_gaps():
                _burn_cpu_ms(5.0)
    with markers.step("learner"):
        pass
    gaps = _gap_us(prof.events())
    assert len(gaps) == 2 and all(2000.0 <= gap < 5000.0 for gap in gaps), gaps


def test_no_unprofiled_gap_spans_a_recorded_step_and_none_without_asking():
    """A recorded step between two unprofiled ones breaks the chain (its gap would hold a whole
    step); bundled workloads' captures, which do not ask for gaps, time none."""
    with unprofiled.timing_unprofiled_steps(gaps=True) as times:
        with markers.step("actor", actor=0):
            pass
        cpu = [torch.profiler.ProfilerActivity.CPU]
        with torch.profiler.profile(activities=cpu), markers.step("actor", actor=0):
            pass
        with markers.step("actor", actor=0):
            pass
        with markers.step("actor", actor=0):
            pass
    assert len(times.samples[("actor", GAP_KEY)]) == 1  # the last two unprofiled steps
    with unprofiled.timing_unprofiled_steps() as times:
        for _ in range(3):
            with markers.step("actor", actor=0):
                pass
    assert ("actor", GAP_KEY) not in times.samples
