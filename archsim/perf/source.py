"""The hardware preset a trace was measured on, matched from its GPU name (the source side of the
kernel model's model(target) / model(source) scaling)."""

from __future__ import annotations

from archsim.errors import ArchsimError
from archsim.hw.schema import HardwareConfig
from archsim.perf.columns import MEASURED_KINDS

# Substrings of a trace's GPU name -> preset (first match wins).
GPU_NAME_PRESETS = (
    ("H100", "dgx-h100"),
    ("A100", "dgx-a100"),
    ("V100", "dgx1-v100"),
    ("2080 Ti", "rtx2080ti"),
    ("GM20B", "jetson-tx1"),
    ("Tegra X1", "jetson-tx1"),
)


def source_hw_for_gpu_name(gpu_name: str, num_sms: int | None = None) -> HardwareConfig:
    """The preset matching a GPU name (with its SM count overridden to the trace's, e.g. MIG)."""
    from archsim.hw.presets import list_presets, load_hw

    for needle, preset in GPU_NAME_PRESETS:
        if needle.lower() in gpu_name.lower() and preset in list_presets():
            hw = load_hw(preset)
            if num_sms and hw.gpu is not None and int(num_sms) != hw.gpu.sms:
                hw = load_hw(preset, [f"gpu.sms={int(num_sms)}"])
            return hw
    raise ArchsimError(
        f"trace GPU {gpu_name!r}: no hardware preset matches it (known: "
        f"{', '.join(sorted({p for _, p in GPU_NAME_PRESETS}))}); pass its config with --source-hw"
    )


def source_hw_for_trace(trace) -> HardwareConfig | None:  # trace: archsim.trace.format.Trace
    """Preset matching the trace's GPU, or None for traces captured on a CPU."""
    source = (trace.meta or {}).get("source") or {}
    device = str(source.get("device", "")).lower()
    gpu_name = source.get("gpu_name") or ""
    if device == "cpu" or (not gpu_name and device != "cuda"):
        kinds = set(trace.ops["kind"].astype(str)) if len(trace.ops) else set()
        if not kinds & set(MEASURED_KINDS):
            return None
    if not gpu_name:
        props = source.get("device_properties") or []
        if isinstance(props, list) and props:
            gpu_name = props[0].get("name", "")
        elif isinstance(props, dict):
            gpu_name = props.get("name", "")
    if not gpu_name:
        raise ArchsimError("trace meta.yaml: source.gpu_name is missing for a trace with GPU ops")
    return source_hw_for_gpu_name(gpu_name, source.get("gpu_num_sms"))
