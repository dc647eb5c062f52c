"""Sweeps of many points (issue 17 item 3): batches of points per task give the rows that points run
one by one with the plain simulator give; the service-time memo reuses a derivation only where the
fields it read agree; batch sizes and the window of tasks in flight stay bounded; Dask gives the
pool's rows."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.analysis import sweep_exec
from archsim.analysis.sweep import SweepSpec, run_sweep
from archsim.analysis.sweep_cache import ServiceTimesMemo, _logged
from archsim.analysis.sweep_exec import (
    MAX_BATCH_POINTS,
    TARGET_TASK_S,
    TASKS_PER_WORKER,
    Batcher,
    BatchResult,
    locality_order,
    run_batch,
)
from archsim.analysis.sweep_results import METRIC_COLUMNS
from archsim.sim.config import SimConfig
from archsim.trace import save
from tests.test_sim_support import tiny_trace

# Not a result of the model: the worker's own timing.
TIMING = {"wall_s"}


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return save(tiny_trace(), tmp_path_factory.mktemp("trace") / "tiny")


def _points() -> list[dict]:
    spec = SweepSpec(
        trace=None,
        hw="dgx1-v100",
        knobs={
            "actors": [4, 8],
            "inference_batch": [2, 4],
            "sms": [8, 80],
            "seed": [0, 1],
            "sim_seconds": [0.02],
        },
    )
    return spec.points()


def _plain_row(trace_dir, point: dict) -> dict:
    """One point through the plain path: a fresh trace load, hardware and service-time derivation."""
    from archsim.commands._trace_input import load_trace_input
    from archsim.hw.presets import load_hw
    from archsim.sim.knobs import split_point
    from archsim.sim.run import simulate

    sim, overrides = split_point(point)
    result = simulate(
        load_trace_input(trace_dir), load_hw("dgx1-v100", overrides), SimConfig(**sim)
    )
    return {name: result.metrics.get(name, "") for name in METRIC_COLUMNS if name in result.metrics}


def test_a_batch_gives_the_rows_of_points_run_one_by_one(trace_dir):
    points = _points()
    batch = run_batch(str(trace_dir), "dgx1-v100", [], points)
    assert batch.error is None and len(batch.rows) == len(points) == 16
    for point, row in zip(points, batch.rows, strict=True):
        plain = _plain_row(trace_dir, point)
        assert plain  # the plain run has metrics to compare
        for name, value in plain.items():
            assert row[name] == value, (point, name)
    # Fewer SMs never speed the learner up (a physical check that the SM knob reached the rows).
    by_point = {tuple(sorted(p.items())): r for p, r in zip(points, batch.rows, strict=True)}
    for point in points:
        if point["sms"] == 8:
            fast = by_point[tuple(sorted({**point, "sms": 80}.items()))]
            slow = by_point[tuple(sorted(point.items()))]
            assert slow["learner_updates_per_s"] <= fast["learner_updates_per_s"]


def test_a_failing_point_ends_its_batch_keeping_the_rows_before_it(trace_dir):
    points = [{"actors": 4, "cpu_threads": 40}, {"actors": 4, "cpu_threads": 1000}]
    points += [{"actors": 8, "cpu_threads": 40}]
    points = [{**p, "inference_batch": 4, "sim_seconds": 0.02} for p in points]
    batch = run_batch(str(trace_dir), "dgx1-v100", [], points)
    assert [r["cpu_threads"] for r in batch.rows] == ["40"]
    assert "sweep point" in batch.error and "cpu_threads=1000" in batch.error


def test_memo_reuses_a_derivation_only_where_the_read_fields_agree(trace_dir):
    from archsim.commands._trace_input import load_trace_input
    from archsim.hw.presets import load_hw

    trace = load_trace_input(trace_dir)
    hw = load_hw("dgx1-v100", [])
    memo = ServiceTimesMemo()
    derive = memo.bind(str(trace_dir), ("dgx1-v100", ()))
    base = SimConfig(actors=8, inference_batch=4, sim_seconds=0.02)
    first = derive(trace, hw, base, 32)
    # seed, actors and simulated seconds are not read by the derivation on this (discrete-GPU) box
    assert derive(trace, hw, base.replace(seed=3, actors=16, sim_seconds=1.0), 32) is first
    assert memo.derivations == 1
    # the inference batch is read: a new derivation, whose inference times go further
    other = derive(trace, hw, base.replace(inference_batch=8), 32)
    assert memo.derivations == 2 and len(other.inference_gpu_s) > len(first.inference_gpu_s)
    derive(trace, hw, base, 64)  # another learner batch: another key
    assert memo.derivations == 3


def test_the_read_log_sees_fields_through_properties_and_replace():
    logged = _logged(SimConfig(actors=8, inference_batch=4))
    reads = object.__getattribute__(logged, "_archsim_reads")
    assert reads == {}  # building the log reads nothing through it
    logged.learner_threads  # noqa: B018 (a property: it reads fields of the config)
    assert "learner_cpu_threads" in reads
    logged.replace(seed=1)  # replace reads every field
    assert set(reads) >= {"actors", "inference_batch", "sim_seconds"}
    vars(logged)  # the whole config at once: not reusable
    assert object.__getattribute__(logged, "_archsim_reads") is None


def test_batch_sizes_follow_the_measured_point_time_and_even_out_the_tail():
    points = [{"actors": a} for a in range(1000)]
    batcher = Batcher(points, workers=2)
    sizes = [len(batcher.take())]
    assert sizes == [1]  # nothing timed yet
    batcher.observe(BatchResult(rows=[{}] * 10, seconds=0.1))  # 10 ms a point
    sizes.append(len(batcher.take()))
    assert sizes[-1] == min(int(TARGET_TASK_S / 0.01), math.ceil(999 / (TASKS_PER_WORKER * 2)))
    while (batch := batcher.take()) is not None:
        sizes.append(len(batch))
    assert sum(sizes) == len(points)  # every point handed out once
    assert sizes[-1] < sizes[1]  # the tail is cut finer, so no worker is left alone with a lot
    fast = Batcher(points, workers=1)
    fast.take()
    fast.observe(BatchResult(rows=[{}], seconds=1e-9))  # very fast points: the cap holds
    assert len(fast.take()) <= MAX_BATCH_POINTS


def test_locality_order_keeps_a_hardware_point_together():
    points = [{"actors": a, "sms": s} for a in (4, 8, 16) for s in (80, 8)]
    ordered = locality_order(points)
    assert [p["sms"] for p in ordered] == [80, 80, 80, 8, 8, 8]  # the flag's order, slowest
    assert sorted(map(str, ordered)) == sorted(map(str, points))


def test_pool_keeps_a_bounded_window_and_dask_gives_the_pool_rows(trace_dir, tmp_path):
    import pandas as pd
    from distributed import LocalCluster

    spec = SweepSpec(
        trace=trace_dir,
        hw="dgx1-v100",
        knobs={"actors": [4, 6, 8, 10, 12, 14], "inference_batch": [4], "sim_seconds": [0.02]},
    )
    args = (str(trace_dir), "dgx1-v100", [])

    class Counting(Batcher):
        in_flight = 0
        most = 0

        def take(self):
            batch = super().take()
            if batch is not None:
                self.in_flight += 1
                self.most = max(self.most, self.in_flight)
            return batch

        def observe(self, result):
            self.in_flight -= 1
            super().observe(result)

    batcher = Counting(spec.points(), workers=2)
    pool_rows = [r for b in sweep_exec.process_pool(args, batcher, 2) for r in b.rows]
    assert len(pool_rows) == 6 and batcher.most <= TASKS_PER_WORKER * 2
    # Dask on an in-process cluster (threads: quick to start), reached by its tcp address.
    with LocalCluster(
        processes=False,
        n_workers=2,
        threads_per_worker=1,
        host="127.0.0.1",
        protocol="tcp",
        dashboard_address=":0",  # any free port (8787 may be taken)
    ) as cluster:
        table = run_sweep(
            spec, tmp_path / "dask", backend="dask", scheduler=cluster.scheduler_address,
            progress=False,
        )  # fmt: skip
    pool = pd.DataFrame(pool_rows).drop(columns=list(TIMING))
    dask = table.drop(columns=list(TIMING))
    pool["actors"] = pool["actors"].astype(int)
    key = ["actors"]
    dask = dask.sort_values(key).reset_index(drop=True)
    pool = pool.sort_values(key).reset_index(drop=True)
    for name in ("frames_per_s", "learner_updates_per_s", "gpu_util", "events", "path"):
        assert list(dask[name]) == list(pool[name]), name


def _same_times(a, b) -> bool:
    import dataclasses

    import numpy as np

    for name in (f.name for f in dataclasses.fields(a)):
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if x is None or y is None or not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


@pytest.fixture(scope="module")
def memo_world(trace_dir):
    from archsim.commands._trace_input import load_trace_input
    from archsim.hw.presets import load_hw

    return load_trace_input(trace_dir), load_hw("dgx1-v100", []), ServiceTimesMemo()


@settings(max_examples=6, deadline=None)
@given(
    actors=st.integers(4, 12),
    envs=st.integers(1, 2),
    batch=st.integers(1, 4),
    inference=st.sampled_from(["central", "local"]),
    seed=st.integers(0, 3),
)
def test_memo_always_returns_what_a_fresh_derivation_gives(
    memo_world, actors, envs, batch, inference, seed
):
    from archsim.sim.workload import derive_service_times

    trace, hw, memo = memo_world  # one memo across examples: later ones hit earlier entries
    config = SimConfig(
        actors=actors,
        envs_per_actor=envs,
        inference_batch=batch * envs,
        inference=inference,
        seed=seed,
        sim_seconds=0.02,
    )
    derive = memo.bind("tiny", ("dgx1-v100", ()))
    assert _same_times(derive(trace, hw, config, 32), derive_service_times(trace, hw, config, 32))
