"""Physics invariants, round 5: what-ifs beyond the physical card (more SMs than it has) under the
power cap, and the other knobs rounds 1-4 left out.

The runs are dqn-pong-cpu with 16 actors for 0.5 s on the fast engine (0.2-0.7 s of CPU each).
"""

from __future__ import annotations

import functools
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.power import dram_peak_w, gpu_dynamic_w, sm_share_of_card
from archsim.sim.config import SimConfig
from archsim.sim.power_cap import POWER_CAP_TOL
from archsim.sim.run import simulate
from tests.test_physics_round4 import GPU_PRESETS, NOISE, ROOT, _trace


@functools.cache
def _short(preset: str, overrides: tuple[str, ...] = (), trace: str = "dqn-pong-cpu", **knobs):
    config = SimConfig(sim_seconds=0.5, **{"actors": 16, **knobs})
    return simulate(_trace(trace), load_hw(preset, list(overrides)), config)


def test_a_what_if_sm_draws_what_one_of_the_cards_sms_draws_worked_by_hand():
    """dgx1-v100 (55-300 W, 900 GB/s HBM2 at 3.9 pJ/bit: 28.08 W at peak): the SMs' budget is
    300 - 55 - 28.08 = 216.92 W over the card's 80 SMs. A what-if card of 160 SMs, all busy, asks
    twice that (the power cap then lowers its clock); 2 of the 80 busy ask 2/80 of it."""
    gpu = load_hw("dgx1-v100").gpu
    budget_w = 300 - 55 - dram_peak_w(900, 3.9)
    assert budget_w == pytest.approx(216.92)
    for enabled, want in ((160, 2 * budget_w), (80, budget_w), (2, budget_w * 2 / 80)):
        share = sm_share_of_card(1.0, enabled, gpu.card_sms)
        sm_w, _ = gpu_dynamic_w(share, 0.0, 55, 300, 900, 3.9)
        assert float(sm_w) == pytest.approx(want)
    assert load_hw("dgx1-v100", ["gpu.sms=160"]).gpu.card_sms == 80


def test_more_sms_than_the_card_never_draw_less_for_the_same_work():
    """The fault: a what-if card with more SMs than the preset's spread the TDP over all of them, so
    each SM drew less the more there were: dgx-a100, DQN, 16 actors, the same 17,560-17,576
    frames/s at 248 W on its 108 SMs, 241 W on 200, 220 W on 400. Now 248, 277, 277 W: the busy
    SMs of a larger card each draw what an A100 SM draws (the 200-SM card's small kernels spread
    over more SMs for the same time)."""
    runs = [_short("dgx-a100", (f"gpu.sms={n}",)).metrics for n in (108, 200, 400)]
    for fewer, more in zip(runs[:-1], runs[1:], strict=True):
        assert more["frames_per_s"] == pytest.approx(fewer["frames_per_s"], rel=NOISE)
        assert more["gpu_power_w"] >= fewer["gpu_power_w"] * (1 - 1e-9)


@settings(max_examples=3, deadline=None)
@given(preset=st.sampled_from(GPU_PRESETS), factor=st.sampled_from((2, 4)))
def test_a_larger_card_of_the_same_sms_is_within_its_tdp_and_draws_no_less_for_no_less_work(
    preset, factor
):
    """Every GPU preset at 2x or 4x its SMs (up to the limit, 1,024): a larger card of the same SMs,
    whose TDP grows by their share of the card's SM budget; its mean power stays within [idle,
    that TDP], and a card that does at least the smaller one's work draws at least its power."""
    hw = load_hw(preset)
    small = _short(preset).metrics
    what_if = (f"gpu.sms={min(hw.gpu.sms * factor, 1024)}",)  # limits: 1,024
    big_run, big_gpu = _short(preset, what_if), load_hw(preset, list(what_if)).gpu
    big = big_run.metrics
    assert big_gpu.max_power_w >= hw.gpu.max_power_w
    assert big_run.clock_caps.within(), big_run.clock_caps
    assert hw.gpu.idle_power_w - 1e-9 <= big["gpu_power_w"] <= big_gpu.max_power_w + 1e-9
    more_work = all(big[k] >= small[k] for k in ("frames_per_s", "learner_updates_per_s"))
    if more_work:
        assert big["gpu_power_w"] >= small["gpu_power_w"] * (1 - NOISE), (preset, factor)


@pytest.mark.parametrize(
    ("preset", "override", "key"),
    [
        ("dgx-a100", "cpu.idle_power_w=500", "cpu.idle_power_w = 500 W is above cpu.max_power_w"),
        ("dgx-a100", "cpu.max_power_w=10", "cpu.idle_power_w = 65 W is above cpu.max_power_w"),
        ("dgx-a100", "gpu.max_power_w=50", "gpu.idle_power_w = 55 W is above gpu.max_power_w"),
        ("jetson-tx1", "gpu.idle_power_w=8", "gpu.idle_power_w = 8 W is above gpu.max_power_w"),
    ],
)
def test_an_idle_power_above_the_tdp_is_refused_naming_the_keys(preset, override, key):
    """The fault: dgx-a100 with a 500 W idle CPU socket under its 225 W TDP ran, drawing 500 W a
    socket (1,110 W in all); jetson-tx1's GPU idling at 8 W under 7.5 drew 8; an A100 below its
    55 W idle was refused naming gpu.dram_bw_gbs. Now one line names the idle and TDP keys, and the
    CLI exits 2."""
    with pytest.raises(ArchsimError, match=re.escape(key)) as error:
        load_hw(preset, [override])
    assert "\n" not in str(error.value) and override in str(error.value)


def test_the_cli_refuses_an_idle_power_above_the_tdp_with_exit_2(tmp_path, capsys):
    from archsim.cli import main

    args = ["simulate", str(ROOT / "traces" / "dqn-pong-cpu"), "--hw", "dgx-a100"]
    args += ["--set", "cpu.idle_power_w=500", "--out", str(tmp_path / "out")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cpu.idle_power_w = 500 W" in err


# --- a power limit is a limit: the same work draws the same power under any -----------------------


def test_a_higher_power_limit_draws_no_more_for_the_same_work():
    """The fault: a busy SM's or core's power was a share of the what-if TDP, so raising the limit
    made the same work draw more (dgx-a100, DQN, 16 actors, the same 17,560 frames/s and 1,056
    updates/s: GPU 111.5 W at its 400 W TDP, 176.8 W at --set gpu.max_power_w=800; CPU 136.4 W
    at 225 W a socket, 145.4 W at 450), and a what-if idle changed what a busy SM draws. Now it is
    a share of the card's own TDP less its idle (gpu.card_max_power_w, cpu.physical_max_power_w):
    a limit above what the run draws changes nothing, and a lower idle lowers only the idle."""
    part = _short("dgx-a100").metrics
    for what_if in ("gpu.max_power_w=800", "gpu.max_power_w=200", "cpu.max_power_w=450"):
        m = _short("dgx-a100", (what_if,)).metrics
        assert m["frames_per_s"] == part["frames_per_s"], what_if
        assert m["gpu_power_w"] == pytest.approx(part["gpu_power_w"], rel=1e-12), what_if
        assert m["cpu_power_w"] == pytest.approx(part["cpu_power_w"], rel=1e-12), what_if
    idle0 = _short("dgx-a100", ("gpu.idle_power_w=0",)).metrics
    assert idle0["gpu_power_w"] == pytest.approx(part["gpu_power_w"] - 55.0, rel=1e-12)


def test_a_power_limit_below_what_the_run_draws_lowers_the_clock_as_nvidia_smi_pl_does():
    """jetson-tx1 (998 MHz GPU, 7.5 W; 1,734 MHz CPU socket, 1.5-7.5 W) draws 6.86 W of GPU and
    2.70 W of CPU here. A 5 W GPU limit runs its SMs near 652 MHz, a 2 W CPU limit its cores
    below the part's clock (a lower limit than the part's may: every core busy there draws it),
    each within its limit, never faster than the part."""
    part = _short("jetson-tx1").metrics
    for what_if, key, limit_w in (
        ("gpu.max_power_w=5", "gpu_power_w", 5.0),
        ("cpu.max_power_w=2", "cpu_power_w", 2.0),
    ):
        run = _short("jetson-tx1", (what_if,))
        assert run.clock_caps.within(), (what_if, run.clock_caps)
        assert run.metrics[key] <= limit_w * (1 + 1e-9)
        assert run.metrics[key] >= limit_w * 0.97  # held near the limit, not far below it
        assert sum("power cap" in note for note in run.notes) == 1
        for metric in ("frames_per_s", "learner_updates_per_s"):
            assert run.metrics[metric] <= part[metric] * (1 + NOISE), (what_if, metric)


@settings(max_examples=4, deadline=None)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    device=st.sampled_from(("gpu", "cpu")),
    scale=st.sampled_from((0.5, 0.75, 2.0)),
)
def test_a_power_limit_bounds_the_power_and_never_speeds_a_run(preset, device, scale):
    """Every GPU preset, its GPU's or CPU sockets' limit scaled: the device's mean power within
    [idle, limit], no metric faster than at the part's limit when lower, and the same run when
    the part already drew less than the new limit."""
    hw = load_hw(preset)
    part = getattr(hw, device)
    limit_w = max(part.max_power_w * scale, part.idle_power_w)
    run = _short(preset, (f"{device}.max_power_w={limit_w}",))
    m, base = run.metrics, _short(preset).metrics
    count = hw.cpu.sockets if device == "cpu" else 1
    watts = m[f"{device}_power_w"]
    assert count * part.idle_power_w - 1e-9 <= watts <= count * limit_w * (1 + 1e-9)
    if base[f"{device}_power_w"] <= count * limit_w * (1 - 1e-3):  # not binding: the same run
        assert m["frames_per_s"] == base["frames_per_s"]
        assert watts == pytest.approx(base[f"{device}_power_w"], rel=1e-12)
    if scale < 1:
        for metric in ("frames_per_s", "learner_updates_per_s"):
            assert m[metric] <= base[metric] * (1 + NOISE), (preset, device, metric)


def test_a_larger_socket_of_the_same_cores_draws_what_they_draw_and_its_tdp_grows_with_them():
    """The fault: the part's TDP was spread over a what-if socket's cores, so each drew less the
    more there were: jetson-tx1 (4 Cortex-A57 cores, 1.5-7.5 W), R2D2, 64 actors, the same 8,704
    frames/s drew 3.0 W of CPU at 16 cores and 1.9 W at 64, where 8 cores drew 7.5 W for 8,472.
    A larger part of the same cores: each draws what one of the four does, and its TDP grows by
    their share of the part's 6 W budget (16 cores: 1.5 + 6 x 4 = 25.5 W), so nothing is capped
    and the run is the one before; a limit given with it is kept, and holds by the clock."""
    assert load_hw("jetson-tx1", ["cpu.cores_per_socket=16"]).cpu.max_power_w == pytest.approx(25.5)
    limited = load_hw("jetson-tx1", ["cpu.cores_per_socket=16", "cpu.max_power_w=7.5"]).cpu
    assert limited.max_power_w == 7.5 and limited.full_load_clock_rel == pytest.approx(0.25)
    runs = {
        n: _short("jetson-tx1", (f"cpu.cores_per_socket={n}",), "r2d2-seed-2x2-cpu", actors=64)
        for n in (8, 16, 64)
    }
    m8, m16, m64 = (runs[n].metrics for n in (8, 16, 64))
    assert m16["frames_per_s"] == m64["frames_per_s"] >= m8["frames_per_s"]
    assert m16["cpu_power_w"] >= m8["cpu_power_w"] > 7.0  # was 3.0 W at 16 cores
    assert m64["cpu_power_w"] == pytest.approx(m16["cpu_power_w"], rel=NOISE)  # was 1.9 W
    assert not any("power cap" in note for note in runs[64].notes)


# --- the steady engine: the same invariants ---------------------------------------------------------


@settings(max_examples=3, deadline=None)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    what_if=st.sampled_from(
        (("gpu.clock_mhz=3000",), ("cpu.boost_clock_mhz=6000",), ("gpu.sms=1024",), ())
    ),
)
def test_the_steady_engine_keeps_the_books_and_the_limits(preset, what_if):
    """``--engine steady`` extrapolates a short run (an approximation); its metrics still obey
    what the exact engine's do: mean power is CPU plus GPU within [idle, TDP] at the hardware
    asked (the cap's clocks included), energy is mean power x the asked window, and the replay
    ratio reached is updates x batch per env step (every preset x these what-ifs, 16 actors, 4 s:
    no exception found; its power series is a run of the last checkpoint's length, documented)."""
    hw = load_hw(preset, list(what_if))
    config = SimConfig(sim_seconds=4.0, actors=16, engine="steady")
    result = simulate(_trace("dqn-pong-cpu"), hw, config)
    m = result.metrics
    assert result.engine.startswith("steady")
    assert m["avg_power_w"] == pytest.approx(m["cpu_power_w"] + m["gpu_power_w"], rel=1e-12)
    assert m["energy_j"] == pytest.approx(m["avg_power_w"] * 4.0, rel=1e-12)
    assert m["samples_per_insert"] == pytest.approx(
        m["learner_updates_per_s"] * result.config.learner_batch / m["env_steps_per_s"]
    )
    assert hw.gpu.idle_power_w - 1e-9 <= m["gpu_power_w"] <= hw.gpu.max_power_w + 1e-9
    sockets = hw.cpu.sockets
    assert sockets * hw.cpu.idle_power_w - 1e-9 <= m["cpu_power_w"]
    assert m["cpu_power_w"] <= sockets * hw.cpu.max_power_w + 1e-9


def test_limits_below_both_parts_full_load_end_within_them_and_energy_is_the_power_integral():
    """jetson-tx1, DQN, 16 actors, its CPU limited to 2.2 W (the part draws 2.7 here) and its GPU
    to 5 W: both clocks fall, the CPU's below the part's. With 4 passes the run ended 2.5% over
    the CPU limit, clipped there, so its energy was 0.26% off the integral of its power series;
    within 6 it holds both limits and the books balance."""
    hw = load_hw("jetson-tx1", ["cpu.max_power_w=2.2", "gpu.max_power_w=5"])
    config = SimConfig(sim_seconds=0.5, actors=16)
    result = simulate(_trace("dqn-pong-cpu"), hw, config, series_bins=20)
    assert result.clock_caps.within(), result.clock_caps
    _, watts = result.power_series
    # what is left above a limit is within the cap's tolerance (0.1%), clipped
    energy_j = result.metrics["energy_j"]
    assert float(watts.sum()) * 0.5 / 20 == pytest.approx(energy_j, rel=POWER_CAP_TOL)
    assert result.hw_run.cpu.boost_clock_mhz < hw.cpu.boost_clock_mhz  # below the part's clock
