"""How fast this machine is right now: the thread CPU time of one fixed piece of work.

A virtual machine's speed drifts with its neighbours. In the validation runs of 2026-11-22 the DQN
baseline captures spent 320-331 us of CPU per ALE env step in two runs and 400 us in a third, a few
minutes apart (20% slower, the same code), and the predictions from that slow capture came out 20%
low. Timing the same reference work right before and after each baseline capture and each measured
run separates the machine's drift from the model's error: a prediction made from a capture taken
while the box ran at speed s_c, for a run at speed s_m, is off by s_m / s_c before the model errs
at all (every part of these runs is CPU-bound).

The reference mixes what the workloads do: the Nature-DQN first convolution on one 4x84x84
observation (torch), a 210x160 RGB frame reduced to 84x84 grey (numpy), and a pure Python loop.

It runs on ONE torch thread, as the workloads do (DqnConfig and SeedSettings ``torch_threads=1``).
With torch's default of one intra-op thread per core, the calling thread busy-waits for its helper
at the end of each op; on a loaded box the helper waits for a core, and the spin is charged to the
caller: on this 2-core VM with other jobs keeping ~1.6 CPUs busy (2026-11-24) the reference read
18-239 ms on two threads and 11.3-11.6 ms on one, so two-thread readings measured the load, not the
machine's speed.
"""

from __future__ import annotations

import statistics
import time

# Repeats of the reference per reading; the median keeps one interrupted repeat out. Each repeat
# takes ~15 ms of CPU here (spread of 5 readings: 2%), so a reading costs ~0.1 s.
REFERENCE_REPEATS = 5
# Pieces of work per repeat (design choices that make each part a few ms on this box).
CONV_CALLS = 20
FRAME_CALLS = 20
PYTHON_ITERATIONS = 50_000


def reference_cpu_ms() -> float:
    """Median thread CPU milliseconds of the reference work over REFERENCE_REPEATS repeats, on one
    torch thread (the caller's thread count is restored)."""
    import torch

    threads_before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return statistics.median(_time_reference())
    finally:
        torch.set_num_threads(threads_before)


def _time_reference() -> list[float]:
    """Thread CPU milliseconds of each repeat of the reference work."""
    import numpy as np
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(0)
    # Nature DQN conv1: 32 filters 8x8 stride 4 over 4 stacked 84x84 frames (Mnih et al. 2015)
    obs = torch.from_numpy(rng.random((1, 4, 84, 84), dtype=np.float32))
    weight = torch.from_numpy(rng.random((32, 4, 8, 8), dtype=np.float32))
    frame = rng.integers(0, 256, (210, 160, 3), dtype=np.uint8)  # an ALE Atari frame
    rows, cols = np.linspace(0, 209, 84).astype(int), np.linspace(0, 159, 84).astype(int)
    samples = []
    with torch.no_grad():
        for _ in range(REFERENCE_REPEATS):
            start = time.thread_time_ns()
            for _ in range(CONV_CALLS):
                F.conv2d(obs, weight, stride=4)
            for _ in range(FRAME_CALLS):
                frame.mean(axis=2)[np.ix_(rows, cols)].astype(np.uint8)
            total = 0
            for i in range(PYTHON_ITERATIONS):
                total += i * i
            samples.append((time.thread_time_ns() - start) / 1e6)
    return samples
