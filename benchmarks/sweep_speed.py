"""Sweep speed (issue 17 item 3): points per second of one sweep run in process (``--jobs 1``), on the
process pool with 2 workers and on a Dask LocalCluster with 2 workers, side by side, and the
per-point overhead of each: everything but the simulation itself.

The simulation's own time is measured first, in this process: ``simulate`` on 200 of the points with
their service times already derived (the sweep's workers keep them too). A mode's per-point overhead is
then its worker-seconds per point (wall x workers / points) less that time: task round trips,
pickling, the CSV and Parquet writes, the derivations each worker does once, the progress
accounting. Printed twice: over the whole run (with the pool's or cluster's start-up) and steady
(from the first finished batch to the last), and in CPU seconds (this process and every worker
process, start-up included, less the simulation's CPU), which a busy machine disturbs least.
Goal: <= 10 ms a point.

    python benchmarks/sweep_speed.py [--points 1000] [--sim-seconds 0.02] [--modes inprocess,pool,dask]

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
MODES = {
    "inprocess": ("in process (--jobs 1)", "process", 1),
    "pool": ("process pool", "process", 2),
    "dask": ("Dask LocalCluster", "dask", 2),
}


def trace_dir(path: Path | None, scratch: Path) -> Path:
    if path is not None:
        return path
    if DQN_TRACE.is_dir():
        return DQN_TRACE
    sys.path.insert(0, str(ROOT))
    from archsim.trace import save
    from tests.test_sim_support import tiny_trace

    return save(tiny_trace(), scratch / "synthetic-trace")


def simulation_seconds_per_point(spec, sample: int = 200) -> tuple[float, float]:
    """Mean wall time of ``simulate`` alone over an even sample of the spec's points, with their
    service times derived beforehand (a first pass), as a sweep worker has them."""
    from archsim.analysis.sweep_cache import STATE
    from archsim.sim.config import SimConfig
    from archsim.sim.knobs import split_point
    from archsim.sim.run import simulate

    trace = STATE.trace(str(spec.trace))
    points = spec.points()
    prepared = []
    for point in points[:: max(1, len(points) // sample)]:
        sim, overrides = split_point(point)
        settings = tuple(overrides)
        hw = STATE.hw(spec.hw, settings)
        times = STATE.memo.bind(str(spec.trace), (spec.hw, settings))
        prepared.append((hw, SimConfig(**sim), times))
    for hw, config, times in prepared:
        simulate(trace, hw, config, service_times=times)  # derives once per hardware point
    started, cpu_started = time.perf_counter(), time.process_time()
    for hw, config, times in prepared:
        simulate(trace, hw, config, service_times=times)
    wall = (time.perf_counter() - started) / len(prepared)
    return wall, (time.process_time() - cpu_started) / len(prepared)


def cpu_seconds() -> float:
    """CPU seconds of this process and of its finished (reaped) descendants: pool workers, Dask
    nannies and their workers."""
    import resource

    me = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return me.ru_utime + me.ru_stime + children.ru_utime + children.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--points", type=int, default=1000, help="a multiple of 100")
    parser.add_argument("--sim-seconds", type=float, default=0.02)
    parser.add_argument(
        "--modes", default=",".join(MODES), help=f"comma list of {', '.join(MODES)} (default all)"
    )
    args = parser.parse_args()
    modes = args.modes.split(",")
    if not set(modes) <= set(MODES):
        parser.error(f"--modes: {args.modes!r} is not a comma list of {', '.join(MODES)}")
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
        sim_s, sim_cpu_s = simulation_seconds_per_point(spec)
        print(
            f"simulation alone, in process: {sim_s * 1e3:.2f} ms a point wall, "
            f"{sim_cpu_s * 1e3:.2f} ms CPU"
        )
        print(
            f"{'mode':<24}{'workers':>8}{'wall s':>9}{'points/s':>10}"
            f"{'overhead ms/point: wall':>25}{'steady':>8}{'CPU':>8}"
        )
        for name, backend, workers in (MODES[mode] for mode in modes):
            arrivals: list[float] = []
            started, cpu_started = time.perf_counter(), cpu_seconds()
            run_sweep(
                spec,
                Path(scratch) / f"{backend}-{workers}",
                jobs=workers,
                backend=backend,
                progress=False,
                on_row=lambda row, seen=arrivals: seen.append(time.perf_counter()),
            )
            wall = time.perf_counter() - started
            cpu_overhead = (cpu_seconds() - cpu_started) / points - sim_cpu_s
            overhead = wall * workers / points - sim_s
            # steady: from the first finished batch's rows to the last row
            first = arrivals[0]
            later = [t for t in arrivals if t > first]
            steady_wall = arrivals[-1] - first
            steady = steady_wall * workers / max(1, len(later)) - sim_s if later else float("nan")
            print(
                f"{name:<24}{workers:>8}{wall:>9.1f}{points / wall:>10.1f}"
                f"{overhead * 1e3:>25.2f}{steady * 1e3:>8.2f}{cpu_overhead * 1e3:>8.2f}"
            )


if __name__ == "__main__":
    main()
