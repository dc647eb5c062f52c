"""Leads from physics round 4 (the power cap's hunt): a replay in the learner process draws power
on node 0's socket like any busy core, within that socket's TDP, and the power cap sees it; a sweep
row gives the clocks its point ran at (the power cap may lower them); --publish-every says it is
for local inference only and notes when it changes nothing."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from archsim.analysis.sweep_exec import run_point
from archsim.analysis.sweep_results import (
    ADDED_COLUMN,
    CLOCK_COLUMNS,
    METRIC_COLUMNS,
    _older_header,
)
from archsim.hw.presets import load_hw
from archsim.sim.config import SimConfig
from archsim.sim.knobs import KNOB_BY_NAME
from archsim.sim.learner import publish_every_note
from archsim.sim.run import simulate, simulate_system
from archsim.trace import load
from tests.test_sim_nodes import network, traffic
from tests.test_sim_support import machine, service_times

DQN = Path(__file__).resolve().parents[1] / "traces" / "dqn-pong-cpu"


def _learner_replay_run(series_bins: int = 0):
    """3 free-running actors on 2 nodes of one 2-core socket each (40-135 W): node 0 holds the
    learner (1 ms of sampling CPU a step) and 2 actors, node 1 one actor; the replay is a thread of
    the learner process that runs on no simulated hardware thread."""
    config = SimConfig(
        actors=3,
        inference="local",
        nodes=2,
        replay_placement="learner",
        replay_ratio=None,
        sim_seconds=0.05,
    )
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=1e-4, learner_cpu_s=1e-3)
    return simulate_system(
        times,
        machine(threads=2),
        config,
        1,
        series_bins=series_bins,
        network=network(),
        traffic=traffic(),
    )


def test_replay_in_the_learner_is_held_within_node_0s_socket_tdp():
    """Node 0's threads are busy 1.889 cores and the replay 0.119 more: past its 2 cores, so the
    socket draws its 135 W TDP; node 1 draws 40 + 95/2 = 87.5 W for its one busy core of two.
    Before, the replay's watts were added after the sockets at the whole TDP a core (the test
    machine gives no cores_per_socket) and clipped only against both nodes' TDP: 228.5 W."""
    result = _learner_replay_run()
    assert result.metrics["replay_server_util"] > 0.1
    assert result.metrics["cpu_power_w"] == pytest.approx(135.0 + 87.5, rel=1e-12)
    # the cap sees the replay's core: node 0 asks for more than its TDP (was 1.0: within)
    assert result.clock_caps.cpu < 1.0


def test_replay_in_the_learner_energy_is_the_integral_of_power():
    result = _learner_replay_run(series_bins=10)
    starts, watts = result.power_series
    width_s = float(starts[1] - starts[0])
    assert float(np.sum(watts)) * width_s == pytest.approx(result.metrics["energy_j"], rel=1e-9)


def test_a_sweep_row_says_the_clocks_its_point_ran_at():
    """jetson-tx1 (Cortex-A57 at 1,734 MHz, Maxwell GPU at 998 MHz), DQN, 4 actors: uncapped the
    columns are the preset's clocks; asked for a 3,000 MHz GPU the SMs draw more than its 7.5 W TDP
    and the row gives the clock the cap ran it at, the one the run's note names."""
    point = {"actors": 4, "sim_seconds": 0.05}
    row = run_point(str(DQN), "jetson-tx1", [], point)
    assert (row["cpu_boost_clock_mhz_run"], row["gpu_clock_mhz_run"]) == (1734.0, 998.0)
    capped = run_point(str(DQN), "jetson-tx1", ["gpu.clock_mhz=3000"], point)
    assert capped["cpu_boost_clock_mhz_run"] == 1734.0
    assert 998.0 < capped["gpu_clock_mhz_run"] < 3000.0


def test_an_older_sweep_header_without_the_clock_columns_is_resumable():
    columns = ["actors", *METRIC_COLUMNS]
    older = [c for c in columns if c not in (ADDED_COLUMN, *CLOCK_COLUMNS)]
    assert _older_header(older, columns)
    assert _older_header([c for c in columns if c not in CLOCK_COLUMNS], columns)
    assert not _older_header([c for c in columns if c != "frames_per_s"], columns)
    assert not _older_header(list(reversed(older)), columns)


def test_publish_every_says_it_is_for_local_inference_only():
    assert "(local inference only" in KNOB_BY_NAME["publish_every"].help
    note = publish_every_note(SimConfig(inference="central", publish_every=4))
    assert note is not None and "--publish-every 4" in note and "\n" not in note
    assert publish_every_note(SimConfig(inference="local", publish_every=4)) is None
    assert publish_every_note(SimConfig(inference="central")) is None  # the default: no note


def test_publish_every_with_central_inference_is_a_note_of_the_run():
    """dqn-pong-cpu (central inference) on jetson-tx1: the run goes on, with the note."""
    config = SimConfig(actors=2, sim_seconds=0.02, publish_every=4)
    result = simulate(load(DQN), load_hw("jetson-tx1"), config)
    assert sum("--publish-every 4" in n for n in result.notes) == 1


def test_samples_per_insert_is_a_whole_window_mean_with_a_one_time_lead():
    """8 local-inference actors stepping every 250 us, a 5 ms learner step of batch 2, ratio 2 on
    both sides: the learner is the bottleneck. The limiter's slack, 4 x max(2, 2 x 1) = 8 samples,
    lets the actors insert 8 / 2 = 4 transitions ahead, plus the step each of the 8 has in flight
    and the learner's batch in flight (2 / 2): a lead of at most 13 inserts, taken once. So the
    window mean reads below 2 by lead / window, while the inserts between two windows' ends are
    paced at exactly the asked ratio (docs/SIMULATOR.md Pacing)."""
    totals = []
    for window_s in (0.5, 1.0):
        config = SimConfig(
            actors=8,
            inference="local",
            replay_ratio=2.0,
            replay_limit="both",
            sim_seconds=window_s,
        )
        times = service_times(actor_step_s=(250e-6,), learner_gpu_s=5e-3)
        m = simulate_system(times, machine(threads=16), config, 2).metrics
        updates, inserts = m["learner_updates_per_s"] * window_s, m["env_steps_per_s"] * window_s
        assert m["samples_per_insert"] < 2.0
        totals.append((updates, inserts, inserts - updates * 2 / 2.0))
    (u0, e0, lead0), (u1, e1, lead1) = totals
    assert lead0 == lead1 <= 4 + 8 + 1  # the same lead: taken once, at the start
    assert (u1 - u0) * 2 / (e1 - e0) == pytest.approx(2.0, rel=1e-12)
