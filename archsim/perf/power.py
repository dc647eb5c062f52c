"""Power model (docs/SIMULATOR.md "Power"): per GPU and per CPU socket, idle power plus the dynamic
power of what is doing work. Pure functions; energy is the time integral of power.

GPU: ``idle + sm_dynamic_w x (busy SM-seconds / (all SMs of the physical card x time)) + DRAM``.
SMs that ``--sms`` disables draw only their share of idle, so two busy SMs of a V100's 80 add
2/80 of the SM budget, not the whole card's. The DRAM term is the energy per bit of the memory
technology times the bits the kernels move. The SM budget is what is left of the board power (TDP)
once idle and DRAM at full bandwidth are paid, so a card with every SM busy and DRAM at peak
bandwidth draws exactly its TDP.

CPU socket: ``idle + per_core_w x busy cores``, where a core's second hardware thread adds only
SMT_SECOND_THREAD_POWER_FRAC of a core (both threads share the core's pipelines and caches). The
per-core figure is what is left of TDP after idle, spread over every core of the socket with all of
its threads busy.

Power is linear in the time-integrated activity (busy seconds, bytes), so the power of a window is
the mean of the power of its parts and energy is exactly the integral of the power series. A what-if
clock above the part's, or DRAM bandwidth above the card's, can ask for more than TDP: a real part
then lowers its clock until its mean power is the TDP (cpu_clock_cap, gpu_clock_cap), and the
simulator reruns at that clock (archsim.sim.power_cap). What is left, float residue and short bins
above the mean, is clipped to [idle, TDP] per device.
"""

from __future__ import annotations

import numpy as np

# A core's second busy SMT thread raises its power by ~24% (Li, Brooks, Hu, Skadron, Bose,
# "Understanding the Energy Efficiency of Simultaneous Multithreading", ISLPED 2004: SMT gives ~20%
# speedup for ~24% more power over a range of applications).
SMT_SECOND_THREAD_POWER_FRAC = 0.24
BITS_PER_BYTE = 8
PJ = 1e-12  # joules per picojoule


def dram_peak_w(dram_bw_gbs: float, dram_pj_per_bit: float) -> float:
    """DRAM power at full bandwidth: bandwidth x 8 bits x energy per bit."""
    return dram_bw_gbs * 1e9 * BITS_PER_BYTE * dram_pj_per_bit * PJ


def sm_share_of_card(
    sm_fraction: np.ndarray | float, enabled_sms: int, physical_sms: int
) -> np.ndarray:
    """Share of the physical card's SMs in use, from the share of the ENABLED SMs in use.

    ``enabled_sms`` above ``physical_sms`` (a what-if card with more SMs than the preset's) gives a
    share above 1: each SM draws what one of the card's SMs draws (its TDP grows with them unless
    a limit is given, archsim.hw.presets._with_larger_part_limits; archsim.sim.power_cap holds a
    limit by the clock). Before, the enabled SMs counted as the card and its TDP was spread over them, so
    more SMs drew less for the same work (dgx-a100, DQN, 16 actors, ``--set gpu.sms``: 108 SMs
    248 W, 200 SMs 241 W, 400 SMs 220 W at the same 17,560-17,576 frames/s).
    """
    card = max(physical_sms, 1)
    return np.clip(np.asarray(sm_fraction, dtype=float), 0.0, 1.0) * (enabled_sms / card)


def gpu_power_w(
    sm_share: np.ndarray | float,
    dram_bytes_per_s: np.ndarray | float,
    idle_w: float,
    max_w: float,
    dram_bw_gbs: float,
    dram_pj_per_bit: float,
    clock_rel: float = 1.0,
    tdp_clip: bool = True,
    budget_w: float | None = None,
) -> np.ndarray:
    """Power of one GPU whose SMs are busy ``sm_share`` of the card (time mean: in [0, 1] on the
    physical card, above 1 on a what-if card with more SMs, sm_share_of_card) and whose
    kernels move ``dram_bytes_per_s`` to and from DRAM; within [idle_w, max_w] (``tdp_clip`` False:
    not clipped at TDP).

    ``dram_bw_gbs`` is the physical card's (``GpuConfig.card_dram_bw``): a busy SM draws what the
    card's SMs draw whatever bandwidth a what-if gives the DRAM (a what-if's own figure shrank the SM
    budget: rtx4090, R2D2, 64 actors at the same work drew 87.0 W at 1,008 GB/s, 34.2 W at 8x).
    ``clock_rel`` is the what-if clock over the card's: SM dynamic power is alpha C V^2 f (Weste and
    Harris, "CMOS VLSI Design", 4th ed., sec. 5.1), linear in f at the card's voltage, so a busy
    SM-second at twice the clock costs twice the energy and the same work costs the same SM energy
    (before, a faster clock made the same work cheaper: dgx-a100, R2D2, 64 actors, 705 -> 2,820 MHz,
    96.0 -> 95.2 W at the same 330 updates/s). The voltage a higher clock needs is left out, so this
    is the least a what-if clock costs. ``budget_w``: the card's own TDP less its idle
    (``GpuConfig.card_power_budget_w``), which a busy SM's power is a share of whatever limit or
    idle a what-if gives (None: ``max_w - idle_w``)."""
    sm_w, dram_w = gpu_dynamic_w(
        sm_share, dram_bytes_per_s, idle_w, max_w, dram_bw_gbs, dram_pj_per_bit, clock_rel, budget_w
    )
    p = idle_w + sm_w + dram_w
    return np.clip(p, idle_w, max(max_w, idle_w)) if tdp_clip else p


def gpu_dynamic_w(
    sm_share: np.ndarray | float,
    dram_bytes_per_s: np.ndarray | float,
    idle_w: float,
    max_w: float,
    dram_bw_gbs: float,
    dram_pj_per_bit: float,
    clock_rel: float = 1.0,
    budget_w: float | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(SM W, DRAM W) above idle of gpu_power_w, before its clip at TDP: what the power cap
    (gpu_clock_cap) weighs against the board's budget."""
    budget_w = max(max_w - idle_w if budget_w is None else budget_w, 0.0)
    dram_w_per_bps = dram_pj_per_bit * PJ * BITS_PER_BYTE
    dram_full_w = min(dram_peak_w(dram_bw_gbs, dram_pj_per_bit), budget_w)
    sm_dynamic_w = (budget_w - dram_full_w) * max(clock_rel, 0.0)
    # above 1: a what-if card with more SMs than the physical one (sm_share_of_card)
    share = np.maximum(np.asarray(sm_share, dtype=float), 0.0)
    dram_w = np.maximum(np.asarray(dram_bytes_per_s, dtype=float), 0.0) * dram_w_per_bps
    return sm_dynamic_w * share, dram_w


def cpu_per_core_w(
    idle_w: float,
    max_w: float,
    cores_per_socket: int,
    threads_per_core: int,
    clock_rel: float = 1.0,
    budget_w: float | None = None,
) -> float:
    """Dynamic power of one busy core with one busy thread, such that every core of the socket
    with all of its threads busy draws the TDP at the part's speed. ``budget_w``: the part's TDP
    less its idle (``CpuConfig.part_power_budget_w``), which a busy core's power is a share of
    whatever limit or idle a what-if gives (None: ``max_w - idle_w``).

    ``clock_rel`` is a what-if thread speed over the part's (``CpuConfig.power_clock_rel``): a
    faster thread of the same part runs at a higher clock, and dynamic power is alpha C V^2 f
    (Weste and Harris, "CMOS VLSI Design", 4th ed., sec. 5.1), linear in f at the part's voltage,
    as the GPU's SMs (gpu_power_w). So the same work costs the same core energy at any speed;
    before, a faster core drew the part's watts for less time and the same work cost less
    (dgx1-v100, DQN, 16 actors, thread_speed_rel 0.773 -> 1.546: the same frames and updates for
    less CPU energy). The voltage a higher clock needs is left out: the least a faster core costs."""
    budget_w = max(max_w - idle_w if budget_w is None else budget_w, 0.0)
    return (
        budget_w / full_load_cores(max(cores_per_socket, 1), threads_per_core) * max(clock_rel, 0.0)
    )


def full_load_cores(cores: float, threads_per_core: float) -> float:
    """Cores' worth of dynamic power of ``cores`` cores with all their threads busy: each busy SMT
    sibling adds SMT_SECOND_THREAD_POWER_FRAC of a core. A socket's TDP less idle is spread over
    the part's (cpu_per_core_w); a what-if part's over the part's is how much larger it is."""
    return cores * (1.0 + SMT_SECOND_THREAD_POWER_FRAC * max(threads_per_core - 1, 0))


def cpu_socket_power_w(
    first_thread_busy: np.ndarray | float,
    sibling_thread_busy: np.ndarray | float,
    idle_w: float,
    max_w: float,
    cores_per_socket: int,
    threads_per_core: int,
    clock_rel: float = 1.0,
    tdp_clip: bool = True,
    budget_w: float | None = None,
) -> np.ndarray:
    """Power of one socket whose cores' first hardware threads are busy ``first_thread_busy`` cores'
    worth (sum of their busy fractions) and whose SMT siblings ``sibling_thread_busy`` threads'
    worth; within [idle_w, max_w] (``tdp_clip`` False: not clipped at TDP). Threads fill cores before SMT siblings (Linux's placement), so a
    busy sibling adds only SMT_SECOND_THREAD_POWER_FRAC of a core."""
    p = idle_w + cpu_dynamic_w(
        first_thread_busy,
        sibling_thread_busy,
        idle_w,
        max_w,
        cores_per_socket,
        threads_per_core,
        clock_rel,
        budget_w,
    )
    return np.clip(p, idle_w, max(max_w, idle_w)) if tdp_clip else p


def cpu_dynamic_w(
    first_thread_busy: np.ndarray | float,
    sibling_thread_busy: np.ndarray | float,
    idle_w: float,
    max_w: float,
    cores_per_socket: int,
    threads_per_core: int,
    clock_rel: float = 1.0,
    budget_w: float | None = None,
) -> np.ndarray:
    """Watts above idle of cpu_socket_power_w, before its clip at TDP (for cpu_clock_cap)."""
    per_core = cpu_per_core_w(
        idle_w, max_w, cores_per_socket, threads_per_core, clock_rel, budget_w
    )
    first = np.maximum(np.asarray(first_thread_busy, dtype=float), 0.0)
    sibling = np.maximum(np.asarray(sibling_thread_busy, dtype=float), 0.0)
    return per_core * (first + SMT_SECOND_THREAD_POWER_FRAC * sibling)


def cpu_clock_cap(dynamic_w: float, idle_w: float, max_w: float) -> float:
    """Factor (at most 1) to lower a socket's clock by so that its mean power is its TDP.

    A part held at its power limit lowers its clock until it is within it: Intel's RAPL package
    limit PL1 (by default the TDP, a mean over its time window: Intel 64 and IA-32 Architectures
    SDM vol. 3B, "Platform Specific Power Management Support") and AMD's PPT. The limit is a mean,
    so the run's mean power is held to it (short bins may pass it, as PL2 lets a part do). Core dynamic power is linear in the clock at the part's voltage (cpu_per_core_w), so
    the same busy core-seconds draw ``dynamic_w x factor`` at the lowered clock. Being linear, and
    leaving out the voltage a clock above the part's needs, this is the least a cap lowers the
    clock: with V rising with f (P ~ f V^2, the DVFS range) it would fall less far for the same
    watts, so these clocks are an upper bound. The run's busy seconds grow as the clock falls, so
    one factor lands above the clock at which power is the TDP: archsim.sim.power_cap repeats it.
    """
    headroom_w = max(max_w - idle_w, 0.0)
    if dynamic_w <= headroom_w or dynamic_w <= 0:
        return 1.0
    return headroom_w / dynamic_w


def gpu_clock_cap(sm_w: float, dram_w: float, idle_w: float, max_w: float) -> float:
    """Factor (at most 1) to lower a GPU's SM clock by so that its mean power is its TDP: NVIDIA's
    power capping lowers the graphics (SM) clock, not the memory's (nvidia-smi
    --help-query-gpu, clocks_throttle_reasons.sw_power_cap: "SW Power Scaling algorithm is
    reducing the clocks below requested clocks because the GPU is consuming too much power"). SM power is linear in the clock (gpu_power_w), DRAM power is the bytes moved, which
    the SM clock leaves nearly alone. 0 when DRAM alone is over the budget: no SM clock brings
    such a board within its TDP (the caller refuses it)."""
    headroom_w = max(max_w - idle_w, 0.0)
    if sm_w + dram_w <= headroom_w or sm_w <= 0:
        return 1.0 if dram_w <= headroom_w else 0.0
    return max(headroom_w - dram_w, 0.0) / sm_w


def energy_j(power_w: np.ndarray, dt_s: np.ndarray | float) -> float:
    """Energy of a piecewise-constant power series: sum of power * interval."""
    return float(np.sum(np.asarray(power_w, dtype=float) * dt_s))


def frames_per_joule(frames: float, energy_joules: float) -> float:
    return frames / energy_joules if energy_joules > 0 else float("nan")
