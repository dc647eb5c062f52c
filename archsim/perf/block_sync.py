"""Fixed costs per wave of block-per-row multi-pass kernels: block turnover and block reductions.

The row passes of :mod:`archsim.perf.passes` price a wave of blocks as its dependent DRAM round
trips plus the transfer. Two costs on the same critical path are not DRAM round trips:

- **Block turnover.** A wave's blocks exit and the next wave's start (dispatch, index arithmetic,
  exit) before its first load is issued. te42kyfo/gpu-benches' one-load ``read_kernel`` measures
  that cycle: at light load its cycle per resident thread slot is the pointer chase plus the
  turnover (archsim.perf.loaded_latency: H100 PCIe 238 ns, A100-40GB 272, V100 252, L40 187,
  MI210 189, MI300X 127). It is measured on blocks of 16-128 threads per SM; a block of 1,024
  threads is taken to turn over in the same time (no published figure for larger blocks). A
  generation without a table takes the turnover of the table its loaded-latency curve comes from
  (archsim.perf.loaded_latency.CURVE_FROM: Maxwell, Pascal, Turing Volta's; Blackwell Hopper's).
- **Block reductions between passes.** Every thread of a block needs the row's max (sum, Welford
  statistics) before its next pass, so the reduction's dependent chain runs after the last load
  of the pass returns and before the first load of the next: nothing else of the block overlaps
  it, and the other resident blocks of the wave are at the same point. The chains, from the code:

  - ``cunn_SoftMaxForward`` (pytorch aten/src/ATen/native/cuda/SoftMax.cu): two
    ``blockReduceWarp`` (max, then sum of exponentials), each ``cuda_utils::BlockReduce``
    (block_reduce.cuh: ``WarpReduce``, 5 dependent ``WARP_SHFL_DOWN`` + combine steps; lane 0
    stores to shared memory; ``__syncthreads``; warp 0 loads and ``WarpReduce``s again) and a
    broadcast through ``smem_cache[0]``: 10 shuffle-and-combine steps and 2 shared-memory round
    trips (``WARP_TREE``).
  - ``cunn_SoftMaxBackward``: one ``blockReduce`` (SoftMax.cu): all threads store, warp 0 folds
    32 values each (``#pragma unroll``: 32 loads in flight, 32 dependent combines), thread 0 folds
    one value per warp in a loop of runtime trip count (one load then its combine per iteration),
    then the broadcast: 3 shared round trips, 32 combines, and warps x (shared round trip +
    combine) (``SMEM_SERIAL``).
  - ``vectorized_layer_norm_kernel`` (layer_norm_kernel.cu ``compute_stats``): 5 warp-shuffle
    steps of a Welford combine (one reciprocal ``1.f/count`` and three dependent multiply-adds),
    then log2(warps) shared-memory tree steps, each a round trip and a combine, then the broadcast
    (``WELFORD``).
  - ``layer_norm_grad_input_kernel`` (``compute_gI``): two ``cuda_utils::BlockReduceSum`` and the
    ``buf`` broadcast (``WARP_TREE``, twice).

  cuDNN's batch-norm kernels are closed source: no reduction is priced for them.

Cycle figures (NVIDIA, Volta and later; ``SYNC_FIGURES``). A dependent FP32 operation: 4 cycles
(Jia et al. 2018, "Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
arXiv:1804.06826; archsim.perf.terms takes the same figure for every generation). A shared-memory
load: 23 cycles (sjfeng1999/gpu-arch-microbenchmark on GitHub, its README's latency table: Turing
RTX 2070 shared latency 23 cycles, a single LDS 23), taken for every generation from Volta on, as
archsim.perf.passes takes Volta's L1 hit. A warp shuffle: no published latency was found in a
form that could be cited; its issue takes 4 cycles on its SM sub-partition (CUDA C++ Programming
Guide, arithmetic instruction throughput table: 32 results per clock per SM for warp shuffle on
compute capability 5.x-9.0, over 4 sub-partitions: 8 lanes a clock, a 32-lane warp in 4), used as
a lower bound. The reciprocal goes to the MUFU (16 results per clock per SM, the same table: a warp
in 8 cycles on its sub-partition). ``__syncthreads`` itself: no published Hopper or Ampere figure
(Zhang et al., IPDPS 2020, measured Pascal and Volta only), priced at zero beyond the wait. So
these chains are lower bounds. Luo et al. 2024 ("Benchmarking and Dissecting the Nvidia Hopper GPU
Architecture", arXiv:2402.13499) measure Hopper's shared memory; their table could not be read
here, so Hopper takes Volta's figure. Pascal (``_PASCAL``): a dependent FMA takes 6 cycles (NVIDIA
Volta Tuning Guide, "Instruction Scheduling": 4 on Volta "compared to six cycles on Pascal"); GP100's
SM has 2 processing blocks (NVIDIA Tesla P100 whitepaper, 2016), so the SM's 32 shuffle and 16 MUFU
results per clock (the same table, cc 6.0) are a warp in 2 and 4 cycles on its block; no Pascal
shared-memory latency could be read here: Volta's 23 is taken. Every Pascal chain is at least
Volta's in cycles. Maxwell gets no reduction cost.

AMD CDNA runs the same code with ``C10_WARP_SIZE`` 64: a ``WarpReduce`` (and compute_stats' shuffle
loop, ``offset = C10_WARP_SIZE >> 1``) is 6 steps, a block has threads / 64 wavefronts, and warp 0
of ``blockReduce`` folds 64 values a lane. HIP's ``__shfl_down``, which ``WARP_SHFL_DOWN`` calls on
ROCm, is ``__builtin_amdgcn_ds_bpermute`` (ROCm HIP, amd_detail/amd_warp_functions.h): an LDS
instruction, not the DPP lane moves the compiler uses for its own reductions, so each shuffle step
waits an LDS round trip, taken as mt4g's LDS load latency (caps-tum/mt4g sample results: MI300X
52 cycles, MI210 48; CDNA2's MI250 and MI100 take MI210's; ds_bpermute's own latency is not
published). A dependent VALU operation takes 4 cycles (a wave64 instruction issues over 4 cycles on
a SIMD16: AMD GCN architecture whitepaper, 2012; CDNA keeps the SIMD16), and the Welford combine's
reciprocal, whose transcendental latency is not published, is priced at that issue. ``s_barrier``:
no published figure, priced at zero beyond the wait, as on NVIDIA. So the AMD chains are lower
bounds too: a softmax reduction 2 x 6 x (52 + 4) + 2 x 52 = 776 cycles on the MI300X. The MUFU
floors below stay NVIDIA's (no published CDNA transcendental rate was found).

Passes re-read on chip are bound by the issue of their instructions. ``cunn_SoftMaxForward``'s sum
pass evaluates an ``expf`` per element (``SumExpFloat``: one MUFU ex2 among 6 FP32 operations) and
its write pass an ``expf`` and an IEEE division (``SoftMaxForwardEpilogue``: an ex2, a reciprocal
and its Newton step); around them each loop iteration converts, addresses, tests and branches.
:mod:`archsim.perf.issue_rate` counts every instruction of each loop body from its SASS (nvcc
13.0, sm_90) and prices a warp-iteration at the dispatch rate (one warp instruction per clock per
SM sub-partition) or its integer pipe's or MUFU's share (64 and 16 results per clock per SM), the
longest. So a pass takes at least resident blocks x the row's warp-iterations x those cycles / 4
(``pass_floor_seconds``), which a pass re-read from L1 at 28 cycles a round trip does not hide: on
the H100 TimeSformer softmax (2 blocks of 3,137-element bf16 rows per SM, 99 scalar
warp-iterations a row) the sum pass issues 17 instructions a warp-iteration, 2 x 99 x 17 / 4 =
841.5 cycles against 4 x 28 of round trips (its MUFU alone, 396). The write pass's 31 a
warp-iteration (1,534.5 cycles) overlap its own output stores, whose transfer the kernel's
bandwidth term already charges (1.66 MB per wave at 3.35 TB/s x 0.82: 0.60 us = 1,194 cycles),
so only what exceeds them counts; the first pass reads DRAM and its 7 a warp-iteration (int-pipe
bound: 10 cycles, 495 a wave) hide under its 4 DRAM round trips.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import DTYPE_BYTES, element_bytes
from archsim.perf.columns import by_unique
from archsim.perf.efficiency import ACHIEVED
from archsim.perf.issue_rate import ISSUE_GENERATIONS, SMSPS_PER_SM, softmax_pass_cycles
from archsim.perf.loaded_latency import (
    CURVES,
    LIGHT_LOAD,
    STREAM_BYTES_PER_THREAD,
    TABLES,
    StreamTable,
    curve_generation,
)

WARP_SIZE = 32  # CUDA C++ Programming Guide: 32 on every NVIDIA architecture
# log2(32): the shuffle steps of one WarpReduce (block_reduce.cuh: offsets 16, 8, 4, 2, 1)
WARP_STEPS = 5
# warp 0's unrolled fold in SoftMax.cu's blockReduce: C10_WARP_SIZE values per lane
SERIAL_FOLD = 32


@dataclass(frozen=True)
class SyncFigures:
    """Cycle figures of one generation's block-reduction chains (module docstring)."""

    fp_dependent_cycles: float
    shared_load_cycles: float
    shuffle_issue_cycles: float
    mufu_issue_cycles: float
    source: str
    warp_size: int = WARP_SIZE


_VOLTA_ON = SyncFigures(
    4.0, 23.0, 4.0, 8.0,
    "Jia et al. 2018 (arXiv:1804.06826); sjfeng1999/gpu-arch-microbenchmark; CUDA C++ Programming Guide "
    "throughput table (shuffle 32, MUFU 16 results per clock per SM)",
)  # fmt: skip
SYNC_FIGURES: dict[str, SyncFigures] = {
    gen: _VOLTA_ON for gen in ("volta", "turing", "ampere", "ada", "hopper", "blackwell")
}
# AMD CDNA (module docstring): wave64; a shuffle is a ds_bpermute, priced at the LDS load latency
# caps-tum/mt4g measures (sample results: MI300X 52 cycles, MI210 48; MI250 and MI100, also
# "cdna2" here, take MI210's); a dependent VALU op and the reciprocal's issue, 4 cycles (a wave64
# instruction on a SIMD16: AMD GCN architecture whitepaper, 2012; no published latency).
_CDNA_SOURCE = (
    "caps-tum/mt4g sample results (LDS latency); ROCm HIP amd_warp_functions.h (__shfl_down is "
    "ds_bpermute); AMD GCN architecture whitepaper (wave64 over 4 cycles on a SIMD16)"
)
# Pascal (module docstring): dependent FMA 6 cycles (Volta Tuning Guide); shuffle and MUFU at the SM's
# cc 6.0 rates over GP100's 2 processing blocks (P100 whitepaper); shared load: Volta's 23 (assumed).
_PASCAL = SyncFigures(
    6.0, 23.0, 2.0, 4.0,
    "NVIDIA Volta Tuning Guide (FMA 6 cycles on Pascal); P100 whitepaper (2 processing blocks per "
    "SM); CUDA C++ Programming Guide throughput table; shared load assumed Volta's",
)  # fmt: skip
SYNC_FIGURES["pascal"] = _PASCAL
SYNC_FIGURES["cdna3"] = SyncFigures(4.0, 52.0, 52.0, 4.0, _CDNA_SOURCE, warp_size=64)
SYNC_FIGURES["cdna2"] = SyncFigures(4.0, 48.0, 48.0, 4.0, _CDNA_SOURCE, warp_size=64)

# Reduction chains: (pattern, chain, count), first match wins; cunn_SoftMaxForwardSmem is one pass
# (archsim.perf.passes) and never reaches here, but is named so that it cannot match the forward.
WARP_TREE, SMEM_SERIAL, WELFORD = "warp_tree", "smem_serial", "welford"
REDUCTION_KERNELS: tuple[tuple[str, str, int], ...] = (
    (r"cunn_SoftMaxForwardSmem", WARP_TREE, 0),
    (r"cunn_SoftMaxForward", WARP_TREE, 2),
    (r"cunn_SoftMaxBackward", SMEM_SERIAL, 1),
    (r"vectorized_layer_norm_kernel", WELFORD, 1),
    (r"layer_norm_grad_input_kernel", WARP_TREE, 2),
)


# Kernels whose passes after the first have an issue floor (archsim.perf.issue_rate): the forward
# softmax of SoftMax.cu (ILP from its first template argument); its Smem variant is one pass.
ISSUE_PASS_PATTERN = r"cunn_SoftMaxForward<(\d+),"


def pass_floor_seconds(
    names: pd.Series,
    row_elements: np.ndarray,
    threads: np.ndarray,
    element_size: np.ndarray,
    blocks_per_sm: np.ndarray,
    write_s_per_wave: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """(ops, 2): seconds per wave the second and third passes take at least to issue their
    instructions (module docstring; archsim.perf.issue_rate.softmax_pass_cycles), the last
    pass's less the output's transfer per wave, which the bandwidth term charges. Zeros for other
    kernels, off ISSUE_GENERATIONS, and under the ``sm_utilization`` idealization."""
    n = len(row_elements)
    out = np.zeros((n, 2))
    if generation not in ISSUE_GENERATIONS or "sm_utilization" in idealize:
        return out
    names = pd.Series(names).reset_index(drop=True).astype("string").fillna("")
    ilp = by_unique(names, lambda u: u.str.extract(ISSUE_PASS_PATTERN)[0].astype(float).to_numpy())
    hit = np.isfinite(ilp.astype(float))
    if not hit.any():
        return out
    cycles = softmax_pass_cycles(row_elements, threads, np.where(hit, ilp, 1.0), element_size)
    per_sm = np.maximum(np.asarray(blocks_per_sm, dtype=float), 1.0) / SMSPS_PER_SM
    cycle_s = 1e-6 / gpu.clock_mhz
    sum_s = per_sm * cycles[:, 1] * cycle_s
    write_s = np.maximum(per_sm * cycles[:, 2] * cycle_s - write_s_per_wave, 0.0)
    out[:, 0] = np.where(hit, sum_s, 0.0)
    out[:, 1] = np.where(hit, write_s, 0.0)
    return out


def pass_floors(
    names: pd.Series,
    dtypes: pd.Series | None,
    read: np.ndarray,
    dram_bytes: np.ndarray,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """:func:`pass_floor_seconds` for the row-pass kernels of archsim.perf.passes: ``read`` the
    bytes a pass reads, ``launch`` (blocks, threads, resident blocks per SM, waves); a row is the
    read over the blocks in elements of the op's dtype (4 B where unknown); the output
    (``dram_bytes`` less the read) is transferred at the generation's achieved DRAM fraction
    (archsim.perf.efficiency)."""
    blocks, threads, resident, waves = launch
    size = np.full(len(read), 4.0)
    if dtypes is not None:
        dtypes = pd.Series(dtypes).reset_index(drop=True).astype("string").fillna("")
        known = dtypes.str.replace("torch.", "", regex=False).isin(list(DTYPE_BYTES))
        size = np.where(known.to_numpy(dtype=bool), element_bytes(dtypes), 4.0)
    row_elements = read / blocks / np.maximum(size, 1.0)
    on_sm = np.minimum(resident, np.ceil(blocks / gpu.sms))
    written = np.maximum(np.nan_to_num(dram_bytes, nan=0.0) - read, 0.0)
    bandwidth = gpu.dram_bw_gbs * 1e9 * ACHIEVED.get(generation, ACHIEVED["default"]).dram
    write_s = 0.0 if "dram_bw" in idealize else written / waves / bandwidth
    return pass_floor_seconds(names, row_elements, threads, size, on_sm, write_s, gpu,
                              generation, idealize)  # fmt: skip


def turnover_ns(table: StreamTable) -> float:
    """Block turnover of one gpu-benches stream table: the median light-load cycle less the pointer
    chase, as archsim.perf.loaded_latency.curve_from_table takes it off every row."""
    threads = np.asarray(table.threads_per_sm, dtype=float) * table.sms
    gbs = np.asarray(table.read_gbs, dtype=float)
    cycle_ns = threads * STREAM_BYTES_PER_THREAD / gbs
    light = cycle_ns[gbs / table.datasheet_gbs < LIGHT_LOAD]
    return max(float(np.median(light if light.size else cycle_ns[:1])) - table.chase_ns, 0.0)


# every generation archsim.perf.loaded_latency.CURVES holds: its table's turnover, or the one it
# borrows the curve from (generation_turnover_ns)
TURNOVER_NS: dict[str, float] = {gen: turnover_ns(TABLES[curve_generation(gen)]) for gen in CURVES}


def generation_turnover_ns(generation: str) -> float:
    """Block turnover of ``generation``: from the stream table that prices its loaded latency
    (archsim.perf.loaded_latency.curve_generation; Maxwell, Pascal and Turing take Volta's,
    Blackwell Hopper's), an assumption where the table is another generation's, lest an older part
    start and retire its blocks for free where the newer pays."""
    return TURNOVER_NS[curve_generation(generation)]


def chain_cycles(chain: str, threads: np.ndarray, figures: SyncFigures) -> np.ndarray:
    """Cycles of one block reduction of kind ``chain`` in blocks of ``threads`` (module docstring)."""
    size = figures.warp_size
    warps = np.maximum(np.ceil(np.asarray(threads, dtype=float) / size), 1.0)
    steps = int(np.log2(size))  # WarpReduce's shuffle steps: 5 on a warp of 32, 6 on wave64
    fp, shared = figures.fp_dependent_cycles, figures.shared_load_cycles
    shuffle_step = figures.shuffle_issue_cycles + fp
    if chain == WARP_TREE:
        return np.full_like(warps, 2 * steps * shuffle_step + 2 * shared)
    if chain == SMEM_SERIAL:  # warp 0 folds C10_WARP_SIZE values a lane (SERIAL_FOLD on NVIDIA)
        return 3 * shared + size * fp + warps * (shared + fp)
    if chain == WELFORD:
        combine = figures.mufu_issue_cycles + 3 * fp
        tree = np.log2(warps)
        return steps * (figures.shuffle_issue_cycles + combine) + tree * (shared + combine) + shared
    raise ValueError(f"unknown reduction chain {chain!r}")


def reduction_cycles(names: pd.Series, threads: np.ndarray, generation: str) -> np.ndarray:
    """Cycles of every block reduction of each kernel per row (0 where none is named or the
    generation has no published figures)."""
    figures = SYNC_FIGURES.get(generation)
    threads = np.asarray(threads, dtype=float)
    if figures is None:
        return np.zeros(len(threads))

    def match(unique: pd.Series) -> np.ndarray:
        out = np.full(len(unique), -1)
        for index in reversed(range(len(REDUCTION_KERNELS))):  # first match wins: apply it last
            hit = unique.str.contains(REDUCTION_KERNELS[index][0], regex=True).to_numpy(dtype=bool)
            out = np.where(hit, index, out)
        return out

    names = pd.Series(names).reset_index(drop=True).astype("string").fillna("")
    kinds = by_unique(names, match).astype(int)
    total = np.zeros(len(threads))
    for index, (_, chain, count) in enumerate(REDUCTION_KERNELS):
        hit = kinds == index
        if count and hit.any():
            total = np.where(hit, count * chain_cycles(chain, threads, figures), total)
    return total


def wave_fixed_seconds(
    names: pd.Series,
    threads: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds per wave of block turnover and block reductions of each kernel (the caller applies
    it to multi-pass kernels). Zero under the ``sm_utilization`` idealization: both are time the
    SMs' blocks wait, which perfect SM utilization removes, as it removes tails."""
    threads = np.asarray(threads, dtype=float)
    if "sm_utilization" in idealize:
        return np.zeros(len(threads))
    turnover_s = generation_turnover_ns(generation) * 1e-9
    reductions_s = reduction_cycles(names, threads, generation) * 1e-6 / gpu.clock_mhz
    return turnover_s + reductions_s


__all__ = [
    "ISSUE_PASS_PATTERN",
    "REDUCTION_KERNELS",
    "SMEM_SERIAL",
    "SYNC_FIGURES",
    "SyncFigures",
    "TURNOVER_NS",
    "generation_turnover_ns",
    "WARP_TREE",
    "WELFORD",
    "chain_cycles",
    "pass_floor_seconds",
    "pass_floors",
    "reduction_cycles",
    "turnover_ns",
    "wave_fixed_seconds",
]
