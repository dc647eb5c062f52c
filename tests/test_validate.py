"""Validation (issue 6): the error arithmetic by hand, the window arithmetic of the R2D2 sampler, the
mapping of configurations onto simulator knobs, and a quick real `archsim validate --quick` run."""

from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.validate.configs import FULL_PLAN, QUICK_PLAN, dqn, r2d2
from archsim.validate.load import PROC_STAT
from archsim.validate.measure import FRAMESKIP, window_rates
from archsim.validate.report import (
    CSV_COLUMNS,
    mean_abs_error,
    signed_rel_error,
    spread,
)

# --- metric arithmetic, worked by hand -----------------------------------------------------------


def test_signed_relative_error_by_hand():
    assert signed_rel_error(110.0, 100.0) == pytest.approx(0.10)  # (110 - 100) / 100
    assert signed_rel_error(80.0, 100.0) == pytest.approx(-0.20)  # (80 - 100) / 100
    assert signed_rel_error(5.0, 0.0) != signed_rel_error(5.0, 0.0)  # NaN: nothing measured


def test_mean_absolute_error_by_hand():
    # |+0.1| + |-0.3| + |+0.2| = 0.6, over 3 = 0.2; a NaN row is left out
    assert mean_abs_error([0.1, -0.3, 0.2, math.nan]) == pytest.approx(0.2)
    assert math.isnan(mean_abs_error([]))


def test_spread_by_hand():
    assert spread([90.0, 110.0]) == pytest.approx(0.2)  # (110 - 90) / 100
    assert spread([42.0]) == 0.0


@given(st.lists(st.floats(-5, 5, allow_nan=False), min_size=1, max_size=20))
def test_mae_bounds(errors):
    mae = mean_abs_error(errors)
    assert abs(sum(errors) / len(errors)) <= mae + 1e-12 <= max(abs(e) for e in errors) + 2e-12


@given(st.floats(1e-3, 1e6), st.floats(1e-3, 1e6))
def test_error_sign_says_over_or_under(predicted, measured):
    err = signed_rel_error(predicted, measured)
    assert (err > 0) == (predicted > measured)
    assert predicted == pytest.approx(measured * (1 + err))


def test_drift_correction_by_hand():
    # DQN baseline captured while the reference took 12 ms; its runs read 10 ms (the box was 20%
    # faster then). Predicted 100 frames/s, measured 120: -16.7% raw, 0 once the prediction is
    # scaled by 12 / 10. The calibrated error of the baseline itself is 0 by construction.
    import pandas as pd

    from archsim.trace.format import Trace
    from archsim.validate.run import add_baseline_columns

    row = {
        "config": "dqn-base",
        "workload": "dqn",
        "role": "baseline",
        "measured_frames_per_s": 120.0,
        "predicted_frames_per_s": 100.0,
        "speed_ref_ms": 10.0,
    }
    no_steps = Trace(meta={}, ops=pd.DataFrame(), steps=pd.DataFrame({"role": []}))
    add_baseline_columns([row], {"dqn": no_steps}, {"dqn": 12.0})
    assert row["calibrated_frames_error"] == pytest.approx(0.0)
    assert row["capture_speed_ref_ms"] == 12.0
    assert row["drift_corrected_frames_error"] == pytest.approx(0.0)
    # measurements saved before the reference existed: no correction, NaN
    old = dict(row, speed_ref_ms=math.nan)
    add_baseline_columns([old], {"dqn": no_steps}, {})
    assert math.isnan(old["drift_corrected_frames_error"])


def test_reference_work_takes_cpu_time():
    import torch

    from archsim.validate.speed import reference_cpu_ms

    before = torch.get_num_threads()
    assert 0 < reference_cpu_ms() < 10_000
    # read on one torch thread (a helper thread's busy-wait would charge the load to the reading),
    # and the caller's own setting survives it
    assert torch.get_num_threads() == before


def test_window_rates_by_hand():
    # Two actors of 2 envs each and a learner, sampled (wall s, count, process CPU s) at ts.
    # Actor 0 makes 10 actor steps/s from t=0, actor 1 5/s from t=1 (first non-zero count at t=1);
    # warm-up 1 s -> window [1 + 1, last sample 7] = [2, 7], 5 s. Actor 0: 20 -> 70 = 50 steps,
    # actor 1: 5 -> 30 = 25 steps; env steps 2 envs x 75 = 150; frames 4 x 150 = 600 / 5 s.
    # Learner 3 updates/s. CPU: each process burns 0.5 CPU s per s -> 3 x 0.5 x 5 = 7.5 CPU s
    # over 5 s x 2 threads = 0.75.
    ts = [0.0, 1.0, 2.0, 4.0, 6.0, 7.0]

    def part(role, rate, start):
        return {
            "role": role,
            "samples": [(t, rate * max(0.0, t - start), 0.5 * t) for t in ts],
        }

    parts = [part("actor", 10, 0.0), part("actor", 5, 1.0), part("learner", 3, 0.0)]
    parts[1]["samples"][1] = (1.0, 1e-9, 0.5)  # actor 1's first step shows at t=1
    m = window_rates(parts, envs_per_actor=2, warmup_s=1.0, hw_threads=2)
    assert m.window_s == pytest.approx(5.0)
    assert m.frames_per_s == pytest.approx(FRAMESKIP * 150 / 5.0)
    assert m.learner_updates_per_s == pytest.approx(3.0)
    assert m.cpu_util == pytest.approx(0.75)
    assert m.cpu_s == pytest.approx(7.5)
    # frames per CPU-second: 600 frames / 7.5 CPU s = 80, whatever else ran on the box
    assert m.frames_per_cpu_s(hw_threads=2) == pytest.approx(80.0)


def test_frames_per_cpu_s_of_older_measurements_by_hand():
    # Saved before cpu_s was kept: CPU seconds = cpu_util x window x hardware threads
    # = 0.25 x 10 s x 2 = 5 CPU s; 100 frames/s x 10 s = 1000 frames -> 200 frames per CPU-second.
    from archsim.validate.measure import Measurement

    old = Measurement(frames_per_s=100.0, learner_updates_per_s=1.0, cpu_util=0.25, window_s=10.0)
    assert old.frames_per_cpu_s(hw_threads=2) == pytest.approx(200.0)
    assert old.frames_per_cpu_s(hw_threads=2) == pytest.approx(
        dataclasses.replace(old, cpu_s=5.0).frames_per_cpu_s(hw_threads=64)
    )


def test_make_row_per_cpu_second_by_hand():
    # Two runs: 100 frames/s over 10 s on 5 CPU s (200 frames/CPU-s) and, on a loaded box, 50
    # frames/s over 10 s on 2.5 CPU s (still 200). Predicted 120 frames/s with 0.5 CPU s busy per
    # s: 240 frames/CPU-s, +20%; the wall-clock error is 120 / 75 - 1 = +60%.
    from archsim.validate.measure import Measurement
    from archsim.validate.run import make_row

    def run(fps, cpu_s, others):
        return Measurement(fps, 1.0, cpu_s / 20, 10.0, cpu_s=cpu_s, other_busy_cpus=others)

    predicted = {
        "frames_per_s": 120.0,
        "learner_updates_per_s": 1.0,
        "cpu_util": 0.25,
        "cpu_busy_s_per_s": 0.5,
    }
    row = make_row(dqn("d"), "baseline", [run(100.0, 5.0, 0.0), run(50.0, 2.5, 1.5)], predicted)
    assert row["measured_frames_per_cpu_s"] == pytest.approx(200.0)
    assert row["predicted_frames_per_cpu_s"] == pytest.approx(240.0)
    assert row["frames_per_cpu_s_error"] == pytest.approx(0.2)
    assert row["frames_error"] == pytest.approx(0.6)
    assert row["measured_cpu_s"] == pytest.approx(3.75)
    assert row["other_busy_cpus"] == pytest.approx(0.75)


def test_load_between_by_hand():
    # 10 s in which all CPUs were busy 14 s (ticks) and this process tree used 5 s of CPU: others
    # kept (14 - 5) / 10 = 0.9 CPUs busy; 2 s stolen over 10 s = 0.2 CPUs.
    from archsim.validate.load import Snapshot, load_between

    start = Snapshot(wall_s=100.0, busy_s=1000.0, steal_s=50.0, own_cpu_s=3.0)
    end = Snapshot(wall_s=110.0, busy_s=1014.0, steal_s=52.0, own_cpu_s=8.0)
    load = load_between(start, end, loadavg_1min=2.5)
    assert load.other_busy_cpus == pytest.approx(0.9)
    assert load.steal_cpus == pytest.approx(0.2)
    assert load.loadavg_1min == 2.5
    # tick-sampled busy time a little below our own getrusage time: clamped at 0, never negative
    quiet = dataclasses.replace(end, busy_s=1004.9)
    assert load_between(start, quiet, loadavg_1min=0.0).other_busy_cpus == 0.0
    # no /proc/stat (not Linux): NaN, not a guess
    blind = Snapshot(wall_s=0.0, busy_s=math.nan, steal_s=math.nan, own_cpu_s=0.0)
    assert math.isnan(load_between(blind, dataclasses.replace(blind, wall_s=1.0), 0.0).steal_cpus)


def test_the_sampling_recorder_answers_every_call_the_runtime_makes_of_its_profiler():
    # validate swaps ProcessProfiler for SamplingRecorder in the R2D2 processes; a method the
    # runtime calls that the stand-in lacks fails only there, mid-run (stepped() once did). stop()
    # runs only where times_after_run is True, which the stand-in says it is not.
    from archsim.validate.measure import SamplingRecorder
    from workloads.r2d2.seed.profiling import ProcessProfiler

    called = {n for n in vars(ProcessProfiler) if not n.startswith("_")} - {"stop", "recording"}
    assert called <= set(dir(SamplingRecorder)), called - set(dir(SamplingRecorder))
    assert SamplingRecorder.times_after_run is False


def test_parse_proc_stat_by_hand():
    from archsim.validate.load import parse_proc_stat

    # user nice system idle iowait irq softirq steal guest guest_nice
    text = "cpu  100 2 30 900 7 1 4 5 60 0\ncpu0 50 1 15 450 3 0 2 2 30 0\nintr 1 2\n"
    # busy = user + nice + system + irq + softirq = 100 + 2 + 30 + 1 + 4 (guest is inside user)
    assert parse_proc_stat(text) == (137.0, 5.0)
    assert parse_proc_stat("cpu 1 2 3 4\n") == (6.0, 0.0)  # an old kernel without steal


def test_load_reads_this_machine():
    from archsim.validate.load import load_between, snapshot

    if not PROC_STAT.exists():
        pytest.skip("no /proc/stat on this system: load readings are NaN by design")
    start = snapshot()
    total = sum(i * i for i in range(300_000))  # some CPU time of our own
    load = load_between(start, snapshot())
    assert total > 0
    cpus = os.cpu_count() or 1
    assert 0.0 <= load.other_busy_cpus <= cpus + 0.5  # tick granularity over a short interval
    assert 0.0 <= load.steal_cpus <= cpus + 0.5


# --- the plan and its mapping onto the simulator ------------------------------------------------


def test_full_plan_covers_the_issue():
    configs = FULL_PLAN.configs
    assert len(FULL_PLAN.variants) >= 6
    assert len({c.name for c in configs}) == len(configs)
    r2d2_actors = {c.actors for c in configs if c.workload == "r2d2"}
    assert min(r2d2_actors) == 1 and max(r2d2_actors) == 4
    for knob in ("envs_per_actor", "inference_batch"):
        assert len({getattr(c, knob) for c in configs if c.workload == "r2d2"}) > 1
    for knob in ("learner_batch", "train_every", "dqn_replay_ratio"):
        assert len({getattr(c, knob) for c in configs if c.workload == "dqn"}) > 1


def test_sim_config_mapping():
    from archsim.validate.predict import sim_config

    # DQN batch 32 every 4 steps: 32 / 4 = 8 samples per transition, one thread for both loops
    sim = sim_config(dqn("d", batch=32, train_every=4), hw_threads=2)
    assert (sim.replay_ratio, sim.cpu_threads, sim.inference, sim.actors) == (8.0, 1, "local", 1)
    # one thread, FIFO, both sides of the ratio: the sequential DQN loop
    assert (sim.cpu_sched, sim.replay_limit, sim.param_lock) == ("pinned", "both", "off")
    # R2D2 replay ratio 1 sequence per sequence; a sequence per (20 - 10) env steps -> 0.1
    sim = sim_config(r2d2("r", actors=3, envs=2, inference_batch=6), hw_threads=2)
    assert sim.replay_ratio == pytest.approx(0.1)
    assert (sim.actors, sim.envs_per_actor, sim.inference_batch) == (3, 2, 6)
    # unpinned processes, a trainer-only rate limit and the runtime's params lock
    assert (sim.cpu_sched, sim.replay_limit, sim.param_lock) == ("shared", "learner", "on")


# --- the real thing, small ----------------------------------------------------------------------

# The quick run asserts on frames per CPU-second, not frames/s: its prediction is for a machine
# that runs nothing else, and its wall-clock frames/s falls with whatever else the box runs (one
# other CPU-bound process: frames/s MAE 115-400%, issue 11; two `yes` processes: 577%). Per
# CPU-second of the run's own processes, time-sharing cancels out; what remains is the model's error
# plus what contention does to CPU time per frame (cache and TLB refills after context switches,
# R2D2's server closing batches on its 5 ms timeout with fewer observations). Measured on this 2-core
# box: per-CPU-second MAE 5.6% with other agents' jobs running, 5.1% (worst -10.7%) with two `yes`
# beside it as well (others kept 1.78 of 2 CPUs busy). 0.25 is about four times that, and still well
# below what a broken pipeline gives: a lost frameskip is a factor 4 (75%), CPU seconds of one R2D2
# process of three left out or counted twice move its row by 30-100%.
QUICK_PER_CPU_S_MAE_BOUND = 0.25
# One configuration alone: twice the MAE bound (the worst row seen is -10.7%).
QUICK_PER_CPU_S_WORST_BOUND = 0.5


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("validate") / "out"
    # a subprocess: the R2D2 runtime spawns processes, which re-import the main module. The quick
    # run takes ~1 min on a quiet box, 3 min 44 s beside two `yes` processes, and over 8 min when
    # a dozen tasks share the 2 cores (2026-11-24): the timeout only guards against a hang.
    proc = subprocess.run(
        [sys.executable, "-m", "archsim", "validate", "--quick", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return out


def test_quick_validation_outputs(quick_run):
    with open(quick_run / "validation.csv") as f:
        rows = list(csv.DictReader(f))
    assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert [r["config"] for r in rows] == [c.name for c in QUICK_PLAN.configs]
    for r in rows:
        measured = float(r["measured_frames_per_s"])
        predicted = float(r["predicted_frames_per_s"])
        assert measured > 0 and predicted > 0
        # The CSV writes 6 significant digits (half a unit: 5e-6 relative), so an error recomputed
        # from two written values is good to ~1e-5 absolute whatever its size: near-zero errors
        # (one run gave +0.79%) need that floor beside the 1e-4 relative check.
        assert float(r["frames_error"]) == pytest.approx(
            (predicted - measured) / measured, rel=1e-4, abs=2e-5
        )
        assert 0 < float(r["measured_cpu_util"]) <= 1.05  # a little over 1: sampling at the edges
        # the load-robust figure: frames over the run's CPU seconds, recomputable from the CSV
        window_s, cpu_s = float(r["window_s"]), float(r["measured_cpu_s"])
        per_cpu_s = float(r["measured_frames_per_cpu_s"])
        assert cpu_s > 0 and per_cpu_s > 0
        if int(r["repeats"]) == 1:  # one run: frames / CPU seconds exactly
            assert per_cpu_s == pytest.approx(measured * window_s / cpu_s, rel=1e-4)
        assert float(r["frames_per_cpu_s_error"]) == pytest.approx(
            (float(r["predicted_frames_per_cpu_s"]) - per_cpu_s) / per_cpu_s, rel=1e-4, abs=2e-5
        )
        # the machine's load was read during the run and the capture (Linux: /proc/stat)
        if PROC_STAT.exists():
            cpus = os.cpu_count() or 1
            for key in ("other_busy_cpus", "capture_other_busy_cpus", "steal_cpus"):
                assert 0 <= float(r[key]) <= cpus + 0.5, key
    table = (quick_run / "validation.md").read_text()
    table_rows = [line for line in table.splitlines() if line.startswith("| ")]
    assert len(table_rows) == 1 + len(rows)  # header row + one per configuration
    assert "Mean absolute error of frames/s" in table
    for suffix in (".png", ".svg"):
        assert (quick_run / f"validation_scatter{suffix}").stat().st_size > 1000
    for r in rows:  # the machine's speed read around the capture and every run
        capture_ms, run_ms = float(r["capture_speed_ref_ms"]), float(r["speed_ref_ms"])
        assert capture_ms > 0 and run_ms > 0
        corrected = float(r["predicted_frames_per_s"]) * capture_ms / run_ms
        assert float(r["drift_corrected_frames_error"]) == pytest.approx(
            (corrected - float(r["measured_frames_per_s"])) / float(r["measured_frames_per_s"]),
            rel=1e-4,
            abs=5e-5,
        )
    summary = json.loads((quick_run / "summary.json").read_text())
    assert summary["frames_mae"] == pytest.approx(
        mean_abs_error([float(r["frames_error"]) for r in rows]), rel=1e-4
    )
    per_cpu_errors = [float(r["frames_per_cpu_s_error"]) for r in rows]
    assert summary["frames_per_cpu_s_mae"] == pytest.approx(
        mean_abs_error(per_cpu_errors), rel=1e-4
    )
    assert summary["frames_per_cpu_s_mae"] < QUICK_PER_CPU_S_MAE_BOUND, rows
    assert max(abs(e) for e in per_cpu_errors) < QUICK_PER_CPU_S_WORST_BOUND, rows
    assert "Per CPU-second" in table
    for workload in ("dqn", "r2d2"):
        assert (quick_run / "traces" / f"{workload}-base" / "steps.parquet").exists()


def test_validate_refuses_non_empty_out(tmp_path):
    (tmp_path / "keep.txt").write_text("x")
    proc = subprocess.run(
        [sys.executable, "-m", "archsim", "validate", "--quick", "--out", str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 2
    assert "not empty" in proc.stderr and "Traceback" not in proc.stderr


def test_from_redoes_the_same_predictions(quick_run, tmp_path):
    # The simulator is deterministic (seed 0), so predictions redone from the saved traces and
    # measurements equal the run's own, and the measured columns are carried over unchanged.
    out = tmp_path / "again"
    proc = subprocess.run(
        [sys.executable, "-m", "archsim", "validate", "--from", str(quick_run), "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    with open(quick_run / "validation.csv") as f:
        first = list(csv.DictReader(f))
    with open(out / "validation.csv") as f:
        again = list(csv.DictReader(f))
    assert first == again
