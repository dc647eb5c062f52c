"""What limits a simulated run's throughput, and why, in words a report can print.

A closed system (actors wait for their actions) runs as fast as its most loaded resource allows, so the
limiter is read from utilizations and waits the simulator already reports:

- a resource busy at least ``SATURATED`` of the time is saturated: adding actors cannot raise frames/s
  beyond it (the GPU, or the CPU threads as a whole);
- inserts that wait for the replay rate limiter longer than samples (and requests) wait: the learner,
  consuming at its replay ratio, sets the pace;
- actors that spend more than half of their time waiting for actions are held back by the inference
  path (batching, the server thread, the GPU);
- otherwise the system is latency-bound: every resource has slack and throughput grows with actors.

``SATURATED`` is 0.9: in an M/M/1-like queue the wait grows as 1/(1-u), so above ~90% busy, queueing
rather than service dominates (Kleinrock, *Queueing Systems* vol. 1, 1975, the M/M/1 mean response
time); a sweep's knee shows up there.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

SATURATED = 0.9
# An actor that spends more than half of its time waiting is held back by what it waits for.
WAITING = 0.5


def limiter(metrics: Mapping[str, float]) -> tuple[str, str]:
    """(short name, one-sentence reason) of what limits a run whose record is ``metrics`` (simulate's
    metric names, plus the ``actors`` knob as metrics.json and sweep rows carry it)."""
    gpu = _number(metrics, "gpu_util")
    cpu = _number(metrics, "cpu_util")
    if metrics.get("loop") == "sequential":
        # One thread does everything in turn: nothing overlaps, so the iteration is the sum of its
        # parts and the larger of CPU work and GPU waits is what a faster part would shorten most.
        part = "GPU work it waits for" if gpu > cpu else "CPU work (env step, Python, launches)"
        return (
            "the single loop",
            f"one thread runs env step, act and training in turn, so every part adds up; the "
            f"larger part is {part} (GPU busy {gpu:.0%} of the time)",
        )
    if gpu >= SATURATED and gpu >= cpu:
        return "GPU", f"the GPU is busy {gpu:.0%} of the time: more actors only queue behind it"
    if cpu >= SATURATED:
        return (
            "CPU",
            f"the CPU threads are {cpu:.0%} busy: actors, inference server and learner compete for them",
        )
    insert_wait = _number(metrics, "replay_insert_wait_mean_us")
    sample_wait = _number(metrics, "replay_sample_wait_mean_us")
    inference_wait = _number(metrics, "inference_wait_mean_us")
    if insert_wait > 0 and insert_wait > max(sample_wait, inference_wait):
        # The rate limiter holds inserts back and the learner never waits for data: the learner,
        # consuming at its replay ratio, sets the pace (a faster one would raise frames/s).
        return (
            "learner pacing",
            f"inserts wait {insert_wait:,.0f} us for the learner to consume at its replay ratio "
            f"(samples wait {sample_wait:,.0f} us): a faster learner, a larger learner batch or a "
            "lower --replay-ratio raises frames/s",
        )
    actors = _number(metrics, "actors")
    steps_per_s = _number(metrics, "env_steps_per_s")
    # Fraction of each actor's time spent waiting: waits per step x steps per actor per second.
    waiting = _number(metrics, "actor_wait_s_per_step") * steps_per_s / actors if actors else 0.0
    if waiting > WAITING:
        return (
            "inference",
            f"actors spend {waiting:.0%} of their time waiting for actions "
            f"({inference_wait:,.0f} us per request: batching, the server thread and the GPU)",
        )
    return (
        "actors (latency-bound)",
        f"no resource is saturated (GPU {gpu:.0%}, CPU {cpu:.0%} busy) and actors mostly work: "
        "more actors add throughput",
    )


def _number(metrics: Mapping[str, float], key: str) -> float:
    try:
        value = float(metrics.get(key, 0.0) or 0.0)
    except (TypeError, ValueError):
        return 0.0
    return value if math.isfinite(value) else 0.0


def knee(xs: Sequence[float], ys: Sequence[float], efficiency: float = 0.5) -> float | None:
    """The first x after which y grows less than ``efficiency`` x proportionally to x (None: never).

    With y = frames/s and x = actors, a system that scales perfectly doubles y when x doubles; the knee
    is where doubling x buys less than half of that (``efficiency`` 0.5), i.e. where the limiter bites.
    """
    points = sorted((float(x), float(y)) for x, y in zip(xs, ys, strict=True))
    for (x0, y0), (x1, y1) in zip(points, points[1:], strict=False):
        if x0 <= 0 or y0 <= 0 or not math.isfinite(y1):
            continue
        ideal_gain = x1 / x0 - 1.0
        gain = y1 / y0 - 1.0
        if ideal_gain > 0 and gain < efficiency * ideal_gain:
            return x0
    return None
