"""``archsim simulate`` end to end on a tiny trace, workload derivation, and bad input."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from archsim.cli import main
from archsim.hw import load_hw
from archsim.sim.config import SimConfig
from archsim.sim.workload import derive_service_times
from archsim.trace import Trace, save
from tests.test_sim_support import ENV_STEP_US, tiny_trace


def test_simulate_writes_metrics_and_a_perfetto_timeline(trace_dir, tmp_path, capsys):
    out = tmp_path / "run"
    code = main(
        [
            "simulate",
            str(trace_dir),
            "--hw",
            "dgx1-v100",
            "--actors",
            "16",
            "--inference-batch",
            "8",
            "--sim-seconds",
            "0.05",
            "--seed",
            "3",
            "--timeline",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    record = json.loads((out / "metrics.json").read_text())
    for column in (
        "frames_per_s",
        "learner_updates_per_s",
        "gpu_util",
        "cpu_util",
        "gpu_power_w",
        "frames_per_joule",
        "energy_per_mframes_j",
        "actor_wait_s_per_step",
        "inference_queue_mean",
    ):
        assert np.isfinite(record[column]), column
    assert record["actors"] == 16 and record["seed"] == 3 and record["sms"] == 80
    # the tiny trace names no frameskip: one frame per env step (archsim.trace.pacing)
    assert record["frames_per_s"] == record["env_steps_per_s"]
    header = (out / "metrics.csv").read_text().splitlines()[0].split(",")
    assert header == list(record)
    events = json.loads((out / "timeline.json").read_text())["traceEvents"]
    slices = [e for e in events if e["ph"] == "X"]
    names = {e["name"] for e in slices}
    assert "env_step" in names and "train_step" in names
    assert any(n.startswith("inference_batch") for n in names)
    assert all(e["dur"] >= 0 and 0 <= e["ts"] <= 0.05e6 for e in slices)
    assert any(e["ph"] == "C" for e in events)  # power counter track
    assert "frames/s" in capsys.readouterr().out


def test_sms_knob_overrides_the_gpu(trace_dir, tmp_path):
    out = tmp_path / "run"
    args = ["simulate", str(trace_dir), "--actors", "8", "--inference-batch", "8"]
    assert main([*args, "--sms", "8", "--sim-seconds", "0.05", "--out", str(out)]) == 0
    assert json.loads((out / "metrics.json").read_text())["sms"] == 8


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--actors", "0"], "--actors"),
        (["--actors", "-4"], "--actors"),
        (["--actors", "four"], "--actors"),
        (["--actors", "4", "--inference-batch", "64"], "--inference-batch"),
        (["--inference", "remote"], "--inference"),
    ],
)
def test_bad_knobs_exit_2_and_write_nothing(trace_dir, tmp_path, capsys, flags, message):
    out = tmp_path / "run"
    assert main(["simulate", str(trace_dir), *flags, "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not out.exists()


def test_trace_without_actor_steps_is_a_clear_error(tmp_path, capsys):
    trace = tiny_trace()
    no_actors = Trace(
        meta=trace.meta, ops=trace.ops, steps=trace.steps[trace.steps["role"] != "actor"]
    )
    path = save(no_actors, tmp_path / "learner-only")
    assert main(["simulate", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "no actor steps" in err and str(path) in err


def test_workload_from_a_trace():
    trace = tiny_trace()
    hw = load_hw("dgx1-v100")
    central = derive_service_times(trace, hw, SimConfig(actors=64), 32)
    local = derive_service_times(trace, hw, SimConfig(actors=64, inference="local"), 32)
    # Central: env step + preprocess (+ the send's stack cost); local also runs act and the insert.
    assert np.median(central.actor_step_cpu_s) == pytest.approx((ENV_STEP_US + 70) * 1e-6, rel=0.1)
    assert np.all(local.actor_step_cpu_s > central.actor_step_cpu_s.min())
    # More observations per batch never take less GPU time, and fill more of the SMs.
    gpu = central.inference_gpu_s[1:]
    assert np.all(np.diff(gpu) >= 0) and gpu[0] > 0
    assert central.inference_sm_fraction[64] >= central.inference_sm_fraction[1]
    # Copy of 64 observations of 28,224 B over PCIe at 11.5 GB/s is ~157 us, included.
    assert central.inference_gpu_s[64] > 64 * 28_224 / 11.5e9
    bigger = derive_service_times(trace, hw, SimConfig(actors=64), 256)
    assert bigger.learner_gpu_s > central.learner_gpu_s
    # 3 ops x 5.22 us (the DGX-1 host's modelled launch cost), in capture-thread seconds (x the
    # host's thread_speed_rel)
    assert central.learner_launch_cpu_s == pytest.approx(3 * 5.22e-6 * hw.cpu.thread_speed_rel)
    # learner DRAM bytes: the ops' bytes plus the batch of 32 x 2 observations copied in
    assert central.learner_dram_bytes > 32 * 2 * 28_224
    assert bigger.learner_dram_bytes > central.learner_dram_bytes
    assert np.all(np.diff(central.inference_dram_bytes[1:]) >= 0)


def test_without_a_gpu_policy_and_learner_run_on_cpu_threads():
    from archsim.sim.run import simulate

    trace = tiny_trace()
    no_gpu = load_hw("dgx1-v100").model_copy(update={"gpu": None})
    result = simulate(trace, no_gpu, SimConfig(actors=8, inference_batch=8, sim_seconds=0.2))
    m = result.metrics
    assert m["gpu_util"] == 0 and m["gpu_power_w"] == 0
    assert m["frames_per_s"] > 0 and m["learner_updates_per_s"] > 0
    # The learner thread runs forward + backward (1,000 + 2,000 us at batch 32) + optimizer 500 us
    # + replay sample 300 us = 3.8 ms of capture-machine CPU, / the preset's thread_speed_rel (0.773:
    # 4.92 ms, at most 203 updates/s; the learner has its own core: 8 actors + 2 learner threads < 40).
    speed = no_gpu.cpu.thread_speed_rel
    assert m["learner_updates_per_s"] == pytest.approx(0.2 // (3.8e-3 / speed) / 0.2, rel=0.02)


def test_more_cpu_threads_than_the_hardware_has_is_refused(trace_dir, tmp_path, capsys):
    args = ["simulate", str(trace_dir), "--cpu-threads", "81", "--out", str(tmp_path / "o")]
    assert main(args) == 2
    assert "--cpu-threads" in capsys.readouterr().err


DQN_TRACE = Path(__file__).resolve().parents[1] / "traces" / "dqn-pong-cpu"


def test_end_to_end_on_the_bundled_dqn_capture(tmp_path):
    if not DQN_TRACE.is_dir():
        pytest.skip(f"{DQN_TRACE} is absent (made by `archsim capture dqn`)")
    out = tmp_path / "sweep"
    args = ["sweep", str(DQN_TRACE), "--hw", "dgx1-v100", "--actors", "8,64"]
    assert main([*args, "--sim-seconds", "0.2", "--out", str(out), "--no-progress"]) == 0
    import pandas as pd

    table = pd.read_csv(out / "sweep.csv").set_index("actors")
    assert (table["frames_per_s"] > 0).all() and (table["learner_updates_per_s"] > 0).all()
    # More actors on a 78-thread box never make fewer frames than 8 actors do.
    assert table.loc[64, "frames_per_s"] > table.loc[8, "frames_per_s"]
    run = tmp_path / "run"
    sim = ["simulate", str(DQN_TRACE), "--hw", "dgx1-v100", "--actors", "32", "--inference"]
    assert main([*sim, "local", "--sim-seconds", "0.2", "--timeline", "--out", str(run)]) == 0
    assert json.loads((run / "metrics.json").read_text())["frames_per_s"] > 0
