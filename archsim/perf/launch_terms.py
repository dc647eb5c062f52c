"""The four time terms of one launch shape (compute, DRAM bandwidth, DRAM latency, L2), the part of
archsim.perf.terms that needs no kernel name: blocks, threads, registers, shared memory, FLOPs and
bytes in, seconds out (the module docstring of archsim.perf.terms gives the formulas). Split out of
that module so that each stays one job: terms reads an ops table into launch shapes and families,
this prices a shape.
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import BYTES_IN_FLIGHT_PER_THREAD
from archsim.perf.loaded_latency import DramLoad, loaded_bandwidth
from archsim.perf.occupancy import blocks_per_sm

# Threads an SM needs to keep its math pipes busy: 4 warp schedulers per SM (Volta, Ampere and Hopper
# whitepapers), each issuing one warp per clock, and a dependent FMA takes 4 cycles on Volta (Jia et al.
# 2018, "Dissecting Volta"), so 4 warps per scheduler hide it: 4 * 4 * 32 threads = 512.
SATURATING_THREADS_PER_SM = 4 * 4 * 32
# Tiled GEMM engines need only one warp per scheduler: each thread accumulates a register tile of
# independent outputs (e.g. 8x8 in cuBLAS's 128x128 sgemm), so the 4-cycle FMA latency is hidden by
# instruction-level parallelism, not by more warps (Volkov, "Better Performance at Lower Occupancy",
# GTC 2010: sgemm near peak at low occupancy). 4 schedulers per SM x 1 warp x 32 threads = 128
# (Volta, Turing and Ampere whitepapers: 4 processing blocks per SM).
ENGINE_SATURATING_THREADS_PER_SM = 4 * 1 * 32


def body_of(terms: dict[str, np.ndarray]) -> np.ndarray:
    comp = terms["comp"] + terms.get("serial", 0.0)  # serial: in series with the math
    return np.maximum.reduce([comp, terms["bw"], terms["lat"], terms["mem"]])


def at_achieved(
    terms: dict[str, np.ndarray], math_fraction: np.ndarray, dram_fraction: float
) -> dict[str, np.ndarray]:
    """The terms at the achieved fractions (archsim.perf.efficiency): math and DRAM bandwidth."""
    return {**terms, "comp": terms["comp"] / math_fraction, "bw": terms["bw"] / dram_fraction}


def launch_terms(
    flops: np.ndarray,
    dram_bytes: np.ndarray,
    blocks: np.ndarray,
    threads: np.ndarray,
    registers: np.ndarray,
    shared: np.ndarray,
    rate_per_sm: np.ndarray,
    tiled: np.ndarray,
    tile_intensity: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str],
    padding: np.ndarray | float = 1.0,
    bytes_per_thread: np.ndarray | float = BYTES_IN_FLIGHT_PER_THREAD,
    load: DramLoad | None = None,
    read_bytes: np.ndarray | None = None,
) -> dict[str, np.ndarray]:
    """``padding`` (>= 1): outputs the launched tiles compute over the op's outputs; the busiest SM
    runs whole tiles, ragged or not (traced launches: archsim.perf.tile_padding reads it from the
    kernel's tile and the op's dims; the tile search of archsim.perf.terms sets it for launches without a grid).
    ``bytes_per_thread``: bytes each thread has in flight per DRAM round trip (archsim.perf.in_flight,
    by kernel family; the flat 16 B for the grid-less tile search). ``load``: the GPU's DRAM latency
    curve (archsim.perf.loaded_latency; None: the unloaded latency at every load). ``read_bytes``:
    the bytes the op loads, the Little's-law term's (stores are posted: archsim.perf.in_flight;
    None: all of ``dram_bytes``, as the grid-less tile search takes it)."""
    n_ops = len(flops)
    n_sms = gpu.sms
    resident_limit = blocks_per_sm(threads, registers, shared, gpu)
    t_math = flops / (n_sms * rate_per_sm)
    saturating = np.where(tiled, ENGINE_SATURATING_THREADS_PER_SM, SATURATING_THREADS_PER_SM)
    if "sm_utilization" in idealize:
        # Perfect SM utilization (Inci et al. 2020): the op on a SINGLE SM, divided by the SM count.
        # That one SM runs all B blocks, min(a, B) at a time, so its time is N t_math padding / u1;
        # over N SMs that leaves t_math padding / u1. Tails and too few blocks for N SMs are gone.
        single_sm_usable = np.minimum(
            1.0, np.minimum(resident_limit, blocks) * threads / saturating
        )
        t_comp = t_math * padding / single_sm_usable
        threads_in_flight = np.full(n_ops, float(n_sms * gpu.max_threads_per_sm))
    else:
        # The busiest SM runs ceil(B/N) blocks (tail and underfill). Its resident blocks use a
        # fraction u of its math rate: full once they hold SATURATING_THREADS_PER_SM threads
        # (ENGINE_SATURATING_THREADS_PER_SM for tiled GEMM engines).
        blocks_on_busiest_sm = np.ceil(blocks / n_sms)
        resident = np.minimum(resident_limit, blocks_on_busiest_sm)
        usable = np.minimum(1.0, resident * threads / saturating)
        t_comp = t_math * padding * n_sms * blocks_on_busiest_sm / blocks / usable
        threads_in_flight = np.minimum(blocks, n_sms * resident_limit) * threads

    bw = np.inf if "dram_bw" in idealize else gpu.dram_bw_gbs * 1e9
    t_bw = dram_bytes / bw
    if "dram_latency" in idealize:
        t_lat = np.zeros(n_ops)
    else:
        latency_s = gpu.dram_latency_ns * 1e-9
        loads = dram_bytes if read_bytes is None else read_bytes
        in_flight = np.minimum(loads, threads_in_flight * bytes_per_thread)
        # Each round trip's loads carry the stores issued beside them (posted, not waited for), so
        # the kernel's traffic runs at D / R times its loads' rate, and that whole traffic sets the
        # latency under load and meets the cap W: T_lat = R / r = D / bw(C x D / R).
        with np.errstate(divide="ignore", invalid="ignore"):
            carried = np.where(loads > 0, in_flight * dram_bytes / loads, 0.0)
        # bw = min(W, C / L(bw)): the latency at the kernel's own load (archsim.perf.loaded_latency)
        curve, saturating = (load.curve, load.saturating_bps) if load else (None, np.inf)
        reachable = loaded_bandwidth(carried, latency_s, saturating, bw, curve)
        with np.errstate(divide="ignore", invalid="ignore"):
            t_lat = np.where(loads > 0, dram_bytes / reachable, 0.0)

    if "memory_system" in idealize:
        t_mem = np.zeros(n_ops)
    else:
        # A tile re-reads its A and B panels from L2: tile_intensity FLOPs per L2 byte.
        l2_bytes = np.where(tiled, np.maximum(dram_bytes, flops / tile_intensity), dram_bytes)
        t_mem = l2_bytes / (gpu.l2_bw_gbs * 1e9)
    return {"math": t_math, "comp": t_comp, "bw": t_bw, "lat": t_lat, "mem": t_mem}
