"""Print how R2D2's per-observation inference cost falls with the inference batch (SEED's reason to
batch centrally): one LSTM step of the R2D2 network at batch 1..16 on this machine's CPU.

    python benchmarks/r2d2_inference_batch.py

Figures are ratios within one run (machine load changes absolute times).
"""

from __future__ import annotations

import time

import torch

from workloads.r2d2.model import R2D2Net

PONG_ACTIONS = 6  # ALE Pong minimal action set
REPEATS = 20


def time_batch(net: R2D2Net, batch: int) -> float:
    obs = torch.randint(0, 255, (batch, 1, 4, 84, 84), dtype=torch.uint8)
    prev_a = torch.zeros(batch, 1, dtype=torch.int64)
    prev_r = torch.zeros(batch, 1)
    state = net.initial_state(batch)
    with torch.no_grad():
        net(obs, prev_a, prev_r, state)  # warm-up
        times = []
        for _ in range(REPEATS):
            start = time.perf_counter()
            net(obs, prev_a, prev_r, state)
            times.append(time.perf_counter() - start)
    # the fastest repeat: the least disturbed by other jobs on a shared machine
    return min(times)


def main() -> None:
    torch.set_num_threads(1)
    torch.manual_seed(0)
    net = R2D2Net(PONG_ACTIONS)
    base = None
    print("batch  ms/batch  ms/obs  per-obs cost vs batch 1")
    for batch in (1, 2, 4, 8, 16):
        seconds = time_batch(net, batch)
        per_obs = seconds / batch
        base = base or per_obs
        print(f"{batch:5d}  {seconds * 1e3:8.2f}  {per_obs * 1e3:6.2f}  {per_obs / base:6.2f}")


if __name__ == "__main__":
    main()
