"""Sweep speed (issue 17 item 3): points per second of one sweep run in process (``--jobs 1``), on the
process pool with 2 workers and on a Dask LocalCluster with 2 workers, side by side, and the
per-point overhead of each: everything but the simulation itself.

The simulation's own time is measured first, in this process: ``simulate`` on every point with the
service times already derived (the sweep's workers keep them too). A mode's per-point overhead is
then its worker-seconds per point (wall x workers / points) less that time: task round trips,
pickling, the CSV and Parquet writes, the derivations each worker does once, the progress
accounting. Printed twice: over the whole run (with the pool's or cluster's start-up) and steady
(from the first finished batch to the last). Goal: <= 10 ms a point.

    python benchmarks/sweep_speed.py [--points 1000] [--sim-seconds 0.02] [--trace DIR]

Points are actors x SMs x seeds (10 x 10 x points/100); ``--points 10000`` is the issue's 10,000.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DQN_TRACE = ROOT / "traces" / "dqn-pong-cpu"
ACTORS = [4, 8, 16, 24, 32, 48, 64, 128, 192, 256]
SMS = [8, 16, 24, 32, 40, 48, 56, 64, 72, 80]
MODES = (
    ("in process (--jobs 1)", "process", 1),
    ("process pool", "process", 2),
    ("Dask", "dask", 2),
)


def trace_dir(path: Path | None, scratch: Path) -> Path:
    if path is not None:
        return path
    if DQN_TRACE.is_dir():
        return DQN_TRACE
    sys.path.insert(0, str(ROOT))
    from archsim.trace import save
    from tests.test_sim_support import tiny_trace

    return save(tiny_trace(), scratch / "synthetic-trace")


def simulation_seconds_per_point(spec) -> float:
    """Mean wall time of ``simulate`` alone over the spec's points, service times derived up front."""
    from archsim.analysis.sweep_cache import STATE
    from archsim.sim.config import SimConfig
    from archsim.sim.knobs import split_point
    from archsim.sim.run import simulate

    trace = STATE.trace(str(spec.trace))
    prepared = []
    for point in spec.points():
        sim, overrides = split_point(point)
        settings = tuple(overrides)
        hw = STATE.hw(spec.hw, settings)
        times = STATE.memo.bind(str(spec.trace), (spec.hw, settings))
        config = SimConfig(**sim)
        simulate(trace, hw, config, service_times=times)  # derives once per hardware point
        prepared.append((hw, config, times))
    started = time.perf_counter()
    for hw, config, times in prepared:
        simulate(trace, hw, config, service_times=times)
    return (time.perf_counter() - started) / len(prepared)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--points", type=int, default=1000, help="a multiple of 100")
    parser.add_argument("--sim-seconds", type=float, default=0.02)
    args = parser.parse_args()
    if args.points < 100 or args.points % 100:
        parser.error("--points: a multiple of 100 (10 actor counts x 10 SM counts x seeds)")

    from archsim.analysis.sweep import SweepSpec, run_sweep

    with tempfile.TemporaryDirectory() as scratch:
        trace = trace_dir(args.trace, Path(scratch))
        knobs = {
            "actors": ACTORS,
            "sms": SMS,
            "seed": list(range(args.points // 100)),
            "sim_seconds": [args.sim_seconds],
        }
        spec = SweepSpec(trace=trace, hw="dgx1-v100", knobs=knobs)
        points = len(spec.points())
        print(f"trace: {trace}; {points} points; {args.sim_seconds:g} simulated s per point")
        sim_s = simulation_seconds_per_point(spec)
        print(f"simulation alone, in process: {sim_s * 1e3:.2f} ms a point")
        print(
            f"{'mode':<24}{'workers':>8}{'wall s':>9}{'points/s':>10}"
            f"{'overhead ms/point':>19}{'steady ms/point':>17}"
        )
        for name, backend, workers in MODES:
            arrivals: list[float] = []
            started = time.perf_counter()
            run_sweep(
                spec,
                Path(scratch) / f"{backend}-{workers}",
                jobs=workers,
                backend=backend,
                progress=False,
                on_row=lambda row, seen=arrivals: seen.append(time.perf_counter()),
            )
            wall = time.perf_counter() - started
            overhead = wall * workers / points - sim_s
            # steady: from the first finished batch's rows to the last row
            first = arrivals[0]
            later = [t for t in arrivals if t > first]
            steady_wall = arrivals[-1] - first
            steady = steady_wall * workers / max(1, len(later)) - sim_s if later else float("nan")
            print(
                f"{name:<24}{workers:>8}{wall:>9.1f}{points / wall:>10.1f}"
                f"{overhead * 1e3:>19.2f}{steady * 1e3:>17.2f}"
            )


if __name__ == "__main__":
    main()
