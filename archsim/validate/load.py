"""How loaded the machine was while a validation capture or run went on: CPUs kept busy by OTHER
processes, and CPU time the hypervisor stole.

Why: on a shared 2-core box a real run's wall-clock frames/s falls with whatever else runs (one other
CPU-bound process moved the quick validation's frames/s MAE to 115-400%, issue 11), while the CPU
seconds its own processes spend per frame barely move. Recording the load beside each run says which
runs were made on a busy machine, and the CPU time makes the per-CPU-second error that load cannot
break (archsim.validate.report).

Sources: Linux ``/proc/stat`` (proc(5)): the first ``cpu`` line sums every CPU's time in USER_HZ
ticks as user, nice, system, idle, iowait, irq, softirq, steal, guest, guest_nice (guest time is
already inside user). Busy = user + nice + system + irq + softirq; steal is time a virtual CPU was
runnable but the hypervisor ran something else. This process's and its reaped children's CPU time
come from ``getrusage(2)`` (RUSAGE_SELF + RUSAGE_CHILDREN: every thread, every joined child), and
are subtracted from busy to leave the other processes' share. Where ``/proc/stat`` is absent
(not Linux) the readings are NaN.
"""

from __future__ import annotations

import dataclasses
import math
import os
import resource
import time
from pathlib import Path

PROC_STAT = Path("/proc/stat")
# /proc/stat's first line: "cpu" then user nice system idle iowait irq softirq steal ...
_BUSY_FIELDS = (0, 1, 2, 5, 6)  # user, nice, system, irq, softirq
_STEAL_FIELD = 7


@dataclasses.dataclass(frozen=True)
class Snapshot:
    """Counters at one instant (seconds); busy_s / steal_s are NaN without /proc/stat."""

    wall_s: float
    busy_s: float  # all CPUs' non-idle time since boot
    steal_s: float  # all CPUs' stolen time since boot
    own_cpu_s: float  # this process (all threads) + its reaped children


@dataclasses.dataclass(frozen=True)
class Load:
    """The machine's load over an interval."""

    other_busy_cpus: float  # CPUs kept busy by other processes, on average (0 .. CPUs)
    steal_cpus: float  # CPUs' worth of time stolen by the hypervisor, on average
    loadavg_1min: float  # os.getloadavg()[0] at the interval's end


def parse_proc_stat(text: str) -> tuple[float, float]:
    """(busy ticks, steal ticks) summed over every CPU, from the text of /proc/stat."""
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            values = [float(v) for v in fields[1:]]
            values += [0.0] * (_STEAL_FIELD + 1 - len(values))  # old kernels: no steal column
            return sum(values[i] for i in _BUSY_FIELDS), values[_STEAL_FIELD]
    raise ValueError("no aggregate 'cpu' line")


def own_cpu_s() -> float:
    """CPU seconds (user + system) of this process's threads and its reaped children."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        usage = resource.getrusage(who)
        total += usage.ru_utime + usage.ru_stime
    return total


def snapshot() -> Snapshot:
    """Read the counters now."""
    busy = steal = math.nan
    try:
        busy_ticks, steal_ticks = parse_proc_stat(PROC_STAT.read_text())
        tick_s = 1.0 / os.sysconf("SC_CLK_TCK")
        busy, steal = busy_ticks * tick_s, steal_ticks * tick_s
    except (OSError, ValueError):
        pass
    return Snapshot(wall_s=time.monotonic(), busy_s=busy, steal_s=steal, own_cpu_s=own_cpu_s())


def load_between(start: Snapshot, end: Snapshot, loadavg_1min: float | None = None) -> Load:
    """The load from ``start`` to ``end``: others' busy CPU seconds (all busy time minus this
    process tree's own) and stolen CPU seconds, each per wall second. Clamped at 0: tick-sampled
    busy time can read a little below getrusage's own time over short intervals."""
    wall = end.wall_s - start.wall_s
    if loadavg_1min is None:
        loadavg_1min = os.getloadavg()[0] if hasattr(os, "getloadavg") else math.nan
    if not wall > 0:
        return Load(math.nan, math.nan, loadavg_1min)
    others = (end.busy_s - start.busy_s) - (end.own_cpu_s - start.own_cpu_s)
    steal = end.steal_s - start.steal_s
    return Load(
        other_busy_cpus=max(0.0, others / wall) if math.isfinite(others) else math.nan,
        steal_cpus=max(0.0, steal / wall) if math.isfinite(steal) else math.nan,
        loadavg_1min=float(loadavg_1min),
    )
