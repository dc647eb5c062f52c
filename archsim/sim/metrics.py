"""Bookkeeping of a simulated run: counters, busy time, queues (Little's law) and power/energy.

Every quantity is clipped to the measured window [0, sim_seconds], so a burst that straddles the end
counts only its part inside the window. Queues keep the time integral of their length and the waits
of their items (including the part waited so far by items still queued at the end), so
``mean length == arrival rate x mean wait`` holds exactly: Little's law over a finite window.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from archsim.perf.power import (
    cpu_socket_power_w,
    frames_per_joule,
    gpu_power_w,
    sm_share_of_card,
)

if TYPE_CHECKING:
    from archsim.sim.timeline import Timeline


class QueueStat:
    """One queue: arrivals, time-integral of its length and total wait, clipped to [0, end]."""

    __slots__ = ("name", "end", "n", "last_t", "area", "arrivals", "wait_sum", "arrival_sum")

    def __init__(self, name: str, end: float) -> None:
        self.name = name
        self.end = end
        self.n = 0  # items in the queue now
        self.last_t = 0.0
        self.area = 0.0  # integral of the length over time, s
        self.arrivals = 0
        self.wait_sum = 0.0  # s, of items that left
        self.arrival_sum = 0.0  # sum of clipped arrival times of items still queued

    def _advance(self, t: float) -> None:
        tc = t if t < self.end else self.end
        if tc > self.last_t:
            self.area += self.n * (tc - self.last_t)
            self.last_t = tc

    def enter(self, t: float) -> None:
        self._advance(t)
        self.n += 1
        if t < self.end:
            self.arrivals += 1
            self.arrival_sum += t
        else:
            self.arrival_sum += self.end

    def leave(self, t: float, arrived: float) -> None:
        self._advance(t)
        self.n -= 1
        a = arrived if arrived < self.end else self.end
        self.arrival_sum -= a
        self.wait_sum += (t if t < self.end else self.end) - a

    def add_wait(self, arrived: float, left: float) -> None:
        """Closed form for a FIFO item whose arrival and departure are both known (Lindley)."""
        end = self.end
        if arrived < end:
            self.arrivals += 1
            w = (left if left < end else end) - arrived
            self.wait_sum += w
            self.area += w

    def snapshot(self, at_s: float) -> QueueStat:
        """A copy as a queue whose window ends at ``at_s`` (the clock there, ``at_s`` <= ``end``)
        holds it: its length integral brought up to ``at_s``; this one is unchanged. Waits booked
        ahead of the clock (``add_wait`` with a departure past ``at_s``) stay in the copy."""
        out = QueueStat(self.name, at_s)
        out.n, out.last_t, out.area = self.n, self.last_t, self.area
        out.arrivals, out.wait_sum, out.arrival_sum = self.arrivals, self.wait_sum, self.arrival_sum
        out._advance(at_s)
        return out

    def summary(self) -> dict[str, float]:
        """Mean length, arrival rate and mean wait, counting the residual wait of queued items."""
        self._advance(self.end)
        wait = self.wait_sum + self.n * self.end - self.arrival_sum
        rate = self.arrivals / self.end
        return {
            f"{self.name}_queue_mean": self.area / self.end,
            f"{self.name}_arrivals_per_s": rate,
            f"{self.name}_wait_mean_us": 1e6 * wait / self.arrivals if self.arrivals else 0.0,
        }


@dataclass
class Recorder:
    """Mutable counters that the simulation components update as they run."""

    end: float
    hw_threads: int
    series_bins: int = 0  # >0: also keep per-bin utilization for a power time series
    # Frames per env step of the trace's environment (ALE frameskip; 1 when the trace does not say,
    # archsim.sim.pacing): frames_per_s = this x env_steps_per_s.
    frames_per_env_step: float = 1.0
    env_steps: int = 0
    learner_updates: int = 0
    inference_batches: int = 0
    inference_obs: int = 0
    actor_wait_s: float = 0.0  # time actors waited for inference (central) or the rate limiter
    cpu_busy_s: np.ndarray = field(init=False)
    gpu_sm_busy_s: float = 0.0  # integral of the SM fraction in use
    gpu_any_busy_s: float = 0.0  # time with at least one kernel running
    gpu_dram_bytes: float = 0.0  # bytes the kernels moved to and from GPU DRAM in the window
    queues: dict[str, QueueStat] = field(default_factory=dict)
    cpu_bins: np.ndarray = field(init=False)
    gpu_bins: np.ndarray = field(init=False)
    dram_bins: np.ndarray = field(init=False)
    # slices, flows and counters for Perfetto (archsim.sim.timeline), when a timeline is asked for
    timeline: Timeline | None = None

    def __post_init__(self) -> None:
        self.cpu_busy_s = np.zeros(self.hw_threads)
        self.cpu_bins = np.zeros((max(self.series_bins, 1), self.hw_threads))
        self.gpu_bins = np.zeros(max(self.series_bins, 1))
        self.dram_bins = np.zeros(max(self.series_bins, 1))  # bytes per bin

    def snapshot(self, at_s: float) -> Recorder:
        """A copy that reads as a run ending at ``at_s`` (the clock there): counters and arrays
        copied, queues brought up to ``at_s`` (QueueStat.snapshot); this recorder is unchanged.
        What components booked ahead of the clock, clipped only at ``end``, stays in the copy:
        archsim.sim.steady takes it out where it can."""
        out = copy.copy(self)
        out.end = at_s
        for name in ("cpu_busy_s", "cpu_bins", "gpu_bins", "dram_bins"):
            setattr(out, name, getattr(self, name).copy())
        out.queues = {name: q.snapshot(at_s) for name, q in self.queues.items()}
        return out

    def queue(self, name: str) -> QueueStat:
        if name not in self.queues:
            self.queues[name] = QueueStat(name, self.end)
        return self.queues[name]

    def cpu_busy(self, thread: int, start: float, finish: float) -> None:
        end = self.end
        s = start if start < end else end
        f = finish if finish < end else end
        self.cpu_busy_s[thread] += f - s
        if self.series_bins and f > s:
            _add_to_bins(self.cpu_bins[:, thread], s, f, end)

    def gpu_busy(self, start: float, finish: float, sm_fraction: float) -> None:
        end = self.end
        s = start if start < end else end
        f = finish if finish < end else end
        if f > s:
            self.gpu_any_busy_s += f - s
            self.gpu_sm_busy_s += sm_fraction * (f - s)
            if self.series_bins:
                _add_to_bins(self.gpu_bins, s, f, end, weight=sm_fraction)

    def gpu_dram(self, start: float, finish: float, nbytes: float) -> None:
        """``nbytes`` moved at an even rate over [start, finish): the part inside the window."""
        end = self.end
        s = start if start < end else end
        f = finish if finish < end else end
        if f > s and finish > start:
            rate = nbytes / (finish - start)
            self.gpu_dram_bytes += rate * (f - s)
            if self.series_bins:
                _add_to_bins(self.dram_bins, s, f, end, weight=rate)


def _add_to_bins(bins: np.ndarray, s: float, f: float, end: float, weight: float = 1.0) -> None:
    """Add the overlap of [s, f) with each of the equal bins of [0, end) to ``bins`` (in seconds)."""
    n = len(bins)
    width = end / n
    first = min(int(s / width), n - 1)
    last = min(int(f / width), n - 1)
    for b in range(first, last + 1):
        lo = max(s, b * width)
        hi = min(f, (b + 1) * width)
        if hi > lo:
            bins[b] += weight * (hi - lo)


@dataclass(frozen=True)
class PowerModel:
    """Idle and peak power of what is in use: ``gpus`` GPUs and every CPU socket, plus what the
    power model (archsim.perf.power) needs to charge only the SMs, cores and bytes that work."""

    gpus: int
    gpu_idle_w: float
    gpu_max_w: float
    sockets: int
    cpu_idle_w: float  # per socket
    cpu_max_w: float  # per socket
    gpu_enabled_sms: int = 1  # gpu.sms after --sms
    gpu_card_sms: int = 1  # SMs of the physical card (gpu.physical_sms); the rest draw only idle
    gpu_dram_bw_gbs: float = 1.0  # the physical card's (gpu.card_dram_bw): splits its TDP
    gpu_dram_pj_per_bit: float = 0.0  # 0: no DRAM term
    gpu_clock_rel: float = 1.0  # gpu.clock_mhz over the card's: scales SM dynamic power
    # 0: unknown, the threads in use on a socket count as its cores (small test machines)
    cores_per_socket: int = 0
    threads_per_core: int = 1
    cpu_clock_rel: float = 1.0  # cpu.thread_speed_rel over the part's: scales core dynamic power
    # The part's TDP less its idle, which a busy SM's or core's power is a share of (a what-if
    # limit or idle leaves it): GpuConfig.card_power_budget_w, CpuConfig.part_power_budget_w (per
    # socket). None: the limits above less idle.
    gpu_budget_w: float | None = None
    cpu_budget_w: float | None = None


def socket_busy(
    power: PowerModel,
    busy: np.ndarray,
    socket_of_thread: np.ndarray,
    smt_sibling: np.ndarray | None,
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """(first threads' busy cores, SMT siblings' busy threads), each (intervals, sockets), from the
    (intervals, threads) busy fractions ``busy``, and each socket's cores for the power split."""
    sibling = np.zeros(busy.shape[1], dtype=bool) if smt_sibling is None else smt_sibling
    first_busy = np.zeros((busy.shape[0], power.sockets))
    sibling_busy = np.zeros((busy.shape[0], power.sockets))
    for s in range(power.sockets):
        on = socket_of_thread == s
        first_busy[:, s] = busy[:, on & ~sibling].sum(axis=1)
        sibling_busy[:, s] = busy[:, on & sibling].sum(axis=1)
    in_use = np.bincount(socket_of_thread[~sibling], minlength=power.sockets)
    cores = [power.cores_per_socket or max(int(n), 1) for n in in_use]
    return first_busy, sibling_busy, cores


def _power_w(
    power: PowerModel,
    width_s: float,
    cpu_busy_s: np.ndarray,
    gpu_sm_busy_s: np.ndarray | float,
    gpu_dram_bytes: np.ndarray | float,
    socket_of_thread: np.ndarray,
    smt_sibling: np.ndarray | None,
    tdp_clip: bool = True,
) -> tuple[np.ndarray, np.ndarray]:
    """(CPU W, GPU W) over intervals of ``width_s``: ``cpu_busy_s`` is (intervals, threads) busy
    seconds, the GPU figures per interval. Linear in every input, so a window's power is the mean
    of its parts' (energy = integral of power). ``tdp_clip`` False leaves an interval above TDP:
    a power limit holds the mean (archsim.sim.power_cap), and a short stretch may pass it (Intel's
    PL2 above PL1), so clipping a bin would lose energy the window's mean counts."""
    first_busy, sibling_busy, cores = socket_busy(
        power, np.atleast_2d(cpu_busy_s) / width_s, socket_of_thread, smt_sibling
    )
    cpu_w = np.zeros(first_busy.shape[0])
    for s in range(power.sockets):
        cpu_w += cpu_socket_power_w(
            first_busy[:, s],
            sibling_busy[:, s],
            power.cpu_idle_w,
            power.cpu_max_w,
            cores[s],
            power.threads_per_core,
            power.cpu_clock_rel,
            tdp_clip,
            power.cpu_budget_w,
        )
    gpu_w = np.zeros(first_busy.shape[0])
    if power.gpus > 0:
        share = sm_share_of_card(
            np.asarray(gpu_sm_busy_s, dtype=float) / width_s,
            power.gpu_enabled_sms,
            power.gpu_card_sms,
        )
        # One GPU runs both streams; any further GPUs in use are counted idle (the learner uses one).
        gpu_w = gpu_w + gpu_power_w(
            share,
            np.asarray(gpu_dram_bytes, dtype=float) / width_s,
            power.gpu_idle_w,
            power.gpu_max_w,
            power.gpu_dram_bw_gbs,
            power.gpu_dram_pj_per_bit,
            power.gpu_clock_rel,
            tdp_clip,
            power.gpu_budget_w,
        )
        gpu_w = gpu_w + (power.gpus - 1) * power.gpu_idle_w
    return cpu_w, gpu_w


def core_utilization(cpu_busy_s: np.ndarray, cores: int, window_s: float) -> np.ndarray:
    """Busy fraction of each core over ``window_s``: the busy seconds of its hardware threads
    (thread ``t`` lives on core ``t % cores``, archsim.perf.cpu) summed, at most 1. With one
    thread per core it is that thread's busy fraction; with two busy SMT siblings the sum is an
    upper bound on the time the core had work, so it is capped at the whole window."""
    cores = max(int(cores), 1)
    threads = np.arange(len(cpu_busy_s))
    busy = np.bincount(threads % cores, weights=np.asarray(cpu_busy_s, float), minlength=cores)
    return np.minimum(busy / window_s, 1.0)


def summarize(
    rec: Recorder,
    power: PowerModel,
    socket_of_thread: np.ndarray,
    threads_per_socket: np.ndarray,
    smt_sibling: np.ndarray | None = None,
) -> dict[str, float]:
    """The run's metrics, named as the sweep CSV columns. ``smt_sibling`` marks the hardware threads
    that are a core's second thread (None: none is). ``avg_power_w`` and ``energy_j`` count CPU
    sockets and GPUs together (archsim.perf.power); ``frames_per_joule`` divides by both."""
    t = rec.end
    frames = rec.frames_per_env_step * rec.env_steps
    cpu_util = float(rec.cpu_busy_s.sum() / (rec.hw_threads * t))
    cpu_w, gpu_w = _power_w(
        power,
        t,
        rec.cpu_busy_s,
        rec.gpu_sm_busy_s,
        rec.gpu_dram_bytes,
        socket_of_thread,
        smt_sibling,
    )
    cpu_power_w, gpu_power_w = float(cpu_w[0]), float(gpu_w[0])
    gpu_sm_util = rec.gpu_sm_busy_s / t
    avg_power_w = cpu_power_w + gpu_power_w
    energy = avg_power_w * t
    # Cores in use: the hardware threads that are no core's second (SMT) thread.
    cores = rec.hw_threads if smt_sibling is None else int((~smt_sibling).sum())
    per_core = core_utilization(rec.cpu_busy_s, cores, t)
    out = {
        "frames_per_s": frames / t,
        "env_steps_per_s": rec.env_steps / t,
        "learner_updates_per_s": rec.learner_updates / t,
        "cpu_util": cpu_util,
        # per core (issue 15): the busiest core (a single loop's or a saturated actor's) and the mean
        "cpu_core_util_max": float(per_core.max()),
        "cpu_core_util_mean": float(per_core.mean()),
        "gpu_util": rec.gpu_any_busy_s / t,
        "gpu_sm_util": gpu_sm_util,
        "inference_batches_per_s": rec.inference_batches / t,
        "inference_batch_mean": rec.inference_obs / rec.inference_batches
        if rec.inference_batches
        else 0.0,
        "actor_wait_s_per_step": rec.actor_wait_s / rec.env_steps if rec.env_steps else 0.0,
        "gpu_power_w": gpu_power_w,
        "cpu_power_w": cpu_power_w,
        "avg_power_w": avg_power_w,
        "energy_j": energy,
        "energy_per_mframes_j": energy / frames * 1e6 if frames else float("nan"),
        "frames_per_joule": frames_per_joule(frames, energy),
    }
    for q in rec.queues.values():
        out.update(q.summary())
    return {name: float(value) for name, value in out.items()}


def add_cpu_power(metrics: dict[str, float], watts: float, window_s: float) -> None:
    """``metrics`` with ``watts`` more CPU power over the whole window (a part outside the simulated
    sockets: archsim.sim.replay_power), energy and per-frame figures to match."""
    if watts <= 0:
        return
    frames = metrics["frames_per_s"] * window_s
    metrics["cpu_power_w"] += watts
    metrics["avg_power_w"] += watts
    energy = metrics["avg_power_w"] * window_s
    metrics["energy_j"] = energy
    metrics["energy_per_mframes_j"] = energy / frames * 1e6 if frames else float("nan")
    metrics["frames_per_joule"] = frames_per_joule(frames, energy)


def power_series(
    rec: Recorder,
    power: PowerModel,
    socket_of_thread: np.ndarray,
    threads_per_socket: np.ndarray,
    smt_sibling: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """(bin start times, total power per bin): piecewise-constant power of the run, for plots and
    for checking that energy is its integral."""
    n = rec.series_bins
    width = rec.end / n
    cpu_w, gpu_w = _power_w(
        power,
        width,
        rec.cpu_bins,
        rec.gpu_bins,
        rec.dram_bins,
        socket_of_thread,
        smt_sibling,
        tdp_clip=False,
    )
    starts = np.arange(n) * width
    if rec.timeline is not None:  # the timeline shows CPU and GPU power as separate counters
        rec.timeline.power = (starts, cpu_w, gpu_w)
    return starts, cpu_w + gpu_w
