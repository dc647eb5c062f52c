"""The hardware a trace was measured on (the source side of the kernel model's model(target) /
model(source) scaling).

In order: ``--source-hw`` when given; the preset whose GPU the trace's name matches (with its SM count
overridden to the trace's, e.g. MIG); a config built from the trace's ``deviceProperties`` and the
architecture table (:mod:`archsim.hw.arch_table`) for a GPU with no preset; for a trace that names no
GPU at all, the architecture its kernel names mark (``sm80_``, ``cutlass_80``, ``gfx942``); else a
one-line error asking for ``--source-hw``.
"""

from __future__ import annotations

import re
from typing import Any

from archsim.errors import ArchsimError
from archsim.hw.arch_table import (
    GpuArch,
    arch_for_properties,
    arch_from_kernel_names,
    check_device_properties,
    gpu_overrides,
    named_dram_bw_gbs,
)
from archsim.hw.schema import HardwareConfig
from archsim.perf.columns import MEASURED_KINDS

# Substrings of a trace's GPU name -> preset (first match wins; more specific names first).
GPU_NAME_PRESETS = (
    ("H200", "dgx-h200"),
    ("H100", "dgx-h100"),
    ("B200", "dgx-b200"),
    ("A100", "dgx-a100"),
    ("V100", "dgx1-v100"),
    ("Tesla P100", "dgx1-p100"),
    ("2080 Ti", "rtx2080ti"),
    ("RTX 4090", "rtx4090"),
    ("Tesla T4", "t4"),
    ("NVIDIA L4", "l4"),
    ("GM20B", "jetson-tx1"),
    ("Tegra X1", "jetson-tx1"),
    ("Orin", "jetson-agx-orin"),
    ("MI210", "mi210"),
    ("MI250X", "mi250x"),
    ("MI300X", "mi300x"),
)


def preset_for_gpu_name(gpu_name: str) -> str | None:
    """The preset whose GPU a trace's GPU name matches, or None."""
    from archsim.hw.presets import list_presets

    presets = list_presets()
    for needle, preset in GPU_NAME_PRESETS:
        # whole words only: "NVIDIA L4" must not match an L40
        whole_word = rf"(?<![a-z0-9]){re.escape(needle.lower())}(?![a-z0-9])"
        if preset in presets and re.search(whole_word, gpu_name.lower()):
            return preset
    return None


def _checked_sms(num_sms: Any) -> int | None:
    if num_sms is None:
        return None
    if isinstance(num_sms, bool) or not isinstance(num_sms, int) or num_sms < 1:
        raise ArchsimError(
            f"trace: source.gpu_num_sms (deviceProperties numSms): expected an integer >= 1, "
            f"got {num_sms!r}"
        )
    return num_sms


def source_hw_for_gpu_name(gpu_name: str, num_sms: Any = None) -> HardwareConfig:
    """The preset matching a GPU name (with its SM count overridden to the trace's, e.g. MIG)."""
    from archsim.hw.presets import load_hw

    sms = _checked_sms(num_sms)
    preset = preset_for_gpu_name(gpu_name)
    if preset is None:
        raise ArchsimError(
            f"trace GPU {gpu_name!r}: no hardware preset matches it (known: "
            f"{', '.join(sorted({p for _, p in GPU_NAME_PRESETS}))}); pass its config with --source-hw"
        )
    overrides = [f"gpu.sms={sms}"] if sms else []
    # A sibling part of the preset's GPU with other memory (an A100-SXM4-80GB on the 40 GB dgx-a100
    # preset) keeps its own datasheet bandwidth (arch_table.NAMED_DRAM_BW_GBS).
    named_bw = named_dram_bw_gbs(gpu_name)
    if named_bw is not None:
        overrides.append(f"gpu.dram_bw_gbs={named_bw}")
    hw = load_hw(preset)
    if hw.gpu is not None and (
        (sms and sms != hw.gpu.sms) or (named_bw is not None and named_bw != hw.gpu.dram_bw_gbs)
    ):
        hw = load_hw(preset, overrides)
    return hw


def source_hw_for_arch(
    arch: GpuArch, props: dict[str, Any] | None, count: int, how: str
) -> HardwareConfig:
    """A config for a GPU of ``arch`` with the trace's figures (arch_table.gpu_overrides) and the
    rest from the architecture's reference preset."""
    from archsim.hw.presets import load_hw, validate_hw

    data = load_hw(arch.reference_preset).model_dump()
    data["gpu"].update(gpu_overrides(arch, props, count))
    data["name"] = f"trace-{arch.key}"
    data["description"] = (
        f"{data['gpu']['name']} ({arch.family}, {how}): rates from the architecture table, DRAM and "
        f"L2 scaled by SMs from the reference part; other figures from preset {arch.reference_preset}"
    )
    return validate_hw(data, f"source config for {data['gpu']['name']!r}")


# archsim's own GPU captures (archsim.capture.machine) record torch's property names, one device.
_TORCH_PROPERTY_NAMES = {"major": "computeMajor", "minor": "computeMinor",
                         "total_memory_bytes": "totalGlobalMem"}  # fmt: skip


def _device_properties(source: dict[str, Any]) -> list[Any]:
    """deviceProperties entries in Kineto's names: a Kineto list, or archsim's own capture's dict
    (torch names, plus the source block's GPU name and SM count; ROCm devices have 64-wide waves)."""
    props = source.get("device_properties") or []
    if isinstance(props, dict):
        entry = {_TORCH_PROPERTY_NAMES.get(k, k): v for k, v in props.items()}
        entry.setdefault("name", source.get("gpu_name"))
        entry.setdefault("numSms", source.get("gpu_num_sms"))
        if str(source.get("device", "")).lower() == "rocm":
            entry.setdefault("warpSize", 64)
        props = [entry]
    if not isinstance(props, list):
        raise ArchsimError(f"trace: deviceProperties: expected a list of objects, got {props!r}")
    return props


def _main_properties(source: dict[str, Any], props: list[Any]) -> tuple[dict[str, Any], str]:
    """The checked deviceProperties entry of the device the trace used (else the first)."""
    used = source.get("devices_used") or []
    index = 0
    for i, entry in enumerate(props):
        if isinstance(entry, dict) and used and entry.get("id") == used[0]:
            index = i
            break
    return check_device_properties(props[index], f"[{index}]"), f"[{index}]"


def source_hw_for_trace(trace) -> HardwareConfig | None:  # trace: archsim.trace.format.Trace
    """The hardware the trace's GPU ops were measured on, or None for traces captured on a CPU."""
    source = (trace.meta or {}).get("source") or {}
    device = str(source.get("device", "")).lower()
    gpu_name = source.get("gpu_name") or ""
    if gpu_name and not isinstance(gpu_name, str):
        raise ArchsimError(f"trace: source.gpu_name: expected a string, got {gpu_name!r}")
    kinds = set(trace.ops["kind"].astype(str)) if len(trace.ops) else set()
    if not kinds & set(MEASURED_KINDS) and (device == "cpu" or not gpu_name):
        return None
    props = _device_properties(source)
    main, where = _main_properties(source, props) if props else ({}, "")
    gpu_name = gpu_name or main.get("name", "")
    num_sms = (
        source.get("gpu_num_sms") if source.get("gpu_num_sms") is not None else main.get("numSms")
    )
    if gpu_name and preset_for_gpu_name(gpu_name) is not None:
        return source_hw_for_gpu_name(gpu_name, num_sms)
    if device == "xpu":  # archsim.trace.ingest_meta: Level Zero / SYCL launches
        raise ArchsimError(
            "trace: measured on an Intel XPU, which no preset or architecture-table row describes; "
            "pass a config with --source-hw NAME, or predict with --model-only"
        )
    count = int(source.get("gpu_count") or len(props) or 1)
    if main:
        _checked_sms(num_sms)
        return source_hw_for_arch(
            arch_for_properties(main, where), main, count, "from the trace's deviceProperties"
        )
    if gpu_name:
        raise ArchsimError(
            f"trace GPU {gpu_name!r}: no preset matches it and the trace has no deviceProperties "
            "to build one from; pass its config with --source-hw"
        )
    arch = arch_from_kernel_names(trace.ops["name"].astype(str)) if len(trace.ops) else None
    if arch is None:
        raise ArchsimError(
            "trace: names no GPU (no deviceProperties) and its kernel names mark no known "
            "architecture (sm80_, cutlass_90, gfx942, ...); pass its config with --source-hw NAME"
        )
    return source_hw_for_arch(arch, None, 1, "inferred from kernel names")


def resolve_source_hw(trace, source_hw: str | None) -> HardwareConfig | None:
    """``--source-hw`` when given (a preset name or YAML path), else :func:`source_hw_for_trace`."""
    if source_hw:
        from archsim.hw.presets import load_hw

        return load_hw(source_hw)
    return source_hw_for_trace(trace)
