"""Instruction issue of PyTorch's ROCm element-wise loops on AMD CDNA, counted from compiled gfx9 ISA.

ROCm PyTorch launches a non-contiguous TensorIterator loop (a broadcast bias add, a copy between
layouts, a mixed-dtype multiply) as ``elementwise_kernel_manual_unroll<128, vt>``
(pytorch/pytorch aten/src/ATen/native/cuda/CUDALoops.cuh, ``USE_ROCM`` branches of
``gpu_kernel_impl_nocast`` and ``type_specialized_broadcast_kernel_launcher``): an interior
thread makes one call ``f(idx, true)`` that computes the offsets of its ``vt`` elements (``idx +
128 k``) with ``OffsetCalculator::get`` (aten/src/ATen/cuda/detail/OffsetCalculator.cuh; one
``IntDivider::divmod`` per coalesced dim, IntegerDivider.cuh: a 32-bit multiply-high, add and
shift, then a multiply-subtract; then one multiply(-add) per operand and dim), loads them, applies
the functor in float (bf16 widened by a shift, rounded back by ``round_to_nearest_even``,
c10/util/BFloat16.h) and stores them. Contiguous operands take ``vectorized_elementwise_kernel<8>``
(16 elements a thread on gfx942, ``elems_per_thread`` 8 elsewhere; 8-wide ``aligned_vector``
loads, MemoryAccess.cuh).

Counts (``WaveCount`` of archsim.perf.issue_rate_amd, per interior thread call, i.e. per wave):
those loops copied into standalone HIP sources with the same expressions and types (functors
``CUDAFunctor_add<BFloat16>``: ``self + alpha * other`` in float, ``BinaryFunctor<BFloat16, ...,
MulFunctor<float>>``, the bf16 ``direct_copy_kernel_cuda`` lambda, the ``<float, BFloat16, float>``
broadcast multiply; ``AUnaryFunctor``/``BUnaryFunctor`` multiply, ``CUDAFunctorOnSelf_add``),
compiled by clang 16 (``-x hip --cuda-device-only -nogpulib -nogpuinc -O3 -S``,
``--offload-arch=gfx940`` for CDNA3, ``gfx90a`` for CDNA2), each VALU instruction classed by
``llvm-mca-16 -instruction-info`` for the same target (every instruction here is full rate: LLVM's
gfx90a/gfx940 scheduling models give 32-bit integer multiplies and ``v_mad_u64_u32`` full rate,
``WriteIntMul`` 1; none of the quarter-rate conversions or transcendentals occur). gfx942 (MI300X)
is not a clang 16 target; it has gfx940's ISA and scheduling model (archsim.perf.issue_rate_amd).
``OffsetCalculator::get`` has, on ROCm, a straight-line path for 1 and 2 coalesced dims (pytorch
PR 161700, "OffsetCalc Unroll Optimization": "our compiler is generating inefficient code for the
offsetCalc") and otherwise a loop over ``MAX_DIMS`` 16 that clang 16 does not unroll, reading the
divisors from a private copy of the functor: only the 1- and 2-dim paths are counted. Per call
(manual_unroll, vt 8 bf16; vt 4 for the broadcast multiply), full-rate VALU / SALU / other:

======================  ============  ============
loop, functor            1 dim         2 dims
======================  ============  ============
add bf16 (vt 8)          137 / 1 / 42  201 / 1 / 47
mul bf16 (vt 8)          137 / 1 / 40  201 / 2 / 45
copy bf16 (vt 8)         64 / 0 / 30   120 / 0 / 31
f32 = bf16 x f32 (vt 4)  44 / 0 / 27   76 / 0 / 29
======================  ============  ============

(gfx90a: the same VALU, 0-6 more "other"). ``vectorized_elementwise_kernel<8>`` per thread:
add/mul 140 VALU for 16 elements on gfx940 (66 for 8 on gfx90a), unary multiply/add 121-123.

Priced as archsim.perf.issue_rate_amd prices a wave (:func:`simd_cycles`: 4 cycles a VALU
instruction on a 16-lane SIMD, one issue turn per SIMD every 4 cycles): the busiest CU's
interior blocks (the last block, which may take the bounds-checked path, is left out) in rounds of
its resident blocks, each round's waves over its 4 SIMDs. At these rates it is a floor that binds
no kernel of the fixtures: MI300X SD3.5's largest bias add ([1,256,1024,1024] + [1,256,1,1] bf16,
262,144 blocks) issues in 165 us against 270 us of DRAM traffic in the model and 393 measured;
its vectorized adds issue in a fifth of their transfer time.
"""

from __future__ import annotations

import json
import re
from functools import lru_cache

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.columns import by_unique
from archsim.perf.columns import strings as _strings
from archsim.perf.issue_rate_amd import WaveCount, cu_rounds, simd_cycles
from archsim.perf.sectors import iteration_order

# clang 16 -O3 listings (module docstring): (generation, loop) -> {coalesced dims: WaveCount(full-
# rate VALU, quarter-rate VALU, SALU, other)}; dims 0 for the vectorized loop (contiguous)
_MANUAL = "void at::native::elementwise_kernel_manual_unroll<128, (\\d+), at::native::"
_NOCAST = _MANUAL + "gpu_kernel_impl_nocast<at::native::"
_BF16_MUL = "BinaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >"  # fmt: skip
_VEC8 = "void at::native::vectorized_elementwise_kernel<8, at::native::"
# (name pattern, loop key, elements a call: vt from the name for manual_unroll, None: by generation)
KERNELS: tuple[tuple[str, str], ...] = (
    (_NOCAST + r"CUDAFunctor_add<c10::BFloat16> >", "mu_add_bf16"),
    (_NOCAST + re.escape(_BF16_MUL) + " >", "mu_mul_bf16"),
    (
        _NOCAST
        + r"direct_copy_kernel_cuda\(at::TensorIteratorBase&\)(::\{lambda\(\)#\d+\}::operator\(\)\(\) const)+::\{lambda\(c10::BFloat16\)#1\}>",
        "mu_copy_bf16",
    ),  # fmt: skip
    (
        _MANUAL
        + r"\(anonymous namespace\)::type_specialized_broadcast_kernel_launcher<1>::apply<at::native::BinaryFunctor<float, float, float, at::native::binary_internal::MulFunctor<float> >",
        "mu_bcast_mul",
    ),  # fmt: skip
    (
        re.escape(_VEC8) + r"CUDAFunctor_add<c10::BFloat16>, std::array<char\*, 3ul> >",
        "vec_add_bf16",
    ),  # fmt: skip
    (re.escape(_VEC8 + _BF16_MUL + ", std::array<char*, 3ul> >"), "vec_mul_bf16"),
    (
        re.escape(_VEC8)
        + r"[AB]UnaryFunctor<c10::BFloat16, c10::BFloat16, c10::BFloat16, at::native::binary_internal::MulFunctor<float> >, std::array<char\*, 2ul> >",
        "vec_scalar_mul_bf16",
    ),  # fmt: skip
    (
        re.escape(_VEC8) + r"CUDAFunctorOnSelf_add<c10::BFloat16>, std::array<char\*, 2ul> >",
        "vec_onself_add_bf16",
    ),  # fmt: skip
)
# elements one call handles: manual_unroll's vt (the name must carry it), vectorized tws per gen
CALL_ELEMENTS = {"mu_add_bf16": 8, "mu_mul_bf16": 8, "mu_copy_bf16": 8, "mu_bcast_mul": 4}
VECTORIZED_ELEMENTS = {"cdna3": 16, "cdna2": 8}  # CUDALoops.cuh: tws 16 on gfx942, else 8 (2-B io)
_W = WaveCount
ELEMENTWISE_COUNTS: dict[tuple[str, str], dict[int, WaveCount]] = {
    ("cdna3", "mu_add_bf16"): {1: _W(137, 0, 1, 42), 2: _W(201, 0, 1, 47)},
    ("cdna3", "mu_mul_bf16"): {1: _W(137, 0, 1, 40), 2: _W(201, 0, 2, 45)},
    ("cdna3", "mu_copy_bf16"): {1: _W(64, 0, 0, 30), 2: _W(120, 0, 0, 31)},
    ("cdna3", "mu_bcast_mul"): {1: _W(44, 0, 0, 27), 2: _W(76, 0, 0, 29)},
    ("cdna3", "vec_add_bf16"): {0: _W(140, 0, 14, 19)},
    ("cdna3", "vec_mul_bf16"): {0: _W(140, 0, 14, 19)},
    ("cdna3", "vec_scalar_mul_bf16"): {0: _W(121, 0, 12, 14)},
    ("cdna3", "vec_onself_add_bf16"): {0: _W(123, 0, 13, 16)},
    ("cdna2", "mu_add_bf16"): {1: _W(137, 0, 1, 48), 2: _W(201, 0, 1, 51)},
    ("cdna2", "mu_mul_bf16"): {1: _W(137, 0, 1, 46), 2: _W(201, 0, 2, 48)},
    ("cdna2", "mu_copy_bf16"): {1: _W(64, 0, 0, 30), 2: _W(120, 0, 0, 31)},
    ("cdna2", "mu_bcast_mul"): {1: _W(44, 0, 0, 27), 2: _W(76, 0, 0, 29)},
    ("cdna2", "vec_add_bf16"): {0: _W(66, 0, 13, 12)},
    ("cdna2", "vec_mul_bf16"): {0: _W(66, 0, 13, 12)},
    ("cdna2", "vec_scalar_mul_bf16"): {0: _W(58, 0, 11, 9)},
    ("cdna2", "vec_onself_add_bf16"): {0: _W(60, 0, 12, 11)},
}
ELEMENTWISE_GENERATIONS = frozenset(g for g, _ in ELEMENTWISE_COUNTS)


def loop_key(name: str) -> tuple[str, int]:
    """(loop key of KERNELS, vt in the name or 0) of a kernel name; ("", 0) when not counted."""
    for pattern, key in KERNELS:
        found = re.match(pattern, name)
        if found:
            vt = int(found.group(1)) if key.startswith("mu_") else 0
            if key.startswith("mu_") and vt != CALL_ELEMENTS[key]:
                return "", 0
            return key, vt
    return "", 0


@lru_cache(maxsize=4096)
def coalesced_iteration_dims(dims_json: str, strides_json: str) -> int:
    """Dims of an element-wise op's TensorIterator after coalescing, from its recorded ``Input
    Dims`` / ``Input Strides`` (arg 0 first: an in-place op's output; a new output is dense in the
    walk order and never keeps two dims apart): tensor operands broadcast to one shape (stride 0
    where broadcast), walked in ``reorder_dimensions``' order (archsim.perf.sectors.
    iteration_order), size-1 dims dropped, a dim merged into the one inside it where every
    operand's stride continues it (``coalesce_dimensions``, TensorIterator.cpp). 0 where the record
    does not give it."""
    try:
        dims, strides = json.loads(dims_json), json.loads(strides_json)
    except (ValueError, TypeError):
        return 0
    if not isinstance(dims, list) or not isinstance(strides, list):
        return 0
    operands = [(d, s) for d, s in zip(dims, strides, strict=False)
                if _ints(d) and _ints(s) and len(d) == len(s)]  # fmt: skip
    if not operands:
        return 0
    rank = max(len(d) for d, _ in operands)
    shape = [1] * rank
    for d, _ in operands:
        for j, n in enumerate([1] * (rank - len(d)) + d):
            if n != 1 and shape[j] not in (1, n):
                return 0
            shape[j] = max(shape[j], n)
    walks = []
    for d, s in operands:
        pad_d, pad_s = [1] * (rank - len(d)) + d, [0] * (rank - len(s)) + s
        walks.append([0 if pad_d[j] == 1 else pad_s[j] for j in range(rank)])
    order = [j for j in reversed(iteration_order([shape] * len(walks), walks)) if shape[j] != 1]
    if not order:
        return 1
    groups, size, inner = 1, shape[order[0]], [w[order[0]] for w in walks]
    for j in order[1:]:
        if all(w[j] == size * st for w, st in zip(walks, inner, strict=True)):
            size *= shape[j]
            continue
        groups, size, inner = groups + 1, shape[j], [w[j] for w in walks]
    return groups


def _ints(v: object) -> bool:
    return isinstance(v, list) and bool(v) and all(type(x) is int for x in v)


def call_count(generation: str, key: str, dims: int) -> WaveCount | None:
    """ELEMENTWISE_COUNTS' wave count of one call of loop ``key`` over ``dims`` coalesced dims
    (any dims for the vectorized loop); None where not counted (module docstring)."""
    table = ELEMENTWISE_COUNTS.get((generation, key))
    if table is None:
        return None
    return table.get(0 if key.startswith("vec_") else dims)


def elementwise_issue_seconds(
    ops: pd.DataFrame,
    launch: tuple[np.ndarray, np.ndarray, np.ndarray],
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str],
) -> np.ndarray:
    """Seconds the SIMDs of the busiest CU take to issue a counted element-wise kernel: its share
    of the B - 1 interior blocks, ceil((B - 1) / N_cu) ((B - 1) / N_cu in one round under
    ``sm_utilization``), in rounds of ``resident`` blocks, each round's waves spread over the 4
    SIMDs at :func:`simd_cycles` of one call. ``launch``: (blocks, threads per block, resident
    blocks per CU). Zero for other kernels, dims not recorded or outside the counted paths, and
    generations without counts."""
    n = len(ops)
    out = np.zeros(n)
    if generation not in ELEMENTWISE_GENERATIONS or n == 0:
        return out
    keys = by_unique(_strings(ops, "name"),
                     lambda u: np.array([loop_key(str(x))[0] for x in u], dtype=object))  # fmt: skip
    rows = np.flatnonzero(keys != "")
    if not rows.size:
        return out
    dims_json, strides_json = (_strings(ops, c).to_numpy(dtype=object)
                               for c in ("input_dims", "input_strides"))  # fmt: skip
    blocks, threads, resident = (np.asarray(a, dtype=float) for a in launch)
    interior = np.maximum(np.nan_to_num(blocks, nan=1.0), 1.0) - 1.0
    rounds, _, waves = cu_rounds(interior, resident, threads, gpu.sms, "sm_utilization" in idealize)
    for i in rows:
        key = str(keys[i])
        dims = 0 if key.startswith("vec_") else coalesced_iteration_dims(str(dims_json[i]),
                                                                          str(strides_json[i]))  # fmt: skip
        count = call_count(generation, key, dims)
        if count is None or interior[i] <= 0:
            continue
        out[i] = rounds[i] * simd_cycles(count, waves[i]) / (gpu.clock_mhz * 1e6)
    return out


__all__ = [
    "CALL_ELEMENTS",
    "ELEMENTWISE_COUNTS",
    "ELEMENTWISE_GENERATIONS",
    "KERNELS",
    "VECTORIZED_ELEMENTS",
    "call_count",
    "coalesced_iteration_dims",
    "elementwise_issue_seconds",
    "loop_key",
]
