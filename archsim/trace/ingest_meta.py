"""meta.yaml of an ingested trace: what the trace says about its source hardware and what ingest
counted, merged with the capture's own meta (which never overrides the ``ingest`` section)."""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from archsim.trace.kineto import KinetoTrace, clean_text
from archsim.trace.kineto_checks import clean_value
from archsim.trace.schema import FORMAT_VERSION

# Intel XPU launches as Kineto's PTI plugin names them (urEnqueueKernelLaunch; older SYCL: pi...).
_XPU_CALLS = re.compile(r"\b(?:urEnqueue|piEnqueue|zeCommandList)")


# Kineto of spring 2021 (torch 1.8.1) wrote the devices as ``computeProperties`` with cudaDeviceProp's
# own names (pytorch/kineto tb_plugin/test/gpu_metrics_input.json); later ones as ``deviceProperties``.
_COMPUTE_PROPERTY_NAMES = {"major": "computeMajor", "minor": "computeMinor",
                           "multiProcessorCount": "numSms",
                           "maxThreadsPerMultiProcessor": "maxThreadsPerMultiprocessor"}  # fmt: skip


def device_properties(top: dict[str, Any]) -> list[dict[str, Any]]:
    """``deviceProperties`` (or 2021's ``computeProperties``, renamed to today's keys) as a list of
    plain dicts (empty for CPU-only traces and for traces that record neither)."""
    props = top.get("deviceProperties")
    if not isinstance(props, list) and isinstance(top.get("computeProperties"), list):
        props = [
            {_COMPUTE_PROPERTY_NAMES.get(k, k): v for k, v in p.items()}
            for p in top["computeProperties"]
            if isinstance(p, dict)
        ]
    if not isinstance(props, list):
        return []
    return [clean_value(dict(p)) for p in props if isinstance(p, dict)]


def _plain(value: Any) -> Any:
    """numpy scalars -> Python, recursively, so meta stays YAML-safe."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, np.generic):
        return value.item()
    return value


def trace_meta(
    kt: KinetoTrace, devices: list[int], counts: dict[str, Any], max_unlinked_fraction: float
) -> dict[str, Any]:
    """meta of a trace ingested from ``kt``: its source device(s) and ingest's counts."""
    props = device_properties(kt.top)
    main = props[0] if props else {}
    if devices:
        main = next((p for p in props if p.get("id") == devices[0]), main)
    rt_names = " ".join(kt.events.loc[kt.events["cat"] == "cuda_runtime", "name"].head(2000))
    if not devices:  # no GPU ops (deviceProperties alone only says a GPU was present)
        device = "cpu"
    elif "hip" in rt_names or "AMD" in str(main.get("name", "")):
        device = "rocm"
    elif _XPU_CALLS.search(rt_names):  # Level Zero / SYCL runtime calls: an Intel XPU
        device = "xpu"
    else:
        device = "cuda"
    source = {
        "device": device,
        "cpu_model": None,
        "cpu_cores": None,
        "cpu_threads": None,
        "cpu_freq_mhz": None,
        "gpu_name": main.get("name"),
        "gpu_num_sms": main.get("numSms"),
        # GPUs in deviceProperties; traces that record none count the devices their ops ran on
        "gpu_count": (len(props) or len(devices)) if device != "cpu" else 0,
        "devices_used": devices,
        "device_properties": props,
    }
    ingest_meta = {
        "source_file": kt.path.name,
        "n_events": kt.n_events,
        "trace_name": clean_text(str(kt.top["traceName"])) if "traceName" in kt.top else None,
        "schema_version": clean_value(kt.top.get("schemaVersion")),
        "base_time_ns": clean_value(kt.top.get("baseTimeNanoseconds")),
        "max_unlinked_fraction": max_unlinked_fraction,
        **counts,
    }
    return _plain(
        {
            "format_version": FORMAT_VERSION,
            "workload": {"name": kt.path.name.split(".json")[0], "settings": {}},
            "source": source,
            "torch_version": None,
            "capture": {"record_shapes": bool(counts.get("shapes_recorded"))},
            "ingest": ingest_meta,
        }
    )


def merge_meta(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """Deep-merge ``override`` into ``base``; the ``ingest`` section always comes from the trace."""
    out = dict(base)
    for key, value in override.items():
        if key == "ingest":
            continue
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge_meta(out[key], value)
        else:
            out[key] = value
    return _plain(out)
