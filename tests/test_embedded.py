"""Issue 15 items 3-6: shared DRAM on SoCs (archsim.perf.shared_memory), per-phase CPU speed
(archsim.perf.cpu_speed), unfold vs library convolutions (archsim.perf.conv_impl), the sequential
loop's per-core utilization."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.conv_impl import NATURE_DQN_CONVS, ConvLayer, conv_cost, network_cost
from archsim.perf.copies import host_link_seconds
from archsim.perf.cpu_speed import (
    EMULATOR,
    INTERPRETER,
    SIMD,
    class_of_phase,
    class_speed,
    phase_speed,
    target_seconds,
)
from archsim.perf.shared_memory import achievable_gbs, contend, shared_copy_seconds
from archsim.sim.config import SimConfig
from archsim.sim.profiler_cost import without_profiler_cost
from archsim.sim.sequential import LoopTimes, derive_loop_times, loop_metrics
from archsim.sim.step_work import whole_steps
from archsim.sim.workload import derive_machine
from archsim.trace import load

ROOT = Path(__file__).resolve().parents[1]
DQN = ROOT / "traces" / "dqn-pong-cpu"

times = st.floats(min_value=0.0, max_value=10.0, allow_nan=False)
sizes = st.floats(min_value=0.0, max_value=1e11, allow_nan=False)
bandwidths = st.floats(min_value=0.1, max_value=1e4, allow_nan=False)


# --- shared DRAM -----------------------------------------------------------------------------


@given(times, sizes, times, sizes, bandwidths)
def test_lone_cpu_or_lone_gpu_is_never_slower_than_unshared(t_cpu, b_cpu, t_gpu, b_gpu, bw):
    """A side running alone (the other has no time or moves no bytes, or no overlap) keeps its
    non-shared time; with both busy neither ever gets faster."""
    lone_cpu = contend(t_cpu, b_cpu, 0.0, 0.0, t_cpu, bw)
    assert lone_cpu.cpu_s == t_cpu
    lone_gpu = contend(0.0, 0.0, t_gpu, b_gpu, t_gpu, bw)
    assert lone_gpu.gpu_s == t_gpu
    no_overlap = contend(t_cpu, b_cpu, t_gpu, b_gpu, 0.0, bw)
    assert (no_overlap.cpu_s, no_overlap.gpu_s) == (t_cpu, t_gpu)
    quiet_gpu = contend(t_cpu, b_cpu, t_gpu, 0.0, min(t_cpu, t_gpu), bw)
    assert quiet_gpu.cpu_s == t_cpu  # a lone CPU's demand is capped at the DRAM: stretch 1
    both = contend(t_cpu, b_cpu, t_gpu, b_gpu, min(t_cpu, t_gpu), bw)
    assert both.cpu_s >= t_cpu and both.gpu_s >= t_gpu and both.stretch >= 1.0


@given(times, sizes, times, sizes, bandwidths, bandwidths)
def test_more_bandwidth_never_slows_either_side(t_cpu, b_cpu, t_gpu, b_gpu, bw, extra):
    overlap = min(t_cpu, t_gpu)
    narrow = contend(t_cpu, b_cpu, t_gpu, b_gpu, overlap, bw)
    wide = contend(t_cpu, b_cpu, t_gpu, b_gpu, overlap, bw + extra)
    assert wide.cpu_s <= narrow.cpu_s * (1 + 1e-12)
    assert wide.gpu_s <= narrow.gpu_s * (1 + 1e-12)


def test_contention_by_hand():
    """B = 10 GB/s. CPU 1 s moving 6 GB (6 GB/s), GPU 2 s moving 16 GB (8 GB/s), 0.5 s together:
    stretch (6 + 8) / 10 = 1.4, so each gains 0.5 x 0.4 = 0.2 s: CPU 1.2 s, GPU 2.2 s."""
    c = contend(1.0, 6e9, 2.0, 16e9, 0.5, 10.0)
    assert c.stretch == pytest.approx(1.4)
    assert c.cpu_s == pytest.approx(1.2)
    assert c.gpu_s == pytest.approx(2.2)
    # demands under the bandwidth: 3 + 4 < 10, no stretch
    c = contend(1.0, 3e9, 2.0, 8e9, 1.0, 10.0)
    assert (c.cpu_s, c.gpu_s, c.stretch) == (1.0, 2.0, 1.0)
    # a GPU asking for 30 GB/s alone is capped at B = 10: with a CPU at 5 GB/s, stretch 1.5 over
    # the whole 1 s overlap
    c = contend(1.0, 5e9, 1.0, 30e9, 1.0, 10.0)
    assert c.stretch == pytest.approx(1.5)
    assert c.cpu_s == pytest.approx(1.5) and c.gpu_s == pytest.approx(1.5)


def test_bad_contention_input():
    with pytest.raises(ValueError, match="achievable_gbs"):
        contend(1.0, 1.0, 1.0, 1.0, 1.0, 0.0)
    with pytest.raises(ValueError, match=">= 0"):
        contend(-1.0, 1.0, 1.0, 1.0, 1.0, 1.0)


def test_soc_presets_share_dram_and_copy_through_it():
    """TX1: 25.6 GB/s LPDDR4 x the Maxwell stream fraction 0.70 = 17.92 GB/s; a 1 MB copy reads and
    writes it: 1 us link latency + 2e6 / 17.92e9 s. Zero-copy: none. A discrete GPU: the link."""
    tx1 = load_hw("jetson-tx1")
    assert tx1.memory.shared_with_gpu and load_hw("jetson-agx-orin").memory.shared_with_gpu
    assert not load_hw("dgx1-v100").memory.shared_with_gpu
    assert achievable_gbs(tx1) == pytest.approx(17.92)
    assert achievable_gbs(load_hw("jetson-agx-orin")) == pytest.approx(204.8 * 0.88)
    expected = 1e-6 + 2e6 / 17.92e9
    assert shared_copy_seconds(1e6, tx1) == pytest.approx(expected)
    import pandas as pd

    name = pd.Series(["Memcpy HtoD (Pinned -> Device)"])
    assert host_link_seconds([1e6], name, tx1)[0] == pytest.approx(expected)
    zero = tx1.model_copy(update={"memory": tx1.memory.model_copy(update={"zero_copy": True})})
    assert shared_copy_seconds(1e6, zero) == 0.0
    assert host_link_seconds([1e6], name, zero)[0] == 0.0
    assert shared_copy_seconds(1e6, load_hw("dgx1-v100")) is None


# --- per-phase CPU speed ---------------------------------------------------------------------


def _cpu(**speeds):
    hw = load_hw("jetson-tx1")
    return hw.cpu.model_copy(update=speeds)


def test_phase_classes_and_fallback():
    assert class_of_phase("env_step") == EMULATOR
    assert class_of_phase("display") == EMULATOR
    assert class_of_phase("act") == SIMD and class_of_phase("train_backward") == SIMD
    assert class_of_phase("replay_sample") == INTERPRETER
    assert class_of_phase("other") == INTERPRETER
    cpu = _cpu(emulator_speed_rel=None, interpreter_speed_rel=None, simd_speed_rel=None)
    for kind in (EMULATOR, INTERPRETER, SIMD):  # none given: thread_speed_rel for all
        assert class_speed(cpu, kind) == cpu.thread_speed_rel
    cpu = _cpu(emulator_speed_rel=0.5, interpreter_speed_rel=0.25, simd_speed_rel=0.125)
    assert phase_speed(cpu, "env_step") == 0.5
    assert phase_speed(cpu, "preprocess") == 0.25
    assert phase_speed(cpu, "train_forward") == 0.125
    with pytest.raises(ValueError, match="unknown CPU work class"):
        class_speed(cpu, "gpu")


def test_target_seconds_by_hand():
    """100 us env step at 0.5 -> 200 us; 30 us act at 0.125 -> 240 us; 10 us other at 0.25 -> 40 us."""
    cpu = _cpu(emulator_speed_rel=0.5, interpreter_speed_rel=0.25, simd_speed_rel=0.125)
    total = target_seconds({"env_step": 100.0, "act": 30.0, "other": 10.0}, cpu)
    assert total == pytest.approx(480e-6)


def _dqn_clean():
    if not (DQN / "steps.parquet").exists():
        pytest.skip("traces/dqn-pong-cpu is not present")
    trace = without_profiler_cost(load(DQN))
    import dataclasses

    return dataclasses.replace(trace, steps=whole_steps(trace.steps))


def test_sequential_loop_applies_the_emulator_speed_to_env_steps_only():
    """Halving only the emulator speed on the TX1 adds exactly the env step (and display) work once
    more to the iteration's CPU time; the learner update's CPU time (no emulator) is unchanged."""
    trace = _dqn_clean()
    hw = load_hw("jetson-tx1")
    base = derive_loop_times(trace, hw, SimConfig(loop="sequential"), 32)
    speed = hw.cpu.thread_speed_rel
    slow = hw.model_copy(
        update={"cpu": hw.cpu.model_copy(update={"emulator_speed_rel": speed / 2})}
    )
    slowed = derive_loop_times(trace, slow, SimConfig(loop="sequential"), 32)
    assert slowed.learn_cpu_s == pytest.approx(base.learn_cpu_s)
    assert slowed.act_cpu_s > base.act_cpu_s
    from archsim.sim.step_work import phases_work_us, typical_us

    actor = trace.steps[trace.steps["role"] == "actor"]
    cpu_time = "cpu_us" in actor and bool(actor["cpu_us"].notna().any())
    env_us = typical_us(phases_work_us(actor, ("env_step", "display")), cpu_time)
    assert slowed.act_cpu_s - base.act_cpu_s == pytest.approx(env_us * 1e-6 / speed, rel=1e-6)


def test_per_core_utilization_of_the_loop():
    """One thread busy 1.1 ms of 2.8 ms plus 0.25 x 2.5 ms: core 0 at (1.1 + 0.625) / 2.8, the TX1's
    4 cores' mean a quarter of it."""
    times = LoopTimes(1e-3, 0.1e-3, 0.3e-3, 2e-3, 0.5e-3, 4e-3, 0.25, 1.0)
    machine = derive_machine(load_hw("jetson-tx1"), SimConfig())
    m = loop_metrics(times, machine, frames_per_env_step=4.0, learner_batch=32, sim_seconds=1.0)
    busiest = (1.1 + 0.25 * 2.5) / 2.8
    assert m["cpu_core_util_max"] == pytest.approx(busiest)
    assert m["cpu_core_util_mean"] == pytest.approx(busiest / 4)
    assert m["gpu_util"] == pytest.approx((0.3 + 0.25 * 4) / 2.8)


# --- unfold vs library convolutions ----------------------------------------------------------


@pytest.mark.parametrize("batch", [1, 32])
def test_unfold_costs_more_than_library_conv_on_tx1(batch):
    hw = load_hw("jetson-tx1")
    for layer in NATURE_DQN_CONVS:
        lib, unf = conv_cost(layer, batch, "cudnn", hw), conv_cost(layer, batch, "unfold", hw)
        assert unf.seconds > lib.seconds and unf.dram_bytes > lib.dram_bytes
        assert (lib.kernels, unf.kernels) == (1, 2)
    assert (
        network_cost(NATURE_DQN_CONVS, batch, "unfold", hw).seconds
        > network_cost(NATURE_DQN_CONVS, batch, "cudnn", hw).seconds
    )


def test_conv1_by_hand_on_tx1():
    """Nature DQN conv1 at batch 32: 20x20 outputs, 256 taps; F = 2 x 32 x 32 x 400 x 256 =
    209.7 MFLOP at 0.511 TFLOP/s x 0.85; input 3.61 MB, weights 32.8 kB, output 1.64 MB at
    25.6 x 0.70 GB/s. The column buffer is 32 x 256 x 400 x 4 = 13.1 MB."""
    hw = load_hw("jetson-tx1")
    layer = ConvLayer(4, 84, 32, 8, 4)
    assert layer.out_side == 20
    peak = 2 * 256 * 998e6 * 0.85
    bw = 25.6e9 * 0.70
    flops = 2 * 32 * 32 * 400 * 256
    inp, w, out, buf = 32 * 4 * 84 * 84 * 4, 32 * 256 * 4, 32 * 32 * 400 * 4, 32 * 256 * 400 * 4
    lib = conv_cost(layer, 32, "cudnn", hw)
    assert lib.seconds == pytest.approx(max(flops / peak, (inp + w + out) / bw))
    unf = conv_cost(layer, 32, "unfold", hw)
    assert unf.seconds == pytest.approx((inp + buf) / bw + max(flops / peak, (buf + w + out) / bw))
    assert unf.dram_bytes == inp + 2 * buf + w + out


def test_conv_cost_bad_input():
    hw = load_hw("jetson-tx1")
    with pytest.raises(ValueError, match="unknown conv implementation"):
        conv_cost(NATURE_DQN_CONVS[0], 1, "winograd", hw)


# --- distributed loop on a shared-DRAM SoC ---------------------------------------------------


def test_busy_side_stretch_by_hand():
    from archsim.perf.shared_memory import busy_side_stretch

    assert busy_side_stretch(6.0, 8.0, 10.0) == pytest.approx(1.4)
    assert busy_side_stretch(3.0, 4.0, 10.0) == 1.0
    assert busy_side_stretch(0.0, 50.0, 10.0) == 1.0  # a lone GPU: its own model already binds


def test_distributed_soc_is_never_faster_than_unshared_and_stretches_alike():
    """The same TX1 with and without a shared DRAM: every service time is the unshared one or
    longer, and the actors' and the learner's GPU work are stretched by one factor."""
    from archsim.sim.workload import derive_service_times

    if not (DQN / "steps.parquet").exists():
        pytest.skip("traces/dqn-pong-cpu is not present")
    trace = load(DQN)
    tx1 = load_hw("jetson-tx1")
    apart = tx1.model_copy(
        update={"memory": tx1.memory.model_copy(update={"shared_with_gpu": False})}
    )
    config = SimConfig(loop="distributed", actors=3)
    shared = derive_service_times(trace, tx1, config, 32)
    alone = derive_service_times(trace, apart, config, 32)
    assert shared.learner_gpu_s >= alone.learner_gpu_s * (1 - 1e-9)
    stretch = float(shared.actor_step_cpu_s.mean() / alone.actor_step_cpu_s.mean())
    assert stretch >= 1.0 - 1e-12


def test_actor_phases_take_their_class_speed():
    """Distributed actors: with the emulator at half the thread's speed, each actor step's CPU work
    grows by its env step's capture time (the engine divides by thread_speed_rel afterwards)."""
    from archsim.sim.actor_work import derive_actor_work
    from archsim.sim.step_work import phase_work_us

    trace = _dqn_clean()
    hw = load_hw("jetson-tx1")
    slow = hw.model_copy(
        update={
            "cpu": hw.cpu.model_copy(update={"emulator_speed_rel": hw.cpu.thread_speed_rel / 2})
        }
    )
    config = SimConfig(loop="distributed", actors=3)
    base = derive_actor_work(trace, hw, config).actor_step_cpu_s
    slowed = derive_actor_work(trace, slow, config).actor_step_cpu_s
    actor = trace.steps[trace.steps["role"] == "actor"]
    env_s = phase_work_us(actor, "env_step").fillna(0.0).to_numpy(dtype=float) * 1e-6
    assert slowed.sum() - base.sum() == pytest.approx(env_s[np.isfinite(env_s)].sum(), rel=1e-6)


def test_zero_copy_removes_exactly_the_batch_copy_in_the_single_loop():
    """TX1, bundled DQN trace (no memcpy ops recorded): the update's GPU time with copies minus with
    zero-copy is the batch's DRAM copy, 1 us + 2 x bytes / 17.92 GB/s; the act side is unchanged."""
    from archsim.sim.learner_work import learner_batch_bytes

    trace = _dqn_clean()
    tx1 = load_hw("jetson-tx1")
    zero = tx1.model_copy(update={"memory": tx1.memory.model_copy(update={"zero_copy": True})})
    config = SimConfig(loop="sequential")
    copying = derive_loop_times(trace, tx1, config, 32)
    free = derive_loop_times(trace, zero, config, 32)
    n_bytes = learner_batch_bytes(trace, 32)
    assert copying.learn_gpu_s - free.learn_gpu_s == pytest.approx(1e-6 + 2 * n_bytes / 17.92e9)
    assert copying.act_s == pytest.approx(free.act_s)
    assert free.iteration_s <= copying.iteration_s


@pytest.mark.parametrize(
    "setting, words",
    [
        ("memory.zero_copy=maybe", "memory.zero_copy"),
        ("memory.shared_with_gpu=2", "memory.shared_with_gpu"),
        ("cpu.emulator_speed_rel=0", "cpu.emulator_speed_rel"),
        ("cpu.simd_speed_rel=1000", "cpu.simd_speed_rel"),
    ],
)
def test_bad_soc_settings_one_line(tmp_path, capsys, setting, words):
    from archsim.cli import main
    from tests.conftest import error_line

    if not (DQN / "steps.parquet").exists():
        pytest.skip("traces/dqn-pong-cpu is not present")
    out = tmp_path / "x"
    args = ["simulate", str(DQN), "--hw", "jetson-tx1", "--set", setting, "--out", str(out)]
    assert main(args) == 2
    assert words in error_line(capsys)
    assert not out.exists()
