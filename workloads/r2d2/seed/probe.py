"""Inference batches of other sizes, timed at the end of a capture: how the server's CPU per batch
grows with the batch.

A capture at one configuration closes batches of one size (2 actors x 2 envs, inference batch 4:
every batch holds 4 observations), so its batches alone cannot tell a cost per batch from a cost per
observation, and the simulator needs both to predict other batch sizes. Once the run is over (the
profiler stopped, the trainer halted), the learner process repeats the server's own batch work on
synthetic frames at PROBE_SIZES and at the run's inference batch: decode one request, advance the
environments' frame stacks and sequences (EnvStates.observe), and the policy's forward step under
the params lock (EnvStates.act). Each size's median thread CPU time goes to the learner's sidecar
(``inference_probe``; meta.capture.processes[learner] after the merge). The simulator keeps the
run's own level and takes only the shape from the probe (archsim.sim.recorded).
"""

from __future__ import annotations

import threading
import time
from typing import Any

import numpy as np

from workloads.r2d2.seed import protocol
from workloads.r2d2.seed.inference import EnvStates
from workloads.r2d2.seed.settings import SeedSettings

# Powers of two from 1 to 32: SEED RL's batches range from a few observations to hundreds
# (Espeholt et al. 2020, Sec. 4); on this 2-core box a 32-observation CPU forward already takes
# ~15 ms, and the simulator extrapolates linearly past the largest size probed.
PROBE_SIZES = (1, 2, 4, 8, 16, 32)
# Untimed batches per size first: the first forward at a new shape allocates its buffers.
PROBE_WARMUP = 2
# Timed batches per size: 10 of ~3-15 ms each keep the whole probe near one second.
PROBE_REPEATS = 10


def probe_sizes(inference_batch: int) -> list[int]:
    """PROBE_SIZES and the run's own inference batch, ascending."""
    return sorted({*PROBE_SIZES, int(inference_batch)})


def probe_inference(
    model: Any, settings: SeedSettings, lock: threading.Lock, sizes: list[int]
) -> list[dict[str, float]]:
    """[{batch_size, cpu_us, act_cpu_us, repeats}] per size: median thread CPU microseconds of the
    whole batch and of its forward step alone (only the curve's shape is used, so the median: one
    repeat disturbed by another process must not bend it)."""
    cfg = settings.r2d2
    largest = max(sizes)
    states = EnvStates(largest, cfg, protocol.FRAME_SHAPE, seed=settings.seed)
    rng = np.random.default_rng(settings.seed)
    frames = rng.integers(0, 256, (largest, *protocol.FRAME_SHAPE), dtype=np.uint8)
    rewards = np.zeros(largest, dtype=np.float32)
    dones = np.zeros(largest, dtype=bool)
    payloads = {
        size: protocol.encode_request(frames[:size], rewards[:size], dones[:size]) for size in sizes
    }
    whole_ns: dict[int, list[int]] = {size: [] for size in sizes}
    act_ns: dict[int, list[int]] = {size: [] for size in sizes}
    # round robin over the sizes: a disturbance (another process exiting) hits every size alike
    for repeat in range(PROBE_WARMUP + PROBE_REPEATS):
        for size in sizes:
            env_ids = np.arange(size)
            start = time.thread_time_ns()
            states.observe(env_ids, *protocol.decode_request(payloads[size], size))
            observed = time.thread_time_ns()
            with lock:
                states.act(model, env_ids)
            done = time.thread_time_ns()
            if repeat >= PROBE_WARMUP:
                whole_ns[size].append(done - start)
                act_ns[size].append(done - observed)
    return [
        {
            "batch_size": int(size),
            "cpu_us": round(float(np.median(whole_ns[size])) / 1000.0, 3),
            "act_cpu_us": round(float(np.median(act_ns[size])) / 1000.0, 3),
            "repeats": PROBE_REPEATS,
        }
        for size in sizes
    ]
