"""What a sweep worker builds once and reuses across points: the loaded trace, the hardware config
of each distinct ``--sms``/``--set`` point, and the derived service times.

Deriving service times (archsim.sim.workload) costs ~90 ms on ``traces/dqn-pong-cpu`` on dgx1-v100
(measured here: ``run_point`` at 0.001 simulated seconds, 98 ms a point without this memo, 4 ms
with it), more than the simulation of a short point. It depends
on the trace, the hardware, the learner batch and a few SimConfig fields (today ``inference``,
``inference_batch``, ``envs_per_actor``; ``actors`` on a shared-DRAM SoC). Rather than a hand-kept
list of those fields, which would go stale silently when the model changes, the memo records which
fields a derivation actually read (the config it is given logs every field read, also through
properties and ``dataclasses.replace``) and reuses the result for any later config that agrees on
exactly those fields. The derivation is a pure function of its arguments, so equal reads mean an
equal execution and an equal result.
"""

from __future__ import annotations

import dataclasses
from collections import OrderedDict
from pathlib import Path
from typing import Any

from archsim.sim.config import SimConfig

# Distinct service-time derivations kept per worker. A ServiceTimes is a few arrays of a few
# thousand floats (one per inference batch size), so 256 of them stay within a few tens of MB.
MAX_CACHED_DERIVATIONS = 256
# Attribute names through which a reader may see every field at once: a derivation that uses one
# depends on the whole config.
_WHOLE_CONFIG_NAMES = frozenset({"__dict__", "__getstate__", "__reduce__", "__reduce_ex__"})
_FIELDS = frozenset(f.name for f in dataclasses.fields(SimConfig))
_NO_LOG = object()


class _ReadLog(SimConfig):
    """A SimConfig that logs the fields read from it (``_reads``: name -> value; ``None`` once
    something read the whole config)."""

    def __getattribute__(self, name: str) -> Any:
        value = object.__getattribute__(self, name)
        # A copy made by ``replace`` has no log: making it read every field of this one already.
        log = object.__getattribute__(self, "__dict__").get("_archsim_reads", _NO_LOG)
        if name in _FIELDS:
            if log is not None and log is not _NO_LOG:
                log[name] = value
        elif name in _WHOLE_CONFIG_NAMES and log is not _NO_LOG:
            object.__setattr__(self, "_archsim_reads", None)
        return value


def _logged(config: SimConfig) -> _ReadLog:
    clone = object.__new__(_ReadLog)
    for name in _FIELDS:  # copy without running __post_init__ (already valid) and without logging
        object.__setattr__(clone, name, getattr(config, name))
    object.__setattr__(clone, "_archsim_reads", {})
    return clone


def _same(a: Any, b: Any) -> bool:
    """Equal value and type (1 and 1.0 may take different branches)."""
    return type(a) is type(b) and a == b


class ServiceTimesMemo:
    """``derive_service_times`` with its signature, memoized per (trace, hardware, learner batch)
    on the config fields each derivation read."""

    def __init__(self, max_entries: int = MAX_CACHED_DERIVATIONS) -> None:
        self.max_entries = max_entries
        # (trace key, hw key, learner batch) -> [(reads or None, ServiceTimes)], LRU over keys
        self._entries: OrderedDict[tuple, list[tuple[dict[str, Any] | None, Any]]] = OrderedDict()
        self.derivations = 0  # how many times the real derivation ran (tests, benchmark)

    def bind(self, trace_key: str, hw_key: tuple):
        """The stand-in for ``simulate(service_times=...)`` for one trace and hardware point."""

        def service_times(trace, hw, config: SimConfig, learner_batch: int):
            return self.get((trace_key, hw_key, learner_batch), trace, hw, config, learner_batch)

        return service_times

    def get(self, key: tuple, trace, hw, config: SimConfig, learner_batch: int):
        from archsim.sim.workload import derive_service_times

        found = self._entries.get(key)
        if found is not None:
            self._entries.move_to_end(key)
            for reads, times in found:
                if all(_same(getattr(config, name), value) for name, value in reads.items()):
                    return times
        logged = _logged(config)
        times = derive_service_times(trace, hw, logged, learner_batch)
        self.derivations += 1
        reads = object.__getattribute__(logged, "_archsim_reads")
        if reads is not None:  # a derivation that read the whole config is not reused
            self._entries.setdefault(key, []).append((dict(reads), times))
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
        return times


class WorkerState:
    """Per worker process: traces, hardware configs and service times, each built once."""

    def __init__(self) -> None:
        self.traces: dict[str, Any] = {}
        self.hardware: dict[tuple, Any] = {}
        self.memo = ServiceTimesMemo()

    def trace(self, path: str):
        if path not in self.traces:
            from archsim.commands._trace_input import load_trace_input

            self.traces[path] = load_trace_input(Path(path))
        return self.traces[path]

    def hw(self, name: str, settings: tuple[str, ...]):
        key = (name, settings)
        if key not in self.hardware:
            from archsim.hw.presets import load_hw

            self.hardware[key] = load_hw(name, list(settings))
        return self.hardware[key]


STATE = WorkerState()  # one per process: pool and Dask workers keep it between tasks
