"""Device-side time of memcpy and memset: over the host link (HtoD/DtoH/PtoP, pinned or pageable)
or through DRAM (DtoD, memset), at the achievable DRAM bandwidth of archsim.perf.efficiency."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig, HardwareConfig
from archsim.perf.columns import by_unique
from archsim.perf.columns import column as _column
from archsim.perf.columns import strings as _strings
from archsim.perf.efficiency import ACHIEVED, generation

_US = 1e-6


def copy_seconds(
    ops: pd.DataFrame, hw: HardwareConfig, gpu: GpuConfig, idealize: frozenset[str]
) -> np.ndarray:
    """memcpy over the host link (HtoD/DtoH/PtoP) or through DRAM (DtoD); memset writes DRAM."""
    n_bytes = np.maximum(
        np.nan_to_num(_column(ops, "bytes_read"), nan=0.0),
        np.nan_to_num(_column(ops, "bytes_written"), nan=0.0),
    )
    name = _strings(ops, "name")
    kind = _strings(ops, "kind")
    dtod = by_unique(name, lambda u: u.str.contains("DtoD", regex=False)).astype(bool)
    on_device = (kind == "memset").to_numpy(dtype=bool) | dtod
    dram_traffic = np.where(kind == "memset", n_bytes, 2 * n_bytes)  # a copy reads and writes DRAM
    # a device copy is a stream kernel: the generation's achievable DRAM fraction (efficiency.py)
    achieved = ACHIEVED.get(generation(gpu, hw.name), ACHIEVED["default"]).dram
    bw = np.inf if "dram_bw" in idealize else gpu.dram_bw_gbs * 1e9 * achieved
    latency = 0.0 if "dram_latency" in idealize else gpu.dram_latency_ns * 1e-9
    device_s = np.maximum(dram_traffic / bw, latency)
    return np.where(on_device, device_s, host_link_seconds(n_bytes, name, hw))


# A copy from or to pageable host memory goes through the driver's pinned staging buffers: the CPU
# copies the data into them and the DMA engine moves each staged chunk (CUDA Runtime API, "API
# synchronization behavior": a pageable host-to-device cudaMemcpyAsync returns once the buffer has been
# copied to staging memory for DMA). The DMA starts once the first chunk is staged, so the copy the
# GPU sees runs at the link's pinned rate for as much as that chunk and beyond it at the host's staging
# rate (host_link.pageable_bw_gbs). Chunk size: measured in fixture a100_alexnet_forward, where the
# DMA of every copy of 1.2 MB or more starts 253-264 us after its cudaMemcpyAsync call does, while
# the call stages at 4.0-4.3 GB/s: ~1.1 MB, taken as 1 MiB (that fixture is in sample for it).
PAGEABLE_STAGING_CHUNK_BYTES = 2**20

# ROCm traces name every host copy "Memcpy HtoD (Host -> Device)" / "DtoH (Device -> Host)": the
# tracer does not say pageable or pinned (the fixtures' hipMemcpyWithStream source pointers lie in the
# process heap, 0x5567... in mi250_mlp_train and 0x7d... in mi300x_sd35_inference, i.e. malloc'd
# pageable tensors, not hipHostMalloc mappings). Either way HIP moves the bytes with an SDMA engine:
# pinned memory directly; pageable memory up to GPU_PINNED_MIN_XFER_SIZE (1 MiB by default) is
# copied by the CPU into a pinned staging buffer (GPU_STAGING_BUFFER_SIZE, 1 MiB) and moved from it
# by SDMA, since GPU_FORCE_BLIT_COPY_SIZE defaults to 0 (no blit kernel); larger pageable copies are
# pinned on the fly and copied directly (ROCm/clr rocclr/device/rocm/rocblit.cpp,
# DmaBlitManager::writeBuffer and hsaCopyStaged; rocsettings.cpp). The copy on the GPU timeline is
# that SDMA copy, at the link rate after its fixed cost, so ROCm names take the pinned branch below
# and the AMD presets' host_link.latency_us is a published SDMA small-copy time (ROCm/hip issue
# 3809: rocm-bandwidth-test, 6 us for ~4 KiB on an MI300X). rocblit.cpp's hsaCopyStaged also notes
# "the slowdown caused to SDMA engine powering down if its not active" (mi250_mlp_train's copies on
# an idle GPU take 16-22 us); no figure for it is published, so it is not modelled.


def host_link_seconds(n_bytes: np.ndarray, name: pd.Series, hw: HardwareConfig) -> np.ndarray:
    """GPU-side duration of host<->device copies of ``n_bytes`` named as in CUDA traces ("Memcpy
    HtoD (Pageable -> Device)"): link latency plus the bytes at the pinned link rate, or for pageable
    memory the larger of that and the bytes beyond the first staged chunk at the staging rate."""
    if hw.memory.shared_with_gpu:  # one DRAM: a DRAM copy, or none with zero-copy
        from archsim.perf.shared_memory import achievable_gbs

        n = np.asarray(n_bytes, dtype=float)
        if hw.memory.zero_copy:
            return np.zeros_like(n)
        return hw.host_link.latency_us * _US + 2.0 * n / (achievable_gbs(hw) * 1e9)
    link = hw.host_link
    pinned_s = np.asarray(n_bytes, dtype=float) / (link.bw_gbs * 1e9)
    staging_gbs = link.pageable_bw_gbs or link.bw_gbs
    staged_s = np.maximum(np.asarray(n_bytes) - PAGEABLE_STAGING_CHUNK_BYTES, 0.0) / (
        staging_gbs * 1e9
    )
    pageable = by_unique(name, lambda u: u.str.contains("Pageable", regex=False)).astype(bool)
    return link.latency_us * _US + np.where(pageable, np.maximum(pinned_s, staged_s), pinned_s)


def on_device_copy(ops: pd.DataFrame) -> np.ndarray:
    kind = _strings(ops, "kind")
    dtod = by_unique(_strings(ops, "name"), lambda u: u.str.contains("DtoD", regex=False))
    return (kind == "memset").to_numpy(dtype=bool) | (
        (kind == "memcpy").to_numpy(dtype=bool) & dtod
    )
