"""Clocks held within TDP: a what-if that asks a CPU socket or a GPU for more than its TDP runs at
the clock where its mean power is the TDP, as a power-limited part does (Intel RAPL PL1, AMD PPT,
NVIDIA's software power cap: archsim.perf.power.cpu_clock_cap, gpu_clock_cap).

Before, such a run was clipped to TDP while it kept the faster clock's throughput: more work per
joule from the cap (jetson-tx1, R2D2, 64 actors, ``--set gpu.clock_mhz=3000``: the SMs asked for
2.1x the 7.5 W TDP). The run's busy seconds grow as the clock falls, so the clock that holds the
mean power at TDP is a fixed point: each pass lowers the clock by TDP headroom / dynamic power at
the last clock, which lands at or above the fixed point when the busy seconds only grow as the
clock falls (power is linear in the clock at the same busy seconds), and the next pass is run
there. A run's batching can move its busy seconds a little either way, so a pass may land just
below: jetson-tx1, DQN, 1 SM, ``gpu.clock_mhz=3000`` ends at 2,168 MHz and 7.46 W of 7.5. Within
POWER_CAP_PASSES passes the presets' what-ifs are within POWER_CAP_TOL of TDP or below it; what is
left above is clipped (archsim.perf.power). A CPU is never lowered below the part's own clock, at which every
core busy draws exactly its TDP; a GPU may be when a what-if DRAM bandwidth's bytes take part of
the SMs' budget.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from archsim.errors import ArchsimError
from archsim.perf.power import (
    cpu_clock_cap,
    cpu_dynamic_w,
    gpu_clock_cap,
    gpu_dynamic_w,
    sm_share_of_card,
)
from archsim.sim.metrics import PowerModel, Recorder, socket_busy

# 6: a what-if CPU limit below the part's full-load power lowers the clock below the part's, where
# a CPU-bound run's busy seconds grow nearly as fast as the clock falls: jetson-tx1, DQN, 16
# actors, cpu.max_power_w=2.2 with gpu.max_power_w=5 was still 2.5% over after 4 passes (clipped,
# its energy then off its power series by 0.26%) and is within 0.1% after 5.
POWER_CAP_PASSES = 6
# A factor this close to 1 is within TDP: 0.1% of the dynamic power, under the run's noise.
POWER_CAP_TOL = 1e-3
# Fields of archsim.hw.schema.CpuConfig that a clock scales (archsim.hw.presets.CPU_SPEEDS, and the
# boost clock itself).
CPU_CLOCKED = (
    "thread_speed_rel",
    "emulator_speed_rel",
    "interpreter_speed_rel",
    "simd_speed_rel",
    "boost_clock_mhz",
)


@dataclass(frozen=True)
class ClockCaps:
    """Factors (at most 1) by which the CPU's and the GPU's clocks must fall for every socket's and
    the GPU's mean power to be within TDP; 1 = within it."""

    cpu: float = 1.0
    gpu: float = 1.0

    def within(self) -> bool:
        return self.cpu >= 1 - POWER_CAP_TOL and self.gpu >= 1 - POWER_CAP_TOL


def run_clock_caps(
    rec: Recorder,
    power: PowerModel,
    socket_of_thread: np.ndarray,
    smt_sibling: np.ndarray | None,
    extra_cores: np.ndarray | None = None,
) -> ClockCaps:
    """The ClockCaps of a recorded run, from its window-mean activity (a power limit is a mean).
    ``extra_cores``: busy cores per socket that run on no simulated hardware thread (a replay in
    the learner process, archsim.sim.replay_power), drawing power as any busy core."""
    t = rec.end
    if not t > 0:
        return ClockCaps()
    busy = np.atleast_2d(np.asarray(rec.cpu_busy_s, dtype=float)) / t
    first, sibling, cores = socket_busy(power, busy, socket_of_thread, smt_sibling)
    if extra_cores is not None:
        first = first + extra_cores
    cpu = 1.0
    for s in range(power.sockets):
        dynamic_w = cpu_dynamic_w(
            first[0, s],
            sibling[0, s],
            power.cpu_idle_w,
            power.cpu_max_w,
            cores[s],
            power.threads_per_core,
            power.cpu_clock_rel,
            power.cpu_budget_w,
        )
        cpu = min(cpu, cpu_clock_cap(float(dynamic_w), power.cpu_idle_w, power.cpu_max_w))
    gpu = 1.0
    if power.gpus > 0:
        share = sm_share_of_card(rec.gpu_sm_busy_s / t, power.gpu_enabled_sms, power.gpu_card_sms)
        sm_w, dram_w = gpu_dynamic_w(
            share,
            rec.gpu_dram_bytes / t,
            power.gpu_idle_w,
            power.gpu_max_w,
            power.gpu_dram_bw_gbs,
            power.gpu_dram_pj_per_bit,
            power.gpu_clock_rel,
            power.gpu_budget_w,
        )
        gpu = gpu_clock_cap(float(sm_w), float(dram_w), power.gpu_idle_w, power.gpu_max_w)
    return ClockCaps(cpu, gpu)


def capped_hw(hw, caps: ClockCaps):
    """``hw`` (a HardwareConfig) with its CPU and GPU clocks lowered by ``caps``; the part's figures
    (physical_thread_speed_rel, card_clock_mhz), which the power model's budgets follow, stay."""
    update = {}
    cpu = hw.cpu
    part = cpu.physical_thread_speed_rel or cpu.thread_speed_rel
    # never below the clock at which every core busy draws exactly the TDP: the part's, or lower
    # under a what-if limit below what the part's cores draw there (a socket still past it there,
    # a learner-process replay's core on top, archsim.sim.replay_power, stays)
    full = min(cpu.full_load_clock_rel, 1.0)
    factor = max(caps.cpu, min(1.0, part * full / cpu.thread_speed_rel))
    if factor < 1 - POWER_CAP_TOL:
        scaled = {k: getattr(cpu, k) * factor for k in CPU_CLOCKED if getattr(cpu, k) is not None}
        update["cpu"] = cpu.model_copy(
            update={
                **scaled,
                "physical_thread_speed_rel": part,
                "physical_boost_clock_mhz": cpu.physical_boost_clock_mhz or cpu.boost_clock_mhz,
            }
        )
    if caps.gpu < 1 - POWER_CAP_TOL and hw.gpu is not None:
        gpu = hw.gpu
        if caps.gpu <= 0:
            raise ArchsimError(
                f"gpu.dram_bw_gbs: the kernels' DRAM traffic at {gpu.dram_bw_gbs:g} GB/s draws "
                f"more than the {gpu.max_power_w:g} W TDP less {gpu.idle_power_w:g} W idle "
                "leaves (gpu.dram_pj_per_bit), so no SM clock keeps the card within it: give "
                "such a memory a larger gpu.max_power_w"
            )
        update["gpu"] = gpu.model_copy(
            update={"clock_mhz": gpu.clock_mhz * caps.gpu, "card_clock_mhz": gpu.card_clock}
        )
    return hw.model_copy(update=update) if update else hw


def within_tdp(result, hw, rerun: Callable):
    """``result`` (a SimResult of ``hw``), or the run at the clocks that hold it within TDP:
    ``rerun(capped hw)`` simulates again. A note says which clocks the cap lowered; the result's
    ``hw_run`` is the hardware it ran at (``hw`` when nothing was lowered)."""
    capped = hw
    for _ in range(POWER_CAP_PASSES):
        if result.clock_caps.within():
            break
        lower = capped_hw(capped, result.clock_caps)
        if lower is capped:  # no clock left to lower: a rerun would be the same run
            break
        capped = lower
        result = rerun(capped)
    if capped is not hw:
        result.notes = (*result.notes, cap_note(hw, capped))
    result.hw_run = capped
    return result


def cap_note(hw, capped) -> str:
    """One line: the clocks asked and the clocks run at to stay within TDP."""
    parts = []
    if capped.cpu is not hw.cpu:
        parts.append(
            f"CPU boost {hw.cpu.boost_clock_mhz:,.0f} -> {capped.cpu.boost_clock_mhz:,.0f} MHz "
            f"(socket TDP {hw.cpu.max_power_w:g} W)"
        )
    if capped.gpu is not hw.gpu and hw.gpu is not None:
        parts.append(
            f"GPU {hw.gpu.clock_mhz:,.0f} -> {capped.gpu.clock_mhz:,.0f} MHz "
            f"(TDP {hw.gpu.max_power_w:g} W)"
        )
    return (
        "power cap: the asked clocks draw more than TDP, so the run lowers them until its mean "
        "power is the TDP, as a power-limited part does: " + "; ".join(parts)
    )
