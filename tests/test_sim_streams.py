"""Actors' random streams (archsim.sim.system.ActorStreams): every actor's step works are the same
sequence, bit for bit, whatever chunk sizes draw them, whatever order the simulation reads them in,
and whether a run reads them from the prefix an earlier run kept or draws them itself. The reference
below is the definition the streams had with fixed chunks of 1,024 step works."""

from __future__ import annotations

import threading

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.sim import system as system_mod
from archsim.sim.config import SimConfig
from archsim.sim.pcg_streams import PrimedDraws
from archsim.sim.run import simulate_system
from archsim.sim.system import ActorStreams, seed_words
from tests.test_sim_support import machine, service_times


def reference_stream(samples: np.ndarray, actors: int, envs: int, seed: int, actor: int, n: int):
    """The first ``n`` step works of ``actor`` as fixed chunks of 1,024 drew them."""
    rng = np.random.Generator(np.random.PCG64(np.random.SeedSequence(seed).spawn(actors)[actor]))
    out: list[float] = []
    while len(out) < n:
        idx = rng.integers(0, len(samples), size=1024 * envs)
        out.extend(samples[idx].reshape(1024, envs).sum(axis=1).tolist())
    return out[:n]


@settings(max_examples=60, deadline=None)
@given(
    n=st.integers(1, 2**40),
    seed=st.integers(0, 2**64 - 1),
    chunks=st.lists(st.integers(1, 300), min_size=1, max_size=12),
)
def test_chunked_integer_draws_continue_one_sequence(n, seed, chunks):
    # The numpy property the growing chunks rely on (PCG64 keeps its spare 32-bit half in its
    # state): draws of any sizes give the values one draw of their total gives.
    whole = np.random.Generator(np.random.PCG64(seed)).integers(0, n, size=sum(chunks))
    rng = np.random.Generator(np.random.PCG64(seed))
    parts = np.concatenate([rng.integers(0, n, size=k) for k in chunks])
    assert np.array_equal(parts, whole)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**64 - 1) | st.sampled_from([0, 1, 2**32 - 1, 2**32, 2**64 - 1]),
    actors=st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=8),
)
def test_seed_words_are_numpys_seed_sequence_children(seed, actors):
    # The actors' generators are seeded from words computed for all actors at once: they must be
    # numpy's SeedSequence words, child by child, so every stream is the one spawn() gives.
    got = seed_words(seed, np.asarray(actors, dtype=np.uint32))
    want = [
        np.random.SeedSequence(seed, spawn_key=(a,)).generate_state(4, np.uint64) for a in actors
    ]
    assert np.array_equal(got, np.stack(want))
    spawned = np.random.SeedSequence(seed).spawn(3)
    first = seed_words(seed, np.arange(3, dtype=np.uint32))
    assert np.array_equal(first, np.stack([c.generate_state(4, np.uint64) for c in spawned]))


@settings(max_examples=80, deadline=None)
@given(
    samples=st.lists(st.floats(1e-7, 1e-2), min_size=1, max_size=40),
    envs=st.sampled_from([1, 2, 3, 8, 9, 17]),
    actors=st.integers(1, 5),
    seed=st.integers(0, 2**64 - 1),
    keep_values=st.integers(0, 3000),
    runs=st.lists(
        st.lists(st.tuples(st.integers(0, 4), st.sampled_from([0, 1, 7, 1024])), max_size=120),
        min_size=1,
        max_size=3,
    ),
)
def test_streams_equal_the_fixed_chunk_definition(samples, envs, actors, seed, keep_values, runs):
    # Several runs of the same streams one after another (as the SMT calibration passes and the
    # run are), each reading actors in a random order one value (0) or a block (take) at a time,
    # with a kept prefix from nothing to more than a run draws (private generators past it).
    samples = np.asarray(samples)
    system_mod._kept.streams = None  # this test's runs start with nothing kept
    for reads in runs:
        streams = ActorStreams(samples, actors, envs, seed, keep_values=keep_values)
        got: dict[int, list[float]] = {}
        for actor, count in reads:
            actor %= actors
            if count == 0:
                got.setdefault(actor, []).append(streams.next(actor))
            else:
                got.setdefault(actor, []).extend(streams.take(actor, count).tolist())
        for actor, values in got.items():
            assert values == reference_stream(samples, actors, envs, seed, actor, len(values))
        assert streams.kept.held <= keep_values
        assert streams.kept.held == sum(len(v) for v in streams.kept.values)


def test_other_threads_draw_the_same_streams_from_their_own_kept_prefix():
    samples = np.linspace(1e-4, 3e-4, 11)
    here = ActorStreams(samples, 3, 2, 5)
    mine = [here.take(actor, 40).tolist() for actor in range(3)]
    theirs: list = []

    def other() -> None:
        streams = ActorStreams(samples, 3, 2, 5)
        assert streams.kept is not here.kept
        theirs.extend(streams.take(actor, 40).tolist() for actor in range(3))

    thread = threading.Thread(target=other)
    thread.start()
    thread.join()
    assert theirs == mine == [reference_stream(samples, 3, 2, 5, a, 40) for a in range(3)]


def test_a_run_gives_the_same_metrics_with_a_kept_prefix_and_without():
    # Busy-fraction SMT calibration (two short passes, then the run) on shared cores: the passes
    # and the run read one kept prefix. The same run again reads a longer one; after a run of
    # other streams (another seed) replaced it, it draws everything anew. All three agree exactly.
    times = service_times(actor_step_s=(150e-6, 250e-6, 400e-6), inference_s=2e-4)
    config = SimConfig(actors=24, sim_seconds=0.05, inference_batch=8, seed=3)
    hw = machine(threads=8, cores=4, smt_yield=0.6)
    system_mod._kept.streams = None
    first = simulate_system(times, hw, config, 32).metrics
    assert system_mod._kept.streams.held > 0
    again = simulate_system(times, hw, config, 32).metrics
    simulate_system(times, hw, config.replace(seed=4), 32)
    anew = simulate_system(times, hw, config, 32).metrics
    assert first == again == anew
    assert first["env_steps_per_s"] > 0


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 2**64 - 1),
    n=st.integers(2, 2**32 - 1) | st.sampled_from([2, 3, 1000, 2**31 + 5, 3_000_000_001]),
    count=st.integers(1, 40),
)
def test_primed_draws_are_numpys_draws_and_state(seed, n, count):
    # The vectorized first chunk (archsim.sim.pcg_streams): values, and the generator state after
    # them (so the actor's later draws continue its stream), equal numpy's for each actor; a row
    # whose Lemire draw would be redrawn is marked, never wrong. n near 2**32 makes redraws common.
    actors = np.arange(64, dtype=np.uint32)
    draws = PrimedDraws(seed_words(seed, actors), n, count)
    children = np.random.SeedSequence(seed).spawn(len(actors))
    for actor in actors:
        rng = np.random.Generator(np.random.PCG64(children[actor]))
        want = rng.integers(0, n, size=count)
        if draws.ok[actor]:
            assert np.array_equal(draws.values[actor], want)
            assert draws.state(int(actor)) == rng.bit_generator.state
        else:  # numpy redrew: it took more 32-bit draws than the values
            assert draws.state(int(actor)) != rng.bit_generator.state
