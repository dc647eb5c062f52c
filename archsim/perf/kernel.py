"""GPU kernel-time model: seconds per op on a target GPU (docs/ACCURACY.md: how well it does).

The pieces, by responsibility: :mod:`archsim.perf.terms` (the time terms of a kernel: math, tail and
underfill, DRAM bandwidth and latency, L2), :mod:`archsim.perf.efficiency` (achieved fractions of
peak from published microbenchmarks, so the model predicts achieved time, not a lower bound),
:mod:`archsim.perf.copies` (memcpy/memset), :mod:`archsim.perf.classes` (calibration classes). This
module combines them:

    T = T_launch_gpu + max(T_comp, T_bw, T_lat, T_mem, T_min) / calibration[class]

T_min is the GPU's shortest kernel (gpu.kernel_min_us, measured in the fixtures); on CDNA3, whose
kernel boundaries write back and invalidate eight L2s, its fixed part runs in series with the work:
max(T_min, T_fixed + max(T_comp, T_bw, T_lat, T_mem)) (:mod:`archsim.perf.dispatch_overhead`).
``calibration`` is an optional per-class correction fitted by archsim.perf.calibrate (at most 1). A
kernel costs the same whatever the idle time before it (:mod:`archsim.perf.idle_clock` says why).

Ops measured on a real GPU are the measured time scaled by model(target) / model(source) (Habitat's
idea: the model only has to get ratios right). Ops captured on a CPU are predicted from F, D and a block
count estimated from the output size (archsim.perf.blocks). The CPU-side launch cost is a separate
figure, :func:`cpu_launch_seconds`, which the simulator charges to the launching thread.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.hw.schema import GpuConfig, HardwareConfig
from archsim.perf.batch import BATCH_PHASES, scale_ops_to_batch
from archsim.perf.classes import (
    AUXILIARY_SUFFIX,
    INFERRED_WORK_SUFFIX,
    POOLING_SUFFIX,
    efficiency_class,
    work_inferred,
)
from archsim.perf.collectives import repeated_collectives
from archsim.perf.columns import MEASURED_KINDS
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.copies import (
    PAGEABLE_STAGING_CHUNK_BYTES,
    copy_seconds,
    host_link_seconds,
    on_device_copy,
)
from archsim.perf.dispatch_overhead import (
    fixed_cost_seconds,
    serial_fixed_cost,
    terms_floor_us,
    with_fixed_cost,
)
from archsim.perf.efficiency import generation
from archsim.perf.launch import launch_calls
from archsim.perf.launch_terms import (
    ENGINE_SATURATING_THREADS_PER_SM,
    SATURATING_THREADS_PER_SM,
    body_of,
)
from archsim.perf.math_units import HALF_DTYPES, TENSOR_CORE_NAME_PATTERN, math_rate_per_sm
from archsim.perf.source import source_hw_for_gpu_name, source_hw_for_trace
from archsim.perf.terms import IDEALIZATIONS, kernel_terms, launch_shape
from archsim.trace.kernel_dtype import with_named_dtypes

_US = 1e-6


def _require_gpu(hw: HardwareConfig) -> GpuConfig:
    if hw.gpu is None:
        raise ArchsimError(f"hardware config {hw.name}: has no GPU (gpu: null) to run kernels on")
    return hw.gpu


def body_seconds(
    ops: pd.DataFrame,
    hw: HardwareConfig,
    idealize: frozenset[str] = frozenset(),
    efficiency: Mapping[str, float] | None = None,
) -> np.ndarray:
    """Model time of each op on ``hw`` without the GPU launch latency: the achieved time of the terms
    (archsim.perf.terms, archsim.perf.efficiency), floored, divided by the calibrated ``efficiency``."""
    unknown = set(idealize) - set(IDEALIZATIONS)
    if unknown:
        raise ArchsimError(
            f"idealize: unknown component(s) {sorted(unknown)}; expected {IDEALIZATIONS}"
        )
    gpu = _require_gpu(hw)
    ops = ops.reset_index(drop=True)
    # Kernels whose work the launch grid must stand for (no shapes recorded) carry no dtype either:
    # the one their name spells sizes their elements and picks their math units
    # (archsim.trace.kernel_dtype; "" where the name says nothing, as before).
    ops = with_named_dtypes(ops, work_inferred(ops))
    # CDNA3 kernels carry their fixed cost in series with their work (archsim.perf.dispatch_overhead):
    # the terms see the minimal kernel's body as the floor, so a few-block chain counts it once.
    serial = serial_fixed_cost(generation(gpu, hw.name)) and "sm_utilization" not in idealize
    floor_us = terms_floor_us(gpu.kernel_min_us, gpu.dram_latency_ns)
    terms_gpu = gpu.model_copy(update={"kernel_min_us": floor_us}) if serial else gpu
    terms = kernel_terms(ops, terms_gpu, frozenset(idealize), hw.name)
    kernel_s = body_of(terms)
    kind = _strings(ops, "kind")
    is_copy = kind.isin(["memcpy", "memset"]).to_numpy(dtype=bool)
    seconds = np.where(is_copy, copy_seconds(ops, hw, gpu, frozenset(idealize)), kernel_s)
    on_device = ~is_copy | on_device_copy(ops)
    if "sm_utilization" not in idealize:
        # The per-kernel floor does not shrink when work spreads over more SMs: under perfect SM
        # utilization it is gone (one SM's floor divided by N SMs is not the floor of any kernel).
        floor_s = gpu.kernel_min_us * _US
        if serial:
            # the card's fixed cost: its floor less ITS round trips (a what-if latency keeps it)
            fixed_s = fixed_cost_seconds(gpu.kernel_min_us * _US, gpu.card_latency_ns * 1e-9)
            seconds = np.where(is_copy, seconds, with_fixed_cost(seconds, floor_s, fixed_s))
        seconds = np.where(on_device, np.maximum(seconds, floor_s), seconds)
    return _apply_efficiency(ops, seconds, efficiency)


def _apply_efficiency(
    ops: pd.DataFrame, seconds: np.ndarray, efficiency: Mapping[str, float] | None
) -> np.ndarray:
    if not efficiency:
        return seconds
    # classes the calibration did not see keep the model's own bound (efficiency 1)
    eff = efficiency_class(ops).map(lambda c: efficiency.get(c, 1.0)).to_numpy(dtype=float)
    return seconds / np.clip(eff, 1e-6, None)


def _source_view(ops: pd.DataFrame) -> pd.DataFrame:
    """The ops as measured (undoing scale_ops_to_batch), for the source side of the ratio."""
    view = ops
    for column in ("flops", "bytes_read", "bytes_written", "grid_x"):
        original = f"measured_{column}"
        if original in ops.columns:
            if view is ops:
                view = ops.copy()
            view[column] = ops[original]
    return view


# NCCL/RCCL collective kernels: ncclKernel_*, ncclDevKernel_*, ncclBroadcastRingLLKernel_*, rccl...
_COLLECTIVE_KERNEL = r"\bnccl\w*Kernel|\brccl"


def predict_op_seconds(
    ops: pd.DataFrame,
    target: HardwareConfig,
    source: HardwareConfig | None = None,
    idealize: frozenset[str] = frozenset(),
    efficiency: Mapping[str, float] | None = None,
    include_launch: bool = True,
) -> np.ndarray:
    """Seconds per op on one GPU of ``target`` (GPU side; the CPU-side launch cost is separate).

    With ``source`` (the GPU the trace was measured on), kernel/memcpy/memset ops with a measured
    duration are scaled by model(target, idealize) / model(source). Other ops (CPU-captured, or no
    source given) are predicted from FLOPs, bytes and blocks, divided by the calibrated efficiency of
    their class. ``include_launch`` adds the target's GPU-side launch latency to every op. A CPU
    capture's collective is priced once, as its caller's c10d op (archsim.perf.collectives).
    """
    ops = ops.reset_index(drop=True)
    gpu = _require_gpu(target)
    target_model = body_seconds(ops, target, idealize)
    predicted = _apply_efficiency(ops, target_model, efficiency)
    if source is not None:
        measured_us = _column(ops, "dur_us", np.nan)
        kind = _strings(ops, "kind")
        anchored = (
            kind.isin(MEASURED_KINDS).to_numpy(dtype=bool)
            & np.isfinite(measured_us)
            & (measured_us > 0)
        )
        if anchored.any():
            source_model = body_seconds(_source_view(ops), source)
            with np.errstate(divide="ignore", invalid="ignore"):
                ratio = np.where(source_model > 0, target_model / source_model, 1.0)
            # Collectives wait on GPU-to-GPU links and peers, which no preset describes: they keep
            # their measured time. The SM model's ratio had a V100 run fixture a100_train_shapes'
            # 60 ncclKernel_SendRecv (163.5 ms on the A100s) in 88.8 ms, faster over slower NVLink.
            collective = _strings(ops, "name").str.contains(_COLLECTIVE_KERNEL).to_numpy(bool)
            ratio = np.where(collective, 1.0, ratio)
            predicted = np.where(anchored, measured_us * _US * ratio, predicted)
    if include_launch:
        predicted = predicted + gpu.launch_latency_us * _US
    return np.where(repeated_collectives(ops), 0.0, predicted)


def cpu_launch_seconds(ops: pd.DataFrame, target: HardwareConfig) -> np.ndarray:
    """CPU time the launching thread spends per op (cudaLaunchKernel/cudaMemcpyAsync), for the
    simulator; the kernels of one graph launch share its one call (archsim.perf.launch)."""
    gpu = _require_gpu(target)
    return launch_calls(ops) * (gpu.launch_overhead_us * _US)


__all__ = [
    "AUXILIARY_SUFFIX",
    "BATCH_PHASES",
    "ENGINE_SATURATING_THREADS_PER_SM",
    "HALF_DTYPES",
    "IDEALIZATIONS",
    "INFERRED_WORK_SUFFIX",
    "MEASURED_KINDS",
    "PAGEABLE_STAGING_CHUNK_BYTES",
    "POOLING_SUFFIX",
    "SATURATING_THREADS_PER_SM",
    "TENSOR_CORE_NAME_PATTERN",
    "body_seconds",
    "copy_seconds",
    "cpu_launch_seconds",
    "efficiency_class",
    "host_link_seconds",
    "kernel_terms",
    "launch_shape",
    "math_rate_per_sm",
    "predict_op_seconds",
    "scale_ops_to_batch",
    "source_hw_for_gpu_name",
    "source_hw_for_trace",
    "work_inferred",
]
