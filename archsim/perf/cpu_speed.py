"""Per-phase CPU speed of the target relative to the capture machine: pure functions.

An emulator, a Python interpreter and numpy/torch CPU kernels do not scale alike between cores:
the emulator (ALE's C++ Stella: integer, branchy, small working set) follows integer single-core
benchmarks (SPECint / Geekbench integer subscores); the interpreter (CPython's eval loop: indirect
branches, pointer chasing) follows pyperformance-type figures; numpy/torch kernels follow SIMD
throughput (vector width x pipes x clock). A preset may give each class its own speed
(``cpu.emulator_speed_rel``, ``cpu.interpreter_speed_rel``, ``cpu.simd_speed_rel``); a class it
does not give falls back to ``cpu.thread_speed_rel``, the single number every preset has.

Phases map to classes: ``env_step`` (and ``display``, which renders and copies the screen in the
emulator's process) -> emulator; the act and train phases' CPU ops (a CPU-only target, where the
network runs on the CPU) -> SIMD kernels; everything else (preprocess, replay, the loop's own code,
kernel launches through the framework) -> interpreter.
"""

from __future__ import annotations

EMULATOR, INTERPRETER, SIMD = "emulator", "interpreter", "simd"
CLASSES = (EMULATOR, INTERPRETER, SIMD)

# Phase -> class; phases not named here are interpreter work.
PHASE_CLASS: dict[str, str] = {
    "env_step": EMULATOR,
    "display": EMULATOR,
    "act": SIMD,
    "train_forward": SIMD,
    "train_backward": SIMD,
    "optimizer_step": SIMD,
    "target_sync": SIMD,
}


def class_of_phase(phase: str) -> str:
    """The kind of work of trace phase ``phase`` (a key of CLASSES)."""
    return PHASE_CLASS.get(phase, INTERPRETER)


def class_speed(cpu, kind: str) -> float:
    """Speed of ``cpu`` (a CpuConfig) on work of class ``kind``, relative to the capture thread:
    the class's own figure where the preset gives one, else ``thread_speed_rel``."""
    if kind not in CLASSES:
        raise ValueError(f"unknown CPU work class {kind!r} (expected one of {', '.join(CLASSES)})")
    value = getattr(cpu, f"{kind}_speed_rel", None)
    return float(value) if value is not None else float(cpu.thread_speed_rel)


def phase_speed(cpu, phase: str) -> float:
    """Speed of ``cpu`` on trace phase ``phase`` (class_of_phase then class_speed)."""
    return class_speed(cpu, class_of_phase(phase))


def target_seconds(capture_us_by_phase: dict[str, float], cpu) -> float:
    """Target seconds of CPU work given as capture-thread microseconds per phase (a phase named
    ``other`` or any unmapped name is interpreter work)."""
    return sum(us * 1e-6 / phase_speed(cpu, phase) for phase, us in capture_us_by_phase.items())
