"""Central inference (SEED RL): a dynamic batcher on the learner and the batch's trip through the
inference server thread, the replay insert, the GPU and back to the actors.

A batch opens with its first request and closes when it holds ``inference_batch`` observations or
``inference_timeout_us`` after its first request arrived, whichever is first; a request arriving at
the closing instant still rides. Closed batches queue FIFO on the GPU's inference stream while the
next batch fills. With ``ServiceTimes.batch_when_server_free`` (SEED traces that record their server)
a batch that is due while every server thread is still busy with an earlier batch (until its actions
are back from the GPU) keeps filling (up to ``inference_batch``) and closes when a server thread comes free, as the recorded
server does: it takes whatever is waiting when it returns. Two batchers implement the same rule
(archsim.sim.batchers); this module has the batch's trip and the event-order helpers they share.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import simpy
from simpy.events import Event

from archsim.sim.cpu import record
from archsim.sim.fast_gil import FastGil
from archsim.sim.gil import run_burst
from archsim.sim.gpu import INFERENCE
from archsim.sim.inline_events import succeed_at_tail
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
        python = times.python.inference_burst(free_s + locked_s)
        yield from run_burst(system, server, free_s, python, label)
        lock_work = run_burst(system, server, locked_s, python, label)
        yield from locked(system.params_lock, lock_work, 1 + index % len(system.server_threads))
    else:
        cpu_s = float(times.inference_gpu_s[n_obs])
        yield from run_burst(system, server, cpu_s, times.python.inference_burst(cpu_s), label)
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
