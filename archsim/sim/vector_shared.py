"""Central-inference actors on the time-shared CPU (``--cpu-sched shared``) without a process each.

The reference (``plain_central_actor`` on archsim.sim.shared_cpu.SharedThreads) runs one simpy process
per actor: every env step is a process resumption, a burst event, a request event into a Store and
a response event, about a dozen simpy events. Under processor sharing an actor's step end is not
known when it starts (it depends on the bursts that arrive later), so the pinned fleet's trick of
computing it at once does not apply; but nothing else about an actor needs a process: when a batch's
actions arrive, the fleet hands each member's next env step to the processor-sharing CPU with a
callback (``SharedThreads.start``); when the CPU's one timer finishes it, the callback registers the
request's arrival with the fleet batcher (archsim.sim.batchers.FleetBatcher), which wakes only when
a batch can close. The CPU's virtual-time clock orders all finishes, so the work per env step is one
heap push and pop and one callback, and simpy sees one timer per distinct finishing instant.

It is the reference model: the same bursts enter the same processor-sharing queue in the same order
(batch members in batch order) and requests reach the batcher at the same arrival times, ordered by
actor id at equal times on both paths. tests/test_engine_agreement.py checks the metrics against the
reference on random systems. Timelines need a slice per step with its context: they use the reference.
"""

from __future__ import annotations

from bisect import insort
from functools import partial

from archsim.sim.batchers import FleetBatcher
from archsim.sim.inference import ARRIVAL_GRID_S
from archsim.sim.shared_cpu import SharedThreads
from archsim.sim.system import System


class SharedFleet:
    """All actors of a central-inference run on the time-shared CPU, driven by callbacks."""

    def __init__(self, system: System, batcher: FleetBatcher) -> None:
        self.system = system
        self.batcher = batcher
        self.threads: SharedThreads = system.threads
        actors = system.config.actors
        self.sent_at = [0.0] * actors
        # the step each actor has on the CPU (one at a time: the next starts when actions arrive)
        self.arrive = [0.0] * actors
        self.work = [0.0] * actors
        self.actor_threads = [int(t) for t in system.actor_threads]
        self.envs = system.config.envs_per_actor
        # what a finished step needs, looked up once; one callback per actor (not a closure per step)
        threads = self.threads
        self._env, self._queue, self._full_speed = threads.env, threads.queue, threads.full_speed
        self._rec, self._pending = system.rec, batcher.pending
        self._up_s = system.times.request_up_s
        self.on_done = [partial(self._finished, actor) for actor in range(actors)]
        batcher.deliver = self.deliver

    def start(self) -> None:
        self.deliver(list(range(self.system.config.actors)), first=True)

    def deliver(self, members: list[int], first: bool = False) -> None:
        """Actions for ``members`` arrived now: each starts its next env step on the CPU."""
        system = self.system
        rec = system.rec
        now = system.env.now
        end = rec.end
        now_c = now if now < end else end
        streams = system.streams
        start = self.threads.start
        sent_at, arrive, work, on_done = self.sent_at, self.arrive, self.work, self.on_done
        waited = 0.0
        self.threads.hold_timer()  # one CPU timer for all the members' starts
        for actor in members:
            if not first:
                sent = sent_at[actor]
                waited += now_c - (sent if sent < end else end)
            step_s = streams.next(actor)
            arrive[actor] = now
            work[actor] = step_s
            start(step_s, on_done[actor])
        self.threads.release_timer()
        rec.actor_wait_s += waited

    def _finished(self, actor: int) -> None:
        """``actor``'s env step ended now: count it and register its request with the batcher."""
        finish = self._env._now
        arrive = self.arrive[actor]
        # SharedThreads.account of one burst: its wait beyond running alone on a core
        slowdown = (finish - arrive) - self.work[actor] / self._full_speed
        left = arrive + (slowdown if slowdown > 0.0 else 0.0)
        queue = self._queue
        end = queue.end
        if arrive < end:  # QueueStat.add_wait(arrive, left), inlined: once per env step
            queue.arrivals += 1
            wait = (left if left < end else end) - arrive
            queue.wait_sum += wait
            queue.area += wait
        self.sent_at[actor] = finish
        rec = self._rec
        if finish < rec.end:
            rec.env_steps += self.envs
        at = round((finish + self._up_s) / ARRIVAL_GRID_S) * ARRIVAL_GRID_S  # arrival_time, inlined
        insort(self._pending, (at if at > finish else finish, actor))  # FleetBatcher.add
        threads = self.threads
        if threads.tail:  # the CPU timer's last callback, and this its last act
            threads.tail = False
            self.batcher.notify(tail=True)
        else:
            self.batcher.notify()


def start_shared_fleet(system: System) -> str:
    """Start the batcher and the fleet of a central-inference run on the time-shared CPU; the path."""
    batcher = FleetBatcher(system)
    fleet = SharedFleet(system, batcher)
    system.env.process(batcher.run())
    fleet.start()
    return "shared_fast"
