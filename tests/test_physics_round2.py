"""Physics invariants, round 2: what tests/test_physics*.py left out (power under clock and DRAM
what-ifs, the network and replay placements, shared-DRAM SoCs, the breakdown, dominance across
presets). Each bound that is physics rather than a defect names its mechanism.

Tolerance as tests/test_physics.py: ``NOISE`` (3%) covers a learner step or batch straddling the end
of a short window; the defects these caught were 10% to 60%.
"""

from __future__ import annotations

import functools
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.hw.presets import list_presets
from archsim.perf.power import gpu_power_w
from archsim.sim.config import SimConfig
from archsim.sim.machine import derive_machine
from archsim.sim.run import simulate
from archsim.trace import load

ROOT = Path(__file__).resolve().parents[1]
SIM_SECONDS = 0.4
NOISE = 0.03
GPU_PRESETS = tuple(p for p in list_presets() if load_hw(p).gpu is not None)
EXAMPLES = settings(
    max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@functools.cache
def _trace(name: str):
    return load(ROOT / "traces" / name)


def _metrics(trace: str, preset: str, overrides: tuple[str, ...] = (), **knobs) -> dict:
    config = SimConfig(sim_seconds=knobs.pop("sim_seconds", SIM_SECONDS), **knobs)
    return simulate(_trace(trace), load_hw(preset, list(overrides)), config).metrics


def _scaled(preset: str, key: str, factor: float) -> str:
    section, field = key.split(".")
    return f"{key}={getattr(getattr(load_hw(preset), section), field) * factor}"


# --- power under clock and DRAM-bandwidth what-ifs ------------------------------------------------


@given(
    preset=st.sampled_from(GPU_PRESETS),
    share=st.floats(0.0, 1.0),
    dram_frac=st.floats(0.0, 1.0),
    factor=st.sampled_from((0.5, 2.0, 4.0, 8.0)),
)
@settings(max_examples=60, deadline=None, derandomize=True)
def test_a_busy_sm_draws_what_the_card_draws_whatever_dram_bandwidth_a_what_if_gives(
    preset, share, dram_frac, factor
):
    """The fault: the SM budget was TDP less idle less DRAM at the WHAT-IF bandwidth, so more DRAM
    bandwidth made every busy SM draw less (rtx4090, R2D2, 64 actors, the same work: 87.0 W at
    1,008 GB/s, 34.2 W at 8x). The card's bandwidth splits the card's TDP; DRAM power stays bytes x
    energy per bit."""
    card = derive_machine(load_hw(preset), SimConfig()).power
    what_if = derive_machine(
        load_hw(preset, [_scaled(preset, "gpu.dram_bw_gbs", factor)]), SimConfig()
    ).power
    assert what_if == card
    gpu = load_hw(preset).gpu
    w = gpu_power_w(
        share, dram_frac * gpu.dram_bw_gbs * 1e9, gpu.idle_power_w, gpu.max_power_w,
        card.gpu_dram_bw_gbs, card.gpu_dram_pj_per_bit,
    )  # fmt: skip
    assert gpu.idle_power_w - 1e-9 <= w <= gpu.max_power_w + 1e-9


def test_sm_power_scales_with_the_what_if_clock_worked_by_hand():
    """V100: 300 W TDP, 55 W idle, 28.08 W of HBM2 at 900 GB/s leave 216.92 W for 80 busy SMs at
    1,530 MHz. At 765 MHz half of that (alpha C V^2 f at the card's voltage): 55 + 108.46 W; at
    3,060 MHz twice, clipped at TDP as a board caps its power."""
    for clock, want in ((1530, 55 + 216.92), (765, 55 + 216.92 / 2), (3060, 300.0)):
        power = derive_machine(load_hw("dgx1-v100", [f"gpu.clock_mhz={clock}"]), SimConfig()).power
        assert power.gpu_clock_rel == pytest.approx(clock / 1530)
        w = gpu_power_w(1.0, 0.0, 55, 300, 900, 3.9, power.gpu_clock_rel)
        assert float(w) == pytest.approx(want, abs=0.01)


@pytest.mark.parametrize(
    ("preset", "trace"), [("dgx-a100", "r2d2-seed-2x2-cpu"), ("rtx4090", "r2d2-seed-2x2-cpu")]
)
def test_a_higher_clock_never_draws_less_for_the_same_work(preset, trace):
    """Held at a replay ratio the learner reaches on either clock, the run does the same work; its
    SMs switch as often per op and more often per second, so GPU power never falls (it did:
    dgx-a100 705 -> 2,820 MHz drew 96.0 -> 95.2 W at the same 330 updates/s)."""
    clock = load_hw(preset).gpu.clock_mhz
    runs = [
        _metrics(trace, preset, (f"gpu.clock_mhz={clock * f}",), actors=64, replay_ratio=0.03)
        for f in (0.5, 1.0, 2.0)
    ]
    for low, high in zip(runs, runs[1:], strict=False):
        assert high["learner_updates_per_s"] == pytest.approx(
            low["learner_updates_per_s"], rel=0.02
        )
        assert high["gpu_power_w"] > low["gpu_power_w"]
