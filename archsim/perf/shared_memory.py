"""CPU and GPU sharing one DRAM (SoCs: Jetson TX1's LPDDR4, Jetson AGX Orin's LPDDR5): pure functions.

On a discrete GPU the CPU's phases and the GPU's kernels draw on separate memories. On an SoC whose
``memory.shared_with_gpu`` is set, both draw on one DRAM, so while both are busy at once their
demanded bandwidths add up. The model:

- Each side's demand while it runs alone is its DRAM bytes over its lone time, at most the achievable
  bandwidth (a lone side that needs more is already bound by the DRAM in its own model).
- During the time both run together, when the demands sum past the achievable bandwidth ``B``, both
  are stretched by the same factor ``(d_cpu + d_gpu) / B`` (the memory controller serves both
  request streams in proportion to what they ask for; each then gets ``d x B / (d_cpu + d_gpu)``).
- Outside the overlap each runs at its lone speed. So a lone CPU or a lone GPU (the other side moves
  no bytes or has no time) is never slower than the non-shared model, and contention never makes
  either side faster (tests/test_shared_memory.py checks both with hypothesis).

Achievable bandwidth = the datasheet DRAM bandwidth times the GPU generation's measured stream
fraction (archsim.perf.efficiency.ACHIEVED: the same fraction the kernel model uses for DRAM).
Datasheet figures: Jetson TX1 LPDDR4 25.6 GB/s (NVIDIA Jetson TX1 module data sheet, 2x32-bit
LPDDR4-3200), Jetson AGX Orin 64GB LPDDR5 204.8 GB/s (NVIDIA Jetson AGX Orin Series data sheet).

Host-device copies on such an SoC are DRAM-to-DRAM copies: read and write the same memory, so
``bytes / (B / 2)``; with ``memory.zero_copy`` (pinned mapped memory, cudaHostAlloc with
cudaHostAllocMapped, which the GPU reads in place on Tegra: NVIDIA "CUDA for Tegra" application
note, "Zero-copy memory") there is no copy at all.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Contended:
    """CPU and GPU times after sharing the DRAM (seconds) and the stretch of their overlap."""

    cpu_s: float
    gpu_s: float
    stretch: float  # >= 1: factor applied to the overlapped part of each side's time


def demand_gbs(n_bytes: float, seconds: float, achievable_gbs: float) -> float:
    """Bandwidth one side asks for while it runs alone (GB/s), at most the achievable bandwidth."""
    if seconds <= 0 or n_bytes <= 0:
        return 0.0
    return min(n_bytes / seconds / 1e9, achievable_gbs)


def contend(
    cpu_s: float,
    cpu_bytes: float,
    gpu_s: float,
    gpu_bytes: float,
    overlap_s: float,
    achievable_gbs: float,
) -> Contended:
    """Times of CPU work (``cpu_s`` alone, moving ``cpu_bytes``) and GPU work (``gpu_s``,
    ``gpu_bytes``) that run together for ``overlap_s`` of their lone times on one DRAM of
    ``achievable_gbs``: the overlapped part of each is stretched by ``max(1, sum of demands / B)``.
    """
    if achievable_gbs <= 0:
        raise ValueError("achievable_gbs must be > 0")
    if min(cpu_s, cpu_bytes, gpu_s, gpu_bytes, overlap_s) < 0:
        raise ValueError("times and bytes must be >= 0")
    overlap = min(overlap_s, cpu_s, gpu_s)
    total = demand_gbs(cpu_bytes, cpu_s, achievable_gbs) + demand_gbs(
        gpu_bytes, gpu_s, achievable_gbs
    )
    stretch = max(1.0, total / achievable_gbs)
    extra = overlap * (stretch - 1.0)
    return Contended(cpu_s=cpu_s + extra, gpu_s=gpu_s + extra, stretch=stretch)


def achievable_gbs(hw) -> float:
    """The shared DRAM's achievable bandwidth (GB/s) of ``hw`` (a HardwareConfig): datasheet
    ``memory.host_dram_bw_gbs`` x the GPU generation's measured stream fraction."""
    from archsim.perf.efficiency import ACHIEVED, generation

    if hw.gpu is None:
        return hw.memory.host_dram_bw_gbs * ACHIEVED["default"].dram
    row = ACHIEVED.get(generation(hw.gpu, hw.name), ACHIEVED["default"])
    return hw.memory.host_dram_bw_gbs * row.dram


def shared_copy_seconds(n_bytes: float, hw) -> float | None:
    """Seconds of a host-device copy of ``n_bytes`` on a shared-DRAM SoC: 0 with zero-copy, else a
    DRAM-to-DRAM copy (read + write) at the achievable bandwidth after the link's latency. None when ``hw`` does not share
    its DRAM (the host link's model applies)."""
    if not hw.memory.shared_with_gpu:
        return None
    if hw.memory.zero_copy or n_bytes <= 0:
        return 0.0
    return hw.host_link.latency_us * 1e-6 + 2.0 * n_bytes / (achievable_gbs(hw) * 1e9)


def busy_side_stretch(cpu_demand_gbs: float, gpu_demand_gbs: float, achievable: float) -> float:
    """Stretch of both sides' work when they run together the whole time (``contend`` with full
    overlap): ``max(1, (d_cpu + d_gpu) / B)``, each demand capped at ``B``."""
    if achievable <= 0:
        raise ValueError("achievable must be > 0")
    total = min(max(cpu_demand_gbs, 0.0), achievable) + min(max(gpu_demand_gbs, 0.0), achievable)
    return max(1.0, total / achievable)
