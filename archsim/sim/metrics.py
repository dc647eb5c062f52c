"""Bookkeeping of a simulated run: counters, busy time, queues (Little's law) and power/energy.

Every quantity is clipped to the measured window [0, sim_seconds], so a burst that straddles the end
counts only its part inside the window. Queues keep the time integral of their length and the waits
of their items (including the part waited so far by items still queued at the end), so
``mean length == arrival rate x mean wait`` holds exactly: Little's law over a finite window.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from archsim.perf.power import device_power_w, frames_per_joule

# ALE with frameskip 4: one agent (env) step = 4 frames (REFERENCE.md "RL workloads").
FRAMES_PER_ENV_STEP = 4


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
    env_steps: int = 0
    learner_updates: int = 0
    inference_batches: int = 0
    inference_obs: int = 0
    actor_wait_s: float = 0.0  # time actors waited for inference (central) or the rate limiter
    cpu_busy_s: np.ndarray = field(init=False)
    gpu_sm_busy_s: float = 0.0  # integral of the SM fraction in use
    gpu_any_busy_s: float = 0.0  # time with at least one kernel running
    queues: dict[str, QueueStat] = field(default_factory=dict)
    cpu_bins: np.ndarray = field(init=False)
    gpu_bins: np.ndarray = field(init=False)
    timeline: list | None = None

    def __post_init__(self) -> None:
        self.cpu_busy_s = np.zeros(self.hw_threads)
        self.cpu_bins = np.zeros((max(self.series_bins, 1), self.hw_threads))
        self.gpu_bins = np.zeros(max(self.series_bins, 1))

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
    """Idle and peak power of what is in use: ``gpus`` GPUs and every CPU socket."""

    gpus: int
    gpu_idle_w: float
    gpu_max_w: float
    sockets: int
    cpu_idle_w: float  # per socket
    cpu_max_w: float  # per socket


def summarize(
    rec: Recorder, power: PowerModel, socket_of_thread: np.ndarray, threads_per_socket: np.ndarray
) -> dict[str, float]:
    """The run's metrics, named as the sweep CSV columns."""
    t = rec.end
    frames = FRAMES_PER_ENV_STEP * rec.env_steps
    cpu_util = float(rec.cpu_busy_s.sum() / (rec.hw_threads * t))
    socket_busy = np.bincount(socket_of_thread, weights=rec.cpu_busy_s, minlength=power.sockets)
    socket_util = socket_busy / (np.maximum(threads_per_socket, 1) * t)
    cpu_power_w = float(np.sum(device_power_w(socket_util, power.cpu_idle_w, power.cpu_max_w)))
    # One GPU runs both streams; any further GPUs in use are counted idle (the learner uses one).
    gpu_sm_util = rec.gpu_sm_busy_s / t
    gpu_power_w = (
        float(device_power_w(gpu_sm_util, power.gpu_idle_w, power.gpu_max_w))
        + (power.gpus - 1) * power.gpu_idle_w
    )
    avg_power_w = cpu_power_w + gpu_power_w
    energy = avg_power_w * t
    out = {
        "frames_per_s": frames / t,
        "env_steps_per_s": rec.env_steps / t,
        "learner_updates_per_s": rec.learner_updates / t,
        "cpu_util": cpu_util,
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


def power_series(
    rec: Recorder, power: PowerModel, socket_of_thread: np.ndarray, threads_per_socket: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(bin start times, total power per bin): piecewise-constant power of the run, for plots and
    for checking that energy is its integral."""
    n = rec.series_bins
    width = rec.end / n
    socket_busy = np.zeros((n, power.sockets))
    for s in range(power.sockets):
        socket_busy[:, s] = rec.cpu_bins[:, socket_of_thread == s].sum(axis=1)
    socket_util = socket_busy / (np.maximum(threads_per_socket, 1) * width)
    cpu_w = device_power_w(socket_util, power.cpu_idle_w, power.cpu_max_w).sum(axis=1)
    gpu_w = device_power_w(rec.gpu_bins / width, power.gpu_idle_w, power.gpu_max_w)
    gpu_w = gpu_w + (power.gpus - 1) * power.gpu_idle_w
    return np.arange(n) * width, cpu_w + gpu_w
