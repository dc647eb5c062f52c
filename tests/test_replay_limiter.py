"""The replay rate limiter's wake-ups (archsim.sim.replay): held inserts and samples go on in the
order they started waiting, at the instant room appears, each counted before the next is tested;
and the same go-on order and instants as the plain rule it replaces (every held request resumed on
a shared simpy event and re-testing), on random scripts."""

from __future__ import annotations

import simpy
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim.metrics import Recorder
from archsim.sim.replay import RateLimitedReplay


def _inserter(env, replay, log, name, start_s, n):
    yield env.timeout(start_s)
    yield from replay.insert(n)
    log.append((env.now, name, replay.inserted, replay.sampled))


def _sampler(env, replay, log, name, start_s, n):
    yield env.timeout(start_s)
    yield from replay.sample(n)
    log.append((env.now, name, replay.inserted, replay.sampled))


def test_one_sample_frees_room_for_exactly_one_of_three_held_inserts():
    # ratio 1, slack 2: an insert of n may go on while inserted + n - sampled <= 2.
    env = simpy.Environment()
    rec = Recorder(end=10.0, hw_threads=1)
    replay = RateLimitedReplay(env, 1.0, 2.0, rec)
    log = []
    env.process(_inserter(env, replay, log, "fill", 0.0, 2))  # 2 - 0 = 2: goes on at t=0
    # then three inserts arrive at t=0, in this order, none fits (2 + n - 0 > 2): all held
    for name, n in (("a2", 2), ("b1", 1), ("c1", 1)):
        env.process(_inserter(env, replay, log, name, 0.0, n))
    # t=1: a sample of 1 leaves room for one transition: a2 (2 + 2 - 1 = 3) stays held, b1
    # (2 + 1 - 1 = 2) goes on and is counted before c1 is tested: 3 + 1 - 1 = 3 > 2, held
    env.process(_sampler(env, replay, log, "s1", 1.0, 1))
    # t=2: another sample of 1: a2 (3 + 2 - 2 = 3) still held; c1 (3 + 1 - 2 = 2) goes on
    env.process(_sampler(env, replay, log, "s2", 2.0, 1))
    # t=3: a sample of 2: a2 (4 + 2 - 4 = 2) goes on
    env.process(_sampler(env, replay, log, "s3", 3.0, 2))
    env.run()
    assert log == [
        (0.0, "fill", 2, 0),
        (1.0, "s1", 2, 1),
        (1.0, "b1", 3, 1),
        (2.0, "s2", 3, 2),
        (2.0, "c1", 4, 2),
        (3.0, "s3", 4, 4),
        (3.0, "a2", 6, 4),
    ]
    queue = rec.queues["replay_insert"]
    assert queue.arrivals == 3
    assert queue.wait_sum == 3.0 + 1.0 + 2.0  # a2 held 3 s, b1 1 s, c1 2 s
    assert not replay.held.gates and replay.held_sizes == ([], [])


class _SharedEventLimiter(RateLimitedReplay):
    """The rule before the held requests were tested without resuming them: every held one waits
    on one shared simpy event, which succeeds when any held one fits; each resumed one re-tests."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.changed = self.env.event()
        self.waiting: list[tuple] = []

    def insert(self, n: int):
        yield from self._plain_wait(self.can_insert, n)
        self.inserted += n
        self._notify()

    def sample(self, n: int):
        yield from self._plain_wait(self.can_sample, n)
        self.sampled += n
        self._notify()

    def _plain_wait(self, allowed, n: int):
        if allowed(n):
            return
        entry = (allowed, n)
        self.waiting.append(entry)
        while not allowed(n):
            yield self.changed
        self.waiting.remove(entry)

    def _notify(self) -> None:
        if self.changed.callbacks and any(allowed(n) for allowed, n in self.waiting):
            event, self.changed = self.changed, self.env.event()
            event.succeed()


def _worker(env, replay, log, name, steps, sample):
    """Loops of a delay on a coarse grid (ties are common) and an insert or sample; after each,
    a same-instant follow-up (a zero timeout) to interleave with the wake-up's other events."""
    for delay_ticks, n in steps:
        yield env.timeout(delay_ticks * 0.25)
        yield from (replay.sample(n) if sample else replay.insert(n))
        log.append((env.now, name, replay.inserted, replay.sampled))
        yield env.timeout(0)


_steps = st.lists(st.tuples(st.integers(0, 3), st.integers(1, 4)), min_size=1, max_size=12)


@settings(max_examples=150, deadline=None)
@given(
    inserters=st.lists(_steps, min_size=1, max_size=6),
    samplers=st.lists(_steps, min_size=1, max_size=2),
    ratio=st.sampled_from([0.5, 1.0, 2.0, 8.0]),
    slack=st.sampled_from([4.0, 8.0, 32.0]),
)
def test_same_go_on_order_and_instants_as_the_shared_event_rule(inserters, samplers, ratio, slack):
    logs = []
    for limiter in (RateLimitedReplay, _SharedEventLimiter):
        env = simpy.Environment()
        replay = limiter(env, ratio, slack, Recorder(end=100.0, hw_threads=1))
        log = []
        for i, steps in enumerate(inserters):
            env.process(_worker(env, replay, log, f"actor {i}", steps, sample=False))
        for i, steps in enumerate(samplers):
            env.process(_worker(env, replay, log, f"learner {i}", steps, sample=True))
        env.run(until=100.0)
        logs.append(log)
    assert logs[0] == logs[1]
