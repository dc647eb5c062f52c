"""Physics invariants, round 4: a what-if clock past TDP runs at the clock that holds its mean power
at the TDP (archsim.sim.power_cap), as a power-limited part does, instead of being clipped to the
TDP while it keeps the faster clock's throughput (more work per joule from a cap).

The runs are dqn-pong-cpu with its default actors on the fast engine (0.2-0.6 s of CPU each).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.hw.presets import list_presets
from archsim.perf.power import cpu_clock_cap, dram_peak_w, gpu_clock_cap
from archsim.sim.config import SimConfig
from archsim.sim.power_cap import POWER_CAP_TOL
from archsim.sim.run import simulate
from archsim.trace import load

ROOT = Path(__file__).resolve().parents[1]
NOISE = 0.02
GPU_PRESETS = tuple(p for p in list_presets() if p != "local" and load_hw(p).gpu is not None)


@functools.cache
def _trace(name: str):
    return load(ROOT / "traces" / name)


def _run(preset: str, overrides: tuple[str, ...] = (), trace: str = "dqn-pong-cpu"):
    return simulate(_trace(trace), load_hw(preset, list(overrides)), SimConfig(sim_seconds=2.0))


@functools.cache
def _short(preset: str, overrides: tuple[str, ...] = ()):
    """16 actors for 0.5 s: 0.2-0.7 s of CPU a run on every preset."""
    config = SimConfig(sim_seconds=0.5, actors=16)
    return simulate(_trace("dqn-pong-cpu"), load_hw(preset, list(overrides)), config)


def _capped_mhz(result, device: str) -> float | None:
    """The clock the power cap ran ``device`` ("CPU boost" or "GPU") at, from its note."""
    for note in result.notes:
        found = re.search(device + r" [\d,]+ -> ([\d,]+) MHz", note)
        if found:
            return float(found.group(1).replace(",", ""))
    return None


def test_clock_caps_by_hand():
    # jetson-tx1's CPU socket: 1.5 W idle, 7.5 W TDP, 6 W of headroom; a clock asking 9 W of
    # dynamic power falls to 6/9 of itself (dynamic power linear in f at the part's voltage).
    assert cpu_clock_cap(9.0, 1.5, 7.5) == pytest.approx(6 / 9)
    assert cpu_clock_cap(5.0, 1.5, 7.5) == 1.0
    # GPU: 6 W of headroom less 1 W of DRAM leaves the SMs 5 W of the 10 W they ask
    assert gpu_clock_cap(10.0, 1.0, 1.5, 7.5) == pytest.approx(0.5)
    assert gpu_clock_cap(4.0, 1.0, 1.5, 7.5) == 1.0
    assert gpu_clock_cap(2.0, 7.0, 1.5, 7.5) == 0.0  # DRAM alone over the budget


def test_capped_hw_lowers_clocks_keeps_the_parts_and_refuses_a_memory_over_budget():
    from archsim.errors import ArchsimError
    from archsim.sim.power_cap import ClockCaps, capped_hw

    hw = load_hw("dgx1-v100", ["cpu.boost_clock_mhz=7200", "gpu.clock_mhz=3060"])
    capped = capped_hw(hw, ClockCaps(cpu=0.75, gpu=0.5))
    # a CPU at 2x the part's 3,600 MHz boost lowered by 0.75: 5,400 MHz, speed 0.773 x 1.5
    assert capped.cpu.boost_clock_mhz == pytest.approx(5400)
    assert capped.cpu.thread_speed_rel == pytest.approx(0.773 * 1.5)
    assert capped.cpu.physical_thread_speed_rel == pytest.approx(0.773)
    assert capped.gpu.clock_mhz == pytest.approx(1530) and capped.gpu.card_clock == 1530
    # never below the part's clock: there every core busy is exactly the TDP
    assert capped_hw(hw, ClockCaps(cpu=0.1)).cpu.thread_speed_rel == pytest.approx(0.773)
    assert capped_hw(hw, ClockCaps()) is hw
    with pytest.raises(ArchsimError, match=r"gpu\.dram_bw_gbs: .*gpu\.max_power_w"):
        capped_hw(hw, ClockCaps(gpu=0.0))


def test_a_socket_past_tdp_at_the_parts_clock_is_not_rerun():
    """A socket past its TDP at the part's own clock (a learner-process replay's core on top of
    every busy core, archsim.sim.replay_power): no clock is lowered, so no rerun and no note.
    Before, local Ape-X at --nodes 2 --replay-placement learner ran 5 identical simulations and
    noted "CPU boost 2,596 -> 2,596 MHz"."""
    from types import SimpleNamespace

    from archsim.sim.power_cap import ClockCaps, capped_hw, within_tdp

    hw = load_hw("local")
    assert capped_hw(hw, ClockCaps(cpu=0.9)) is hw
    result = SimpleNamespace(clock_caps=ClockCaps(cpu=0.9), notes=())
    reruns = []
    assert within_tdp(result, hw, reruns.append) is result
    assert not reruns and result.notes == ()


def test_a_gpu_clock_past_tdp_runs_at_the_clock_that_holds_it():
    """The fault: jetson-tx1 (998 MHz, 7.5 W) at --set gpu.clock_mhz=3000 asked its SMs for 2.3x
    the TDP, was clipped to 7.5 W and kept 3 GHz's throughput. Now it runs at about 1,114 MHz,
    where its SMs' busy cycles per second are what the TDP pays for: above the card's clock (the
    card at 998 MHz draws 6.85 W here), below the asked."""
    hw = load_hw("jetson-tx1", ["gpu.clock_mhz=3000"])
    capped, part = _run("jetson-tx1", ("gpu.clock_mhz=3000",)), _run("jetson-tx1")
    mhz = _capped_mhz(capped, "GPU")
    assert mhz is not None and hw.gpu.card_clock < mhz < 3000
    assert capped.clock_caps.within()
    # the SMs' dynamic power at the run's clock, from its busy share: within the TDP's budget
    gpu = hw.gpu
    sm_budget_w = (
        gpu.max_power_w
        - gpu.idle_power_w
        - dram_peak_w(gpu.dram_bw_gbs, gpu.dram_pj_per_bit or 0.0)
    )
    sm_w = sm_budget_w * mhz / gpu.card_clock * capped.metrics["gpu_sm_util"]
    assert gpu.idle_power_w + sm_w <= gpu.max_power_w * (1 + POWER_CAP_TOL)
    assert capped.metrics["frames_per_s"] >= part.metrics["frames_per_s"] * (1 - NOISE)


def test_a_cpu_boost_past_tdp_runs_at_the_clock_that_holds_it():
    """local (2 cores, 7.03 W a socket) runs R2D2's actors at 98% of its cores: a 5 GHz boost asked
    1.6x the TDP. It runs at about 2,659 MHz, just above the part's 2,596 MHz."""
    capped = _run("local", ("cpu.boost_clock_mhz=5000",), "r2d2-seed-2x2-cpu")
    part = _run("local", (), "r2d2-seed-2x2-cpu")
    mhz = _capped_mhz(capped, "CPU boost")
    assert mhz is not None and load_hw("local").cpu.boost_clock_mhz <= mhz < 5000
    assert capped.clock_caps.within()
    assert capped.metrics["frames_per_s"] >= part.metrics["frames_per_s"] * (1 - NOISE)


@settings(max_examples=5, deadline=None)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    what_if=st.sampled_from(("gpu.clock_mhz", "cpu.boost_clock_mhz", "gpu.dram_bw_gbs")),
    scale=st.sampled_from((1.5, 2.5)),
)
def test_a_faster_what_if_is_never_slower_and_never_past_tdp(preset, what_if, scale):
    """Every GPU preset, a faster clock or DRAM: at least the part's throughput (the cap never
    lowers a CPU below the part's clock, and a GPU's SMs only as far as its DRAM traffic takes
    their budget), and every device's mean power within [idle, TDP] at the clocks it ran."""
    hw = load_hw(preset)
    section, field = what_if.split(".")
    value = min(getattr(getattr(hw, section), field) * scale, 9000.0)  # limits: under 10 GHz
    fast = _short(preset, (f"{what_if}={value}",))
    part = _short(preset)
    assert fast.clock_caps.within(), fast.clock_caps
    assert fast.metrics["frames_per_s"] >= part.metrics["frames_per_s"] * (1 - NOISE)
    m = fast.metrics
    assert hw.gpu.idle_power_w - 1e-9 <= m["gpu_power_w"] <= hw.gpu.max_power_w + 1e-9
    sockets = hw.cpu.sockets
    assert sockets * hw.cpu.idle_power_w - 1e-9 <= m["cpu_power_w"]
    assert m["cpu_power_w"] <= sockets * hw.cpu.max_power_w + 1e-9


ALL_PRESETS = tuple(list_presets())


@settings(max_examples=5, deadline=None)
@given(
    preset=st.sampled_from(ALL_PRESETS),
    what_if=st.sampled_from(((), ("gpu.clock_mhz", 2.0), ("cpu.boost_clock_mhz", 2.0))),
    actors=st.sampled_from((4, 16)),
    cpu_sched=st.sampled_from(("pinned", "shared")),
)
def test_the_books_balance_at_every_clock(preset, what_if, actors, cpu_sched):
    """Conservation on every preset, capped or not: energy is the integral of the power series
    (whose bins may pass TDP for a moment: a limit holds the mean), the total is CPU plus GPU,
    frames per joule are frames over energy, and the replay ratio reached is updates x batch per
    env step."""
    hw = load_hw(preset)
    overrides = []
    if what_if and (what_if[0].startswith("cpu.") or hw.gpu is not None):
        section, field = what_if[0].split(".")
        value = getattr(getattr(hw, section), field) * what_if[1]
        overrides = [f"{what_if[0]}={min(value, 9000.0)}"]
    config = SimConfig(sim_seconds=0.5, actors=actors, cpu_sched=cpu_sched)
    result = simulate(_trace("dqn-pong-cpu"), load_hw(preset, overrides), config, series_bins=20)
    m = result.metrics
    _, watts = result.power_series
    assert float(watts.sum()) * 0.5 / 20 == pytest.approx(m["energy_j"], rel=2e-3)
    assert m["avg_power_w"] == pytest.approx(m["cpu_power_w"] + m["gpu_power_w"], rel=1e-12)
    assert m["energy_j"] == pytest.approx(m["avg_power_w"] * 0.5, rel=1e-12)
    assert m["frames_per_joule"] == pytest.approx(m["frames_per_s"] * 0.5 / m["energy_j"])
    assert m["samples_per_insert"] == pytest.approx(
        m["learner_updates_per_s"] * result.config.learner_batch / m["env_steps_per_s"]
    )
    assert m["frames_per_s"] == pytest.approx(4 * m["env_steps_per_s"])  # Pong: 4 frames a step
    sockets = hw.cpu.sockets
    assert sockets * hw.cpu.idle_power_w - 1e-9 <= m["cpu_power_w"]
    assert m["cpu_power_w"] <= sockets * hw.cpu.max_power_w + 1e-9
    if hw.gpu is not None:
        assert hw.gpu.idle_power_w - 1e-9 <= m["gpu_power_w"] <= hw.gpu.max_power_w + 1e-9


# Figures no earlier round's invariants vary, and each one's better direction. The TDPs matter
# under a clock past them (archsim.sim.power_cap), so they are varied at one.
BETTER = (
    ("gpu.launch_latency_us", 0.5),
    ("host_link.latency_us", 0.25),
    ("gpu.l2_latency_ns", 0.5),
    ("cpu.smt_yield", 1.25),
    ("cpu.interpreter_speed_rel", 1.5),
    ("cpu.simd_speed_rel", 1.5),
    ("gpu.max_power_w", 1.5),
    ("cpu.max_power_w", 1.5),
)
PAST_TDP = ("gpu.clock_mhz=3000", "cpu.boost_clock_mhz=6000")


@settings(max_examples=5, deadline=None)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    better=st.sampled_from(BETTER),
    past_tdp=st.booleans(),
)
def test_a_better_figure_never_loses_both_frames_and_updates(preset, better, past_tdp):
    """A lower latency, a better SMT yield, a faster kind of CPU work or a larger TDP: frames/s
    and updates/s never both fall. One may trade for the other when the actors run free of the
    replay ratio (dgx-h100, R2D2, 16 actors, clocks past TDP, launch latency 1.0 -> 0.5 us: 404 ->
    454 updates/s, 51,712 -> 49,664 frames/s, the learner's kernels taking more of the shared GPU;
    paced at 0.05 or 0.06 samples per insert neither falls)."""
    key, factor = better
    hw = load_hw(preset)
    section, field = key.split(".")
    value = getattr(getattr(hw, section), field)
    if value is None:  # a per-kind CPU speed that defaults to the thread speed
        value = hw.cpu.thread_speed_rel
    value = min(value * factor, 1.0) if field == "smt_yield" else value * factor
    base = PAST_TDP if past_tdp or field == "max_power_w" else ()
    a = _short(preset, base).metrics
    b = _short(preset, (*base, f"{key}={value}")).metrics
    fell = [k for k in ("frames_per_s", "learner_updates_per_s") if b[k] < a[k] * (1 - NOISE)]
    assert len(fell) < 2, (key, a["frames_per_s"], b["frames_per_s"])
    if field == "max_power_w":  # the same asked clocks with more TDP: never slower at all
        assert not fell, (key, fell)
