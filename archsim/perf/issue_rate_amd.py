"""Instruction issue on AMD CDNA3: the cycles normalization statistics kernels' instructions take to
issue on the SIMDs of the busiest compute unit, counted from compiled gfx9 ISA.

A CDNA compute unit has 4 SIMDs of 16 lanes; a wave64 VALU instruction occupies its SIMD for 4
cycles, and the CU's arbiter gives each SIMD one issue turn every 4 cycles, in which it issues at
most one instruction per wave (one VALU, one scalar, one vector-memory, one LDS ... from different
waves): AMD "Graphics Cores Next (GCN) Architecture" whitepaper (2012), p. 5 and its CU diagram;
the CLRX project's GCN timing tables (clrx.nativeboinc.org, "GcnTimings": one wave a SIMD issues
at most one instruction a turn, five waves up to five); the AMD CDNA3 ISA reference guide (2024)
keeps the 4 x SIMD16 CU and wave64. A quarter-rate VALU instruction holds its SIMD 4 times as
long: LLVM's AMDGPU scheduling model for gfx940-942
(llvm/lib/Target/AMDGPU/SISchedule.td, ``SIDPGFX940FullSpeedModel``, "latency values are 1 /
(operations / cycle) / 4") gives 4 to the F32 transcendentals (``WriteTrans32``: v_rcp_f32,
v_exp_f32, v_sqrt_f32 ...) and to the F32 <-> integer conversions (``WriteFloatCvt``:
v_cvt_f32_i32), 1 to every other 32-bit VALU instruction, and 1 to FP64 and integer multiplies on
this generation (``FullRate64Ops``). So a SIMD holding w waves of one kernel needs at least

    cycles = max(w x (4 N_valu + 16 N_quarter), w x 4 N_salu, 4 N_all)

(:func:`simd_cycles`): its VALU, the CU's scalar unit (one instruction a cycle, a quarter of it
per SIMD), or one wave's own one-instruction-per-turn issue, whichever is longest.

Counts (``WaveCount``), for fp32 tensors and int32 indexing (the instantiations named in
KERNEL_COUNTS; other dtypes get no term): the kernels' public source (pytorch/pytorch,
aten/src/ATen/native/cuda/: Normalization.cuh, group_norm_kernel.cu, layer_norm_kernel.cu, with
``cuda_utils::BlockReduce`` from block_reduce.cuh and ``WelfordOps`` from
aten/src/ATen/native/SharedReduceOps.h; HIP's ``__shfl_xor``/``__shfl_down`` as ROCm's
amd_warp_functions.h writes them, ``__builtin_amdgcn_ds_bpermute``) copied into standalone HIP
sources with the same expressions and types (float, ``index_t`` int), compiled by clang 16 (``-x hip --cuda-device-only -nogpulib
-nogpuinc --offload-arch=gfx940 -O3 -S``: HIP's defaults, correctly rounded fp32 division, no
fast-math flag assumed for PyTorch's ROCm build) and counted per basic block, each VALU instruction
classed by ``llvm-mca-16 -mcpu=gfx940 -instruction-info``. gfx942 (MI300X) is not a clang 16
target; LLVM's AMDGPU.td gives it gfx940's ISA feature set (``FeatureISAVersion9_4_Common``) plus
FP8/XF32 instructions and the same scheduling model, none of which these kernels use. Sections:
``prologue`` (once a wave: arguments, indices, loop set-up), ``row`` (once per outer ``batch``
iteration), ``step`` (once per inner ``x`` iteration: one element a lane), ``epilogue`` (once a
wave: the block reduction and what follows), ``first_wave`` (only wave 0 of a block: the second
``WarpReduce`` of ``BlockReduce``, the ``tid == 0`` stores; blocks of a few instructions guarded by
lane tests that every wave enters are counted in ``epilogue``). Instructions: full-rate VALU,
quarter-rate VALU, SALU, and others that take an issue turn (vector memory, LDS, scalar loads,
waits, branches, barriers):

- ``batch_norm_collect_statistics_kernel``: the Welford loop (load; ``n++`` converted to float; an
  IEEE division ``d1 / n``: v_div_scale x 2, v_rcp_f32, 5 FMAs, v_div_fmas, v_div_fixup) is 18 + 2
  quarter-rate VALU a step; the two ``WARP_SHFL_XOR`` Welford merges of 6 steps each (3
  ds_bpermute, the division ``1.0 / fmaxf(1.0, n + o_n)``, which clang narrows to an f32 IEEE
  division, and the merge's multiplies) run in every wave: 277 + 35 quarter-rate VALU (1,668 SIMD
  cycles a wave).
- ``batch_norm_backward_kernel``: ``reduce<Float2>``'s loop (two loads, a subtract, a multiply and
  two adds a step) and ``BlockReduce`` (two 6-step ``WarpReduce`` of a Float2, the second in wave 0
  only), then the ``grad_input`` loop (two loads, four VALU, a store a step).
- ``RowwiseMomentsCUDAKernel`` (group_norm_kernel.cu; layer_norm_kernel.cu's kernel of the same
  name runs the same loop and ``BlockReduce``): ``WelfordOps::reduce`` a step (the int64 count
  converted to float on the scalar unit, an IEEE division: 19 + 2 quarter-rate VALU, 14 SALU), and
  ``BlockReduce`` of ``WelfordData`` (5 ds_bpermute, a division and the merge a step; the blocks
  of the ``nf == 0`` paths are counted as executed: a few moves a step).
- ``vectorized_layer_norm_kernel`` (layer_norm_kernel.cu, ``compute_stats`` with ``vec_size`` 4):
  four ``cuWelfordOnlineSum`` a 16-byte load (``1.f/new_count``: an IEEE division each; 65 + 4
  quarter-rate VALU), the 6-step ``cuWelfordCombine`` shuffle and the shared-memory tree over the
  block's 4 wavefronts (blockDim (64, 4)), then the write pass (packed-FP32 ``gamma * (rstd *
  (x - mean)) + beta``, 13 VALU a 16-byte load).
- ``vectorized_layer_norm_kernel<float, float, true>``, the ``rms_norm`` instantiation (the
  ``rms_norm`` template flag of later layer_norm_kernel.cu versions, which share the layer norm's
  kernels with RMSNorm): ``cuWelfordOnlineSum`` adds ``val * val`` (4 v_fmac a 16-byte load, no
  division), ``cuWelfordCombine`` adds the sums (6 ds_bpermute and adds), one IEEE division by N
  in wave 0, then ``gamma * (rstd * x)``: 225 instructions a wave (245 in wave 0) at one step a
  row, 0.47 us on the bench's 128-row layers, which measure 4.1-5.5 us (2.3 modelled without it,
  2.7 with): issue is not their gap.

Loop trips (``walk``): the batch-norm kernels walk ``for (batch = threadIdx.y; ...) for (x =
threadIdx.x; ...)`` over the first input reshaped to (N, C, HW): ceil(N / blockDim.y) rows of
ceil(HW / blockDim.x) steps; ``RowwiseMomentsCUDAKernel`` walks its row (the first input's
elements over the blocks) ``blockDim.x`` at a time, and ``vectorized_layer_norm_kernel`` 4 x
``blockDim.x x blockDim.y`` at a time, both passes.

The issue runs in series with the loop's dependent DRAM round trips (each wave waits for its load,
then issues its step, then the next load: :mod:`archsim.perf.memory_parallelism`, or the row passes
of :mod:`archsim.perf.passes` for the vectorized layer norm) and with the block reduction after the
loop, so :mod:`archsim.perf.terms` adds it to that chain. The ``grad_input``
loop's round trips are not counted (as before), so the backward chain stays a lower bound.
Generations other than CDNA3 get no term (CDNA2's gfx90a lacks v_lshl_add_u64 and packed-FP32
forms differ: not counted).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.columns import by_unique, parsed_input_dims
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings

WAVE_SIZE = 64  # CDNA wavefront (AMD CDNA3 ISA reference guide)
SIMDS_PER_CU = 4  # GCN whitepaper (2012); CDNA3 ISA guide: 4 SIMD16 per CU
VALU_CYCLES = 4.0  # a wave64 instruction over 16 lanes: 4 cycles of its SIMD (same sources)
QUARTER_RATE_CYCLES = 16.0  # SISchedule.td gfx940: WriteTrans32 / WriteFloatCvt at 1/4 rate
SALU_CYCLES = 4.0  # one scalar instruction a cycle per CU, round-robin over its 4 SIMDs (GCN)
ISSUE_TURN_CYCLES = 4.0  # each SIMD's issue turn comes every 4 cycles, one instruction per wave
# Generations whose ISA the counts below stand for (module docstring)
AMD_ISSUE_GENERATIONS = frozenset({"cdna3"})


@dataclass(frozen=True)
class WaveCount:
    """Instructions one wave issues in a section of a kernel (module docstring): full-rate VALU,
    quarter-rate VALU, scalar ALU, and others that take only an issue turn."""

    valu: float
    quarter: float = 0.0
    salu: float = 0.0
    other: float = 0.0

    def __add__(self, o: WaveCount) -> WaveCount:
        return WaveCount(self.valu + o.valu, self.quarter + o.quarter, self.salu + o.salu,
                         self.other + o.other)  # fmt: skip

    def times(self, k: float) -> WaveCount:
        return WaveCount(self.valu * k, self.quarter * k, self.salu * k, self.other * k)

    @property
    def instructions(self) -> float:
        return self.valu + self.quarter + self.salu + self.other


def simd_cycles(count: WaveCount, waves_per_simd: float) -> float:
    """Cycles a SIMD takes to issue ``count`` for each of its ``waves_per_simd`` waves: its VALU,
    its quarter of the CU's scalar unit, or one wave's issue turns, whichever is longest."""
    waves = max(float(waves_per_simd), 0.0)
    if waves == 0.0:
        return 0.0
    valu = count.valu * VALU_CYCLES + count.quarter * QUARTER_RATE_CYCLES
    return max(
        waves * valu, waves * count.salu * SALU_CYCLES, count.instructions * ISSUE_TURN_CYCLES
    )


def cu_rounds(
    blocks: np.ndarray, resident: np.ndarray, threads: np.ndarray, cus: int, ideal: bool
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(rounds, blocks a round, waves a SIMD a round) of the busiest CU: ceil(B / N_cu) blocks in
    rounds of at most ``resident``, a round's waves spread over the 4 SIMDs (whole waves). Under
    ``sm_utilization`` (``ideal``) the CU's B / N_cu blocks are one round of fractional waves."""
    blocks, threads = np.asarray(blocks, dtype=float), np.asarray(threads, dtype=float)
    resident = np.maximum(np.nan_to_num(np.asarray(resident, dtype=float), nan=1.0), 1.0)
    waves_per_block = np.ceil(np.maximum(np.nan_to_num(threads, nan=1.0), 1.0) / WAVE_SIZE)
    per_cu = blocks / cus
    if ideal:
        return np.ones_like(per_cu), per_cu, per_cu * waves_per_block / SIMDS_PER_CU
    per_cu = np.ceil(per_cu)
    in_round = np.minimum(per_cu, resident)
    rounds = np.ceil(per_cu / np.maximum(in_round, 1e-30))
    return rounds, in_round, np.ceil(in_round * waves_per_block / SIMDS_PER_CU)


@dataclass(frozen=True)
class KernelCount:
    """A kernel's sections (module docstring): ``fixed`` once a wave (prologue, epilogue), ``row``
    per outer iteration, ``step`` per inner iteration, ``first_wave`` once per block (wave 0)."""

    fixed: WaveCount
    row: WaveCount
    step: WaveCount
    first_wave: WaveCount
    walk: str = "nchw"  # loop trips (module docstring): "nchw", "row" or "row_vec4"

    def per_wave(self, rows: float, steps_per_row: float) -> WaveCount:
        return self.fixed + self.row.times(rows) + self.step.times(rows * steps_per_row)


# clang 16, -x hip --cuda-device-only -nogpulib -nogpuinc --offload-arch=gfx940 -O3 -S (module
# docstring); WaveCount(full-rate VALU, quarter-rate VALU, SALU, other)
BN_STATS_COUNT = KernelCount(
    fixed=WaveCount(14, 0, 9, 12) + WaveCount(277, 35, 7, 78),  # prologue + two Welford merges
    row=WaveCount(6, 0, 6, 3),
    step=WaveCount(18, 2, 2, 3),  # load, n++ (v_cvt_f32_i32), IEEE division (v_rcp_f32)
    first_wave=WaveCount(55, 7, 29, 17),  # tid < 64 loads of the partials, tid == 0 stores
)
BN_BACKWARD_COUNT = KernelCount(
    # prologue, BlockReduce (all waves), grad_input set-up, grad_weight/grad_bias stores
    fixed=WaveCount(28, 2, 44, 40) + WaveCount(50, 0, 16, 40) + WaveCount(23, 2, 7, 4)
    + WaveCount(3, 0, 20, 7),
    row=WaveCount(9, 0, 13, 5) + WaveCount(10, 0, 11, 5),  # reduce loop + grad_input loop
    step=WaveCount(7, 0, 2, 5) + WaveCount(13, 0, 3, 8),
    first_wave=WaveCount(7, 0, 4, 24),  # BlockReduce's second WarpReduce (wid == 0)
)  # fmt: skip
ROWWISE_MOMENTS_COUNT = KernelCount(
    fixed=WaveCount(16, 0, 16, 8) + WaveCount(181, 6, 49, 112),  # prologue + BlockReduce (all)
    row=WaveCount(0),
    step=WaveCount(19, 2, 14, 3),  # WelfordOps::reduce: int64 n++ to float (SALU), IEEE division
    first_wave=WaveCount(150, 8, 37, 66),  # BlockReduce's second WarpReduce, the tid == 0 stores
    walk="row",
)
VECTORIZED_LAYER_NORM_COUNT = KernelCount(
    # prologue, 6-step shuffle Welford combine, two shared-memory tree steps (blockDim.y 4), set-up
    fixed=WaveCount(16, 0, 16, 4) + WaveCount(199, 11, 46, 72) + WaveCount(31, 1, 14, 17).times(2),
    row=WaveCount(0),
    step=WaveCount(65, 4, 5, 6) + WaveCount(13, 0, 3, 11),  # 4 cuWelfordOnlineSum; write pass
    first_wave=WaveCount(2, 0, 7, 4),  # thrx == 0 stores mean and rstd
    walk="row_vec4",
)
VECTORIZED_RMS_NORM_COUNT = KernelCount(
    # prologue and 6-step shuffle sum, two shared-memory tree steps, the tree's exit, write set-up
    # (v_rsq_f32), the thrx == 0 test
    fixed=WaveCount(47, 0, 22, 18) + WaveCount(4, 0, 10, 11).times(2) + WaveCount(2, 0, 4, 6)
    + WaveCount(9, 1, 18, 6) + WaveCount(1, 0, 2, 2),
    row=WaveCount(0),
    step=WaveCount(7, 0, 2, 3) + WaveCount(10, 0, 4, 11),  # 4 v_fmac of squares; gamma * (rstd * x)
    first_wave=WaveCount(11, 2, 0, 1) + WaveCount(1, 0, 4, 1),  # sum / N (IEEE division); rstd store
    walk="row_vec4",
)  # fmt: skip
# first match wins
KERNEL_COUNTS: tuple[tuple[str, KernelCount], ...] = (
    (r"batch_norm_collect_statistics_kernel<[^<>,]+, float, float, float, int>", BN_STATS_COUNT),
    (r"batch_norm_backward_kernel<float, float, float, int>", BN_BACKWARD_COUNT),
    (r"RowwiseMomentsCUDAKernel<float(?:, float)?>", ROWWISE_MOMENTS_COUNT),
    (
        r"(?<![a-z_])vectorized_layer_norm_kernel<float, float(?:, false)?>",
        VECTORIZED_LAYER_NORM_COUNT,
    ),
    # the rms_norm = true instantiation sums squares instead
    (r"(?<![a-z_])vectorized_layer_norm_kernel<float, float, true>", VECTORIZED_RMS_NORM_COUNT),
)


# CDNA2 (gfx90a, MI210/MI250X) runs the same kernels: the replicas of the first four counts,
# compiled again with --offload-arch=gfx90a and classed by llvm-mca-16 -mcpu=gfx90a, issue the same
# instructions in another order plus gfx90a's 64-bit address arithmetic (v_lshlrev_b64, v_add_co,
# v_addc where gfx940 has one v_lshl_add_u64): whole listings 419/175/550/377 full-rate VALU against
# gfx940's 414/154/545/358, the same quarter-rate (44/4/22/16), SALU equal or more (53/120/142/101
# against 53/120/142/94); total instructions 584/431/926/596 against 580/412/938/580 (group norm's
# 12 fewer are waits and nops). So the gfx940 counts are a lower bound of gfx90a's VALU and SALU
# issue. The rms_norm instantiation was not compiled for gfx90a: CDNA3 only.
CDNA2_COUNTED = (
    BN_STATS_COUNT, BN_BACKWARD_COUNT, ROWWISE_MOMENTS_COUNT, VECTORIZED_LAYER_NORM_COUNT,
)  # fmt: skip


def kernel_index(names: pd.Series) -> np.ndarray:
    """Index into KERNEL_COUNTS of each kernel name (-1: not counted)."""

    def find(unique: pd.Series) -> np.ndarray:
        out = np.full(len(unique), -1)
        for k in reversed(range(len(KERNEL_COUNTS))):
            out = np.where(unique.str.contains(KERNEL_COUNTS[k][0], regex=True), k, out)
        return out

    return by_unique(names.astype("string").fillna(""), find).astype(int)


def loop_trips(
    input_dims: pd.Series,
    block_x: np.ndarray,
    block_y: np.ndarray,
    walks: list[str] | None = None,
    blocks: np.ndarray | None = None,
) -> np.ndarray:
    """(ops, 2): (rows, steps a row) of each op's loop walk (module docstring) over its first
    input: ``nchw`` ceil(N / blockDim.y) rows of ceil(HW / blockDim.x) steps (the default);
    ``row`` one row of ceil(elements / blocks / blockDim.x) steps; ``row_vec4`` ceil(elements /
    blocks / (4 blockDim.x blockDim.y)). NaN where the dims are not recorded."""
    out = np.full((len(input_dims), 2), np.nan)
    bx = np.maximum(np.nan_to_num(np.asarray(block_x, dtype=float), nan=1.0), 1.0)
    by = np.maximum(np.nan_to_num(np.asarray(block_y, dtype=float), nan=1.0), 1.0)
    nb = np.ones(len(input_dims)) if blocks is None else np.asarray(blocks, dtype=float)
    nb = np.maximum(np.nan_to_num(nb, nan=1.0), 1.0)
    for i, text in enumerate(input_dims.astype("string").fillna("")):
        dims = parsed_input_dims(str(text))
        first = dims[0] if dims else None
        if not isinstance(first, list) or len(first) < 2:
            continue
        if not all(isinstance(d, int) and d >= 0 for d in first):
            continue
        walk = "nchw" if walks is None else walks[i]
        if walk == "nchw":
            out[i] = (math.ceil(first[0] / by[i]), math.ceil(math.prod(first[2:]) / bx[i]))
            continue
        row = math.prod(first) / nb[i]
        per_step = bx[i] if walk == "row" else 4.0 * bx[i] * by[i]
        out[i] = (1.0, math.ceil(row / per_step - 1e-9))
    return out


def cdna_issue_seconds(
    ops: pd.DataFrame,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds the SIMDs of the busiest CU take to issue a counted kernel's instructions
    (KERNEL_COUNTS): its ceil(B / N_cu) blocks (B / N_cu under ``sm_utilization``) in rounds of
    ``resident`` blocks, each round's waves spread over the 4 SIMDs, at :func:`simd_cycles` of a
    wave's sections for the op's loop trips, plus wave 0's extra per block. ``launch``: (blocks,
    threads per block, resident blocks per CU). Zero for other kernels, ops without recorded
    dims, and generations outside AMD_ISSUE_GENERATIONS (CDNA2: CDNA2_COUNTED only)."""
    n = len(ops)
    out = np.zeros(n)
    if generation not in AMD_ISSUE_GENERATIONS | {"cdna2"} or n == 0:
        return out
    which = kernel_index(_strings(ops, "name"))
    rows = np.flatnonzero(which >= 0)
    if generation == "cdna2":  # CDNA2_COUNTED: the counts checked against a gfx90a compile
        rows = np.array([i for i in rows if any(KERNEL_COUNTS[which[i]][1] is c for c in
                                                CDNA2_COUNTED)], dtype=int)  # fmt: skip
    if not rows.size:
        return out
    blocks, threads, resident = (np.asarray(a, dtype=float)[rows] for a in launch)
    walks = [KERNEL_COUNTS[which[i]][1].walk for i in rows]
    dims = _strings(ops, "input_dims").iloc[rows]
    block_x, block_y = _column(ops, "block_x", np.nan)[rows], _column(ops, "block_y", np.nan)[rows]
    trips = loop_trips(dims, block_x, block_y, walks, blocks)
    ideal = "sm_utilization" in idealize
    rounds, in_round, waves = cu_rounds(np.maximum(blocks, 1.0), resident, threads, gpu.sms, ideal)
    for j, i in enumerate(rows):
        if not np.all(np.isfinite(trips[j])):
            continue
        count = KERNEL_COUNTS[which[i]][1]
        cycles = simd_cycles(count.per_wave(*trips[j]), waves[j])
        first = in_round[j] / SIMDS_PER_CU  # wave 0 of each block: one a SIMD at most per 4
        cycles += simd_cycles(count.first_wave, first if ideal else math.ceil(first - 1e-9))
        out[i] = rounds[j] * cycles / (gpu.clock_mhz * 1e6)
    return out


__all__ = [
    "AMD_ISSUE_GENERATIONS",
    "cu_rounds",
    "BN_BACKWARD_COUNT",
    "BN_STATS_COUNT",
    "KERNEL_COUNTS",
    "KernelCount",
    "ROWWISE_MOMENTS_COUNT",
    "VECTORIZED_LAYER_NORM_COUNT",
    "VECTORIZED_RMS_NORM_COUNT",
    "QUARTER_RATE_CYCLES",
    "SALU_CYCLES",
    "SIMDS_PER_CU",
    "VALU_CYCLES",
    "WAVE_SIZE",
    "WaveCount",
    "cdna_issue_seconds",
    "kernel_index",
    "loop_trips",
    "simd_cycles",
]
