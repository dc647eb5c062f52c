"""One GPU shared by two FIFO streams, inference and learner (docs/SIMULATOR.md "What is modelled").

Kernels from the two streams share the SMs: a job whose kernels fill every SM (``sm_fraction`` 1)
gets the GPU alone, and smaller ones run side by side until the SMs are full. When both streams have
a job running, each progresses at rate ``1 / max(1, f_inference + f_learner)``: processor sharing of
the SMs. Rates change only when a job starts or ends, so the GPU recomputes its next completion at
those moments (an old timer is recognised by its version and ignored). A job's DRAM bytes are moved
at an even rate over its progress, for the power model.
"""

from __future__ import annotations

from collections import deque

import simpy

from archsim.sim.cpu import record
from archsim.sim.inline_events import fire, next_anyway
from archsim.sim.metrics import Recorder

STREAMS = ("inference", "learner")
INFERENCE, LEARNER = 0, 1
# Work left below this (seconds) is float residue of processor sharing: the job has finished.
DONE_EPS_S = 1e-12


class SharedGpu:
    def __init__(self, env: simpy.Environment, rec: Recorder) -> None:
        self.env = env
        self.rec = rec
        self.waiting: list[deque] = [deque(), deque()]
        # running job per stream: [work left s, sm fraction, done event, label, start, DRAM bytes
        # per second of work, timeline args]
        self.running: list[list | None] = [None, None]
        self.queues = [rec.queue(f"gpu_{name}") for name in STREAMS]
        self.last_t = 0.0
        self.version = 0

    def submit(
        self,
        stream: int,
        work_s: float,
        sm_fraction: float,
        label: str,
        dram_bytes: float = 0.0,
        args: dict | None = None,
    ) -> simpy.Event:
        """Queue a job of ``work_s`` GPU seconds (when alone) on ``stream`` that moves ``dram_bytes``
        to and from DRAM; returns its done event. ``args`` go on its timeline slice."""
        done = self.env.event()
        self._advance()
        bytes_per_work_s = dram_bytes / work_s if work_s > 0 else 0.0
        self.waiting[stream].append(
            (work_s, sm_fraction, done, label, self.env.now, bytes_per_work_s, args)
        )
        self.queues[stream].enter(self.env.now)
        if self.running[stream] is None:
            self._start_next(stream)
        self._schedule()
        return done

    def _rate(self) -> float:
        a, b = self.running
        if a is not None and b is not None:
            return 1.0 / max(1.0, a[1] + b[1])
        return 1.0

    def _advance(self) -> None:
        now = self.env.now
        dt = now - self.last_t
        if dt > 0:
            rate = self._rate()
            occupied = 0.0
            moved = 0.0
            for job in self.running:
                if job is not None:
                    job[0] -= dt * rate
                    occupied += job[1]
                    moved += dt * rate * job[5]
            if occupied > 0:
                self.rec.gpu_busy(self.last_t, now, min(1.0, occupied))
            timeline = self.rec.timeline
            if timeline is not None and self.last_t < self.rec.end:
                timeline.counter("gpu_sm_util", self.last_t, min(1.0, occupied))
            if moved > 0:
                self.rec.gpu_dram(self.last_t, now, moved)
        self.last_t = now

    def _start_next(self, stream: int) -> None:
        if self.waiting[stream]:
            work, frac, done, label, arrived, bytes_rate, args = self.waiting[stream].popleft()
            now = self.env.now
            self.queues[stream].leave(now, arrived)
            if self.rec.timeline is not None:
                args = {**(args or {}), "queue_wait_us": (now - arrived) * 1e6, "sm_fraction": frac}
            self.running[stream] = [work, frac, done, label, now, bytes_rate, args]
        else:
            self.running[stream] = None

    def _schedule(self) -> None:
        self._arm(self._next_delay())

    def _next_delay(self) -> float | None:
        """A new timer's delay for the next completion (None: nothing runs); older timers die."""
        self.version += 1
        rate = self._rate()
        left = [job[0] for job in self.running if job is not None]
        if not left:
            return None
        return max(0.0, min(left) / rate)

    def _arm(self, delay: float | None) -> None:
        if delay is None:
            return
        timer = self.env.timeout(delay)
        version = self.version
        timer.callbacks.append(lambda _event: self._on_timer(version))

    def _on_timer(self, version: int) -> None:
        if version != self.version:
            return
        self._advance()
        env = self.env
        now = env.now
        finished = []
        for stream in (INFERENCE, LEARNER):
            job = self.running[stream]
            if job is not None and job[0] <= DONE_EPS_S:
                record(self.rec, job[3], f"gpu_{STREAMS[stream]}", job[4], now - job[4], job[6])
                finished.append(job[2])
                self._start_next(stream)
        delay = self._next_delay()
        if len(finished) == 1 and (delay is None or now + delay > now) and next_anyway(env):
            # the one finished job's done event would be processed next (the new timer is later):
            # its waiter resumes here, at the tail of this timer's processing (one event fewer)
            self._arm(delay)
            fire(finished[0])
            return
        for done in finished:  # as succeeded before the new timer was scheduled
            done.succeed()
        self._arm(delay)
