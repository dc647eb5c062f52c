"""The Jetson presets' per-class CPU speeds (issue 15 item 4): the SIMD class is the ratio of peak
FP32 FMA throughput per core (vendor optimization guides), worked here by hand; the classes with no
citable source stay unset and fall back to thread_speed_rel."""

from __future__ import annotations

import pytest

from archsim.hw.presets import load_hw
from archsim.perf.cpu_speed import EMULATOR, INTERPRETER, SIMD, class_speed, phase_speed

# Capture core (Zen 5): two 512-bit FMA pipes = 2 x 16 lanes x 2 FLOP per cycle, at 2596 MHz.
CAPTURE_FLOP_PER_S = 64 * 2596e6


@pytest.mark.parametrize(
    ("preset", "flop_per_cycle", "clock_mhz"),
    [
        ("jetson-tx1", 8, 1734),  # Cortex-A57: one 4-lane FMLA per cycle
        ("jetson-agx-orin", 16, 2200),  # Cortex-A78AE: two 4-lane FMLA per cycle
    ],
)
def test_simd_speed_is_the_peak_fma_ratio(preset, flop_per_cycle, clock_mhz):
    cpu = load_hw(preset).cpu
    assert cpu.base_clock_mhz == clock_mhz
    by_hand = flop_per_cycle * clock_mhz * 1e6 / CAPTURE_FLOP_PER_S
    assert class_speed(cpu, SIMD) == pytest.approx(by_hand, rel=0.005)
    # the network's CPU ops are SIMD work; env step and the loop's code fall back
    assert phase_speed(cpu, "train_forward") == class_speed(cpu, SIMD)
    for kind in (EMULATOR, INTERPRETER):
        assert getattr(cpu, f"{kind}_speed_rel") is None
        assert class_speed(cpu, kind) == cpu.thread_speed_rel


def test_the_newer_core_is_faster_on_every_class():
    tx1, orin = load_hw("jetson-tx1").cpu, load_hw("jetson-agx-orin").cpu
    for kind in (EMULATOR, INTERPRETER, SIMD):
        assert class_speed(orin, kind) > class_speed(tx1, kind)
