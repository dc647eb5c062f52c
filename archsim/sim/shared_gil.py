"""archsim.sim.fast_gil's GIL state machine on the time-shared CPU (``--cpu-sched shared``).

Under processor sharing a part's end depends on the bursts that arrive later, so the machine cannot
run ahead on its own clock as on pinned threads: each part is a processor-sharing burst started with
a callback (``SharedThreads.start``) and each hand-off a timer with one, and the transitions run when
they fire. That already saves the reference's lock events and generator resumptions per slice.

A thread alone in its process with a burst (no other thread of the process running one, nobody
waiting for the GIL) is never held up by the GIL: its remaining slices run back to back, always
runnable, so under processor sharing they finish exactly when one burst of their summed work does
(the CPU's rate does not depend on how a runnable thread's work is cut). Such a stretch is one burst
on the CPU. When another thread of the process starts a burst, the stretch is cut at that instant
(``SharedThreads.cancel`` gives the work left; the work done says which slice and which part the
thread is in, and so whether it holds the GIL) and the thread goes on part by part. The run-queue
statistics of a stretch are its parts' (their waits add up); it differs from the reference only in
float rounding.

A burst queued behind the one that ends on its thread (an inference batch's locked part behind
another batch's free part on one server thread) starts two events after the ending burst's done, as
the reference passes the thread's turn (a release, then a grant): started at once, it had asked
for the GIL ahead of another thread starting a burst at that instant, where the reference asks
after it (hypothesis, issue 17: frames/s 3,750 fast vs 4,150 reference in 0.02 s; now equal).
"""

from __future__ import annotations

from archsim.sim.fast_gil import NAT, PY, FastGil, _Thread
from archsim.sim.fast_gil_lone import IDLE

LONE = 6  # a phase: the thread's remaining slices run as one burst on the CPU


class SharedFastGil(FastGil):
    """FastGil whose parts are processor-sharing bursts (module docstring)."""

    def _begin(self, thread: int, state: _Thread) -> None:
        for other in self.active:  # another thread's lone stretch ends here: it may meet this one
            if other != thread and self.state[other].phase == LONE:
                self._split(other, self.state[other])
        super()._begin(thread, state)

    def _ask(self, thread: int, state: _Thread, t: float) -> None:
        if self.owner is not None or self.waiting or len(self.active) > 1:
            super()._ask(thread, state, t)
            return
        self.owner = self.holder = thread  # a free GIL, and nobody else to want it meanwhile
        state.phase = LONE
        work = state.left * (state.py_work + state.nat_work)
        parts = state.left * (2 if state.nat_work > 0 else 1)
        arrive = self.env.now
        threads = self.threads

        def stretch_done() -> None:
            threads.account(arrive, work, parts)
            self.owner = None
            state.left = 0
            self._finish(thread, state, self.env.now)

        state.lone = (threads.start(work, stretch_done), arrive, work, parts)
        state.until = float("inf")

    def _finish(self, thread: int, state: _Thread, t: float) -> None:
        """As FastGil's, but a burst queued behind the one that ends starts where the reference
        starts it: its thread's turn passes by a release and a grant (two events after the ending
        burst's done is processed), so another thread that starts a burst at this instant asks
        for the GIL in the same order as on the reference (module docstring)."""
        if not state.pending:
            super()._finish(thread, state, t)
            return
        state.phase = IDLE
        self.active.remove(thread)
        done = state.done
        done.callbacks.insert(0, lambda _event: self._pass_turn(thread, state))
        done.succeed()

    def _pass_turn(self, thread: int, state: _Thread) -> None:
        """The reference's turn release, then its grant: the queued burst begins at the second."""
        release = self.env.event()
        release.callbacks.append(lambda _event: self._grant(thread, state))
        release.succeed()

    def _grant(self, thread: int, state: _Thread) -> None:
        grant = self.env.event()
        grant.callbacks.append(lambda _event: self._begin(thread, state))
        grant.succeed()

    def _split(self, thread: int, state: _Thread) -> None:
        """Cut ``thread``'s lone stretch now: book the parts it ran, resume part by part."""
        burst, arrive, work, _ = state.lone
        threads = self.threads
        done_work = max(0.0, work - threads.cancel(burst))  # a cut at its start: 0, not -1 ulp
        py, nat = state.py_work, state.nat_work
        period = py + nat
        slice_ = max(0, min(int(done_work // period), state.left - 1))
        into = max(0.0, done_work - slice_ * period)
        in_python = nat <= 0 or into < py
        started = slice_ * (2 if nat > 0 else 1) + (1 if in_python else 2)  # the current included
        threads.account(arrive, done_work, started)
        state.left -= slice_
        now = self.env.now
        if in_python:
            state.phase = PY
            state.until = self._part(thread, max(0.0, py - into), now, arrivals=0)
        else:
            self.owner = None  # it dropped the GIL after this slice's Python part
            state.phase = NAT
            state.until = self._part(thread, max(0.0, period - into), now, arrivals=0)

    def _part(self, thread: int, work_s: float, t: float, arrivals: int = 1) -> float:
        state = self.state[thread]
        threads = self.threads
        arrive = self.env.now

        def part_done() -> None:
            threads.account(arrive, work_s, arrivals)
            state.until = self.env.now
            self._step(thread, state)

        threads.start(work_s, part_done)
        return float("inf")  # known when it finishes

    def _handoff(self, thread: int, state: _Thread) -> None:
        timer = self.env.timeout(self.handoff_s)
        timer.callbacks.append(lambda _event: self._step(thread, state))

    def _advance(self, until: float) -> None:
        """Transitions run from the CPU's callbacks."""

    def _arm(self) -> None:
        """No timer of its own."""
