"""A kernel's fixed cost in series with its work, on GPUs whose kernel boundaries maintain several L2s.

:mod:`archsim.perf.kernel` floors every kernel at the GPU's shortest kernel T_min (``kernel_min_us``:
the median of a fixture's one-workgroup kernels) and otherwise takes its terms' body,
max(T_min, body): the fixed cost (dispatch, the boundary's cache maintenance, completion) is taken to
overlap the work. On CDNA3 (MI300X, gfx942) it cannot. A kernel's workgroups spread over eight XCDs,
each with its own 4 MB L2 that is not coherent with the others (AMD CDNA3 whitepaper: 4 MB L2 per
XCD; AMD ROCm GPU partitioning docs: in SPX mode one device spans every XCD), so an agent-scope
acquire invalidates and an agent-scope release WRITES BACK each XCD's L2: LLVM AMDGPUUsage, memory
model GFX942 (``buffer_inv sc1`` / ``buffer_wbl2 sc1``; SIMemoryLegalizer.cpp
SIGfx940CacheControl::insertRelease: "buffer_wbl2 sc1=1 ensures that dirty L2 lines are visible to
CUs that don't use the same L2"). On GFX90A (CDNA2) and on NVIDIA GPUs one L2 serves the whole
device: "Since all work-groups on the same agent share the same L2, no L2 invalidation or writeback
is required for coherence" (AMDGPUUsage, memory model GFX90A, reviews.llvm.org D105137). A kernel
dispatch is such an acquire at its start and a release at its end (HSA Platform System Architecture
Specification, AQL kernel dispatch packet header: acquire and release fence scopes), so on CDNA3 the
invalidate precedes the first wave and the writeback follows the last store: in series with the
kernel's work. The same additive form is what te42kyfo/gpu-benches fits to its repeated small
stream kernels on every GPU it measures (``gpu-small-kernels/readme.md``: performance V / (a + V /
b), i.e. a time of a startup overhead a plus V / b). So on CDNA3

    T = max(T_min, T_fixed + body),   T_fixed = max(T_min - body_min, 0)

where body_min is what the terms give the one-workgroup kernels that set T_min, computed from the
model (:func:`archsim.perf.pipeline_fill.minimal_kernel_seconds`): their loads all fit in one round,
so they return one round trip L after dispatch and the stores' acknowledgement follows one L later,
2 L (the fill's first-load trip is the Little's-law term's one round, counted once). Such a kernel
stays at T_min; a streaming kernel pays T_fixed on top of its transfer. T_fixed is not a published
figure: it is the preset's floor (in sample where the accuracy table says so) less two published
pointer chases (MI300X: 2.0 - 2 x 0.434 = 1.13 us). It is the card's: a what-if ``--set
gpu.dram_latency_ns`` keeps it (archsim.perf.kernel takes ``gpu.card_latency_ns``), else a lower
latency grew it and made compute-bound kernels slower (tests/test_physics_ops.py). (The fill
once counted a latency-bound kernel's first round trip twice, which made body_min 3 L and T_fixed
0.70 us.) A few-block reduction chain
(:mod:`archsim.perf.memory_parallelism`) already puts the fixed cost in series with its round trips
(T_min - L + steps); with the fixed cost carried here, the chain keeps only its round trips (the
terms see a floor of body_min = 2 L, so the chain costs L + steps) and the sum is what it was; the
same holds for a traced GEMM's serial prologue (archsim.perf.gemm_latency: T_min - L + rounds x L).

Tried on every generation (the same form, with the earlier 3 L body_min): the H100 TimeSformer's
per-kernel median 24% -> 21%, A100 ``train_shapes`` 40% -> 38%, MI250 MLP 51% -> 46%, but the
fixtures whose work is inferred from the launch grid moved away (MI210 13% -> 36%, total +6% ->
+22%; A100 AlexNet 25% -> 41%; RTX 2080 Ti 17% -> 26%) and V100 ResNet-50 lost 267 of its 5,557
kernels within 30% (its 1-us element-wise kernels are under the preset's 1.25-us floor already).
GPUs with one L2 have no documented boundary step that cannot overlap, so they keep max(T_min, body).
That leaves the model not uniform there, and it says so: on every GPU a traced tiled GEMM's prologue
(archsim.perf.gemm_latency) and a few-block reduction chain (archsim.perf.memory_parallelism) put
T_min - L in series with their dependent round trips, while a streaming kernel on a one-L2 GPU keeps
the fixed cost overlapped. No measurement here separates the two (the fixtures that moved away above
are the ones whose work is guessed from the grid, so they cannot decide it either way).

Pure functions; the breakdown's ``sm_utilization`` idealization removes the fixed cost with the
floor (archsim.perf.kernel).
"""

from __future__ import annotations

import numpy as np

from archsim.perf.pipeline_fill import minimal_kernel_seconds

# Generations whose devices span several non-coherent L2s (module docstring): CDNA3's eight XCDs.
SERIAL_FIXED_COST_GENERATIONS = frozenset({"cdna3"})


def serial_fixed_cost(generation: str) -> bool:
    """Whether a kernel's fixed cost runs in series with its work on GPUs of ``generation``."""
    return generation in SERIAL_FIXED_COST_GENERATIONS


def fixed_cost_seconds(kernel_min_s: float, dram_latency_s: float) -> float:
    """T_fixed: the floor less the terms' body of the one-workgroup kernel that sets it
    (archsim.perf.pipeline_fill.minimal_kernel_seconds: 2 L), >= 0."""
    if kernel_min_s < 0 or dram_latency_s < 0:
        raise ValueError("kernel_min_s and dram_latency_s must be >= 0")
    return max(kernel_min_s - minimal_kernel_seconds(dram_latency_s), 0.0)


def terms_floor_us(kernel_min_us: float, dram_latency_ns: float) -> float:
    """The floor the kernel terms see when the kernel carries its fixed cost: the minimal kernel's
    body (never above the preset's floor), so a few-block chain (archsim.perf.memory_parallelism:
    floor - L + steps) keeps its round trips and the fixed cost is counted once."""
    return min(kernel_min_us, minimal_kernel_seconds(dram_latency_ns * 1e-9) * 1e6)


def with_fixed_cost(body_s: np.ndarray, floor_s: np.ndarray, fixed_s: np.ndarray) -> np.ndarray:
    """max(floor, fixed + body), elementwise: never below the floor, never faster as body grows."""
    body = np.asarray(body_s, dtype=float)
    return np.maximum(np.asarray(floor_s, dtype=float), np.asarray(fixed_s, dtype=float) + body)


__all__ = [
    "SERIAL_FIXED_COST_GENERATIONS",
    "fixed_cost_seconds",
    "serial_fixed_cost",
    "terms_floor_us",
    "with_fixed_cost",
]
