"""The dynamic batchers of central inference (archsim.sim.inference has the rule and a batch's
trip): two implementations of the same rule. ``PlainBatcher`` keeps requests in a simpy Store (one
event per request); ``FleetBatcher`` keeps the known future arrival times of the actors' next
requests in a sorted list and wakes only when a batch can close (a few events per batch).
"""

from __future__ import annotations

import bisect
from collections.abc import Callable

import simpy
from simpy.events import Event

from archsim.sim.inference import (
    LateTimeout,
    arrival_time,
    delay_to,
    in_actor_order,
    serve_batch,
    wake_or_late,
)
from archsim.sim.inline_events import ProcessPool, succeed_at_tail
from archsim.sim.system import System


class PlainBatcher:
    """Requests are (arrival time, actor, response event) items in a simpy Store."""

    def __init__(self, system: System) -> None:
        self.system = system
        self.store = simpy.Store(system.env)
        self.queue = system.rec.queue("inference")
        self.capacity = system.config.inference_batch // system.config.envs_per_actor
        self.timeout_s = system.config.inference_timeout_us * 1e-6
        self.batches = 0
        self.wait_for_server = system.times.batch_when_server_free
        self.servers = len(system.server_threads)
        self.busy = 0  # closed batches whose server has not got their actions yet
        self.freed = system.env.event()

    def server_free(self) -> None:
        if self.wait_for_server:
            self.busy -= 1
            if not self.freed.triggered:
                self.freed.succeed()

    def arrival(self, actor: int, delay_s: float) -> Event:
        """The moment ``actor``'s request, sent now, reaches the batcher (``delay_s`` later, on the
        arrival grid): after every ordinary event of that instant and after the same-instant
        arrivals of lower actor ids."""
        env = self.system.env
        at = arrival_time(env.now, delay_s)
        return in_actor_order(env, actor, self.system.config.actors, delay_to(env.now, at))

    def request(self, actor: int) -> Event:
        """Called by an actor when its request arrives; returns the event of its actions."""
        response = self.system.env.event()
        self.queue.enter(self.system.env.now)
        self.store.put((self.system.env.now, actor, response))
        return response

    def run(self):
        env = self.system.env
        store = self.store
        while True:
            first = yield store.get()
            batch = [first]
            deadline = first[0] + self.timeout_s
            while len(batch) < self.capacity:
                if store.items:
                    if store.items[0][0] > deadline:
                        break
                    batch.append((yield store.get()))
                    continue
                if env.now > deadline:
                    break
                get = store.get()
                timer = LateTimeout(env, deadline - env.now)
                yield get | timer
                if get.triggered:
                    batch.append(get.value)
                else:
                    get.cancel()
                    break
            while self.wait_for_server and self.busy >= self.servers:
                if self.freed.triggered:
                    self.freed = env.event()
                if len(batch) >= self.capacity:
                    yield self.freed
                    continue
                get = store.get()
                yield get | self.freed
                if get.triggered:
                    batch.append(get.value)
                else:
                    get.cancel()
            if self.wait_for_server:
                self.busy += 1
            for arrived, _, _ in batch:
                self.queue.leave(env.now, arrived)
            responses = {actor: response for _, actor, response in batch}
            members = [actor for _, actor, _ in batch]
            env.process(
                serve_batch(
                    self.system, members, _succeed_all(responses), self.batches, self.server_free
                )
            )
            self.batches += 1


def _below(pending: list[tuple[float, int]], cap: int, now: float) -> bool:
    """Whether fewer than ``cap`` requests have arrived by ``now``."""
    return len(pending) < cap or pending[cap - 1][0] > now


def _succeed_all(responses: dict[int, Event]) -> Callable[[list[int]], None]:
    def deliver(members: list[int]) -> None:
        for actor in members:
            responses[actor].succeed()

    return deliver


class FleetBatcher:
    """Arrivals are known ahead (the fleet computes them); one wake-up per closing decision."""

    def __init__(self, system: System) -> None:
        self.system = system
        # (arrival time, actor): an actor has at most one request out; ties go by actor id
        self.pending: list[tuple[float, int]] = []
        self.queue = system.rec.queue("inference")
        self.capacity = system.config.inference_batch // system.config.envs_per_actor
        self.timeout_s = system.config.inference_timeout_us * 1e-6
        self.batches = 0
        self.wake = system.env.event()
        self.deliver: Callable[[list[int]], None] = lambda members: None
        self.wait_for_server = system.times.batch_when_server_free
        self.servers = len(system.server_threads)
        self.busy = 0  # closed batches whose server has not got their actions yet
        self.armed: float | None = None  # the closing time run() sleeps until, if it does
        self.servers_pool = ProcessPool(system.env, serve_batch)  # one event per batch

    def server_free(self) -> None:
        if self.wait_for_server:  # otherwise no wake-up: it would reorder same-instant closes
            self.busy -= 1
            self._wake()

    def add(self, sent: float, actor: int) -> None:
        """Register an actor's next request, sent at ``sent`` (>= now)."""
        bisect.insort(self.pending, (arrival_time(sent, self.system.times.request_up_s), actor))

    def notify(self, tail: bool = False) -> None:
        """New arrivals may close the open batch earlier: recompute, unless run() already sleeps
        until the closing time they give (woken, it would only set the same timer again; with
        thousands of actors that was a wake-up per env step). ``tail``: the caller is at the tail
        of the event it runs in (run() may then resume in place: archsim.sim.inline_events)."""
        if self.armed is not None and self.pending and self._close() == self.armed:
            return
        self._wake(tail)

    def _wake(self, tail: bool = False) -> None:
        if not self.wake.triggered:
            if tail:
                succeed_at_tail(self.wake)  # run()'s only wake-up: its resumption
            else:
                self.wake.succeed()

    def _close(self) -> float:
        """When the open batch closes: its first request's timeout, or its filling request."""
        pending = self.pending
        close = pending[0][0] + self.timeout_s
        cap = self.capacity
        if len(pending) >= cap and pending[cap - 1][0] < close:
            close = pending[cap - 1][0]
        return close

    def run(self):
        env = self.system.env
        pending = self.pending
        cap = self.capacity
        late_at = -1.0  # the instant at which a LateTimeout last woke us
        while True:
            if not pending:
                self.wake = env.event()
                yield self.wake
                continue
            close = self._close()
            now = env.now
            if close > now or (close == now and late_at != now):
                self.wake = env.event()
                timer = LateTimeout(env, close - now)
                self.armed = close
                yield wake_or_late(env, self.wake, timer)
                self.armed = None
                if timer.processed:
                    late_at = env.now
                continue
            if self.wait_for_server:
                if self.busy >= self.servers:
                    self.wake = env.event()
                    yield self.wake
                    if self.busy < self.servers and _below(pending, cap, env.now):
                        # PlainBatcher waits for a free server on ``get | freed`` below capacity:
                        # its condition resumes it one NORMAL event after the wake, behind events
                        # scheduled meanwhile (the params lock handed on at this instant)
                        yield env.timeout(0)
                    continue
                close = now  # everything that arrived while the servers were busy may ride
                self.busy += 1
            n = 0
            while n < len(pending) and n < cap and pending[n][0] <= close:
                n += 1
            batch = pending[:n]
            del pending[:n]
            queue = self.queue
            end = queue.end
            left = now if now < end else end
            inside = [arrived for arrived, _ in batch if arrived < end]
            waited = len(inside) * left - sum(inside)
            queue.arrivals += len(inside)
            queue.wait_sum += waited
            queue.area += waited
            members = [actor for _, actor in batch]
            self.servers_pool.start(
                (self.system, members, self.deliver, self.batches, self.server_free)
            )
            self.batches += 1
