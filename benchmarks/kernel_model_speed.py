"""Throughput of the vectorized kernel model (the simulator precomputes every op's duration with it).

    python benchmarks/kernel_model_speed.py

Prints ops per second for a real GPU trace (V100 fixture, tiled 16x, scaled to the A100 preset) and
for a CPU capture (bundled AlexNet trace, tiled 500x, predicted from shapes); then the per-call cost
on a small table (one step of the AlexNet capture), which the simulator, sweeps and property tests
pay call after call: the first call in the process (nothing remembered) beside later calls (the
per-name results of archsim.perf.columns.by_unique remembered), and, measured in the same run as a
yardstick for the machine's speed, one pandas regular-expression match over the same names.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archsim.hw import load_hw  # noqa: E402
from archsim.perf import columns  # noqa: E402
from archsim.perf.kernel import body_seconds, predict_op_seconds  # noqa: E402
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
        small_table(load(CPU_TRACE).ops, a100)
    return 0


def small_table(ops: pd.DataFrame, hw) -> None:
    """Per-call time of body_seconds on one step's ops: first call, later calls, and a yardstick."""
    step = ops[ops["step_id"] == ops["step_id"].max()].reset_index(drop=True)
    memo = getattr(columns, "_MEMO", None)
    if memo is not None:
        memo.clear()  # as in a fresh process (the calls above filled it)
    start = time.perf_counter()
    body_seconds(step, hw)
    first = time.perf_counter() - start
    again = best_of(20, lambda: body_seconds(step, hw))
    names = pd.Series(step["name"].astype(str).tolist(), dtype="string")
    yardstick = best_of(20, lambda: names.str.contains(r"gemm|conv\d", regex=True))
    print(f"one step of the CPU capture ({len(step)} ops) on A100: first call {first * 1e3:.1f} ms, "
          f"later calls {again * 1e3:.1f} ms; yardstick (one pandas regex over its names) "
          f"{yardstick * 1e3:.2f} ms: later calls = {again / yardstick:.0f} yardsticks")  # fmt: skip


if __name__ == "__main__":
    sys.exit(main())
