"""The params lock (``--param-lock on``): a FIFO lock that the learner's replay sample and update and
each inference batch's forward pass hold (archsim.sim.learner, archsim.sim.inference).

Requests that reach the lock at one instant are put to it in a fixed order on every engine: after
every ordinary event of the instant, the learner first, then the inference server threads in turn.
The model leaves the order of simultaneous requests open (either is a valid run), but a simpy
Resource takes them in the order its callers happen to run, which is an engine's own event order:
the reference's threads start a queued burst's timer when the thread is granted, the fast engine's
Lindley threads when the burst arrives. Found by hypothesis (issue 17): inference batches whose free
and locked parts last equally long make two server threads ask at one instant every cycle, and
the engines, each granting its own first, drifted 14 env steps apart in 0.02 s (frames/s 12,150
fast vs 12,850 reference). Ordered here, both take the same turns. The request waits on one event
of a priority between NORMAL and the actors' same-instant arrivals (archsim.sim.inference
``in_actor_order``), so it comes after the instant's ordinary events and before any batch that
instant closes, on both engines (the fleet's batcher closes at LATE, the plain one at an arrival).
"""

from __future__ import annotations

import simpy
from simpy.events import NORMAL, Event


class ParamsLock(simpy.Resource):
    """A capacity-1 simpy Resource whose same-instant requests are ordered by requester (module
    docstring): key 0 the learner, 1 + i the i-th inference server thread."""

    def __init__(self, env: simpy.Environment, servers: int, actors: int) -> None:
        super().__init__(env, capacity=1)
        # priorities in (NORMAL, NORMAL + 1 / (actors + 1)): below the lowest in_actor_order
        self.step = 1.0 / ((servers + 2) * (actors + 1))

    def in_turn(self, key: int) -> Event:
        """An event of now that comes after this instant's ordinary events and after the
        same-instant turns of lower keys."""
        event = Event(self._env)
        event._ok = True
        event._value = None
        self._env.schedule(event, NORMAL + (key + 1) * self.step)
        return event


def locked(lock: ParamsLock | None, work, key: int = 0):
    """Run the generator ``work`` holding ``lock``, if there is one, asking for it in the turn of
    requester ``key`` (ParamsLock)."""
    if lock is None:
        yield from work
        return
    yield lock.in_turn(key)
    with lock.request() as turn:
        yield turn
        yield from work
