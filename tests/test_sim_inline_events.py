"""Events processed in place (archsim.sim.inline_events, issue 17): the same order of everything, so
every simulated figure is the same to the bit with and without it, with fewer simpy events."""

from __future__ import annotations

from pathlib import Path

import pytest
import simpy

from archsim.hw import load_hw
from archsim.sim import inline_events
from archsim.sim.config import SimConfig
from archsim.sim.inline_events import ProcessPool, succeed_at_tail
from archsim.sim.run import simulate
from archsim.trace.format import load

TRACES = Path(__file__).resolve().parents[1] / "traces"


def _order(inline: bool, monkeypatch, rival_at_same_instant: bool) -> tuple[list, int]:
    """A timer at t=1 succeeds ``b`` as its last act; with ``rival_at_same_instant`` an event
    ``a`` is already due at t=1. Returns the order processes resumed in and the events made."""
    monkeypatch.setattr(inline_events, "INLINE", inline)
    env = simpy.Environment()
    log = []
    a, b = env.event(), env.event()

    def waiter(name, event):
        yield event
        log.append((name, env.now))
        yield env.timeout(0)  # an event of its own at the same instant
        log.append((name + "'", env.now))

    env.process(waiter("a", a))
    env.process(waiter("b", b))
    timer = env.timeout(1.0)
    if rival_at_same_instant:
        env.timeout(1.0).callbacks.append(lambda _e: a.succeed())
    timer.callbacks.append(lambda _e: succeed_at_tail(b))
    env.run()
    return log, int(env._eid.__reduce__()[1][0])


@pytest.mark.parametrize("rival", [False, True])
def test_in_place_keeps_the_order(monkeypatch, rival):
    plain, plain_events = _order(False, monkeypatch, rival)
    inline, inline_events_made = _order(True, monkeypatch, rival)
    assert inline == plain
    # alone at its instant b is processed in place (one event fewer); behind a it is scheduled
    assert inline_events_made == plain_events - (0 if rival else 1)


def test_process_pool_reuses_processes():
    env = simpy.Environment()
    done = []

    def job(name, seconds):
        yield env.timeout(seconds)
        done.append((name, env.now))

    pool = ProcessPool(env, job)
    pool.start(("x", 1.0))
    pool.start(("y", 2.0))  # x still runs: a second process
    env.run(until=1.5)
    pool.start(("z", 1.0))  # x's process is idle again: reused
    env.run()
    assert done == [("x", 1.0), ("y", 2.0), ("z", 2.5)]
    assert len(pool.idle) == 2  # two processes made for three jobs


CASES = [
    ("dqn-pong-cpu", "dgx1-v100", dict(actors=32, cpu_sched="pinned")),
    ("dqn-pong-cpu", "dgx1-v100", dict(actors=32, cpu_sched="shared")),
    ("dqn-pong-cpu", "dgx1-v100", dict(actors=32, cpu_sched="pinned", replay_ratio=None)),
    ("dqn-pong-cpu", "dgx1-v100", dict(actors=32, cpu_sched="shared", replay_ratio=None)),
    ("r2d2-seed-2x2-cpu", "dgx1-v100", dict(actors=16, cpu_sched="shared")),
    ("apex-dqn-cpu", "dgx1-v100", dict(actors=16, inference="local")),
]


@pytest.mark.parametrize("name,hw_name,knobs", CASES)
def test_in_place_changes_no_figure(monkeypatch, name, hw_name, knobs):
    if not (TRACES / name).is_dir():
        pytest.skip(f"traces/{name} is not in this checkout")
    trace, hw = load(TRACES / name), load_hw(hw_name)
    config = SimConfig(sim_seconds=0.3, **knobs)
    fewer = simulate(trace, hw, config)
    monkeypatch.setattr(inline_events, "INLINE", False)
    plain = simulate(trace, hw, config)
    assert {k: repr(v) for k, v in fewer.metrics.items()} == {
        k: repr(v) for k, v in plain.metrics.items()
    }
    assert fewer.events < plain.events
