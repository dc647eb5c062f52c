"""Fewer simpy events with the same order of everything (issue 17): an event that would be the next
one simpy processes may be processed in place by a caller with nothing left to do, and processes
that would be started for one job each may be reused.

Why it is exact: simpy processes events in (time, priority, number) order. A caller that succeeds an
event as the last act of the event processing it (at its "tail") would see that event processed next
when nothing else is scheduled at this instant ahead of it; processing it at once gives every
callback the same state in the same order. Only the event numbers differ (fewer are made).
"""

from __future__ import annotations

import simpy
from simpy.events import URGENT, Event

# False: every event is scheduled as simpy would (tests/test_sim_inline_events.py compares the two)
INLINE = True


def next_anyway(env: simpy.Environment) -> bool:
    """Whether an event succeeded now (priority NORMAL) would be the next one simpy processes: no
    event is scheduled at this instant ahead of it (URGENT or NORMAL; later ones are LATE or at a
    later time)."""
    if not INLINE:
        return False
    queue = env._queue
    return not queue or queue[0][0] > env._now or queue[0][1] > simpy.core.NORMAL


def fire(event: simpy.Event) -> None:
    """Process ``event`` (untriggered, value None) here and now, as simpy's step would."""
    event._ok = True
    event._value = None
    callbacks, event.callbacks = event.callbacks, None
    for callback in callbacks:
        callback(event)


def succeed_at_tail(event: simpy.Event) -> None:
    """``event.succeed()`` for a caller at the tail of the event simpy is processing (nothing is
    left to do in it after this call): when ``event`` would be processed next anyway, it is
    processed at once instead, one simpy event fewer and the same order of everything."""
    if next_anyway(event.env):
        fire(event)
    else:
        event.succeed()


class ProcessPool:
    """Runs jobs (argument tuples of the generator function ``body``) on a few reused processes
    instead of a new process per job, which simpy starts with an event and ends with another that
    nobody waits on. A process whose job is over waits on an event of its own; the next job wakes
    it with that event scheduled as simpy schedules a new process's start (URGENT, now), so the job
    starts at the same place among the instant's events. One event per job instead of two; as many
    processes as jobs are ever under way at once."""

    def __init__(self, env: simpy.Environment, body) -> None:
        self.env = env
        self.body = body
        self.idle: list[Event] = []  # wake-up events of processes between jobs

    def start(self, job: tuple) -> None:
        """Run ``body(*job)`` from now."""
        if not self.idle:
            self.env.process(self._serve(job))
            return
        wake = self.idle.pop()
        wake._ok = True
        wake._value = job
        self.env.schedule(wake, URGENT)

    def _serve(self, job: tuple):
        while True:
            yield from self.body(*job)
            wake = Event(self.env)
            self.idle.append(wake)
            job = yield wake
