"""Detect the machine archsim runs on, as a HardwareConfig.

The local machine is the capture machine, so its per-thread speed is 1.0 by definition
(``thread_speed_rel`` is relative to the capture machine). Figures the OS cannot report (power, network
stack cost, DRAM latency) are taken from REFERENCE.md-backed defaults and say so.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path

from archsim.hw.schema import (
    CpuConfig,
    GpuConfig,
    HardwareConfig,
    HostLinkConfig,
    MemoryConfig,
    NetworkConfig,
)
from archsim.perf.launch import launch_overhead_us

CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_fields(text: str) -> list[dict[str, str]]:
    """One dict per processor block of /proc/cpuinfo."""
    blocks = []
    for chunk in text.strip().split("\n\n"):
        fields = {}
        for line in chunk.splitlines():
            key, sep, value = line.partition(":")
            if sep:
                fields[key.strip()] = value.strip()
        if fields:
            blocks.append(fields)
    return blocks


def detect_cpu(cpuinfo_text: str | None = None) -> CpuConfig:
    """CPU model, sockets, cores and threads from /proc/cpuinfo (os.cpu_count when it is absent)."""
    if cpuinfo_text is None:
        cpuinfo_text = CPUINFO.read_text() if CPUINFO.exists() else ""
    blocks = _cpuinfo_fields(cpuinfo_text)
    logical = len(blocks) or (os.cpu_count() or 1)
    model = (blocks[0].get("model name") if blocks else None) or platform.processor() or "unknown"
    sockets = len({b.get("physical id", "0") for b in blocks}) or 1
    cores = len(
        {(b.get("physical id", "0"), b.get("core id", str(i))) for i, b in enumerate(blocks)}
    )
    cores = cores or logical
    threads_per_core = max(1, logical // cores)
    mhz = [float(b["cpu MHz"]) for b in blocks if "cpu MHz" in b]
    freq_mhz = (
        max(mhz) if mhz else 2000.0
    )  # 2 GHz when the OS hides it: a typical server base clock
    return CpuConfig(
        model=model,
        sockets=sockets,
        cores_per_socket=max(1, cores // sockets),
        threads_per_core=threads_per_core,
        base_clock_mhz=freq_mhz,
        boost_clock_mhz=freq_mhz,
        thread_speed_rel=1.0,  # by definition: the local machine is the capture machine
        # x86 SMT: +10-30% per core with both threads busy (Marr et al., Intel Technology Journal 6(1),
        # 2002: "up to 30%"); the midpoint +20% is 0.60 per thread, as in the presets
        smt_yield=0.60 if threads_per_core > 1 else 1.0,
        # The OS reports no power figures: scale a known server part to the cores we see. AMD EPYC
        # 7742: 225 W TDP (AMD) and ~65 W idle package power (AnandTech Milan review) for 64 cores.
        idle_power_w=65.0 / 64 * max(1, cores // sockets),
        max_power_w=225.0 / 64 * max(1, cores // sockets),
    )


def detect_gpu() -> GpuConfig | None:
    """GPU from torch.cuda device properties; None when CUDA is unavailable (or torch is absent)."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    props = torch.cuda.get_device_properties(0)
    clock_mhz = getattr(props, "clock_rate", 0) / 1000 or 1500.0
    # Bandwidth, latency and per-SM rates are not reported by the driver: V100-class figures from
    # hwconfigs/dgx1-v100.yaml stand in; override them with --set for an accurate local model.
    return GpuConfig(
        name=props.name,
        count=torch.cuda.device_count(),
        sms=props.multi_processor_count,
        physical_sms=props.multi_processor_count,
        clock_mhz=clock_mhz,
        fp32_flops_per_clk_per_sm=128,
        fp16_flops_per_clk_per_sm=256,
        tensor_flops_per_clk_per_sm=1024 if props.major >= 7 else 0,
        # FP8 tensor cores from Ada/Hopper (cc 8.9/9.0) on, at twice the FP16 rate (the datasheets
        # of hwconfigs/l4.yaml and dgx-h100.yaml)
        fp8_flops_per_clk_per_sm=(
            2048 if not torch.version.hip and (props.major, props.minor) >= (8, 9) else 0
        ),
        # as torch.cuda.is_bf16_supported(including_emulation=False): ROCm, or CUDA cc >= 8.0
        bf16=bool(torch.version.hip) or props.major >= 8,
        dram_bw_gbs=900,
        dram_pj_per_bit=3.9,  # HBM2 (O'Connor et al., MICRO 2017), with the V100 bandwidth
        dram_latency_ns=500,
        l2_size_mb=max(getattr(props, "L2_cache_size", 6 * 2**20) / 2**20, 0.25),
        l2_bw_gbs=2155,
        max_threads_per_sm=props.max_threads_per_multi_processor,
        max_blocks_per_sm=32,
        registers_per_sm=getattr(props, "regs_per_multiprocessor", 65536),
        shared_mem_per_sm_kb=getattr(props, "shared_memory_per_multiprocessor", 98304) / 1024,
        launch_latency_us=1.0,
        # the local machine is the capture machine: its thread speed is 1.0 (archsim.perf.launch)
        launch_overhead_us=round(launch_overhead_us(1.0), 2),
        idle_power_w=55,
        max_power_w=300,
    )


def detect_local() -> HardwareConfig:
    """The machine archsim runs on."""
    cpu = detect_cpu()
    return HardwareConfig(
        name="local",
        description=f"detected: {cpu.model}, {cpu.hw_threads} hardware threads",
        cpu=cpu,
        gpu=detect_gpu(),
        # PCIe 3.0 x16 at 80% protocol efficiency and REFERENCE's pageable range (see dgx1-v100.yaml)
        host_link=HostLinkConfig(
            kind="pcie3-x16", bw_gbs=12.6, latency_us=1.0, pageable_bw_gbs=6.4
        ),
        network=NetworkConfig(
            nic_bw_gbs=1.25,  # 10GbE = 1.25 GB/s, REFERENCE network section
            latency_us=10.0,  # assumed: NIC + one switch hop on commodity Ethernet; override with --set
            stack="kernel_tcp",
            # measured: benchmarks/network_stack.py on the development machine, loopback TCP, thread
            # CPU of both ends per message 7.15-7.25 us in three runs (docs/NETWORK.md)
            kernel_tcp_us_per_msg=7.2,
            kernel_bypass_us_per_msg=2.0,  # REFERENCE ~1-3 us
        ),
        # one DDR4-3200 channel pair (2 * 25.6 GB/s) as a conservative default for a small machine
        memory=MemoryConfig(host_dram_bw_gbs=51.2),
    )
