"""``--loop sequential``: the single-threaded program as it ran (archsim.sim.sequential).

The loop's throughput is checked against the closed form 1 / (sum of phase times, a learner update
every k iterations) worked from the trace's own steps, with an infinitely fast GPU and with an
infinitely fast CPU; the default-loop rules (the trace decides unless a distributed-only knob is
given) and the one-line refusals are checked through the CLI.
"""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.hw.presets import list_presets
from archsim.sim.config import SimConfig
from archsim.sim.knobs import split_point
from archsim.sim.profiler_cost import without_profiler_cost
from archsim.sim.run import simulate
from archsim.sim.sequential import LoopTimes, loop_metrics, resolve_loop
from archsim.sim.step_work import whole_steps
from archsim.sim.workload import derive_machine, derive_service_times
from archsim.trace import load
from archsim.trace.info import loop_of_steps
from tests.conftest import error_line

ROOT = Path(__file__).resolve().parents[1]
DQN = ROOT / "traces" / "dqn-pong-cpu"
R2D2 = ROOT / "traces" / "r2d2-seed-2x2-cpu"
# An infinitely fast GPU: every rate far beyond any real part, every fixed latency zero, and no CPU
# cost per launch, so the loop's time is its CPU work alone. Past the ranges load_hw accepts
# (docs/LIMITS.md), so set on the model directly.
FAST_GPU = {
    "gpu": {
        "clock_mhz": 1e12,
        "dram_bw_gbs": 1e12,
        "l2_bw_gbs": 1e12,
        "dram_latency_ns": 1e-9,
        "launch_latency_us": 0.0,
        "kernel_min_us": 0.0,
        "launch_overhead_us": 0.0,
    },
    "host_link": {"bw_gbs": 1e12, "latency_us": 0.0},
}
FAST_CPU = {"cpu": {"thread_speed_rel": 1e12}, "gpu": {"launch_overhead_us": 0.0}}


def _hw(changes: dict | None = None):
    """dgx1-v100 with ``{section: {field: value}}`` changed."""
    hw = load_hw("dgx1-v100")
    update = {
        section: getattr(hw, section).model_copy(update=fields)
        for section, fields in (changes or {}).items()
    }
    return hw.model_copy(update=update)


# Nature DQN in the bundled trace: a batch of 32 every 4 env steps (meta samples_per_insert 8).
UPDATES_PER_STEP = 8.0 / 32


def _dqn():
    return load(DQN)


def _cpu_work_s(trace, role: str, minus: tuple[str, ...] = ()) -> float:
    """Mean CPU seconds of a step of ``role`` plus the loop code before it, less ``minus`` phases,
    profiler cost taken out (as the capture measured it beside the trace)."""
    steps = whole_steps(without_profiler_cost(trace).steps)
    rows = steps[steps["role"] == role]
    work = rows["cpu_us"] + rows["gap_cpu_us"].fillna(0.0)
    for phase in minus:
        work = work - rows[f"{phase}_cpu_us"].fillna(0.0)
    return float(work.mean()) * 1e-6


def test_closed_form_by_hand():
    """act 1 ms CPU + max(0.1 ms launches, 0.3 ms GPU); an update of 2 ms CPU + max(0.5, 4) ms every
    4 iterations: 1.3 + 6 / 4 = 2.8 ms per env step."""
    times = LoopTimes(
        act_cpu_s=1e-3,
        act_launch_s=0.1e-3,
        act_gpu_s=0.3e-3,
        learn_cpu_s=2e-3,
        learn_launch_s=0.5e-3,
        learn_gpu_s=4e-3,
        updates_per_iteration=0.25,
        env_steps_per_iteration=1.0,
    )
    assert times.iteration_s == pytest.approx(2.8e-3)
    machine = derive_machine(load_hw("dgx1-v100"), SimConfig())
    m = loop_metrics(times, machine, frames_per_env_step=4.0, learner_batch=32, sim_seconds=2.0)
    assert m["env_steps_per_s"] == pytest.approx(1 / 2.8e-3)
    assert m["frames_per_s"] == pytest.approx(4 / 2.8e-3)
    assert m["learner_updates_per_s"] == pytest.approx(0.25 / 2.8e-3)
    assert m["seconds_per_1000_steps"] == pytest.approx(2.8)
    assert m["gpu_util"] == pytest.approx((0.3 + 0.25 * 4) / 2.8)
    # one of 80 hardware threads busy with CPU work and launches: (1 + 0.1 + 0.25 x 2.5) / 2.8
    assert m["cpu_util"] == pytest.approx((1.1 + 0.25 * 2.5) / 2.8 / 80)
    assert m["samples_per_insert"] == pytest.approx(8.0)
    assert m["energy_j"] == pytest.approx(m["avg_power_w"] * 2.0)


def test_infinitely_fast_gpu_is_the_cpu_work_alone():
    trace = _dqn()
    hw = _hw(FAST_GPU)
    m = simulate(trace, hw, SimConfig(loop="sequential")).metrics
    speed = hw.cpu.thread_speed_rel
    act_s = _cpu_work_s(trace, "actor", ("act",)) / speed
    learn = ("train_forward", "train_backward", "optimizer_step", "target_sync")
    learn_s = _cpu_work_s(trace, "learner", learn) / speed
    expected = 1.0 / (act_s + UPDATES_PER_STEP * learn_s)
    assert m["env_steps_per_s"] == pytest.approx(expected, rel=1e-3)
    assert m["gpu_util"] < 1e-3


def test_infinitely_fast_cpu_is_the_gpu_work_alone():
    """With the CPU work gone, the loop waits for one act forward per step and an update every 4:
    the GPU times of the distributed model's service times (batch-1 inference, one learner step)."""
    trace = _dqn()
    hw = _hw(FAST_CPU)
    m = simulate(trace, hw, SimConfig(loop="sequential")).metrics
    service = derive_service_times(trace, hw, SimConfig(actors=1, inference_batch=1), 32)
    expected = 1.0 / (service.inference_gpu_s[1] + UPDATES_PER_STEP * service.learner_gpu_s)
    assert m["env_steps_per_s"] == pytest.approx(expected, rel=1e-3)
    assert m["gpu_util"] == pytest.approx(1.0, rel=1e-3)  # the GPU never waits for the CPU


def test_cpu_only_target_is_the_whole_loop_as_measured():
    """Without a GPU every phase is CPU work: the whole actor and learner steps as captured."""
    trace = _dqn()
    hw = load_hw("dgx1-v100")
    hw = hw.model_copy(update={"gpu": None})
    m = simulate(trace, hw, SimConfig(loop="sequential")).metrics
    per_step = _cpu_work_s(trace, "actor") + UPDATES_PER_STEP * _cpu_work_s(trace, "learner")
    assert m["env_steps_per_s"] == pytest.approx(hw.cpu.thread_speed_rel / per_step, rel=1e-6)
    assert m["gpu_util"] == 0.0


def test_faster_parts_never_slow_the_loop():
    trace, base = _dqn(), SimConfig(loop="sequential")
    slow = simulate(trace, load_hw("dgx1-v100"), base).metrics["env_steps_per_s"]
    for faster in (FAST_GPU, FAST_CPU, {"gpu": {"dram_bw_gbs": 1800.0}}):
        fast = simulate(trace, _hw(faster), base).metrics["env_steps_per_s"]
        assert fast >= slow * (1 - 1e-9), faster


def test_deterministic_and_learner_batch_scales_the_update():
    trace, hw = _dqn(), load_hw("dgx1-v100")
    a = simulate(trace, hw, SimConfig(loop="sequential", seed=1)).metrics
    assert a == simulate(trace, hw, SimConfig(loop="sequential", seed=1)).metrics
    bigger = simulate(trace, hw, SimConfig(loop="sequential", learner_batch=128)).metrics
    # 4x the batch at the trace's pacing (8 samples per insert) is an update every 16 steps
    assert bigger["learner_updates_per_s"] / bigger["env_steps_per_s"] == pytest.approx(8 / 128)


def test_default_loop_follows_the_trace():
    assert loop_of_steps(_dqn().steps)[0]
    single, why = loop_of_steps(load(R2D2).steps)
    assert not single and "3 processes" in why
    config = SimConfig(loop="trace")
    assert resolve_loop(_dqn(), config).loop == "sequential"
    assert resolve_loop(load(R2D2), config).loop == "distributed"
    # steps without process and thread ids (a hand-built trace) are not known to be one loop
    unknown = dataclasses.replace(_dqn(), steps=_dqn().steps.assign(pid=-1))
    assert not loop_of_steps(unknown.steps)[0]


@pytest.mark.parametrize(
    ("point", "loop"),
    [
        ({}, "trace"),
        ({"learner_batch": 64}, "trace"),
        ({"actors": 4}, "distributed"),
        ({"inference": "local"}, "distributed"),
        ({"cpu_sched": "shared"}, "distributed"),
        ({"loop": "distributed"}, "distributed"),
        ({"loop": "sequential", "sms": 40}, "sequential"),
    ],
)
def test_distributed_knobs_select_the_distributed_loop(point, loop):
    sim, _ = split_point(point)
    assert sim["loop"] == loop


def test_cli_default_and_knob_selection(tmp_path, capsys):
    out = tmp_path / "seq"
    assert main(["simulate", str(DQN), "--hw", "dgx1-v100", "--out", str(out)]) == 0
    seq = json.loads((out / "metrics.json").read_text())
    assert seq["loop"] == "sequential" and seq["path"] == "sequential"
    assert seq["seconds_per_1000_steps"] == pytest.approx(1000 / seq["env_steps_per_s"])
    out = tmp_path / "dist"
    args = ["simulate", str(DQN), "--hw", "dgx1-v100", "--actors", "2", "--sim-seconds", "0.2"]
    assert main([*args, "--out", str(out)]) == 0
    dist = json.loads((out / "metrics.json").read_text())
    assert dist["loop"] == "distributed" and dist["path"] != "sequential"
    assert math.isfinite(dist["seconds_per_1000_steps"])


def test_sweep_of_actors_stays_distributed_and_loop_sweeps(tmp_path):
    out = tmp_path / "sw"
    args = ["sweep", str(DQN), "--hw", "dgx1-v100", "--actors", "2,4", "--sim-seconds", "0.2"]
    assert main([*args, "--jobs", "1", "--no-progress", "--out", str(out)]) == 0
    text = (out / "sweep.csv").read_text()
    assert "sequential" not in text
    out = tmp_path / "loops"
    args = ["sweep", str(DQN), "--hw", "dgx1-v100", "--loop", "sequential,distributed"]
    assert (
        main([*args, "--sim-seconds", "0.2", "--jobs", "1", "--no-progress", "--out", str(out)])
        == 0
    )
    rows = (out / "sweep.csv").read_text().splitlines()
    assert len(rows) == 3 and any(",sequential," in r for r in rows)


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--loop", "sequential", "--actors", "4"], "--actors only mean"),
        (["--loop", "sequential", "--inference", "local"], "--inference only mean"),
        (["--loop", "round-robin"], "--loop"),
    ],
)
def test_refusals_one_line(tmp_path, capsys, args, words):
    out = tmp_path / "x"
    assert main(["simulate", str(DQN), "--hw", "dgx1-v100", *args, "--out", str(out)]) == 2
    assert words in error_line(capsys)
    assert not out.exists()


def test_multi_process_trace_refused(tmp_path, capsys):
    out = tmp_path / "x"
    args = ["simulate", str(R2D2), "--hw", "dgx1-v100", "--loop", "sequential"]
    assert main([*args, "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "--loop sequential" in line and "3 processes" in line


def test_api_refuses_sequential_with_distributed_fields():
    with pytest.raises(ArchsimError, match="--actors"):
        SimConfig(loop="sequential", actors=8)
    assert SimConfig().loop == "distributed"  # the Python default keeps today's system


def test_timeline_alternates_on_one_thread():
    trace, hw = _dqn(), load_hw("dgx1-v100")
    result = simulate(trace, hw, SimConfig(loop="sequential", sim_seconds=0.05), timeline=True)
    cpu = [s for s in result.timeline if s[1] == "cpu0"]
    starts = np.array([s[2] for s in cpu])
    ends = starts + np.array([s[3] for s in cpu])
    assert np.all(starts[1:] >= ends[:-1] - 1e-12)  # one thread: strictly in turn
    updates = sum(1 for s in cpu if s[0] == "learner_step")
    iterations = sum(1 for s in cpu if s[0] == "iteration")
    assert updates == pytest.approx(iterations * UPDATES_PER_STEP, abs=1)


# --- Show (issue 13): the unmodified single-file DQN, captured, then simulated with no knobs ---------
EXAMPLE = ROOT / "examples" / "dqn_single_file.py"
LEARNING_STARTS = 100
# Two program lengths with the same learn-start: their difference is steps of the steady state only
# (epsilon has decayed by then: exploration over the first 10% of the steps, 30 and 90 < 100).
SHORT_STEPS, LONG_STEPS = 300, 900
# The short version's bound: a few hundred steps and 4 recorded windows (the full-length figure in
# docs/VALIDATION.md was within 3%). CPU time on both sides, so other jobs' time does not count, but
# their cache and memory traffic slows this program's own CPU time: on the shared 2-core box, runs of
# 300 and 700 steps once read 83.3 env steps per CPU-second against 96.8 predicted (+16%).
SHOW_BOUND = 0.25


# Below this share of a core (the program's CPU seconds over its wall seconds) the machine is busy
# enough that other jobs' cache and memory traffic inflate the program's own CPU time: under two
# `yes` loops on the 2-core box the program got 63% of a core and measured 100.5 env steps per
# CPU-second against 125.7 predicted from a capture made beside the same load (+25%), while quiet
# runs get 99-100% of a core. The comparison is then not of the model but of the load, so it skips.
BUSY_CORE_SHARE = 0.85


def _program_cpu_s(steps: int) -> float:
    """The example's own CPU-second count (time.process_time around its loop), run as is; skips
    the calling test when the program got under BUSY_CORE_SHARE of a core (a busy machine)."""
    import re
    import subprocess
    import sys

    args = [sys.executable, str(EXAMPLE), "--total-timesteps", str(steps)]
    args += ["--learning-starts", str(LEARNING_STARTS), "--torch-threads", "1", "--no-cuda"]
    done = subprocess.run(args, capture_output=True, text=True, timeout=900, check=True)
    wall_s = float(re.search(r"wall: ([0-9.]+) s", done.stdout).group(1))
    cpu_s = float(re.search(r"CPU: ([0-9.]+) s", done.stdout).group(1))
    if cpu_s < BUSY_CORE_SHARE * wall_s:
        pytest.skip(
            f"busy machine: the program got {cpu_s / wall_s:.0%} of a core ({cpu_s:.2f} CPU-s in "
            f"{wall_s:.2f} s), and other jobs' cache traffic inflates its own CPU time"
        )
    return cpu_s


@pytest.mark.slow
@pytest.mark.solo
def test_simulated_single_file_dqn_matches_the_program_per_cpu_second(tmp_path):
    """Predicted env steps per CPU-second of the captured program, --hw local and no knobs, within
    SHOW_BOUND of the program's own steady state: (LONG - SHORT) steps / (their CPU-seconds' difference)."""
    pytest.importorskip("ale_py", reason="the example steps ALE Pong (ale-py)")
    import torch

    if torch.cuda.is_available():
        pytest.skip("the program runs on the CPU here (--no-cuda); --hw local would add the GPU")
    measured = (LONG_STEPS - SHORT_STEPS) / (
        _program_cpu_s(LONG_STEPS) - _program_cpu_s(SHORT_STEPS)
    )
    out = tmp_path / "cap"
    schedule = ["--wait", "10", "--warmup", "2", "--active", "30", "--repeat", "4"]
    args = ["--total-timesteps", "500", "--learning-starts", str(LEARNING_STARTS)]
    args += ["--torch-threads", "1", "--no-cuda"]
    assert main(["capture", "run", "--out", str(out), *schedule, "--", str(EXAMPLE), *args]) == 0
    sim = tmp_path / "sim"
    assert main(["simulate", str(out), "--hw", "local", "--out", str(sim)]) == 0
    record = json.loads((sim / "metrics.json").read_text())
    assert record["loop"] == "sequential"  # the default for this trace
    predicted = record["env_steps_per_s"]  # local: thread speed 1, so per CPU-second
    assert abs(predicted / measured - 1) < SHOW_BOUND, (predicted, measured)


@pytest.mark.parametrize("preset", list_presets())
def test_physics_on_every_preset(preset):
    """More of a resource never lowers the loop's throughput; power stays within [idle, TDP] of the
    sockets and GPUs in use; energy is power x the window."""
    trace = _dqn()
    base = load_hw(preset)
    config = SimConfig(loop="sequential")
    m = simulate(trace, base, config).metrics
    sockets = base.cpu.sockets
    assert sockets * base.cpu.idle_power_w - 1e-9 <= m["cpu_power_w"]
    assert m["cpu_power_w"] <= sockets * base.cpu.max_power_w + 1e-9
    if base.gpu is not None:
        assert base.gpu.idle_power_w - 1e-9 <= m["gpu_power_w"] <= base.gpu.max_power_w + 1e-9
    assert m["energy_j"] == pytest.approx(m["avg_power_w"] * config.sim_seconds)
    grown = [f"cpu.thread_speed_rel={min(base.cpu.thread_speed_rel * 2, 100)}"]
    if base.gpu is not None:
        grown += [
            f"gpu.dram_bw_gbs={base.gpu.dram_bw_gbs * 2}",
            f"gpu.l2_bw_gbs={base.gpu.l2_bw_gbs * 2}",
        ]
    for override in grown:
        faster = simulate(trace, load_hw(preset, [override]), config).metrics
        for metric in ("env_steps_per_s", "learner_updates_per_s"):
            assert faster[metric] >= m[metric] * (1 - 1e-9), (override, metric)


def test_act_without_policy_ops_stays_cpu_work():
    """A trace whose act phase holds no ops (nothing to price on the GPU) keeps the act phase's CPU
    time as captured: with an infinitely fast GPU the loop is the whole actor step plus updates."""
    trace = _dqn()
    trace = dataclasses.replace(trace, ops=trace.ops[trace.ops["phase"] != "act"])
    hw = _hw(FAST_GPU)
    m = simulate(trace, hw, SimConfig(loop="sequential")).metrics
    learn = ("train_forward", "train_backward", "optimizer_step", "target_sync")
    per_step = _cpu_work_s(trace, "actor") + UPDATES_PER_STEP * _cpu_work_s(trace, "learner", learn)
    assert m["env_steps_per_s"] == pytest.approx(hw.cpu.thread_speed_rel / per_step, rel=1e-3)


def test_trace_info_says_which_loop_runs():
    from archsim.trace.info import format_summary, summarize

    dqn, r2d2 = summarize(_dqn()), summarize(load(R2D2))
    assert dqn["loop"]["default"] == "sequential" and r2d2["loop"]["default"] == "distributed"
    assert "simulated by default as: --loop sequential" in format_summary(dqn)
    assert "--loop distributed (its steps come from 3 processes)" in format_summary(r2d2)
