"""Instruction issue of TorchInductor's Triton kernels on AMD CDNA3, counted from Triton's compile.

Two families of SD3.5's Inductor kernels on the MI300X run longer than their DRAM traffic needs: the
looped Welford layer norms (``triton_red_fused_..._native_layer_norm_...``, one 2,432-column bf16
row a 256-thread workgroup) and the bias + tanh-GELU epilogues
(``triton_poi_fused_addmm_gelu_view_...``). Their element work is long on a SIMD: the Welford update
divides (``triton_helpers.welford_reduce``: ``mean + delta / new_weight``, an IEEE f32 division,
v_div_scale x 2, v_rcp_f32, FMAs, v_div_fmas, v_div_fixup), the bf16 stores round to nearest even in
VALU code (gfx942 has no f32 -> bf16 conversion instruction), and ``libdevice.tanh`` is ROCm's
``__ocml_tanh_f32``, a polynomial for small inputs and ``1 - 2 / (exp(2x) + 1)`` otherwise, both
executed by a wave whose lanes hold both kinds (a GELU input almost always does).

Counts. The kernels were written as Inductor generates them (torch/_inductor/codegen/triton.py:
static ``xnumel``/``r0_numel``, ``for r0_offset in range(0, r0_numel, R0_BLOCK)``, the Welford
loop and the second normalizing loop of archsim.perf.inductor_loops, ``tl.where`` on the running
statistics, ``triton_helpers.welford`` as the final reduction; a pointwise kernel's
``tl.load(in_out_ptr0 + x2)``, the bias load at ``x2 % 9728``, the tanh-GELU decomposition
``0.5 x (1 + tanh(0.79788456 (x + 0.044715 x^3)))`` of torch/_decomp, with SD3.5's
``FeedForward(activation_fn="gelu-approximate")`` from diffusers' JointTransformerBlock), with the
trace's launch configuration (``kernel_kwargs`` XBLOCK/R0_BLOCK, ``num_warps``, ``num_stages``,
16-byte aligned pointers as Inductor declares them), compiled by Triton 3.9.0's AMD backend for
``GPUTarget("hip", "gfx942", 64)`` (FP fusion on, its default) and counted from ``asm["amdgcn"]``
per wave, each instruction classed as in archsim.perf.issue_rate_amd (full-rate VALU;
quarter-rate: v_rcp/v_rsq/v_exp_f32 and v_cvt_i32_f32, LLVM's ``WriteTrans32``/``WriteFloatCvt``;
SALU; others that take an issue turn: vector memory, LDS, scalar loads, waits, branches). LLVM
unrolls the short loops completely (2 or 3 steps), so a wave executes the listing once, except
blocks that ``s_cbranch_execz`` skips when no lane of the wave is active:

- layer norm, 256 threads (4 waves), bf16, R0_BLOCK / 256 = e columns a lane a step. A step of
  both loops (loads, the Welford update with its division, the reload, normalization, rounding and
  store) costs the same at every step, so a wave's count is ``base + steps x step``, less
  ``tail_skip`` for a wave with no lane in the last step's columns (2,432 - (steps - 1) x R0_BLOCK
  of them, 64 e a wave: at r0_numel 2,432 1 of 4 waves has lanes there at R0_BLOCK 2,048, 2 of 4 at
  1,024): those waves skip that step's masked loads and stores and the second loop's whole last
  step. (VALU, quarter, SALU, other) a wave, from r0_numel 2,432 and 4,480 (R0_BLOCK 2,048: 2 and 3
  steps) and 2,432, 3,456, 4,480 (1,024: 3, 4, 5 steps): R0_BLOCK 2,048: step 373, 8, 17, 28,
  base 155, 5, 29, 31, tail_skip 166, 0, 4, 17; R0_BLOCK 1,024: step 195.5, 4, 18, 30.5 (the mean of
  its two differences, 189 and 202 VALU), base 169.5, 8, 27, 35.5, tail_skip 90, 0, 5, 20. They give
  the r0_numel 1,280 and 384 listings' all-lane counts within 16 VALU (3%), their wave means within
  25 (5%, above). Triton keeps a loop instead of unrolling
  from 4 steps (2,048) on; its body is the step above. Counted on the 8-pointer variant
  (``..._native_layer_norm_split_unsqueeze_view_16``: x in place, two modulation vectors with their
  biases, the attention projection and its bias, the output). The 6-pointer variant (``_19``: one
  modulation vector for gate, scale and shift) counts within 3 VALU of it (903 and 736 at R0_BLOCK
  2,048, 759 and 668 at 1,024); the 5-pointer one (``_6``, 4 kernels of SD3.5's 600: nothing
  stored in place) 17% fewer (750 and 617, 636 and 563), priced at these counts all the same.
- tanh-GELU, bf16, e elements a lane (XBLOCK / threads): e = 1, 4, 8, 16: 53, 157, 303, 606 VALU,
  3, 12, 24, 48 quarter-rate, 12, 41, 77, 149 SALU, 15, 29, 45, 82 other (e = 4, 8, 16 with 4 waves
  a workgroup: within 4 VALU of these). Linear in e between (and beyond) the counted points.

Pricing: archsim.perf.issue_rate_amd's :func:`simd_cycles` (4 cycles a VALU instruction, 16 a
quarter-rate one, the CU's scalar unit a quarter per SIMD, one wave's own issue turns) for the waves
the busiest CU's SIMDs hold: ceil(B / N_cu) workgroups x waves each over 4 SIMDs. A throughput floor
like archsim.perf.issue_rate's: archsim.perf.terms takes the larger of it and the math term.
Other kernels (fused backward ones too), dtypes, shapes and generations get 0: the counts stand
for gfx942 code only.
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
from archsim.perf.inductor_loops import looped_norm_rows
from archsim.perf.issue_rate_amd import (
    AMD_ISSUE_GENERATIONS,
    SIMDS_PER_CU,
    WAVE_SIZE,
    WaveCount,
    simd_cycles,
)

TRITON_VERSION = "3.9.0"  # the compiler the counts come from (module docstring)


@dataclass(frozen=True)
class NormCount:
    """A looped layer norm's wave (module docstring): ``base + steps x step``, less ``tail_skip``
    for a wave with no lane in the last step."""

    base: WaveCount
    step: WaveCount
    tail_skip: WaveCount


# (R0_BLOCK, threads) -> counts of the 8-pointer SD3.5 layer norm (module docstring)
LOOPED_NORM_COUNTS: dict[tuple[int, int], NormCount] = {
    (2048, 256): NormCount(WaveCount(155, 5, 29, 31), WaveCount(373, 8, 17, 28),
                           WaveCount(166, 0, 4, 17)),
    (1024, 256): NormCount(WaveCount(169.5, 8, 27, 35.5), WaveCount(195.5, 4, 18, 30.5),
                           WaveCount(90, 0, 5, 20)),
}  # fmt: skip
# elements a lane -> counts of a wave (module docstring)
GELU_TANH_COUNTS: dict[int, WaveCount] = {
    1: WaveCount(53, 3, 12, 15),
    4: WaveCount(157, 12, 41, 29),
    8: WaveCount(303, 24, 77, 45),
    16: WaveCount(606, 48, 149, 82),
}
# forward kernels only: a fused gelu_backward or native_layer_norm_backward does other math
GELU_PATTERN = r"^triton_poi_fused(?!\w*backward)\w*_addmm_gelu"
BACKWARD_PATTERN = r"backward"
COUNTED_DTYPES = frozenset({"bfloat16"})


def gelu_wave_count(elements_per_lane: float) -> WaveCount:
    """GELU_TANH_COUNTS at ``elements_per_lane``, linear between the counted points and along the
    last segment's slope beyond them."""
    keys = sorted(GELU_TANH_COUNTS)
    e = float(elements_per_lane)
    lo, hi = (keys[-2], keys[-1]) if e >= keys[-1] else (keys[0], keys[1])
    for a, b in zip(keys, keys[1:], strict=False):
        if a <= e <= b:
            lo, hi = a, b
            break
    t = (e - lo) / (hi - lo)
    p, q = GELU_TANH_COUNTS[lo], GELU_TANH_COUNTS[hi]
    return p.times(1.0 - t) + q.times(t)


def norm_wave_count(r0_block: int, r0_numel: int, threads: int) -> WaveCount | None:
    """The mean count of a workgroup's waves for a counted (R0_BLOCK, threads) and r0_numel >= 1
    (module docstring), or None."""
    counts = LOOPED_NORM_COUNTS.get((int(r0_block), int(threads)))
    if counts is None or r0_numel < 1:
        return None
    waves = max(int(threads) // WAVE_SIZE, 1)
    steps = -(-int(r0_numel) // int(r0_block))
    tail = r0_numel - (steps - 1) * r0_block
    per_wave_columns = r0_block // threads * WAVE_SIZE
    idle = waves - min(-(-tail // per_wave_columns), waves)
    full = counts.base + counts.step.times(steps)
    return full + counts.tail_skip.times(-idle / waves)


def _first_dims(input_dims: pd.Series) -> list[list[int] | None]:
    out: list[list[int] | None] = []
    for text in input_dims.astype("string").fillna(""):
        try:
            dims = [d for d in parsed_input_dims(str(text)) if isinstance(d, list) and d]
        except (ValueError, TypeError, KeyError, IndexError):
            dims = []
        first = dims[0] if dims else None
        ok = first is not None and all(isinstance(d, int) and d > 0 for d in first)
        out.append(first if ok else None)
    return out


def _wave_counts(ops: pd.DataFrame, blocks: np.ndarray, threads: np.ndarray) -> list:
    """A WaveCount per op where a counted kernel, shape and dtype match, else None."""
    names = _strings(ops, "name")
    # looped layer norms that normalize and store their rows (archsim.perf.inductor_loops)
    passes, _ = looped_norm_rows(names, _strings(ops, "input_dims"), _column(ops, "bytes_read"),
                                 _strings(ops, "dtype"))  # fmt: skip
    backward = by_unique(names, lambda u: u.str.contains(BACKWARD_PATTERN, regex=True)).astype(bool)
    norm = (passes == 2) & ~backward
    gelu = by_unique(names, lambda u: u.str.contains(GELU_PATTERN, regex=True)).astype(bool)
    counted = (norm | gelu) & _strings(ops, "dtype").str.replace("torch.", "").isin(
        list(COUNTED_DTYPES)
    ).to_numpy(bool)
    out: list = [None] * len(ops)
    rows = np.flatnonzero(counted)
    if not rows.size:
        return out
    firsts = _first_dims(_strings(ops, "input_dims").iloc[rows])
    steps = _column(ops, "reduction_loop_steps", np.nan)
    for i, first in zip(rows, firsts, strict=True):
        if first is None or blocks[i] < 1 or threads[i] < 1:
            continue
        elements = math.prod(first)
        if gelu[i]:
            per_lane = elements / (blocks[i] * threads[i])
            if per_lane >= 1:
                out[i] = gelu_wave_count(per_lane)
            continue
        r0_numel = first[-1]  # one workgroup a row (XBLOCK 1): rows x r0_numel elements
        if not np.isfinite(steps[i]) or steps[i] < 1 or elements != r0_numel * blocks[i]:
            continue
        r0_block = 2 ** math.ceil(math.log2(r0_numel / steps[i]))  # R0_BLOCK: a power of two
        if -(-r0_numel // r0_block) == steps[i]:
            out[i] = norm_wave_count(int(r0_block), int(r0_numel), int(threads[i]))
    return out


def triton_issue_seconds(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    threads: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds the busiest CU's SIMDs take to issue a counted Inductor kernel's instructions
    (module docstring): ceil(B / N_cu) workgroups (B / N_cu under ``sm_utilization``) x waves
    each, over 4 SIMDs, at :func:`simd_cycles` of the kernel's mean wave. Zero elsewhere."""
    n = len(ops)
    out = np.zeros(n)
    if generation not in AMD_ISSUE_GENERATIONS or n == 0:
        return out
    blocks = np.nan_to_num(np.asarray(blocks, dtype=float), nan=0.0)
    threads = np.nan_to_num(np.asarray(threads, dtype=float), nan=0.0)
    counts = _wave_counts(ops, blocks, threads)
    for i, count in enumerate(counts):
        if count is None:
            continue
        per_cu = blocks[i] / gpu.sms
        waves = per_cu * math.ceil(threads[i] / WAVE_SIZE) / SIMDS_PER_CU
        if "sm_utilization" not in idealize:
            waves = math.ceil(math.ceil(per_cu) * math.ceil(threads[i] / WAVE_SIZE) / SIMDS_PER_CU)
        out[i] = simd_cycles(count, waves) / (gpu.clock_mhz * 1e6)
    return out


__all__ = [
    "COUNTED_DTYPES",
    "GELU_PATTERN",
    "GELU_TANH_COUNTS",
    "LOOPED_NORM_COUNTS",
    "NormCount",
    "TRITON_VERSION",
    "gelu_wave_count",
    "norm_wave_count",
    "triton_issue_seconds",
]
