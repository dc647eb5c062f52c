"""The GIL of archsim.sim.gil without one simpy event per slice: a small event loop of its own over
the learner process's threads, on pinned hardware threads (the fast path's Lindley executor).

The model is archsim.sim.gil's, step for step: a burst of ``k`` slices, each a Python part under the
GIL and a native part without it; a FIFO lock; a thread granted the GIL that another thread held
pays the hand-off first; a software thread runs its bursts one after another. What changes is how
time advances. The threads of one process are few (the training loop and its inference server
threads), so their state fits in a few fields and the next thing that happens among them (a part or
a hand-off that ends) is the earliest of one time per thread. ``_advance(t)`` plays those transitions
in time order up to ``t`` in plain Python; simpy only sees one timer:

- while one thread alone runs a burst and nobody waits for the GIL, nothing can change its course
  until another burst arrives, so the timer is set at the burst's end (one event for all its slices);
  a burst arriving earlier first plays the lone thread's parts up to that moment;
- while several threads run bursts, the timer is set at the next transition among them (one event
  per transition instead of the reference's lock request, grant, timeouts and release); while every
  thread of the process runs one, nothing from outside can change their course before one of the
  bursts ends, so the transitions up to then are played at once and the timer is set there.

A done event that would be the next one processed anyway is processed in place at the tail of the
timer's processing (archsim.sim.inline_events), and a caller at the tail of its own event takes its
turn in place: the same order of everything, fewer events.

Each part is booked on its hardware thread through ``LindleyThreads.finish_time`` at the moment it
starts, as the reference's ``execute`` does, so busy time and run-queue counts are the same sums. It
needs what makes that valid: every thread of the process on its own hardware thread, which no other
software thread uses (the pinned layout reserves the learner's threads), and no per-slice records
(timeline, power series); ``choose_gil`` returns the reference GIL otherwise.
"""

from __future__ import annotations

from collections import deque

import numpy as np
import simpy

from archsim.sim import inline_events
from archsim.sim.cpu import LindleyThreads
from archsim.sim.fast_gil_lone import ASK, HAND, IDLE, NAT, PLAIN, PY, advance_lone
from archsim.sim.gil import HANDOFF_S, Gil, slices
from archsim.sim.inline_events import fire, next_anyway, succeed_at_tail
from archsim.sim.python_share import BurstPython
from archsim.sim.shared_cpu import SharedThreads

BETWEEN = 0.5  # a simpy priority after URGENT (0) and before NORMAL (1)


class _Thread:
    """One software thread of the process: its queued bursts and where its current one is."""

    __slots__ = (
        "pending",
        "phase",
        "until",
        "left",
        "py_work",
        "nat_work",
        "done",
        "asked",
        "lone",
    )

    def __init__(self) -> None:
        self.pending: deque = deque()  # (work_s, python, done event) not yet started
        self.phase = IDLE
        self.until = 0.0  # end of the current part or hand-off
        self.left = 0  # slices of the current burst not yet finished, the current one included
        self.py_work = 0.0  # work of one slice's Python part, and of its native part
        self.nat_work = 0.0
        self.done: simpy.Event | None = None
        self.asked = 0.0  # when it asked for the GIL
        self.lone: tuple = ()  # archsim.sim.shared_gil: (burst number, start, work, parts)


class FastGil:
    """The process's GIL played by its own event loop; same interface as archsim.sim.gil.Gil."""

    def __init__(
        self,
        env: simpy.Environment,
        threads: LindleyThreads,
        handoff_s: float = HANDOFF_S,
        process_threads: int = 0,
    ) -> None:
        self.env = env
        # software threads of the process (0: not known): while all of them run bursts, nothing
        # from outside can change their course before one of the bursts ends (a burst handed to a
        # busy thread waits behind its current one), so _arm plays the transitions up to then
        self.process_threads = process_threads
        self.threads = threads
        self.handoff_s = handoff_s
        self.holder: int | None = None  # the thread that held the GIL last
        self.owner: int | None = None  # the thread that holds it now
        self.waiting: deque[int] = deque()  # threads asking for it, first come first served
        self.state: dict[int, _Thread] = {}
        self.active: list[int] = []  # threads with a burst under way
        self.handoffs = 0
        self.wait_s = 0.0
        self.timer_gen = 0
        # pinned: done events of bursts that end while the own event loop runs, succeeded when it
        # has run (None: at once); the one done of a run may then be processed in place
        self.collect = isinstance(threads, LindleyThreads)
        self.dones: list[simpy.Event] | None = None
        if isinstance(threads, LindleyThreads):  # parts started before the end, booked at the end
            threads.flush_hooks.append(lambda: self._advance(threads.rec.end))

    def run(
        self,
        thread: int,
        work_s: float,
        python: BurstPython,
        label: str = "",
        tail: bool = False,
        after: simpy.Event | None = None,
    ):
        """Run a burst of ``work_s`` on ``thread`` (a simpy generator), its Python part under the GIL.
        ``tail``: the caller runs at the tail of the event that resumed it (nothing is left to do in
        that event's processing once it waits for the burst). ``after``: an event of this instant
        that was the last one scheduled (the turn's event would come right after it)."""
        env = self.env
        state = self.state.get(thread)
        if state is None:
            state = self.state[thread] = _Thread()
        done = env.event()
        state.pending.append((work_s, python, done))
        if state.phase == IDLE and len(state.pending) == 1:
            # The reference takes the thread's turn first, an event later at this instant, and
            # then asks for the GIL: two threads that start bursts at one instant (a replay insert
            # that frees the learner while the server goes on) ask in the same order here. When that
            # event would be the next one processed and the caller is at its event's tail, the
            # turn is taken here (the same order, one event fewer).
            if after is not None and inline_events.INLINE:
                after.callbacks.append(lambda _event: self._turn_after(thread, state))
                yield done
                return
            if tail and next_anyway(env):
                self._begin(thread, state)
                yield done
                return
            turn = env.event()
            turn.callbacks.append(lambda _event: self._begin(thread, state))
            turn.succeed()
        yield done

    def _turn_after(self, thread: int, state: _Thread) -> None:
        """The turn's event would have been scheduled right after the event whose last callback
        this is: it comes next unless that event's processing scheduled URGENT events at this
        instant (NORMAL ones come after it). Taken here then, else scheduled to come after those
        and before every NORMAL event of the instant (a priority between the two)."""
        env = self.env
        queue = env._queue
        if not (queue and queue[0][0] == env._now and queue[0][1] < BETWEEN):
            self._begin(thread, state)
            return
        turn = simpy.Event(env)
        turn._ok = True
        turn._value = None
        turn.callbacks.append(lambda _event: self._begin(thread, state))
        env.schedule(turn, BETWEEN)

    def _begin(self, thread: int, state: _Thread) -> None:
        now = self.env.now
        self._collect()
        self._advance(now)
        if state.phase == IDLE and state.pending:
            self._start_next(thread, state, now)
        self._arm()

    # -- the process's own event loop ------------------------------------------------------------

    def _start_next(self, thread: int, state: _Thread, t: float) -> None:
        work_s, python, done = state.pending.popleft()
        state.done = done
        self.active.append(thread)
        python_s = work_s * python.share
        if python_s <= 0:
            state.phase = PLAIN
            state.until = self._part(thread, work_s, t)
            return
        k = slices(python_s, python.releases)
        state.left = k
        state.py_work = python_s / k
        state.nat_work = (work_s - python_s) / k
        self._ask(thread, state, t)

    def _ask(self, thread: int, state: _Thread, t: float) -> None:
        if self.owner is None and not self.waiting:
            self.owner = self.holder = thread  # a free GIL: no hand-off
            state.phase = PY
            state.until = self._part(thread, state.py_work, t)
        else:
            state.phase = ASK
            state.asked = t
            self.waiting.append(thread)

    def _step(self, thread: int, state: _Thread) -> None:
        """The current part or hand-off of ``thread`` ends now (at ``state.until``)."""
        t = state.until
        phase = state.phase
        if phase == HAND:
            self.wait_s += t - state.asked
            self.holder = thread
            state.phase = PY
            state.until = self._part(thread, state.py_work, t)
            return
        if phase == PY:
            self.owner = None  # release: the first waiter gets it and pays the hand-off
            if self.waiting:
                nxt = self.waiting.popleft()
                other = self.state[nxt]
                self.owner = nxt
                self.handoffs += 1  # it asked while another held it: never the last holder
                other.phase = HAND
                other.until = t + self.handoff_s
                self._handoff(nxt, other)
            if state.nat_work > 0:
                state.phase = NAT
                state.until = self._part(thread, state.nat_work, t)
                return
        if phase != PLAIN:  # PY without native work, or NAT: the slice is over
            state.left -= 1
            if state.left > 0:
                self._ask(thread, state, t)
                return
        self._finish(thread, state, t)

    def _finish(self, thread: int, state: _Thread, t: float) -> None:
        """The thread's burst ends at ``t``: its caller goes on; its next queued burst starts."""
        state.phase = IDLE
        self.active.remove(thread)
        if self.dones is not None:
            self.dones.append(state.done)
        elif not state.pending and getattr(self.threads, "tail", False):
            self.threads.tail = False  # archsim.sim.shared_cpu: nothing is left after this call
            succeed_at_tail(state.done)
        else:
            state.done.succeed()
        if state.pending:
            self._start_next(thread, state, t)

    def _part(self, thread: int, work_s: float, t: float) -> float:
        """Book a part of ``work_s`` starting at ``t`` on the thread's pinned hardware thread: its end."""
        return self.threads.finish_time(thread, work_s, t)

    def _handoff(self, thread: int, state: _Thread) -> None:
        """A hand-off to ``thread`` ends at ``state.until`` (the own event loop plays it)."""

    def _next(self) -> tuple[float, int]:
        """(time, thread) of the earliest transition; ties go to the lower thread."""
        best_t, best = float("inf"), -1
        for thread in self.active:
            state = self.state[thread]
            if state.phase != ASK and state.until < best_t:
                best_t, best = state.until, thread
        return best_t, best

    def _advance(self, until: float) -> None:
        while True:
            if len(self.active) == 1 and not self.waiting:
                advance_lone(self, until)
                return
            t, thread = self._next()
            if thread < 0 or t > until:
                return
            self._step(thread, self.state[thread])

    def _lone_end(self, state: _Thread) -> float:
        """When the burst of a thread alone in the process ends, nobody else asking meanwhile: its
        parts' ends summed in the order finish_time sums them (start = the previous end)."""
        t = state.until
        speed = self.threads.speed[self.active[0]]
        left, phase = state.left, state.phase
        if phase == PLAIN:
            return t
        if phase == HAND:
            t = t + state.py_work / speed
            phase = PY
        if phase == PY and state.nat_work > 0:
            t = t + state.nat_work / speed
        py_s, nat_s = state.py_work / speed, state.nat_work / speed
        if state.nat_work > 0:
            for _ in range(left - 1):
                t = t + py_s
                t = t + nat_s
        else:
            for _ in range(left - 1):
                t = t + py_s
        return t

    def _collect(self) -> None:
        """From here to _arm, done events are collected (pinned threads: nothing else schedules
        events meanwhile), to be succeeded by _arm in the same order."""
        if self.collect:
            self.dones = []

    def _arm(self) -> None:
        """One timer: at the lone burst's end, or at the next transition among several. Then the
        collected done events, in the order they were succeeded before the timer was scheduled;
        called at the tail of an event's processing, so one done may be processed in place."""
        self.timer_gen += 1
        dones, self.dones = self.dones, None
        env = self.env
        delay, at = None, 0.0
        if self.active:
            if len(self.active) == 1 and not self.waiting:
                at = self._lone_end(self.state[self.active[0]])
            elif len(self.active) == self.process_threads:
                at = self._play_to_burst_end()
            else:
                at, _ = self._next()
            delay = max(0.0, at - env.now)
        later = delay is None or env.now + delay > env.now
        if dones and len(dones) == 1 and later and next_anyway(env):
            # the done would be the next event processed: process it here
            self._set_timer(delay, at)
            fire(dones[0])
            return
        for done in dones or ():
            done.succeed()
        self._set_timer(delay, at)

    def _play_to_burst_end(self) -> float:
        """Every thread of the process runs a burst: play the transitions ahead (booking their
        parts early, as the lone path does; each part starts when its thread's previous one ends,
        so its run-queue wait is 0 and the sums do not depend on when it is booked) up to the
        first that ends a burst, which a timer must resume: its time."""
        while True:
            t, thread = self._next()
            state = self.state[thread]
            phase = state.phase
            if (
                phase == PLAIN
                or (phase == NAT and state.left == 1)
                or (phase == PY and state.nat_work <= 0 and state.left == 1)
            ):
                return t
            self._step(thread, state)

    def _set_timer(self, delay: float | None, at: float) -> None:
        if delay is None:
            return
        gen = self.timer_gen
        timer = self.env.timeout(delay)
        timer.callbacks.append(lambda _event: self._on_timer(gen, at))

    def _on_timer(self, gen: int, at: float) -> None:
        if gen != self.timer_gen:
            return  # a burst arrived since and re-armed it
        self._collect()
        self._advance(at)
        self._arm()


def choose_gil(system, threads) -> Gil | FastGil:
    """FastGil where it computes the reference model (module docstring), else the reference Gil."""
    if system.config.engine == "simpy":
        return Gil(system.env, threads)
    if isinstance(threads, SharedThreads):
        from archsim.sim.shared_gil import SharedFastGil  # it builds on FastGil

        return Gil(system.env, threads) if threads.timeline else SharedFastGil(system.env, threads)
    if isinstance(threads, LindleyThreads) and not threads.detailed:
        gil_threads = sorted({system.learner_thread, *system.server_threads})
        hosted = np.bincount(system.layout.placement, minlength=system.layout.hw_threads)
        if np.all(hosted[gil_threads] == 1):
            return FastGil(system.env, threads, process_threads=len(gil_threads))
    return Gil(system.env, threads)
