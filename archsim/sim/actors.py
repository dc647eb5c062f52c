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

import numpy as np

from archsim.sim.inference import FleetBatcher, PlainBatcher
from archsim.sim.system import System


def plain_central_actor(system: System, actor: int, batcher: PlainBatcher):
    env, rec, streams = system.env, system.rec, system.streams
    thread = int(system.actor_threads[actor])
    envs = system.config.envs_per_actor
    up_s = system.times.request_up_s
    while True:
        yield from system.threads.execute(thread, streams.next(actor), "env_step")
        sent = env.now
        if sent < rec.end:
            rec.env_steps += envs
        yield env.timeout(up_s)
        yield batcher.request(actor)
        rec.actor_wait_s += min(env.now, rec.end) - min(sent, rec.end)


def plain_local_actor(system: System, actor: int):
    env, rec, streams = system.env, system.rec, system.streams
    thread = int(system.actor_threads[actor])
    envs = system.config.envs_per_actor
    while True:
        yield from system.threads.execute(thread, streams.next(actor), "env_step")
        done = env.now
        if done < rec.end:
            rec.env_steps += envs
        yield from system.replay.insert(envs)
        rec.actor_wait_s += min(env.now, rec.end) - min(done, rec.end)


class ActorFleet:
    """All actors of a central-inference run, advanced a batch at a time (needs LindleyThreads)."""

    def __init__(self, system: System, batcher: FleetBatcher) -> None:
        self.system = system
        self.batcher = batcher
        self.sent_at = [0.0] * system.config.actors
        batcher.deliver = self.deliver

    def start(self) -> None:
        self.deliver(list(range(self.system.config.actors)), first=True)

    def deliver(self, members: list[int], first: bool = False) -> None:
        """Actions for ``members`` arrived now: run each one's next step and queue its request."""
        system = self.system
        now = system.env.now
        rec = system.rec
        end = rec.end
        finish_time = system.threads.finish_time
        nxt = system.streams.next
        threads = system.actor_threads
        envs = system.config.envs_per_actor
        up_s = system.times.request_up_s
        add = self.batcher.add
        sent_at = self.sent_at
        for actor in members:
            if not first:
                rec.actor_wait_s += min(now, end) - min(sent_at[actor], end)
            finish = finish_time(int(threads[actor]), nxt(actor), now, "env_step")
            sent_at[actor] = finish
            if finish < end:
                rec.env_steps += envs
            add(finish + up_s, actor)
        self.batcher.notify()


def closed_form_local(system: System) -> None:
    """Each actor alone on its thread, never throttled: count step ends inside the window."""
    rec = system.rec
    end = rec.end
    envs = system.config.envs_per_actor
    speed = system.layout.speed
    queue = rec.queue("cpu_run")  # every burst starts on arrival: arrivals count, zero wait
    for actor in range(system.config.actors):
        thread = int(system.actor_threads[actor])
        total = 0.0
        steps = 0
        while total < end:
            ends = total + np.cumsum(system.streams.chunk(actor) / speed[thread])
            steps += int(np.searchsorted(ends, end, side="left"))
            total = float(ends[-1])
        queue.arrivals += steps + 1  # the bursts that ended inside, and the one running at the end
        rec.env_steps += envs * steps
        rec.cpu_busy(thread, 0.0, total)
    system.replay.inserted += rec.env_steps
