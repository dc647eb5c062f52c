"""Throughput of the vectorized kernel model (the simulator precomputes every op's duration with it).

    python benchmarks/kernel_model_speed.py

Prints ops per second for a real GPU trace (V100 fixture, tiled 16x, scaled to the A100 preset) and
for a CPU capture (bundled AlexNet trace, tiled 500x, predicted from shapes).
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archsim.hw import load_hw  # noqa: E402
from archsim.perf.kernel import predict_op_seconds  # noqa: E402
from archsim.trace.format import load  # noqa: E402
from archsim.trace.ingest import ingest  # noqa: E402

FIXTURE = ROOT.parent / "shared" / "fixtures" / "kineto" / "v100_cnn_ddp_train.json.gz"
CPU_TRACE = ROOT / "traces" / "alexnet-b32-fp32"


def best_of(runs: int, fn) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> int:
    v100, a100 = load_hw("dgx1-v100"), load_hw("dgx-a100")
    if FIXTURE.exists():
        ops = pd.concat([ingest(FIXTURE).ops] * 16, ignore_index=True)
        seconds = best_of(3, lambda: predict_op_seconds(ops, a100, v100))
        print(f"GPU trace ops scaled V100 -> A100: {len(ops)} ops in {seconds:.3f} s "
              f"= {len(ops) / seconds / 1e3:.0f}K ops/s")  # fmt: skip
    if CPU_TRACE.is_dir():
        ops = pd.concat([load(CPU_TRACE).ops] * 500, ignore_index=True)
        seconds = best_of(3, lambda: predict_op_seconds(ops, a100))
        print(f"CPU-captured ops on A100 from shapes: {len(ops)} ops in {seconds:.3f} s "
              f"= {len(ops) / seconds / 1e3:.0f}K ops/s")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
