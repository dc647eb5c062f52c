"""Hardware threads of the simulated CPU: FIFO servers with a fixed speed (archsim.perf.cpu).

Two interchangeable executors with one signature, ``execute(thread, work_s, label)`` (a simpy
generator): ``SimpyThreads`` models each hardware thread as a simpy Resource (the plain path);
``LindleyThreads`` computes the same FIFO with the Lindley recursion
``finish = max(arrive, previous finish) + service`` and one timeout (the fast path). Both give the
same times as long as work arrives in time order, which a discrete-event run guarantees.
"""

from __future__ import annotations

import simpy

from archsim.perf.cpu import ThreadLayout
from archsim.sim.metrics import Recorder
from archsim.sim.timeline import TIMELINE_LIMIT


class SimpyThreads:
    """Plain path: one capacity-1 simpy Resource per hardware thread."""

    def __init__(self, env: simpy.Environment, layout: ThreadLayout, rec: Recorder) -> None:
        self.env = env
        self.speed = [float(v) for v in layout.speed]
        self.rec = rec
        self.queue = rec.queue("cpu_run")
        self.threads = [simpy.Resource(env, capacity=1) for _ in range(layout.hw_threads)]

    def execute(
        self, thread: int, work_s: float, label: str = "", track: str = "", args: dict | None = None
    ):
        env = self.env
        arrive = env.now
        duration = work_s / self.speed[thread]
        self.queue.enter(arrive)
        with self.threads[thread].request() as req:
            yield req
            start = env.now
            self.queue.leave(start, arrive)
            self.rec.cpu_busy(thread, start, start + duration)
            record_burst(self.rec, label, track, thread, arrive, start, duration, args)
            yield env.timeout(duration)

    def flush(self) -> None:
        """Busy time went straight into the recorder."""


class LindleyThreads:
    """Fast path: per-thread time of the next free moment; no simpy resource events."""

    def __init__(self, env: simpy.Environment, layout: ThreadLayout, rec: Recorder) -> None:
        self.env = env
        self.speed = [float(v) for v in layout.speed]
        self.rec = rec
        self.queue = rec.queue("cpu_run")
        self.free_at = [0.0] * layout.hw_threads
        self.busy_s = [
            0.0
        ] * layout.hw_threads  # clipped to the window; flushed into rec at the end
        # Per-slice bookkeeping (time series, timeline) needs the general path below.
        self.detailed = bool(rec.series_bins) or rec.timeline is not None
        # called first by flush: executors that book bursts lazily (archsim.sim.fast_gil) book the
        # ones that started inside the window
        self.flush_hooks: list = []

    def finish_time(
        self,
        thread: int,
        work_s: float,
        arrive: float,
        label: str = "",
        track: str = "",
        args: dict | None = None,
    ) -> float:
        """Run ``work_s`` arriving at ``arrive`` (>= every earlier arrival) on ``thread``."""
        free = self.free_at[thread]
        start = arrive if arrive > free else free
        finish = start + work_s / self.speed[thread]
        self.free_at[thread] = finish
        self.queue.add_wait(arrive, start)
        if self.detailed:
            self.rec.cpu_busy(thread, start, finish)
            record_burst(self.rec, label, track, thread, arrive, start, finish - start, args)
        else:
            end = self.rec.end
            self.busy_s[thread] += (finish if finish < end else end) - (
                start if start < end else end
            )
        return finish

    def execute(
        self, thread: int, work_s: float, label: str = "", track: str = "", args: dict | None = None
    ):
        env = self.env
        finish = self.finish_time(thread, work_s, env.now, label, track, args)
        yield env.timeout(finish - env.now)

    def unflushed_busy_s(self, at_s: float) -> list[float]:
        """Busy time per thread that ``flush`` would add were the window to end at ``at_s`` (the
        clock there); read-only. Bursts are booked on arrival (<= the clock) and run back to back,
        so what lies past ``at_s`` is one block [at_s, free_at): exact, but for the bursts that
        ``flush_hooks`` would book (archsim.sim.fast_gil plays them lazily)."""
        end = self.rec.end
        out = []
        for busy, free in zip(self.busy_s, self.free_at, strict=True):
            ahead = (free if free < end else end) - at_s
            out.append(busy - (ahead if ahead > 0 else 0.0))
        return out

    def flush(self) -> None:
        """Move the accumulated busy time into the recorder (call once, after the run)."""
        for hook in self.flush_hooks:
            hook()
        for thread, busy in enumerate(self.busy_s):
            self.rec.cpu_busy_s[thread] += busy
        self.busy_s = [0.0] * len(self.busy_s)


def record(
    rec: Recorder, label: str, track: str, start: float, duration: float, args: dict | None = None
) -> None:
    """Keep one slice for the timeline when one is being recorded."""
    timeline = rec.timeline
    if timeline is not None and start < rec.end and len(timeline) < TIMELINE_LIMIT:
        timeline.append((label, track, start, duration, args))


def record_burst(
    rec: Recorder,
    label: str,
    track: str,
    thread: int,
    arrive: float,
    start: float,
    duration: float,
    args: dict | None,
) -> None:
    """A pinned burst's slice: on ``track`` (else its thread's role track), with the hardware thread
    it ran on and how long it queued for it."""
    timeline = rec.timeline
    if timeline is None or start >= rec.end:
        return
    if not track:
        track = timeline.track_of(thread) if hasattr(timeline, "track_of") else f"cpu{thread}"
    extra = {"hw_thread": thread, "queue_wait_us": (start - arrive) * 1e6}
    record(rec, label, track, start, duration, {**(args or {}), **extra})
