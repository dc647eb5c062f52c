"""Types of the meta.yaml fields the models read as numbers or mappings, checked when a trace is
loaded: a hand-edited or damaged ``param_bytes: abc`` is one line naming the field, not a
traceback from deep inside the simulator (consumers call ``float()``/``int()``/``.items()`` on
them). Fields that are absent or null are left to their consumers' defaults.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from archsim.errors import ArchsimError

# What each kind of field holds, as the message says it.
_EXPECTED = {
    "count": "an integer >= 1",
    "count0": "an integer >= 0",
    "amount": "a finite number >= 0",
    "mapping": "a mapping",
    "list": "a list",
    "flag": "true or false",
}

# dotted path under meta -> kind. The counts and amounts are what the models divide or multiply
# by (archsim.sim.actor_work param_bytes, archsim.sim.recorded envs_per_actor and the R2D2
# sequence, archsim.sim.learner_work frame_stack, archsim.perf.source gpu_num_sms/gpu_count).
META_FIELDS: dict[str, str] = {
    "workload.settings.param_bytes": "amount",
    "workload.settings.envs_per_actor": "count",
    "workload.settings.replay_capacity": "count",
    "workload.settings.r2d2": "mapping",
    "workload.settings.r2d2.sequence_length": "count",
    "workload.settings.r2d2.burn_in": "count0",
    "workload.settings.r2d2.sequence_overlap": "amount",
    "workload.settings.r2d2.frame_stack": "count",
    "source.gpu_num_sms": "count",
    "source.gpu_count": "count0",
    "source.device_properties": "list",
    "source.devices_used": "list",
    "capture.processes": "list",
    "capture.unprofiled_cpu_us": "mapping",
    "ingest.inferred_steps": "list",
    # predict --model-only's note says "record_shapes was off" when false; trace info prints it
    "ingest.shapes_recorded": "flag",
    # the repair counts trace info prints with thousands separators (archsim.trace.ingest._REPAIRS)
    **{
        f"ingest.{key}": "count0"
        for key in (
            "prewindow_gpu_events_dropped",
            "duplicate_events_removed",
            "names_repaired",
            "ts_rebased_by_us",
            "begin_end_pairs",
            "unclosed_begin_events",
        )
    },
}

# Fields a capture writes as null when it has nothing to say (a CPU capture's GPU figures); every
# other field above is read as soon as its key is there, so null there is an error too.
NULLABLE = frozenset(
    {"source.gpu_num_sms", "source.gpu_count", "source.device_properties", "source.devices_used"}
    | {
        field
        for field in META_FIELDS
        if field.startswith("ingest.") and META_FIELDS[field] != "flag"  # counts: null is none
    }
)

# Per-step CPU figures of a capture without the profiler: {role: {phase: {steps, mean_us, ...}}}
# (archsim.sim.profiler_cost), also per worker process under capture.processes[i].
_FIGURE_KINDS = {"steps": "count0", "mean_us": "amount", "median_us": "amount"}


def _holds(kind: str, value: Any) -> bool:
    if kind == "mapping":
        return isinstance(value, dict)
    if kind == "list":
        return isinstance(value, list)
    if kind == "flag":
        return isinstance(value, bool)
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if kind in ("count", "count0"):
        whole = isinstance(value, int) or (math.isfinite(value) and float(value).is_integer())
        return whole and value >= (1 if kind == "count" else 0)
    return math.isfinite(value) and value >= 0


def _check(path: Path, field: str, kind: str, value: Any, nullable: bool = False) -> None:
    if not (value is None and nullable) and not _holds(kind, value):
        raise ArchsimError(f"{path}: {field} is {str(value)[:40]!r} (expected {_EXPECTED[kind]})")


_ABSENT = object()


def _lookup(meta: dict, dotted: str) -> Any:
    """The value at ``dotted``, or _ABSENT where a key on the way is missing."""
    node: Any = meta
    for part in dotted.split("."):
        if not isinstance(node, dict) or part not in node:
            return _ABSENT
        node = node[part]
    return node


def _check_unprofiled(path: Path, field: str, figures: Any) -> None:
    if figures is _ABSENT:
        return
    _check(path, field, "mapping", figures)
    for role, phases in figures.items():
        _check(path, f"{field}.{role}", "mapping", phases)
        for name, stats in phases.items():
            _check(path, f"{field}.{role}.{name}", "mapping", stats)
            for key, kind in _FIGURE_KINDS.items():
                if key in stats:
                    _check(path, f"{field}.{role}.{name}.{key}", kind, stats[key])


def check_meta_fields(path: Path, meta: dict[str, Any]) -> None:
    """Raise an ArchsimError naming ``path`` and the field when one holds the wrong type."""
    for field, kind in META_FIELDS.items():
        value = _lookup(meta, field)
        if value is not _ABSENT:
            _check(path, field, kind, value, nullable=field in NULLABLE)
    _check_unprofiled(path, "capture.unprofiled_cpu_us", _lookup(meta, "capture.unprofiled_cpu_us"))
    processes = _lookup(meta, "capture.processes")
    for i, process in enumerate(processes if isinstance(processes, list) else []):
        _check(path, f"capture.processes[{i}]", "mapping", process)
        field = f"capture.processes[{i}].unprofiled_cpu_us"
        _check_unprofiled(path, field, process.get("unprofiled_cpu_us", _ABSENT))
