"""Describe the machine a capture ran on (trace meta ``source``), from /proc/cpuinfo and torch.

The simulator scales measured CPU phases by the target's speed relative to this machine, so the capture
records what it was: CPU model, cores, hardware threads, clock, and the GPU when one was used.
"""

from __future__ import annotations

import os
import platform
from pathlib import Path
from typing import Any

CPUINFO = Path("/proc/cpuinfo")


def _cpuinfo_records(text: str) -> list[dict[str, str]]:
    records, current = [], {}
    for line in text.splitlines():
        if not line.strip():
            if current:
                records.append(current)
            current = {}
            continue
        key, _, value = line.partition(":")
        current[key.strip()] = value.strip()
    if current:
        records.append(current)
    return records


def cpu_description(cpuinfo_text: str | None = None) -> dict[str, Any]:
    """CPU model, physical cores, hardware threads and current clock (MHz) of this machine."""
    if cpuinfo_text is None:
        cpuinfo_text = CPUINFO.read_text() if CPUINFO.exists() else ""
    records = [r for r in _cpuinfo_records(cpuinfo_text) if "processor" in r]
    threads = len(records) or (os.cpu_count() or 1)
    model = next(
        (r["model name"] for r in records if "model name" in r), platform.processor() or "unknown"
    )
    # A physical core is a distinct (physical id, core id); VMs often omit them, then threads = cores.
    cores = {(r.get("physical id", "0"), r["core id"]) for r in records if "core id" in r}
    mhz = [float(r["cpu MHz"]) for r in records if "cpu MHz" in r]
    return {
        "cpu_model": model,
        "cpu_cores": len(cores) or threads,
        "cpu_threads": threads,
        "cpu_freq_mhz": round(max(mhz), 1) if mhz else None,
    }


def gpu_description(device: str) -> dict[str, Any]:
    """GPU name, SM count and properties when ``device`` is a CUDA/ROCm device, else empty fields."""
    empty = {"gpu_name": None, "gpu_num_sms": None, "gpu_count": 0, "device_properties": None}
    if not device.startswith("cuda"):
        return empty
    import torch

    props = torch.cuda.get_device_properties(torch.device(device))
    return {
        "gpu_name": props.name,
        "gpu_num_sms": int(props.multi_processor_count),
        "gpu_count": int(torch.cuda.device_count()),
        "device_properties": {
            "total_memory_bytes": int(props.total_memory),
            "major": int(props.major),
            "minor": int(props.minor),
        },
    }


def source_description(device: str = "cpu") -> dict[str, Any]:
    """The trace meta ``source`` block for a capture on ``device``."""
    import torch

    kind = "cpu"
    if device.startswith("cuda"):
        kind = "rocm" if getattr(torch.version, "hip", None) else "cuda"
    return {"device": kind, **cpu_description(), **gpu_description(device)}
