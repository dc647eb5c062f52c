"""Hardware threads time-shared by every software thread, as an operating system schedules threads that
are not pinned (``--cpu-sched shared``; the pinned FIFO threads are archsim.sim.cpu).

Linux's CFS gives each runnable thread an equal share of the CPU over its scheduling period (a few
ms) and balances runnable threads across cores, idle cores before SMT siblings. Idealised, that is
egalitarian processor sharing: with n runnable bursts on H hardware threads of C cores, each burst
progresses at ``capacity(n) / n`` where ``capacity(n) = speed * (min(m, C) + p * (2 * smt_yield - 1))``,
``m = min(n, H)`` busy hardware threads and ``p = max(0, m - C)`` cores running two of them (each at
``smt_yield``). No burst waits behind a long one: a 1 ms env step that arrives while a 90 ms learner
step runs on a 1-core box takes 2 ms, not 91 ms.

Because every runnable burst progresses at the same rate, one "virtual work" clock ``v`` (work done
by any burst present since time 0) orders completions: a burst arriving at ``v0`` with work ``w``
finishes when ``v`` reaches ``v0 + w``. A heap of those targets and one pending timer for the
earliest give O(log n) per arrival and completion. While no more bursts are runnable than there are
cores the rate is constant and an arrival that does not finish first leaves the timer alone.

Same signature as the pinned executors: ``execute(thread, work_s, label)``, a simpy generator;
``thread`` names the software thread (its timeline track), not where it runs. A software thread runs
one burst at a time: threads that :meth:`SharedThreads.serialize` names (several roles on one thread,
such as a one-thread learner that also serves inference, or an inference server thread that batches
queue for) queue their bursts FIFO; every other thread is one process that never overlaps its own
bursts anyway.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable

import numpy as np
import simpy
from simpy.events import Event

from archsim.sim.cpu import record
from archsim.sim.inline_events import succeed_at_tail
from archsim.sim.metrics import Recorder


def shared_capacity(n: int, hw_threads: int, cores: int, speed: float, smt_yield: float) -> float:
    """Work-seconds per second done by ``n`` runnable bursts together (see the module docstring)."""
    busy = min(n, hw_threads)
    doubled = max(0, busy - cores)
    return speed * (min(busy, cores) + doubled * (2.0 * smt_yield - 1.0))


class SharedThreads:
    """Processor sharing of ``hw_threads`` hardware threads among all runnable bursts."""

    def __init__(
        self,
        env: simpy.Environment,
        hw_threads: int,
        cores: int,
        speed: float,
        smt_yield: float,
        rec: Recorder,
    ) -> None:
        self.env = env
        self.hw_threads = hw_threads
        self.cores = min(cores, hw_threads)
        self.full_speed = speed  # a burst alone on a core
        self.rec = rec
        self.queue = rec.queue("cpu_run")
        # per-burst rate with n runnable, for every n up to the hardware threads (beyond: capacity
        # stays that of all threads)
        self._capacity = [
            shared_capacity(n, hw_threads, self.cores, speed, smt_yield)
            for n in range(hw_threads + 1)
        ]
        self._rates = [0.0]  # rate(n) for every n seen so far, computed once (the same division)
        self.v = 0.0  # work done by every burst present, since time 0
        self.t = 0.0  # time of the last update of v
        self.n = 0  # runnable bursts
        # (v at finish, seq, what to call when it finishes: an event's succeed, or a callback)
        self.heap: list[tuple[float, int, Callable[[], object]]] = []
        self.seq = 0
        self.timer_gen = 0  # the live timer's number; older timers are ignored
        self.timer_v = float("inf")  # v at which the live timer fires
        self.timer_rate = 0.0  # per-burst rate the live timer assumed
        self.timer_at = float("inf")  # when the live timer fires
        self.holding = False  # inside hold_timer(): the live timer is armed on release
        self.held_arm: tuple[int, float] | None = None  # (its number, delay) while holding
        # seconds (clipped to the window) with k hardware threads busy, k = 0..hw_threads (a list:
        # one float added per clock update; into numpy at the flush)
        self.level_s = [0.0] * (hw_threads + 1)
        self.series = rec.series_bins > 0
        self.timeline = rec.timeline is not None  # keep a slice per burst
        self.fifo: dict[int, simpy.Resource] = {}  # software threads shared by several roles
        self.tail = False  # a finish callback runs at the tail of the timer's processing

    def serialize(self, threads: list[int], each: list[int] | tuple[int, ...] = ()) -> None:
        """Software threads named more than once in ``threads``, and every thread in ``each``, run one
        burst at a time."""
        for thread in {t for t in threads if threads.count(t) > 1} | set(each):
            if thread not in self.fifo:
                self.fifo[thread] = simpy.Resource(self.env, capacity=1)

    def rate(self, n: int) -> float:
        """Work-seconds per second of each of ``n`` runnable bursts."""
        rates = self._rates
        if 0 <= n < len(rates):
            return rates[n]
        if n <= 0:
            return 0.0
        while len(rates) <= n:
            k = len(rates)
            rates.append(self._capacity[min(k, self.hw_threads)] / k)
        return rates[n]

    def _advance(self, now: float) -> None:
        t = self.t
        dt = now - t
        if dt <= 0:
            return
        n = self.n
        if n:
            rates = self._rates
            self.v += dt * (rates[n] if n < len(rates) else self.rate(n))
        end = self.rec.end
        start_c = t if t < end else end
        now_c = now if now < end else end
        if now_c > start_c:
            busy = n if n < self.hw_threads else self.hw_threads
            self.level_s[busy] += now_c - start_c
            if self.series:  # per-slot intervals for the power time series
                for slot in range(busy):
                    self.rec.cpu_busy(slot, start_c, now_c)
        self.t = now

    def execute(
        self, thread: int, work_s: float, label: str = "", track: str = "", args: dict | None = None
    ):
        fifo = self.fifo.get(thread)
        if fifo is None:
            yield from self._burst(thread, work_s, label, track, args)
            return
        with fifo.request() as turn:
            yield turn
            yield from self._burst(thread, work_s, label, track, args)

    def _burst(self, thread: int, work_s: float, label: str, track: str, args: dict | None):
        env = self.env
        arrive = env.now
        self._advance(arrive)
        done = env.event()
        self._push(work_s, done.succeed)
        yield done
        finish = env.now
        ideal = work_s / self.full_speed  # alone on a core
        self.queue.add_wait(arrive, arrive + max(0.0, (finish - arrive) - ideal))
        if self.timeline:  # the time beyond running alone on a core: its share of the waiting
            timeline = self.rec.timeline
            track = track or timeline.thread_names.get(thread, f"thread{thread}")
            extra = {"software_thread": thread, "slowdown_us": (finish - arrive - ideal) * 1e6}
            record(self.rec, label, track, arrive, finish - arrive, {**(args or {}), **extra})

    def start(self, work_s: float, on_done: Callable[[], object]) -> int:
        """A burst of ``work_s`` arriving now without a process: ``on_done()`` is called when it
        finishes (after the timer's bookkeeping, as a process would resume). The caller keeps the
        queue statistics (:meth:`account`); no timeline slice is kept. Returns its number, for
        :meth:`cancel`."""
        self._advance(self.env._now)
        return self._push(work_s, on_done)

    def cancel(self, burst: int) -> float:
        """Take burst number ``burst`` (from :meth:`start`, unfinished) off the CPU now: the work
        it has left."""
        self._advance(self.env.now)
        heap = self.heap
        index = next(i for i, entry in enumerate(heap) if entry[1] == burst)
        target = heap.pop(index)[0]
        heapq.heapify(heap)
        self.n -= 1
        self._reschedule()  # the rate rose, or the first to finish changed
        return max(0.0, target - self.v)

    def account(self, arrive: float, work_s: float, arrivals: int = 1) -> None:
        """The run-queue statistics of ``arrivals`` bursts of ``work_s`` in all, run back to back
        from ``arrive`` to now, as :meth:`_burst` keeps them (each waits its time beyond running
        alone on a core; the waits add up to the whole stretch's)."""
        ideal = work_s / self.full_speed
        queue = self.queue
        if arrive < queue.end:
            queue.arrivals += arrivals - 1  # add_wait counts one
        queue.add_wait(arrive, arrive + max(0.0, (self.env.now - arrive) - ideal))

    def _push(self, work_s: float, on_done: Callable[[], object]) -> int:
        target = self.v + work_s
        heapq.heappush(self.heap, (target, self.seq, on_done))
        self.seq += 1
        self.n += 1
        if not self.timer_rate:
            self._reschedule()  # the first burst
        elif (
            target < self.timer_v  # a new first to finish, before the live timer fires
            and self.t + (target - self.v) / self.rate(self.n) < self.timer_at
        ):
            self._reschedule()
        # Otherwise the first to finish is the same and its rate only fell (the per-burst rate never
        # grows with more bursts): the live timer fires early and re-arms then, one event for any
        # number of arrivals in between instead of a new timer per arrival.
        return self.seq - 1

    def _reschedule(self) -> None:
        """Arm one timer for the earliest finishing burst at the current rate."""
        self.timer_gen += 1
        heap = self.heap
        if not heap:
            self.timer_v, self.timer_rate, self.timer_at = float("inf"), 0.0, float("inf")
            return
        n, rates = self.n, self._rates
        rate = rates[n] if n < len(rates) else self.rate(n)
        self.timer_v, self.timer_rate = heap[0][0], rate
        delay = (self.timer_v - self.v) / rate
        if not delay > 0.0:  # max(0.0, delay), this runs once per finishing instant
            delay = 0.0
        self.timer_at = self.env._now + delay
        if self.holding:
            self.held_arm = (self.timer_gen, delay)
        else:
            self._arm(self.timer_gen, delay)

    def _arm(self, gen: int, delay: float) -> None:
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _event: self._on_timer(gen))

    def hold_timer(self) -> None:
        """Bursts started from here to :meth:`release_timer`, at one instant with no other event
        scheduled in between, arm only the last timer they would arm: the ones before it would
        be superseded at once and fire for nothing. The last one is scheduled on release, with
        the same delay; no event was scheduled in between, so it has the same place among the
        other events as when it was armed."""
        self.holding = True
        self.held_arm = None

    def release_timer(self) -> None:
        self.holding = False
        arm, self.held_arm = self.held_arm, None
        if arm is not None and arm[0] == self.timer_gen:  # not superseded by an empty heap
            self._arm(*arm)

    def _on_timer(self, gen: int) -> None:
        if gen != self.timer_gen:
            return  # superseded by a later arrival
        self._advance(self.env._now)
        heap, n, rates, timer_v = self.heap, self.n, self._rates, self.timer_v
        rate = rates[n] if n < len(rates) else self.rate(n)
        if not heap or rate != self.timer_rate or heap[0][0] != timer_v:
            self._reschedule()  # early: bursts arrived since it was armed and slowed the first
            return
        # v reached the earliest target up to rounding: finish it and any finishing with it
        limit = timer_v + 1e-12 * max(1.0, abs(timer_v))
        if self.v < timer_v:
            self.v = timer_v
        finished = []
        pop = heapq.heappop
        while heap and heap[0][0] <= limit:
            finished.append(pop(heap)[2])
            n -= 1
        self.n = n
        self._reschedule()
        last = finished.pop()
        for on_done in finished:  # in finishing order; callbacks may start new bursts
            on_done()
        # The last callback runs at the tail of this timer's processing: a done event it succeeds
        # as its last act may be processed in place when it would be next (archsim.sim.system)
        if getattr(last, "__func__", None) is Event.succeed:  # a process's burst (_burst)
            succeed_at_tail(last.__self__)
            return
        self.tail = True  # read (and cleared) by archsim.sim.fast_gil for its done events
        last()
        self.tail = False

    def flush(self) -> None:
        """Busy time per hardware thread into the recorder: with k busy, threads 0..k-1 are (Linux
        numbers a core's first thread before any second sibling, and fills idle cores first)."""
        self._advance(max(self.env.now, self.t))
        if self.rec.series_bins:
            return  # recorded slot by slot as it ran
        self.rec.cpu_busy_s[: self.hw_threads] += thread_busy_s(self.level_s)
        self.level_s = [0.0] * (self.hw_threads + 1)

    def unflushed_busy_s(self, at_s: float) -> np.ndarray:
        """Busy time per hardware thread that ``flush`` would add were the window to end at
        ``at_s`` (the clock there); read-only (archsim.sim.steady reads a run at checkpoints)."""
        levels = np.array(self.level_s)
        start = min(self.t, self.rec.end)
        if at_s > start:
            levels[min(self.n, self.hw_threads)] += at_s - start
        return thread_busy_s(levels)


def thread_busy_s(level_s) -> np.ndarray:
    """Busy seconds per hardware thread from the seconds spent at each busy level (index k: k
    threads busy): thread i is busy whenever more than i threads are, the sum of level_s[k > i]."""
    return np.cumsum(np.asarray(level_s, dtype=float)[::-1])[::-1][1:]
