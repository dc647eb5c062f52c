"""Replay buffer on the learner with a rate limiter (Reverb's SampleToInsertRatio).

With ``ratio`` samples per inserted transition, inserts wait while the samplers are more than
``slack`` samples behind, and samples wait while they are more than ``slack`` ahead: either side is
throttled, as Reverb does. With ``learner_only`` inserts never wait: the learner samples at most
``ratio`` per insert plus the slack, as the bundled R2D2 runtime's trainer does
(workloads/r2d2/seed/rate.py). ``ratio=None`` runs both sides free (SEED RL, R2D2). The slack is at
least one insert and one sample wide, so the two sides can never both wait.
"""

from __future__ import annotations

import simpy

from archsim.sim.metrics import Recorder


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
        self.changed = env.event()
        self.waiting: list[tuple] = []  # (test, n) of every insert and sample held by the limiter
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
        yield from self._wait(self.can_insert, n, self.insert_queue)
        self.inserted += n
        self._notify()

    def sample(self, n: int):
        yield from self._wait(self.can_sample, n, self.sample_queue)
        self.sampled += n
        self._notify()

    def _wait(self, allowed, n: int, queue):
        if allowed(n):
            return
        arrived = self.env.now
        queue.enter(arrived)
        entry = (allowed, n)
        self.waiting.append(entry)
        while not allowed(n):
            yield self.changed
        self.waiting.remove(entry)
        queue.leave(self.env.now, arrived)
        timeline = self.rec.timeline
        if timeline is not None and arrived < self.rec.end:  # counters for Perfetto
            name = (
                "replay_insert_queue_depth"
                if queue is self.insert_queue
                else "replay_sample_queue_depth"
            )
            timeline.delta(name, arrived, +1)
            timeline.delta(name, self.env.now, -1)

    def _notify(self) -> None:
        # Wake the held ones only when one of them may go on: the others would test, find
        # nothing changed for them and wait again in the same order (hundreds of resumptions per
        # learner step with thousands of actors' batches held).
        if self.changed.callbacks and any(allowed(n) for allowed, n in self.waiting):
            event, self.changed = self.changed, self.env.event()
            event.succeed()
