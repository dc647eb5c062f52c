"""Replay buffer on the learner with a rate limiter (Reverb's SampleToInsertRatio).

With ``ratio`` samples per inserted transition, inserts wait while the samplers are more than
``slack`` samples behind, and samples wait while they are more than ``slack`` ahead: either side is
throttled, as Reverb does. With ``learner_only`` inserts never wait: the learner samples at most
``ratio`` per insert plus the slack, as the bundled R2D2 runtime's trainer does
(workloads/r2d2/seed/rate.py). ``ratio=None`` runs both sides free (SEED RL, R2D2). The slack is at
least one insert and one sample wide, so the two sides can never both wait.

Held inserts and samples wake as one shared simpy event would wake processes waiting on it: when
one of them may go on, the held ones are tested one after another, in the order they started
waiting on that event, at the instant and place in simpy's event order the event is processed; one
that may go on runs on at once (its insert counted and the limiter re-checked before the next is
tested), one that may not waits for the next wake-up. Only the ones that go on are resumed: the
others are not (a resumption each, to test and wait again), and they are skipped a run at a time:
the tests are monotone in the size (float rounding keeps the order), so the largest held size of
each kind that fits now (a bisection) says which of them may go on. A paced 2-s run of 4,096 DQN
actors (benchmarks/sim_speed.py) made ~70,000 resumptions fewer for its 1,925 learner steps.
"""

from __future__ import annotations

from bisect import bisect_left, insort

import simpy
from simpy.events import Event

from archsim.sim.metrics import Recorder

INSERT, SAMPLE = 0, 1  # a held request's kind: the index of its sizes in held_sizes


class _Held:
    """Requests held until one wake-up, in the order it tests them: sizes, kinds and gates."""

    __slots__ = ("sizes", "kinds", "gates")

    def __init__(self) -> None:
        self.sizes: list[int] = []
        self.kinds: list[int] = []
        self.gates: list[Event] = []


def _fire(gate: Event) -> None:
    """Process ``gate`` here and now, as simpy's step would: the held process runs on at once."""
    gate._ok = True
    gate._value = None
    callbacks, gate.callbacks = gate.callbacks, None
    for callback in callbacks:
        callback(gate)


class RateLimitedReplay:
    def __init__(
        self,
        env: simpy.Environment,
        ratio: float | None,
        slack_samples: float,
        rec: Recorder,
        learner_only: bool = False,
    ) -> None:
        self.env = env
        self.ratio = ratio
        self.learner_only = learner_only
        self.slack = slack_samples
        self.inserted = 0
        self.sampled = 0
        self.held = _Held()  # waiting for the next wake-up
        self.last_wake: Event | None = None  # the wake-up the last insert or sample scheduled
        self.held_sizes: tuple[list[int], list[int]] = ([], [])  # of every held request, sorted
        self.rec = rec
        self.insert_queue = rec.queue("replay_insert")
        self.sample_queue = rec.queue("replay_sample")

    def can_insert(self, n: int) -> bool:
        if self.ratio is None or self.learner_only:
            return True
        return (self.inserted + n) * self.ratio - self.sampled <= self.slack

    def can_sample(self, n: int) -> bool:
        return self.ratio is None or self.sampled + n - self.inserted * self.ratio <= self.slack

    def insert(self, n: int):
        """Generator: insert ``n`` transitions, waiting for the rate limiter if needed."""
        if not self.can_insert(n):
            yield from self._wait(INSERT, n, self.insert_queue)
        self.inserted += n
        self._notify()

    def sample(self, n: int):
        """Generator: sample ``n`` transitions, waiting for the rate limiter if needed; returns
        whether it waited (then a wake-up resumed it amid testing others, not at an event's tail)."""
        waited = not self.can_sample(n)
        if waited:
            yield from self._wait(SAMPLE, n, self.sample_queue)
        self.sampled += n
        self._notify()
        return waited

    def _fits(self, sizes: tuple[list[int], list[int]]) -> bool:
        """Whether any of the requests with these sizes may go on now."""
        inserts, samples = sizes
        return bool(
            (inserts and self.can_insert(inserts[0])) or (samples and self.can_sample(samples[0]))
        )

    def _wait(self, kind: int, n: int, queue):
        """Held until a wake-up finds it may go on (it is tested then: it goes on when resumed)."""
        arrived = self.env.now
        queue.enter(arrived)
        gate = Event(self.env)
        held = self.held
        held.sizes.append(n)
        held.kinds.append(kind)
        held.gates.append(gate)
        insort(self.held_sizes[kind], n)
        yield gate
        sizes = self.held_sizes[kind]
        del sizes[bisect_left(sizes, n)]
        queue.leave(self.env.now, arrived)
        timeline = self.rec.timeline
        if timeline is not None and arrived < self.rec.end:  # counters for Perfetto
            name = "replay_insert_queue_depth" if kind == INSERT else "replay_sample_queue_depth"
            timeline.delta(name, arrived, +1)
            timeline.delta(name, self.env.now, -1)

    def _notify(self) -> None:
        # A wake-up only when one of the held requests (of this wake-up's or an earlier pending
        # one's) may go on: the rest would only be tested and held again in the same order.
        held = self.held
        self.last_wake = None
        if held.gates and self._fits(self.held_sizes):
            self.held = _Held()
            event = Event(self.env)
            event.callbacks.append(lambda _event: self._wake(held))
            event.succeed()
            self.last_wake = event

    def _largest_fitting(self, kind: int) -> int:
        """The largest size of a held ``kind`` request that may go on now (-1: none may): every
        held request of that kind no larger may go on, every larger one may not."""
        sizes = self.held_sizes[kind]
        fits = self.can_insert if kind == INSERT else self.can_sample
        low, high = 0, len(sizes)  # sizes[:low] fit, sizes[high:] do not
        while low < high:
            mid = (low + high) // 2
            if fits(sizes[mid]):
                low = mid + 1
            else:
                high = mid
        return sizes[low - 1] if low else -1

    def _wake(self, held: _Held) -> None:
        """Test ``held``'s requests in order: resume each that may go on (at once: it may change
        what the next ones find), hold the others again for the next wake-up, a run at a time."""
        sizes, kinds, gates = held.sizes, held.kinds, held.gates
        count = len(gates)
        i = 0
        while i < count:
            largest = (self._largest_fitting(INSERT), self._largest_fitting(SAMPLE))
            j = i
            while j < count and sizes[j] > largest[kinds[j]]:
                j += 1
            if j > i:  # these may not go on with things as they are now: held again, in order
                later = self.held
                later.sizes.extend(sizes[i:j])
                later.kinds.extend(kinds[i:j])
                later.gates.extend(gates[i:j])
            if j == count:
                return
            _fire(gates[j])
            i = j + 1
