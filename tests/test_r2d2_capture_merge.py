"""Merging a multi-process capture's traces: clock alignment across hosts (the least late of each
process's clock-sync samples), process names, unprofiled figures pooled by role, and the one-line
warning for a recording that holds no whole learner step. Real profiler recordings, no processes."""

from __future__ import annotations

import gzip
import json
import os

import pytest
import torch

from archsim.capture.markers import phase, step
from archsim.capture.merge import CLOCK_TOLERANCE_US, ProcessPart, merge_process_traces
from archsim.trace.format import load
from tests.conftest import PROJECT_ROOT
from workloads.r2d2.capture import unprofiled_by_role
from workloads.r2d2.seed.profiling import CLOCK_SYNC_ROUNDS, ProcessProfiler


def _two_actor_recordings(tmp_path, late_ns: int, other_host: bool):
    """Two real profiler recordings; B's wall-clock sample moved ``late_ns`` back (as if B's clock ran
    behind), and B's sidecar on another host when ``other_host``. Returns (parts, first step ts each)."""
    parts = []
    for i in range(2):
        with (
            ProcessProfiler(tmp_path, "actor", i, record_shapes=False) as prof,
            step("actor", actor=i, batch_size=1),
            phase("env_step"),
        ):
            torch.ones(4).sum()
        sidecar = dict(prof.sidecar)
        if i == 1:
            sidecar["clock_sync"] = dict(sidecar["clock_sync"])
            sidecar["clock_sync"]["time_ns"] -= late_ns
            sidecar["clock_sync"]["samples_ns"] = [
                t - late_ns for t in sidecar["clock_sync"]["samples_ns"]
            ]
            if other_host:
                sidecar["host"] = {"hostname": "node-b", "boot_id": "another-boot"}
        parts.append(ProcessPart("actor", i, os.getpid(), prof.trace_path, sidecar, 0))
    before = {}
    for i, part in enumerate(parts):
        events = json.loads(part.trace_path.read_text())["traceEvents"]
        before[i] = [
            e["ts"] for e in events if e.get("name", "").startswith("archsim::actor_step")
        ][0]
    return parts, before


def _merged_step_times(path):
    """(merged Kineto JSON, start of every actor step in it)."""
    with gzip.open(path) as handle:
        merged = json.loads(handle.read())
    steps = [
        e["ts"]
        for e in merged["traceEvents"]
        if e.get("name", "").startswith("archsim::actor_step")
    ]
    return merged, steps


def test_unprofiled_figures_of_all_processes_merge_by_role():
    # actor 0: 30 steps at mean 1.0 ms (median 0.9), actor 1: 10 steps at mean 2.0 (median 1.5):
    # pooled mean (30 x 1.0 + 10 x 2.0) / 40 = 1.25, medians weighted alike: 1.05
    learner = {"step": {"median_us": 4.0, "mean_us": 5.0, "steps": 8}}
    processes = [
        {"role": "learner", "unprofiled_cpu_us": {"learner": learner}},
        {
            "role": "actor",
            "unprofiled_cpu_us": {
                "actor": {"env_step": {"median_us": 900.0, "mean_us": 1000.0, "steps": 30}}
            },
        },
        {
            "role": "actor",
            "unprofiled_cpu_us": {
                "actor": {"env_step": {"median_us": 1500.0, "mean_us": 2000.0, "steps": 10}}
            },
        },
        {"role": "actor"},
    ]
    assert unprofiled_by_role(processes) == {
        "learner": learner,
        "actor": {"env_step": {"steps": 40, "median_us": 1050.0, "mean_us": 1250.0}},
    }


def test_merge_aligns_clocks_and_names_processes(tmp_path):
    # B's host clock runs 5 ms behind: offset_B - offset_A ~ +5,000 us > 1,000 us tolerance, so the
    # merge shifts B's events by about -5,000 us and records it.
    parts, before = _two_actor_recordings(tmp_path, 5_000_000, other_host=True)
    out = tmp_path / "merged.json.gz"
    summary = merge_process_traces(parts, out)
    shifts = [p["clock_shift_us"] for p in summary["processes"]]
    assert shifts[0] == 0.0  # the first process defines the clock
    assert abs(shifts[1] + 5000.0) < CLOCK_TOLERANCE_US  # about -5 ms, give or take the sync cost
    merged, step_ts = _merged_step_times(out)
    # A is untouched, B moved by its shift (both files had the same base time: one process)
    assert step_ts[0] == pytest.approx(before[0])
    assert step_ts[1] == pytest.approx(before[1] + shifts[1], abs=1e-3)
    names = {e["args"]["name"] for e in merged["traceEvents"] if e.get("name") == "process_name"}
    assert names == {"actor 0", "actor 1"}
    assert [p["index"] for p in merged["archsimProcesses"]] == [0, 1]


def test_merge_keeps_the_least_late_clock_sample(tmp_path):
    # The reference process's first annotation starts 3 ms after its sample (the lazy first call a
    # loaded CI machine showed, 2.1 ms): the other rounds still give B's 5 ms within tolerance.
    parts, _ = _two_actor_recordings(tmp_path, 5_000_000, other_host=True)
    sync = parts[0].sidecar["clock_sync"]
    assert len(sync["samples_ns"]) == CLOCK_SYNC_ROUNDS
    sync["samples_ns"] = [sync["samples_ns"][0] - 3_000_000, *sync["samples_ns"][1:]]
    summary = merge_process_traces(parts, tmp_path / "merged.json.gz")
    assert abs(summary["processes"][1]["clock_shift_us"] + 5000.0) < CLOCK_TOLERANCE_US
    # an older sidecar with one sample pairs it with the first annotation
    del sync["samples_ns"]
    sync["time_ns"] -= 3_000_000
    summary = merge_process_traces(parts, tmp_path / "merged-old.json.gz")
    # the reference reads 3 ms late, so B is shifted by 5 - 3 = 2 ms: the failure CI saw
    assert abs(summary["processes"][1]["clock_shift_us"] + 2000.0) < CLOCK_TOLERANCE_US


def test_merge_never_shifts_processes_of_one_host(tmp_path):
    # A sample taken 5 ms late (a preempted process on a loaded box) on the same host: one clock, so
    # no shift, and the offsets still record the difference.
    parts, before = _two_actor_recordings(tmp_path, 5_000_000, other_host=False)
    out = tmp_path / "merged.json.gz"
    summary = merge_process_traces(parts, out)
    assert [p["clock_shift_us"] for p in summary["processes"]] == [0.0, 0.0]
    offsets = [p["clock_offset_us"] for p in summary["processes"]]
    assert offsets[1] - offsets[0] == pytest.approx(5000.0, abs=CLOCK_TOLERANCE_US)
    _, step_ts = _merged_step_times(out)
    assert step_ts == pytest.approx([before[0], before[1]])


def test_a_recording_without_a_whole_learner_step_is_said_in_one_line(tmp_path, capsys):
    from workloads.r2d2.capture import warn_without_learner_steps

    steps = load(PROJECT_ROOT / "traces" / "r2d2-seed-2x2-cpu").steps
    assert not warn_without_learner_steps(steps, 4.0, tmp_path)  # the bundled trace trains
    assert capsys.readouterr().err == ""
    actors_only = steps[steps.role != "learner"]
    assert warn_without_learner_steps(actors_only, 4.0, tmp_path)
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "holds no whole learner step" in err and "--seconds" in err
    cut_only = steps[steps.role == "learner"].head(1).assign(cpu_us=float("nan"))
    assert warn_without_learner_steps(cut_only, 4.0, tmp_path)  # a cut step is not a whole one
