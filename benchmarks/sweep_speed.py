"""Sweep speed: an 8-point actor sweep plus an 8-point SM sweep (at 256 actors) with two parallel
jobs, the issue's goal on this 2-core machine being under 60 s for both. Prints wall times.

    python benchmarks/sweep_speed.py [--trace DIR] [--jobs 2] [--sim-seconds 2]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DQN_TRACE = ROOT / "traces" / "dqn-pong-cpu"
ACTORS = [4, 8, 16, 32, 40, 64, 128, 256]
SMS = [2, 4, 8, 16, 32, 40, 64, 80]


def trace_dir(path: Path | None, scratch: Path) -> Path:
    if path is not None:
        return path
    if DQN_TRACE.is_dir():
        return DQN_TRACE
    sys.path.insert(0, str(ROOT))
    from archsim.trace import save
    from tests.test_sim_support import tiny_trace

    return save(tiny_trace(), scratch / "synthetic-trace")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--sim-seconds", type=float, default=2.0)
    args = parser.parse_args()

    from archsim.analysis.sweep import SweepSpec, run_sweep

    with tempfile.TemporaryDirectory() as scratch:
        trace = trace_dir(args.trace, Path(scratch))
        print(f"trace: {trace}; {args.jobs} jobs; {args.sim_seconds:g} simulated s per point")
        total = 0.0
        for name, knobs in (
            ("actor sweep", {"actors": ACTORS}),
            ("SM sweep at 256 actors", {"actors": [256], "sms": SMS}),
        ):
            spec = SweepSpec(
                trace=trace,
                hw="dgx1-v100",
                knobs={**knobs, "sim_seconds": [args.sim_seconds]},
            )
            started = time.perf_counter()
            table = run_sweep(spec, Path(scratch) / name.split()[0], jobs=args.jobs, progress=False)
            wall = time.perf_counter() - started
            total += wall
            print(
                f"{name}: {len(table)} points in {wall:.1f} s wall "
                f"(per point: {table['wall_s'].mean():.2f} s in its worker)"
            )
        print(f"both sweeps: {total:.1f} s wall (goal: under 60 s)")


if __name__ == "__main__":
    main()
