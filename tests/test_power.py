"""Power model (archsim.perf.power) and launch-cost model (archsim.perf.launch): golden cases worked by
hand from the presets' figures, invariants with hypothesis, and the engine's energy bookkeeping."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.hw.presets import list_presets, presets_dir
from archsim.perf.launch import launch_overhead_us
from archsim.perf.power import (
    SMT_SECOND_THREAD_POWER_FRAC,
    cpu_socket_power_w,
    dram_peak_w,
    energy_j,
    frames_per_joule,
    gpu_power_w,
    sm_share_of_card,
)
from archsim.sim.config import SimConfig
from archsim.sim.metrics import PowerModel, Recorder, power_series, summarize
from archsim.sim.run import simulate_system
from archsim.sim.system import Machine
from tests.test_sim_support import service_times

PRESETS = ("dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1", "rtx2080ti")
GPU_PRESETS = tuple(p for p in list_presets() if load_hw(p).gpu is not None)
# V100 SXM2: 55 W idle, 300 W TDP, HBM2 900 GB/s at 3.9 pJ/bit (hwconfigs/dgx1-v100.yaml)
V100 = dict(idle_w=55.0, max_w=300.0, dram_bw_gbs=900.0, dram_pj_per_bit=3.9)
# DRAM at full bandwidth: 900e9 B/s x 8 x 3.9e-12 J = 28.08 W; the SMs get 300 - 55 - 28.08 = 216.92 W
V100_DRAM_W = 28.08
V100_SM_W = 216.92


def test_dram_power_at_peak_bandwidth_by_hand():
    assert dram_peak_w(900, 3.9) == pytest.approx(V100_DRAM_W)
    assert dram_peak_w(616, 7.5) == pytest.approx(616e9 * 8 * 7.5e-12)  # GDDR6: 36.96 W


def test_two_busy_sms_of_eighty_draw_just_above_idle():
    # 2 of 80 SMs busy all the time, no DRAM traffic: 55 + 216.92 x 2/80 = 60.42 W.
    share = sm_share_of_card(1.0, enabled_sms=2, physical_sms=80)
    assert share == pytest.approx(2 / 80)
    assert gpu_power_w(share, 0.0, **V100) == pytest.approx(55 + V100_SM_W * 2 / 80)
    assert gpu_power_w(share, 0.0, **V100) == pytest.approx(60.423, abs=1e-3)


def test_full_card_busy_at_peak_bandwidth_draws_tdp():
    assert gpu_power_w(1.0, 900e9, **V100) == pytest.approx(300.0)
    assert gpu_power_w(1.0, 0.0, **V100) == pytest.approx(300.0 - V100_DRAM_W)
    assert gpu_power_w(0.0, 0.0, **V100) == 55.0


def test_dram_term_from_a_known_byte_count():
    # 1 GB moved in 10 ms = 100 GB/s: 100e9 x 8 x 3.9e-12 = 3.12 W above idle.
    assert gpu_power_w(0.0, 1e9 / 10e-3, **V100) == pytest.approx(55 + 3.12)
    # no DRAM figure: the term is absent
    assert gpu_power_w(0.0, 1e11, 55, 300, 900, 0.0) == 55.0


def test_power_is_clipped_to_tdp_when_two_kernels_exceed_the_bandwidth():
    # two memory-bound jobs side by side can ask for more than the modelled bandwidth
    assert gpu_power_w(1.0, 5 * 900e9, **V100) == 300.0


def test_cpu_socket_golden_cases():
    # Xeon E5-2698 v4: 40 W idle, 135 W TDP, 20 cores x 2 threads (hwconfigs/dgx1-v100.yaml).
    # per core: 95 / (20 x 1.24) = 3.831 W; one busy core 43.83 W; a busy SMT sibling adds 0.24 core.
    per_core = 95 / (20 * (1 + SMT_SECOND_THREAD_POWER_FRAC))
    assert cpu_socket_power_w(1.0, 0.0, 40, 135, 20, 2) == pytest.approx(40 + per_core)
    assert cpu_socket_power_w(1.0, 1.0, 40, 135, 20, 2) == pytest.approx(40 + 1.24 * per_core)
    assert cpu_socket_power_w(20.0, 20.0, 40, 135, 20, 2) == pytest.approx(135.0)
    # without SMT every core busy is the TDP
    assert cpu_socket_power_w(4.0, 0.0, 1.5, 7.5, 4, 1) == pytest.approx(7.5)
    # two busy threads on two cores draw more than the same two threads on one core
    assert cpu_socket_power_w(2.0, 0.0, 40, 135, 20, 2) > cpu_socket_power_w(
        1.0, 1.0, 40, 135, 20, 2
    )


finite = st.floats(0, 1e6, allow_nan=False)


@given(
    share=st.floats(-1, 2, allow_nan=False),
    bytes_per_s=st.floats(0, 1e13, allow_nan=False),
    idle=st.floats(0, 200, allow_nan=False),
    dynamic=st.floats(0, 800, allow_nan=False),
    bw=st.floats(1, 5000, allow_nan=False),
    pj=st.floats(0, 20, allow_nan=False),
)
def test_gpu_power_within_idle_and_tdp(share, bytes_per_s, idle, dynamic, bw, pj):
    p = float(gpu_power_w(share, bytes_per_s, idle, idle + dynamic, bw, pj))
    assert idle - 1e-9 <= p <= idle + dynamic + 1e-9


@given(
    first=st.floats(0, 200, allow_nan=False),
    sibling=st.floats(0, 200, allow_nan=False),
    idle=st.floats(0, 100, allow_nan=False),
    dynamic=st.floats(0, 300, allow_nan=False),
    cores=st.integers(1, 128),
    tpc=st.integers(1, 4),
)
def test_cpu_power_within_idle_and_tdp(first, sibling, idle, dynamic, cores, tpc):
    p = float(cpu_socket_power_w(first, sibling, idle, idle + dynamic, cores, tpc))
    assert idle - 1e-9 <= p <= idle + dynamic + 1e-9


@given(
    physical=st.integers(1, 200),
    pair=st.tuples(st.integers(1, 200), st.integers(1, 200)).map(sorted),
    blocks=st.integers(1, 10_000),
    resident=st.integers(1, 32),
    busy=st.floats(0, 1, allow_nan=False),
    preset=st.sampled_from(PRESETS[:3] + PRESETS[4:]),
)
def test_fewer_enabled_sms_never_draw_more_for_the_same_kernel(
    physical, pair, blocks, resident, busy, preset
):
    """A kernel of ``blocks`` blocks fills min(1, blocks / (sms x resident)) of the enabled SMs; with
    fewer SMs enabled it keeps as many or fewer of the card's SMs busy, so never draws more."""
    low, high = (min(s, physical) for s in pair)
    gpu = load_hw(preset).gpu

    def watts(sms: int) -> float:
        frac = min(1.0, blocks / (sms * resident))
        share = sm_share_of_card(busy * frac, sms, physical)
        return float(gpu_power_w(share, 0.0, gpu.idle_power_w, gpu.max_power_w, 1.0, 0.0))

    assert watts(low) <= watts(high) + 1e-9


def test_every_preset_names_its_card_and_memory():
    for name in PRESETS:
        gpu = load_hw(name).gpu
        assert gpu.physical_sms == gpu.sms, name
    for name in GPU_PRESETS:
        gpu = load_hw(name).gpu
        assert gpu.card_sms == gpu.sms, name  # no SM disabled without --sms
        assert gpu.dram_pj_per_bit is None or 0 < gpu.dram_pj_per_bit < 20, name
        if gpu.dram_pj_per_bit:  # the DRAM term fits in the dynamic budget
            peak_w = dram_peak_w(gpu.dram_bw_gbs, gpu.dram_pj_per_bit)
            assert peak_w < gpu.max_power_w - gpu.idle_power_w, name


def test_sms_override_keeps_the_physical_card():
    gpu = load_hw("dgx1-v100", ["gpu.sms=2"]).gpu
    assert (gpu.sms, gpu.card_sms) == (2, 80)
    # a what-if card larger than the V100: its SMs are the V100's, each drawing what one of the 80
    # draws (tests/test_physics_round5.py), not the TDP spread over 160
    bigger = load_hw("dgx1-v100", ["gpu.sms=160"]).gpu
    assert bigger.card_sms == 80


def test_sms_override_keeps_the_card_of_a_config_that_does_not_name_it(tmp_path):
    text = (presets_dir() / "dgx1-v100.yaml").read_text()
    lines = [line for line in text.splitlines() if "physical_sms:" not in line]
    path = tmp_path / "mine.yaml"
    path.write_text("\n".join(lines) + "\n")
    assert load_hw(str(path)).gpu.physical_sms is None
    gpu = load_hw(str(path), ["gpu.sms=2"]).gpu
    assert (gpu.sms, gpu.card_sms) == (2, 80)


def test_launch_cost_follows_the_host_thread_speed():
    # anchor: 5.22 us measured on the DGX-1's Xeon (the preset's thread_speed_rel) -> 5.22 x that
    # speed on the capture machine
    dgx1_speed = load_hw("dgx1-v100").cpu.thread_speed_rel
    assert launch_overhead_us(dgx1_speed) == pytest.approx(5.22)
    assert launch_overhead_us(1.0) == pytest.approx(5.22 * dgx1_speed)
    for name in GPU_PRESETS:
        hw = load_hw(name)
        assert hw.gpu.launch_overhead_us == pytest.approx(
            launch_overhead_us(hw.cpu.thread_speed_rel), rel=0.01
        ), name


def test_no_faster_host_is_slower_per_launch():
    hosts = [load_hw(n) for n in GPU_PRESETS]
    for a in hosts:
        for b in hosts:
            if a.cpu.thread_speed_rel < b.cpu.thread_speed_rel:
                assert a.gpu.launch_overhead_us >= b.gpu.launch_overhead_us - 0.01, (a.name, b.name)
    # the issue's fault: the DGX A100 host paid 9 us per launch against the DGX-1's 5.2
    assert load_hw("dgx-a100").gpu.launch_overhead_us < load_hw("dgx1-v100").gpu.launch_overhead_us


def _machine(sms: int, physical: int = 80) -> Machine:
    # DGX-1 figures: V100 55-300 W at HBM2 3.9 pJ/bit; a Xeon socket 40-135 W, 4 cores x 2 threads
    return Machine(
        hw_threads=8,
        cores=4,
        sockets=1,
        cores_per_socket=4,
        thread_speed_rel=1.0,
        smt_yield=0.6,
        power=PowerModel(
            gpus=1,
            gpu_idle_w=55,
            gpu_max_w=300,
            sockets=1,
            cpu_idle_w=40,
            cpu_max_w=135,
            gpu_enabled_sms=sms,
            gpu_card_sms=physical,
            gpu_dram_bw_gbs=900,
            gpu_dram_pj_per_bit=3.9,
            cores_per_socket=4,
            threads_per_core=2,
        ),
    )


def test_summary_power_by_hand():
    """A recorder filled by hand: 1 s, one thread busy 0.5 s, SMs 25% of 2 enabled busy, 10 GB."""
    power = _machine(sms=2).power
    rec = Recorder(end=1.0, hw_threads=8)
    rec.cpu_busy(0, 0.0, 0.5)
    rec.gpu_busy(0.0, 1.0, 0.25)
    rec.gpu_dram(0.0, 1.0, 10e9)
    rec.gpu_dram(0.5, 1.5, 2e9)  # half of it falls after the window
    m = summarize(rec, power, np.zeros(8, dtype=int), np.array([8]), np.arange(8) >= 4)
    per_core = 95 / (4 * 1.24)
    assert m["cpu_power_w"] == pytest.approx(40 + 0.5 * per_core)
    # 0.25 x 2/80 of the card's SMs + 11 GB/s x 8 x 3.9 pJ
    assert m["gpu_power_w"] == pytest.approx(55 + V100_SM_W * 0.25 * 2 / 80 + 11e9 * 8 * 3.9e-12)


@pytest.mark.parametrize("cpu_sched", ["pinned", "shared"])
def test_engine_energy_is_the_integral_of_power_with_dram_traffic(cpu_sched):
    times = service_times(
        actor_step_s=(200e-6, 300e-6), inference_s=100e-6, inference_frac=0.4, max_batch=8
    )
    # 1 MB per observation of a batch and 50 MB per learner step
    times = dataclasses.replace(
        times, inference_dram_bytes=np.arange(9) * 1e6, learner_dram_bytes=50e6
    )
    cfg = SimConfig(actors=6, inference_batch=4, sim_seconds=0.03, cpu_sched=cpu_sched)
    result = simulate_system(times, _machine(sms=80), cfg, 32, series_bins=40)
    starts, watts = result.power_series
    width = cfg.sim_seconds / 40
    m = result.metrics
    assert m["energy_j"] == pytest.approx(energy_j(watts, width), rel=1e-9)
    assert np.all(watts >= 40 + 55 - 1e-9) and np.all(watts <= 135 + 300 + 1e-9)
    # the DRAM traffic shows: more than the SM term alone would give
    sm_only = 55 + V100_SM_W * m["gpu_sm_util"]
    assert m["gpu_power_w"] > sm_only + 1.0


@settings(max_examples=10, deadline=None)
@given(pair=st.tuples(st.integers(1, 80), st.integers(1, 80)).map(sorted))
def test_engine_fewer_enabled_sms_never_draw_more(pair):
    """The same job on fewer enabled SMs: its SM share of the enabled SMs is larger but of the card
    no larger, and it runs no more often, so the GPU draws no more."""
    low, high = pair
    blocks = 40  # a kernel of 40 blocks, one resident per SM

    def run(sms: int) -> float:
        frac = min(1.0, blocks / sms)
        times = service_times(learner_gpu_s=1e-3 * max(1.0, blocks / sms), learner_frac=frac)
        cfg = SimConfig(actors=2, inference_batch=1, sim_seconds=0.02)
        return simulate_system(times, _machine(sms=sms), cfg, 32).metrics["gpu_power_w"]

    assert run(low) <= run(high) + 1e-9


def test_power_series_without_gpu_is_cpu_only():
    power = PowerModel(gpus=0, gpu_idle_w=0, gpu_max_w=0, sockets=1, cpu_idle_w=1.5, cpu_max_w=7.5)
    rec = Recorder(end=1.0, hw_threads=4, series_bins=4)
    rec.cpu_busy(0, 0.0, 1.0)
    _, watts = power_series(rec, power, np.zeros(4, dtype=int), np.array([4]))
    # cores unknown: the 4 threads in use are the socket's cores; one of four busy = 1.5 + 6/4
    assert watts == pytest.approx(np.full(4, 1.5 + 6.0 / 4))


def test_frames_per_joule():
    assert frames_per_joule(1_000, 250.0) == 4.0
    assert np.isnan(frames_per_joule(10, 0.0))
