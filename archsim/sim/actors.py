"""Actors: each steps ``envs_per_actor`` environments on its own software thread, pinned to a
hardware thread (archsim.perf.cpu), then gets actions either from the central inference server
(SEED RL) or by running the policy on its own thread (Ape-X/R2D2 local inference).

Three implementations of the same actor, from general to fast:
- ``plain_central_actor`` / ``plain_local_actor``: one simpy process per actor (the plain path);
- ``ActorFleet``: central inference without per-actor processes: when a batch's actions arrive, the
  fleet runs every member's next CPU burst through the Lindley recursion and tells the batcher when
  each next request will arrive;
- ``closed_form_local``: local inference where every actor owns its hardware thread and nothing
  throttles it: an actor's step ends are the running sum of its step times, one numpy cumsum.
"""

from __future__ import annotations

from bisect import insort

import numpy as np

from archsim.sim.batchers import FleetBatcher, PlainBatcher
from archsim.sim.cpu import record
from archsim.sim.inference import ARRIVAL_GRID_S, in_actor_order
from archsim.sim.system import SAMPLE_CHUNK, System


def plain_central_actor(system: System, actor: int, batcher: PlainBatcher):
    env, rec, streams = system.env, system.rec, system.streams
    thread = int(system.actor_threads[actor])
    envs = system.config.envs_per_actor
    up_s = system.times.request_up_s
    track, timeline = f"actor {actor}", rec.timeline
    while True:
        args = None if timeline is None else {"step": timeline.next_step(actor)}
        yield from system.threads.execute(thread, streams.next(actor), "env_step", track, args)
        sent = env.now
        if timeline is not None:
            timeline.sent[actor] = sent
        if sent < rec.end:
            rec.env_steps += envs
        yield batcher.arrival(actor, up_s)
        yield batcher.request(actor)
        rec.actor_wait_s += min(env.now, rec.end) - min(sent, rec.end)


def plain_local_actor(system: System, actor: int):
    env, rec, streams = system.env, system.rec, system.streams
    thread = int(system.actor_threads[actor])
    envs = system.config.envs_per_actor
    track, timeline = f"actor {actor}", rec.timeline
    net = getattr(system, "net", None)  # set by archsim.sim.run for --nodes / --replay-placement
    while True:
        args = None if timeline is None else {"step": timeline.next_step(actor)}
        yield from system.threads.execute(thread, streams.next(actor), "env_step", track, args)
        # actors whose steps end at one instant go on (to the replay limiter) in actor-id order on
        # every path, whatever order the CPU executor finished them in
        yield in_actor_order(env, actor, system.config.actors)
        done = env.now
        if done < rec.end:
            rec.env_steps += envs
        yield from system.replay.insert(envs)
        rec.actor_wait_s += min(env.now, rec.end) - min(done, rec.end)
        if timeline is not None and env.now > done:  # held by the replay rate limiter
            record(rec, "await_replay", track, done, env.now - done, args)
        if net is not None:  # replay inserts over the network (archsim.sim.replay_server)
            yield from net.actor_step(system, actor, net.actor_nodes[actor], thread, track, envs)


class ActorFleet:
    """All actors of a central-inference run, advanced a batch at a time (needs LindleyThreads)."""

    def __init__(self, system: System, batcher: FleetBatcher) -> None:
        self.system = system
        self.batcher = batcher
        self.sent_at = [0.0] * system.config.actors
        self.actor_threads = [int(t) for t in system.actor_threads]
        batcher.deliver = self.deliver

    def start(self) -> None:
        self.deliver(list(range(self.system.config.actors)), first=True)

    def deliver(self, members: list[int], first: bool = False) -> None:
        """Actions for ``members`` arrived now: run each one's next step and queue its request."""
        if self.system.threads.detailed:
            self._deliver_detailed(members, first)
        else:
            self._deliver_inline(members, first)
        # at the tail of serve_batch (its last act), which ends its process's event: run() may
        # resume in place; the first delivery is before the run
        self.batcher.notify(tail=not first)

    def _deliver_detailed(self, members: list[int], first: bool) -> None:
        system = self.system
        now = system.env.now
        rec = system.rec
        end = rec.end
        for actor in members:
            if not first:
                rec.actor_wait_s += min(now, end) - min(self.sent_at[actor], end)
            thread = int(system.actor_threads[actor])
            work = system.streams.next(actor)
            timeline = rec.timeline
            args = None if timeline is None else {"step": timeline.next_step(actor)}
            finish = system.threads.finish_time(
                thread, work, now, "env_step", f"actor {actor}", args
            )
            if timeline is not None:
                timeline.sent[actor] = finish
            self.sent_at[actor] = finish
            if finish < end:
                rec.env_steps += system.config.envs_per_actor
            self.batcher.add(finish, actor)

    def _deliver_inline(self, members: list[int], first: bool) -> None:
        """The same arithmetic as _deliver_detailed and LindleyThreads.finish_time, inlined: this
        loop runs once per simulated env step and dominates the fast path's run time."""
        system = self.system
        now = system.env.now
        rec = system.rec
        end = rec.end
        threads = system.threads
        free_at, speed, busy = threads.free_at, threads.speed, threads.busy_s
        queue = threads.queue
        streams = system.streams
        buffers, positions = streams.buffers, streams.pos
        actor_threads = self.actor_threads
        sent_at = self.sent_at
        up_s = system.times.request_up_s
        pending = self.batcher.pending
        now_c = now if now < end else end
        waited = 0.0
        steps = 0
        arrivals = 0
        queue_wait = 0.0
        grid = ARRIVAL_GRID_S
        # many members at once (the first delivery): one sort of the new arrivals into the list
        # instead of an insort each (the same sorted list: no two arrivals are equal)
        bulk = len(members) > len(pending)
        arrived = []
        for actor in members:
            if not first:
                sent = sent_at[actor]
                waited += now_c - (sent if sent < end else end)
            pos = positions[actor]
            buf = buffers[actor]
            if pos == len(buf):
                buf, pos = streams.refill(actor)
            positions[actor] = pos + 1
            thread = actor_threads[actor]
            free = free_at[thread]
            start = now if now > free else free
            finish = start + buf[pos] / speed[thread]
            free_at[thread] = finish
            if now < end:
                arrivals += 1
                queue_wait += (start if start < end else end) - now
            busy[thread] += (finish if finish < end else end) - (start if start < end else end)
            sent_at[actor] = finish
            if finish < end:
                steps += 1
            at = round((finish + up_s) / grid) * grid  # arrival_time(finish, up_s), inlined
            if bulk:
                arrived.append((at if at > finish else finish, actor))
            else:
                insort(pending, (at if at > finish else finish, actor))
        if bulk:
            pending.extend(arrived)
            pending.sort()
        rec.actor_wait_s += waited
        rec.env_steps += steps * system.config.envs_per_actor
        queue.arrivals += arrivals
        queue.wait_sum += queue_wait
        queue.area += queue_wait


def closed_form_local(system: System) -> None:
    """Each actor alone on its thread, never throttled: count step ends inside the window."""
    rec = system.rec
    end = rec.end
    envs = system.config.envs_per_actor
    speed = system.layout.speed
    queue = rec.queue("cpu_run")  # every burst starts on arrival: arrivals count, zero wait
    streams = system.streams
    for actor in range(system.config.actors):
        thread = int(system.actor_threads[actor])
        total = 0.0
        steps = 0
        while total < end:
            # SAMPLE_CHUNK at a time: the same float sums as before chunks grew (exact to the bit)
            ends = total + np.cumsum(streams.take(actor, SAMPLE_CHUNK) / speed[thread])
            steps += int(np.searchsorted(ends, end, side="left"))
            total = float(ends[-1])
        queue.arrivals += steps + 1  # the bursts that ended inside, and the one running at the end
        rec.env_steps += envs * steps
        rec.cpu_busy(thread, 0.0, total)
    system.replay.inserted += rec.env_steps
