"""Central inference (SEED RL): a dynamic batcher on the learner and the batch's trip through the
inference server thread, the replay insert, the GPU and back to the actors.

A batch opens with its first request and closes when it holds ``inference_batch`` observations or
``inference_timeout_us`` after its first request arrived, whichever is first; a request arriving at
the closing instant still rides. Closed batches queue FIFO on the GPU's inference stream while the
next batch fills. With ``ServiceTimes.batch_when_server_free`` (SEED traces that record their server)
a batch that is due while every server thread is still busy with an earlier batch (until its actions
are back from the GPU) keeps filling (up to ``inference_batch``) and closes when a server thread comes free, as the recorded
server does: it takes whatever is waiting when it returns. Two batchers implement the same rule: ``PlainBatcher`` keeps requests in a simpy
Store (one event per request); ``FleetBatcher`` keeps the known future arrival times of the actors'
next requests in a sorted list and wakes only when a batch can close (a few events per batch).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Callable

import simpy
from simpy.events import Event

from archsim.sim.cpu import record
from archsim.sim.fast_gil import FastGil
from archsim.sim.gil import run_burst
from archsim.sim.gpu import INFERENCE
from archsim.sim.inline_events import ProcessPool, succeed_at_tail
from archsim.sim.params_lock import locked
from archsim.sim.system import System

# simpy runs events at equal times by priority (URGENT 0, NORMAL 1); a batch's closing timer runs
# after every ordinary event of its instant, so requests arriving at that instant are included.
LATE = 2
# Requests that arrive at one instant are ordered by actor id on both paths (PlainBatcher schedules
# each arrival at a priority between NORMAL and LATE that grows with the actor id; FleetBatcher keys
# its arrivals by (time, actor)), so the two serve tied requests in the same order. An arrival time is
# a sum of step times whose float rounding depends on the order a path adds them in (the shared-CPU
# executor's virtual clock, the Lindley recursion), so arrivals are snapped to a 1 ps grid first:
# times a few ulps apart are the same instant on every path. 1 ps is far below any modelled duration.
NORMAL = 1
ARRIVAL_GRID_S = 1e-12


def arrival_time(sent_s: float, up_s: float) -> float:
    """When a request sent at ``sent_s`` that travels ``up_s`` arrives, on the arrival grid (never
    before it was sent): equal for times within float residue of each other."""
    at = round((sent_s + up_s) / ARRIVAL_GRID_S) * ARRIVAL_GRID_S
    return at if at > sent_s else sent_s


def delay_to(now_s: float, at_s: float) -> float:
    """The delay that simpy (which schedules at ``now + delay``) turns into exactly ``at_s``."""
    delay = max(0.0, at_s - now_s)
    while now_s + delay < at_s:
        delay = math.nextafter(delay, math.inf)
    while delay > 0.0 and now_s + delay > at_s:
        delay = math.nextafter(delay, 0.0)
    return delay


def in_actor_order(env: simpy.Environment, actor: int, actors: int, delay_s: float = 0.0) -> Event:
    """A timeout of ``delay_s`` that fires after every ordinary event of its instant and after the
    same-instant timeouts of lower actor ids: a priority in (NORMAL, LATE) that grows with the id."""
    event = Event(env)
    event._ok = True
    event._value = None
    env.schedule(event, NORMAL + (actor + 1) / (actors + 1), delay_s)
    return event


def first_of(env: simpy.Environment, *events: Event) -> Event:
    """An event that succeeds when the first of ``events`` is processed. It is scheduled at that
    moment, as simpy's ``a | b`` schedules its Condition, so a process waiting on it resumes in the
    same order among its instant's events; without the Condition's bookkeeping (a value dict and
    callback removal per wait: the fleet batcher waits about once per batch)."""
    done = Event(env)

    def fire(_event: Event) -> None:
        if not done.triggered:
            done.succeed()

    for event in events:
        if event.callbacks is None:  # already processed
            fire(event)
        else:
            event.callbacks.append(fire)
    return done


def wake_or_late(env: simpy.Environment, wake: Event, timer: Event) -> Event:
    """``first_of(env, wake, timer)`` for a ``timer`` that is a LateTimeout, one event fewer when
    the timer is first. The Condition that simpy's ``a | b`` would schedule when the timer is
    processed is the very next event then: nothing of the instant is left before it (URGENT and
    NORMAL events come before a LATE one) and it comes before every later LATE event. So it is
    processed at once, inside the timer's processing: the waiting process resumes at the same
    point of the event order. When ``wake`` is first, the Condition is scheduled as before, or
    processed in place where it would be next (``wake``'s only callback runs at its tail)."""
    done = Event(env)

    def fire(_event: Event) -> None:
        if not done.triggered:
            succeed_at_tail(done)

    def fire_now(_event: Event) -> None:
        if not done.triggered:  # process it here, as simpy's step would
            done._ok = True
            done._value = None
            callbacks, done.callbacks = done.callbacks, None
            for callback in callbacks:
                callback(done)

    wake.callbacks.append(fire)
    timer.callbacks.append(fire_now)
    return done


class LateTimeout(Event):
    """A timeout that fires after all URGENT and NORMAL events of its instant."""

    def __init__(self, env: simpy.Environment, delay: float) -> None:
        super().__init__(env)
        self._ok = True
        self._value = None
        env.schedule(self, LATE, delay)


def serve_batch(
    system: System,
    members: list[int],
    deliver: Callable[[list[int]], None],
    index: int,
    server_free: Callable[[], None] = lambda: None,
):
    """Closed batch number ``index``: server CPU (per batch, plus receive and insert per observation)
    on the server thread whose turn it is, replay insert, GPU, actions back."""
    env, times, rec = system.env, system.times, system.rec
    server = system.server_threads[index % len(system.server_threads)]
    n_obs = len(members) * system.config.envs_per_actor
    closed = env.now
    timeline = rec.timeline
    if timeline is not None:
        n_servers = len(system.server_threads)
        server_track = "inference server" + (f" {index % n_servers}" if n_servers > 1 else "")
        timeline.name_thread(server, server_track)
    if env.now < rec.end:
        rec.inference_batches += 1
        rec.inference_obs += n_obs
    cpu_s = times.server_cpu_s_per_batch + times.server_cpu_s_per_obs * n_obs
    # request handling holds the learner process's GIL for its Python part (archsim.sim.gil)
    python = times.python.server_burst(
        times.server_cpu_s_per_batch, times.server_cpu_s_per_obs, n_obs, len(members)
    )
    gil = system.gil
    if isinstance(gil, FastGil):  # started by its own event (below): at that event's tail
        yield from gil.run(server, cpu_s, python, "inference_server", tail=True)
    else:
        yield from run_burst(system, server, cpu_s, python, "inference_server")
    served = env.now
    yield from system.replay.insert(n_obs)
    label = "inference_batch"
    if times.on_gpu:
        yield system.gpu.submit(
            INFERENCE,
            float(times.inference_gpu_s[n_obs]),
            float(times.inference_sm_fraction[n_obs]),
            label,
            dram_bytes=0.0
            if times.inference_dram_bytes is None
            else float(times.inference_dram_bytes[n_obs]),
            args={"batch": index, "batch_size": n_obs, "requests": len(members)},
        )
    elif system.params_lock is not None:
        # the batch's forward pass holds the params lock; the request handling around it does not
        locked_s = float(times.inference_locked_s[n_obs])
        free_s = float(times.inference_gpu_s[n_obs]) - locked_s
        python = times.python.inference
        yield from run_burst(system, server, free_s, python, label)
        lock_work = run_burst(system, server, locked_s, python, label)
        yield from locked(system.params_lock, lock_work, 1 + index % len(system.server_threads))
    else:
        cpu_s = float(times.inference_gpu_s[n_obs])
        yield from run_burst(system, server, cpu_s, times.python.inference, label)
    # The recorded server sends the replies once it has the actions: it is free again only then.
    answered = env.now
    server_free()
    if times.response_down_s > 0:
        yield env.timeout(times.response_down_s)
    if timeline is not None:  # before deliver: the fleet sends the members' next requests there
        batch_track = "gpu_inference" if times.on_gpu else timeline.track_of(server)
        trip = (closed, served, answered, batch_track, timeline.track_of(server))
        _record_requests(system, members, index, n_obs, trip)
    deliver(members)


def _record_requests(system: System, members: list[int], index: int, n_obs: int, trip: tuple):
    """Timeline of one batch's requests: each actor's wait for its actions, the flows from its
    request to the server burst that batched it and from the batch back to the actor, and the
    inference queue's depth (each request queued from its arrival to the batch's close)."""
    closed, served, answered, batch_track, server_track = trip
    rec, timeline = system.rec, system.rec.timeline
    delivered = system.env.now
    up_s = system.times.request_up_s
    for actor in members:
        sent = timeline.sent.get(actor, closed)
        arrived = arrival_time(sent, up_s)
        args = {"batch": index, "batch_size": n_obs, "queue_wait_us": (closed - arrived) * 1e6}
        track = f"actor {actor}"
        record(rec, "await_actions", track, sent, delivered - sent, args)
        timeline.flow("request", (track, sent, "after"), (server_track, served, "before"))
        timeline.flow("reply", (batch_track, answered, "before"), (track, delivered, "before"))
        if arrived < rec.end:
            timeline.delta("inference_queue_depth", arrived, +1)
            timeline.delta("inference_queue_depth", closed, -1)


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
