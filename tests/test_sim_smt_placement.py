"""SMT and thread placement (issue 11, item 2): golden placements worked by hand, a core with two busy
threads does at least what one does, and more CPU threads never lower throughput at a fixed actor
count, pinned or time-shared."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw import list_presets, load_hw
from archsim.perf.cpu import place_threads
from archsim.sim.config import SimConfig
from archsim.sim.run import simulate_system
from archsim.sim.shared_cpu import shared_capacity
from tests.test_sim_support import machine, service_times


def place(n_reserved: int, n_actors: int, hw_threads: int = 8, cores: int = 4, smt_yield=0.6):
    return place_threads(n_reserved, n_actors, hw_threads, cores, 1, cores, 1.0, smt_yield)


def test_three_busy_threads_on_four_two_way_cores_take_three_cores():
    # Linux numbers core k's threads k and k + 4: threads 0, 1, 2 are on cores 0, 1, 2; no sibling
    layout = place(0, 3)
    assert layout.placement.tolist() == [0, 1, 2]
    assert (layout.placement % 4).tolist() == [0, 1, 2]
    assert not layout.shared.any()
    assert layout.speed[:3].tolist() == [1.0, 1.0, 1.0]


def test_five_busy_threads_share_one_core():
    # the fifth goes to thread 4, core 0's sibling: core 0 holds two, cores 1-3 one each
    layout = place(0, 5)
    assert layout.placement.tolist() == [0, 1, 2, 3, 4]
    assert layout.shared.tolist() == [True, False, False, False, True, False, False, False]
    assert layout.speed[[0, 4]].tolist() == [0.6, 0.6]
    assert layout.speed[[1, 2, 3]].tolist() == [1.0, 1.0, 1.0]


def test_the_learner_keeps_its_core():
    # learner on thread 0 (core 0); 5 actors take cores 1-3, then their siblings 5 and 6; core 0's
    # sibling (thread 4) stays free while other cores are left
    layout = place(1, 5)
    assert layout.placement.tolist() == [0, 1, 2, 3, 5, 6]
    assert not layout.shared[0] and layout.speed[0] == 1.0
    assert 4 not in layout.placement.tolist()
    # 2 cores, 2 learner threads: no core is left, so actors take the learner cores' siblings
    layout = place(2, 2, hw_threads=4, cores=2)
    assert layout.placement.tolist() == [0, 1, 2, 3]


def test_shared_capacity_golden():
    # 4 cores x 2 threads, yield 0.6: 3 busy -> 3 cores; 5 busy -> 4 cores + one core at 2 x 0.6
    assert shared_capacity(3, hw_threads=8, cores=4, speed=1.0, smt_yield=0.6) == pytest.approx(3.0)
    assert shared_capacity(5, hw_threads=8, cores=4, speed=1.0, smt_yield=0.6) == pytest.approx(4.2)
    assert shared_capacity(8, hw_threads=8, cores=4, speed=1.0, smt_yield=0.6) == pytest.approx(4.8)


@given(
    smt_yield=st.floats(0.5, 1.0),
    cores=st.integers(1, 16),
    n=st.integers(1, 40),
)
def test_a_busy_sibling_never_lowers_what_a_core_does(smt_yield, cores, n):
    hw = 2 * cores
    more = shared_capacity(n + 1, hw, cores, 1.0, smt_yield)
    assert more >= shared_capacity(n, hw, cores, 1.0, smt_yield) - 1e-12
    # one core, two busy threads: at least what one thread alone does
    assert shared_capacity(2, 2, 1, 1.0, smt_yield) >= 1.0 - 1e-12


def test_presets_refuse_a_yield_below_one_half():
    for preset in list_presets():
        assert load_hw(preset).cpu.smt_yield >= 0.5
    with pytest.raises(ArchsimError, match=r"cpu\.smt_yield") as info:
        load_hw("dgx1-v100", ["cpu.smt_yield=0.48"])
    assert "\n" not in str(info.value)


# Throughput at a fixed actor count against CPU threads. Local inference and a learner that takes
# no CPU: every actor is a closed loop on its threads' CPU and nothing else couples them. Tolerance:
# one env step per actor in the window (a step still running when the window closes is not counted,
# and how far along it is moves with the placement), plus 1e-9 relative for float sums.
TOLERANCE = 1e-9


@settings(max_examples=25, deadline=None)
@given(
    actors=st.integers(1, 12),
    cores=st.integers(1, 6),
    smt_yield=st.sampled_from([0.5, 0.6, 0.8, 1.0]),
    sched=st.sampled_from(["pinned", "shared"]),
    seed=st.integers(0, 3),
)
def test_more_cpu_threads_never_lower_throughput(actors, cores, smt_yield, sched, seed):
    rng = np.random.default_rng(seed)
    times = service_times(actor_step_s=rng.uniform(200e-6, 400e-6, size=16))
    mach = machine(2 * cores, cores=cores, smt_yield=smt_yield)
    cfg = SimConfig(actors=actors, inference="local", sim_seconds=0.02, cpu_sched=sched, seed=seed)
    rates = [
        simulate_system(times, mach, cfg.replace(cpu_threads=n), 32).metrics["env_steps_per_s"]
        for n in range(1, 2 * cores + 1)
    ]
    for fewer, more in zip(rates, rates[1:], strict=False):
        assert more >= fewer * (1 - TOLERANCE) - 1.0 / cfg.sim_seconds * actors
