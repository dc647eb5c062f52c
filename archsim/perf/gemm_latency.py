"""The K-loop latency chain of a tiled GEMM: each K step's operand loads must return in time.

A tiled GEMM workgroup (thread block) walks the reduction dimension K in steps of its tile depth
(DepthU on AMD's Tensile/hipBLASLt kernels, the threadblock K on CUTLASS's). The loads of a step are
issued a fixed number of steps ahead of the math that consumes them (the prefetch *cover*), so
however fast the math units are, a workgroup cannot complete a step faster than one global-load
round trip divided by that cover. Per workgroup, along K:

    T_chain = (T_min - L) + waves x (1 + (steps - 1) / cover) x L,   steps = ceil(K_slice / depth)

(the first step's loads, issued in the prologue, wait a whole round trip) with L the preset's DRAM
pointer-chase latency (``dram_latency_ns``): each K step touches a new
K-slice of the operand panels, first touched by the workgroups that share it together, so a step's
loads go past the L2 (a memory-side cache like MI300X's Infinity Cache answers faster, 217-255 ns
against 434 ns, te42kyfo/gpu-benches gpu-latency/mi300x.txt: the chain is then an upper end of
the latency part, and it stays below the measured times on every fixture, see below);
K_slice = K / split-K slices; waves = ceil(blocks / (SMs x resident blocks per SM)); and
(T_min - L) the kernel's fixed cost in series with the chain (archsim.perf.memory_parallelism.
serial_overhead_seconds: dispatch and completion of a one-workgroup kernel).

Cover, from the kernel's name:

- Tensile/hipBLASLt ``MT<m>x<n>x<depth>`` with ``PGR<p>`` (PrefetchGlobalRead). ROCm/Tensile,
  Tensile/Common.py (``validParameters``): PGR1 double-buffers global -> VGPR -> LDS; PGR2 "do[es]
  another prefetch while writing data from vgpr to lds", and "in PGR2, since LW is followed by GR,
  every LW has same whole loop latency to hide global read" (its LocalWritePerMfma comment): one
  K-loop iteration of cover for PGR 0-2 (PGR0 waits in the same iteration: the chain is still a
  floor). "PrefetchGlobalRead >= 3: DirectToLds only. Do PGR times prefetch global read before main
  loop": PGR iterations of cover.
- CUTLASS ``_<m>x<n>_<depth>x<stages>_`` (cutlass_80_tensorop_s1688gemm_256x128_32x3_...): a
  multistage mainloop keeps stages - 1 K-slices in flight (NVIDIA/cutlass, media/docs/
  efficient_gemm.md, "Software Pipelining" and the multistage mainloop of
  include/cutlass/gemm/threadblock/mma_multistage.h, which issues cp.async for stage k + stages - 1
  while computing stage k): cover = stages - 1.
- cuBLAS/cuDNN names without a depth or stage count (volta_sgemm_128x64_nn, sm90_xmma_*) and grid-less
  ops get no chain.

K comes from the launching op's recorded Input Dims (archsim.perf.tile_padding.GEMM_OPERANDS); the
split-K slice count is the traced grid over the output tiles, for the tile-to-axis assignment whose
tile count divides the grid (as archsim.perf.tile_padding confirms its padding); none: no chain.

Measured against the fixture ``mi300x_sd35_inference`` (not used to set anything): the chain is
19 x 434 ns = 8.2 us for the MT64x96x128 GEMMs of a [666, 2432] x [2432, 2432] mm, 9.8 us with the
fixed cost, against the model's 13.5 us and the measured 25.7 us. So unloaded round trips at one
iteration of cover do NOT explain those kernels (their K steps take 1,770-2,850 cycles at 2.1 GHz,
2-3x one round trip); the chain is a physical floor that binds only for long K with few tiles.
What does: their one LDS buffer puts each step's LDS reads in series with its MFMAs
(archsim.perf.tensile_loop, which also gives Tensile kernels their tiles in flight).

The same round trip is in series with the math once per round of workgroups on an SM
(:func:`prologue_seconds`): a tiled kernel's prologue issues its first K step's loads and waits for
them before any MFMA/HMMA can start (Tensile "Do PGR times prefetch global read before main loop",
Tensile/Common.py; CUTLASS's multistage mainloop fills stages - 1 K-slices before its first math,
include/cutlass/gemm/threadblock/mma_multistage.h), and nothing else on the SM overlaps it where the
SM holds that round's only workgroups. With the kernel's fixed cost (dispatch and completion, as
for the chain) the compute term of a traced tiled kernel is

    T_comp' = T_comp + (T_min - L) + rounds x L,   rounds = ceil(ceil(B / N) / resident)

for B workgroups on N SMs, ``resident`` at a time per SM. A kernel's time is the max of its
terms, so these serial parts had been hidden under the math they precede (archsim.perf.terms
keeps them apart as the ``serial`` term, added to ``comp``).

The epilogue too (:func:`epilogue_store_seconds`): a workgroup stores its C tile after its K loop
(Tensile's "Global Write Elements" after the summation loop; CUTLASS's epilogue after its
mainloop, NVIDIA/cutlass media/docs/efficient_gemm.md), so where each workgroup computes one tile
(the traced grid is the tile count times the split-K slices, as archsim.perf.tile_padding
confirms; not persistent kernels, whose grid is smaller and whose epilogues overlap the next
tile's loop) each round's stores start when its math ends and queue for the DRAM bandwidth, while
the next rounds compute. The last store then completes at

    max over rounds r of (M_r + S_r),

M_r the math through round r (r full rounds of t = T_comp x resident / ceil(B / N) each; all of
T_comp for the last), S_r the stores of rounds r to R at the achievable DRAM bandwidth (the
model's convention for every write; archsim.perf.efficiency) in proportion to their workgroups
(N x resident per full round). Linear in r up to R - 1, so r = 1, R - 1 and R suffice; ``serial``
adds that max less T_comp. More SMs are never slower (property test). Gone under ``dram_bw``
(S = 0) and ``sm_utilization`` (no rounds).

Measured effect of the two, with the register floor of archsim.perf.tile_padding (same tree with
and without; nothing was set from it): fixture ``mi300x_sd35_inference`` -16.6% -> -14.9%, its
GEMMs -9.5% -> -6.3% (median |error| 29% -> 28%; above 100 GFLOP -3.6% -> -2.1%, 10-100 -14.8%
-> -9.1%, 1-10 -40.1% -> -34.6%, the one-wave MT64x96x128 -45% -> -37%); ``a100_train_shapes``
GEMMs -53.7% -> -50.9%; ``v100_resnet50_train_2021`` GEMMs -44.4% -> -34.6%; the H100 TimeSformer
unchanged. GEMMs whose work is inferred from the grid and already priced too slow get slower
still (``a100_event_sync_multistream`` +167% -> +170%): their error is the inferred depth.

Pure functions over an ops table and launch arrays.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.columns import column, parsed_input_dims, strings
from archsim.perf.memory_parallelism import serial_overhead_seconds
from archsim.perf.tile_padding import GEMM_OPERANDS, gemm_output_dims, tile_of

# Tensile/hipBLASLt: MT<m>x<n>x<DepthU> ... _PGR<p>_ (Tensile solution-name abbreviations)
TENSILE_TILE = r"MT(\d+)x(\d+)x(\d+)"
TENSILE_PGR = r"_PGR(\d+)"
# CUTLASS 2.x kernel names: _<m>x<n>_<k>x<stages>_ (cutlass_80_tensorop_s1688gemm_256x128_32x3_nn)
CUTLASS_TILE = r"_(\d{2,3})x(\d{2,3})_(\d{2,3})x(\d)_"
# "PrefetchGlobalRead >= 3: DirectToLds only. Do PGR times prefetch global read" (Tensile Common.py)
MULTI_PREFETCH_PGR = 3


def k_step_of(name: str) -> tuple[int, int, int, int] | None:
    """(tile m, tile n, K depth per step, cover in steps) named by a GEMM kernel, or None."""
    match = re.search(TENSILE_TILE, name)
    if match is not None:
        pgr = re.search(TENSILE_PGR, name)
        prefetch = int(pgr.group(1)) if pgr else 1
        cover = prefetch if prefetch >= MULTI_PREFETCH_PGR else 1
        m, n, depth = (int(g) for g in match.groups())
        return m, n, depth, cover
    match = re.search(CUTLASS_TILE, name)
    if match is not None:
        m, n, depth, stages = (int(g) for g in match.groups())
        return m, n, depth, max(stages - 1, 1)
    return None


def gemm_reduction_dim(launch_op: str, input_dims: str) -> int | None:
    """K of a GEMM op from its recorded Input Dims (A's last dim; linear's weight is [N, K])."""
    operands = GEMM_OPERANDS.get(launch_op)
    if operands is None or not input_dims:
        return None
    dims = parsed_input_dims(input_dims)
    if len(dims) <= operands[0]:
        return None
    a = dims[operands[0]]
    if not (isinstance(a, list) and len(a) >= 2 and isinstance(a[-1], int) and a[-1] > 0):
        return None
    return a[-1]


def split_k_slices(batch: int, m: int, n: int, tile: tuple[int, int], blocks: float) -> int | None:
    """blocks / output tiles for the tile-to-axis assignment whose tile count divides ``blocks`` (the
    fewer slices if both do), or None if neither does."""
    found = []
    for a, b in (tile, tile[::-1]):
        tiles = batch * math.ceil(m / a) * math.ceil(n / b)
        if blocks >= tiles and blocks % tiles == 0:
            found.append(int(blocks // tiles))
    return min(found) if found else None


def k_iterations(name: str, launch_op: str, input_dims: str, blocks: float) -> tuple[int, int]:
    """(K steps each workgroup walks, cover) of one traced GEMM kernel; (0, 1) where unknown."""
    step = k_step_of(name)
    if step is None:
        return 0, 1
    m_tile, n_tile, depth, cover = step
    output = gemm_output_dims(launch_op, input_dims)
    k = gemm_reduction_dim(launch_op, input_dims)
    if output is None or k is None:
        return 0, 1
    slices = split_k_slices(*output, (m_tile, n_tile), blocks)
    if slices is None:
        return 0, 1
    return math.ceil(math.ceil(k / slices) / depth), cover


def chain_seconds(
    steps: np.ndarray,
    cover: np.ndarray,
    blocks: np.ndarray,
    resident: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray:
    """T_chain (module docstring) per op; 0 where ``steps`` is 0 and under ``dram_latency``."""
    steps = np.asarray(steps, dtype=float)
    if "dram_latency" in idealize:
        return np.zeros_like(steps)
    latency_s = gpu.dram_latency_ns * 1e-9
    waves = np.ceil(np.maximum(blocks, 1.0) / (gpu.sms * np.maximum(resident, 1.0)))
    cover = np.maximum(np.asarray(cover, dtype=float), 1.0)
    # the first step's loads are issued in the prologue with nothing to overlap: a whole round trip
    chain = waves * (1.0 + (np.maximum(steps, 1.0) - 1.0) / cover) * latency_s
    return np.where(steps > 0, serial_overhead_seconds(gpu, idealize) + chain, 0.0)


def k_loop_floor(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    resident: np.ndarray,
    tiled: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray | None:
    """T_chain of every traced tiled GEMM kernel whose name gives its K step and whose op recorded
    its dims (None when there is none): a floor for the kernel's latency term."""
    if "dram_latency" in idealize:
        return None
    traced = np.nan_to_num(column(ops, "grid_x"), nan=0.0) > 0
    wanted = np.asarray(tiled, dtype=bool) & traced & (strings(ops, "input_dims") != "").to_numpy()
    if not wanted.any():
        return None
    names = strings(ops, "name").to_numpy(dtype=object)
    launch = strings(ops, "launch_op").to_numpy(dtype=object)
    dims = strings(ops, "input_dims").to_numpy(dtype=object)
    steps, cover = np.zeros(len(ops)), np.ones(len(ops))
    cache: dict[tuple, tuple[int, int]] = {}
    for i in np.flatnonzero(wanted):
        key = (names[i], launch[i], dims[i], blocks[i])
        if key not in cache:
            cache[key] = k_iterations(names[i], launch[i], dims[i], blocks[i])
        steps[i], cover[i] = cache[key]
    if not (steps > 0).any():
        return None
    return chain_seconds(steps, cover, np.asarray(blocks, dtype=float), resident, gpu, idealize)


def prologue_seconds(
    blocks: np.ndarray,
    resident: np.ndarray,
    wanted: np.ndarray,
    gpu: GpuConfig,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray:
    """Serial time of traced tiled kernels outside their main loop (module docstring): the fixed
    cost plus one DRAM round trip per round of resident workgroups on the busiest SM; 0 where not
    ``wanted``. Under ``sm_utilization`` (one SM runs all B blocks, divided by N) the rounds are
    ceil(B / resident) / N and the fixed cost is gone; under ``dram_latency`` the round trips are."""
    blocks = np.maximum(np.nan_to_num(np.asarray(blocks, dtype=float), nan=1.0), 1.0)
    resident = np.maximum(np.nan_to_num(np.asarray(resident, dtype=float), nan=1.0), 1.0)
    latency_s = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    if "sm_utilization" in idealize:
        rounds = np.ceil(blocks / resident) / gpu.sms
    else:
        rounds = _rounds(blocks, resident, gpu.sms)
    serial = serial_overhead_seconds(gpu, idealize) + rounds * latency_s
    return np.where(np.asarray(wanted, dtype=bool), serial, 0.0)


def _rounds(blocks: np.ndarray, resident: np.ndarray, sms: int) -> np.ndarray:
    """Rounds of resident workgroups on the busiest SM: ceil(ceil(B / N) / resident)."""
    return np.ceil(np.ceil(blocks / sms) / resident)


def one_tile_per_workgroup(ops: pd.DataFrame, blocks: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """Kernels whose traced grid is their tile count times whole K-slices (module docstring)."""
    out = np.zeros(len(ops), dtype=bool)
    names = strings(ops, "name").to_numpy(dtype=object)
    launch = strings(ops, "launch_op").to_numpy(dtype=object)
    dims = strings(ops, "input_dims").to_numpy(dtype=object)
    cache: dict[tuple, bool] = {}
    for i in np.flatnonzero(np.asarray(wanted, dtype=bool) & (blocks > 0)):
        key = (names[i], launch[i], dims[i], blocks[i])
        if key not in cache:
            tile = tile_of(names[i])
            output = gemm_output_dims(launch[i], dims[i]) if tile is not None else None
            cache[key] = output is not None and split_k_slices(*output, tile, blocks[i]) is not None
        out[i] = cache[key]
    return out


def epilogue_store_seconds(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    resident: np.ndarray,
    wanted: np.ndarray,
    comp: np.ndarray,
    gpu: GpuConfig,
    dram_fraction: float,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray:
    """The stores of the last round in series with the math (module docstring), for the ``wanted``
    traced tiled kernels that compute one tile per workgroup; 0 elsewhere."""
    out = np.zeros(len(ops))
    if "dram_bw" in idealize or "sm_utilization" in idealize:
        return out
    blocks = np.maximum(np.nan_to_num(np.asarray(blocks, dtype=float), nan=1.0), 1.0)
    resident = np.maximum(np.nan_to_num(np.asarray(resident, dtype=float), nan=1.0), 1.0)
    applies = one_tile_per_workgroup(ops, blocks, wanted)
    if not applies.any():
        return out
    store_s = np.nan_to_num(column(ops, "bytes_written"), nan=0.0) / (
        gpu.dram_bw_gbs * 1e9 * dram_fraction
    )
    busiest = np.ceil(blocks / gpu.sms)  # workgroups on the busiest SM
    rounds = _rounds(blocks, resident, gpu.sms)
    per_round = comp * np.minimum(resident, busiest) / busiest  # math of one full round
    full = gpu.sms * resident  # workgroups in a full round

    def stores_from(r: np.ndarray) -> np.ndarray:  # stores of rounds r..R
        return store_s * np.clip(blocks - (r - 1.0) * full, 0.0, None) / blocks

    several = rounds >= 2
    first = np.where(several, per_round + store_s, 0.0)
    before_last = np.where(several, (rounds - 1.0) * per_round + stores_from(rounds - 1.0), 0.0)
    last = comp + stores_from(rounds)
    exposed = np.maximum.reduce([first, before_last, last]) - comp
    return np.where(applies, np.maximum(exposed, 0.0), 0.0)


__all__ = [
    "chain_seconds",
    "epilogue_store_seconds",
    "gemm_reduction_dim",
    "k_iterations",
    "k_loop_floor",
    "k_step_of",
    "one_tile_per_workgroup",
    "prologue_seconds",
    "split_k_slices",
]
