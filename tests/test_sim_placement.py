"""Actor placement (archsim.sim.placement): the candidate thread counts worked by hand, the layout
``actor_threads`` gives, and the chosen placement's effect on a run (never worse than the default,
a note when actors time-share threads although others stay idle)."""

from __future__ import annotations

from pathlib import Path

from archsim.hw import load_hw
from archsim.perf.cpu import actor_thread_order, place_threads
from archsim.sim import placement
from archsim.sim.config import SimConfig
from archsim.sim.placement import candidate_actor_threads
from archsim.sim.run import simulate
from archsim.trace import load

ROOT = Path(__file__).resolve().parents[1]


def test_actor_thread_order_takes_other_cores_then_siblings_then_the_learners_threads():
    # 4 cores x 2 threads, learner on threads 0 and 1 (cores 0 and 1): other cores' threads 2, 3,
    # 6, 7 first, then the learner cores' siblings 4, 5, then the learner's own: its inference
    # server's 1 before its training loop's 0.
    order, default = actor_thread_order(2, 8, 4)
    assert order == [2, 3, 6, 7, 4, 5, 1, 0]
    assert default == 4
    # two threads, both the learner's: actors can only share them
    assert actor_thread_order(2, 2, 2) == ([1, 0], 2)


def test_actor_threads_spreads_actors_over_that_many_threads():
    layout = place_threads(2, 6, 8, 8, 1, 8, 1.0, 1.0, actor_threads=2)
    assert layout.placement.tolist() == [0, 1, 2, 3, 2, 3, 2, 3]
    default = place_threads(2, 6, 8, 8, 1, 8, 1.0, 1.0)
    assert default.placement.tolist() == [0, 1, 2, 3, 4, 5, 6, 7]


def test_candidates_worked_by_hand():
    # 16 actors, 16 threads on 16 cores: default 14, then ceil(16 / k) for k = 1, 2, 3, 4, 6, 8,
    # 12, 16, 24, 32 is 16 (capped at 14), 8, 6, 4, 3, 2, 2, 1, 1, 1
    assert candidate_actor_threads(2, 16, 16, 16) == [14, 8, 6, 4, 3, 2, 1]
    # 3 threads, learner on 2: one thread of their own is fewer than the learner's two, so the
    # actors also take the inference server's thread (at 2 threads they share both of the
    # learner's); 64 / k all cap at 2
    assert candidate_actor_threads(2, 64, 3, 3) == [2]
    assert place_threads(2, 4, 3, 3, 1, 3, 1.0, 1.0, actor_threads=2).placement.tolist() == [
        0,
        1,
        2,
        1,
        2,
        1,
    ]
    # 4 actors: never more threads than actors
    assert candidate_actor_threads(2, 4, 80, 40) == [4, 2, 1]


def _frames(preset: str, trace: str, actors: int, threads: int, **knobs):
    r = simulate(
        load(ROOT / "traces" / trace),
        load_hw(preset),
        SimConfig(**{"actors": actors, "cpu_threads": threads, "sim_seconds": 0.4, **knobs}),
    )
    return r.metrics["frames_per_s"], r.notes


def test_time_shared_actors_say_so_and_all_threads_match_fewer(monkeypatch):
    # dgx1-v100, R2D2, 16 actors: 3 actor threads (about 5 actors each) beat one actor per thread
    # (lockstep behind a batch of all 16); 8 and 16 threads then run the same placement.
    f8, notes8 = _frames("dgx1-v100", "r2d2-seed-2x2-cpu", 16, 8)
    f16, notes16 = _frames("dgx1-v100", "r2d2-seed-2x2-cpu", 16, 16)
    assert f16 == f8
    assert any(n.startswith("placement: 16 actors on 3 actor threads") for n in notes16)
    # with the default placement alone (one actor per thread but two) it is slower: the choice is
    # not a no-op
    monkeypatch.setattr(placement, "ACTORS_PER_THREAD", ())
    f16_default, notes_default = _frames("dgx1-v100", "r2d2-seed-2x2-cpu", 16, 16)
    assert f16_default < f16
    assert not any(n.startswith("placement:") for n in notes_default)


def test_steady_engine_keeps_the_placement_note():
    # --engine steady places threads as the exact engine does and says so (it used to drop the note)
    _, notes = _frames("dgx1-v100", "r2d2-seed-2x2-cpu", 16, 16, engine="steady", sim_seconds=4.0)
    assert any(n.startswith("placement: 16 actors on 3 actor threads") for n in notes)
