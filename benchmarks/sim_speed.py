"""Simulator speed: 256 actors over 60 simulated seconds on the dgx1-v100 preset (issue 4's goal on
this 2-core machine: under 10 s), against the same number of events through a bare simpy loop.

Also times the time-shared CPU model (``--cpu-sched shared``), which has no fast path.

Uses traces/dqn-pong-cpu when present (the bundled DQN capture), else the tiny synthetic DQN-like
trace the tests build. Prints figures; asserts nothing (timings vary with the machine's load).

    python benchmarks/sim_speed.py [--trace DIR] [--sim-seconds 60] [--actors 256]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DQN_TRACE = ROOT / "traces" / "dqn-pong-cpu"


def bare_simpy_seconds(events: int) -> float:
    """Wall time of ``events`` timeouts through one simpy process (the cheapest simpy event)."""
    import simpy

    env = simpy.Environment()

    def loop():
        for _ in range(events):
            yield env.timeout(1e-6)

    env.process(loop())
    started = time.perf_counter()
    env.run()
    return time.perf_counter() - started


def load_trace(path: Path | None):
    from archsim.trace import load

    if path is not None:
        return load(path), str(path)
    if DQN_TRACE.is_dir():
        return load(DQN_TRACE), str(DQN_TRACE.relative_to(ROOT))
    sys.path.insert(0, str(ROOT))
    from tests.test_sim_support import tiny_trace

    return tiny_trace(), "synthetic DQN-like trace (tests/test_sim_support.py)"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--sim-seconds", type=float, default=60.0)
    parser.add_argument("--actors", type=int, default=256)
    parser.add_argument(
        "--plain-seconds", type=float, default=5.0, help="window for the plain path"
    )
    args = parser.parse_args()

    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.run import simulate, simulate_system

    trace, name = load_trace(args.trace)
    hw = load_hw("dgx1-v100")
    config = SimConfig(actors=args.actors, sim_seconds=args.sim_seconds)
    started = time.perf_counter()
    result = simulate(trace, hw, config)
    wall = time.perf_counter() - started
    bare = bare_simpy_seconds(result.events)
    m = result.metrics
    print(f"trace: {name}")
    print(
        f"{args.actors} actors, {args.sim_seconds:g} simulated s on dgx1-v100 ({result.engine} path): "
        f"{wall:.2f} s wall, {result.events:,} simpy events, {result.events / wall:,.0f} events/s"
    )
    print(
        f"  simulated {m['env_steps_per_s'] * args.sim_seconds:,.0f} env steps "
        f"({m['frames_per_s']:,.0f} frames/s), {m['env_steps_per_s'] * args.sim_seconds / wall:,.0f} "
        "simulated env steps per wall second"
    )
    print(
        f"bare simpy loop, same {result.events:,} events: {bare:.2f} s "
        f"-> archsim / bare = {wall / bare:.1f}x"
    )
    # Engine only (service times derived once), fast path against the plain simpy path.
    from archsim.sim.workload import derive_machine, derive_service_times

    batch = result.config.learner_batch
    t0 = time.perf_counter()
    times = derive_service_times(trace, hw, result.config, batch)
    machine = derive_machine(hw, result.config)
    derive_wall = time.perf_counter() - t0
    short = result.config.replace(sim_seconds=args.plain_seconds)
    walls = {}
    for engine in ("fast", "simpy"):
        t0 = time.perf_counter()
        run = simulate_system(times, machine, short.replace(engine=engine), batch)
        walls[engine] = (time.perf_counter() - t0, run)
    (fast_wall, fast), (plain_wall, plain) = walls["fast"], walls["simpy"]
    print(f"service-time derivation (kernel model, all batch sizes): {derive_wall:.2f} s")
    print(
        f"engine only, {args.plain_seconds:g} simulated s: fast path {fast_wall:.2f} s "
        f"({fast.events:,} events), plain simpy path {plain_wall:.2f} s ({plain.events:,} events)"
        f" -> {plain_wall / fast_wall:.1f}x; frames/s {fast.metrics['frames_per_s']:,.0f} vs "
        f"{plain.metrics['frames_per_s']:,.0f}"
    )
    # --cpu-sched shared has no closed form (a burst's end depends on later arrivals): one process
    # per actor on the processor-sharing CPU. Same window as the plain path, for the ratio.
    t0 = time.perf_counter()
    shared = simulate_system(times, machine, short.replace(cpu_sched="shared"), batch)
    shared_wall = time.perf_counter() - t0
    print(
        f"--cpu-sched shared, {args.plain_seconds:g} simulated s: {shared_wall:.2f} s "
        f"({shared.events:,} events, {shared_wall / fast_wall:.1f}x the pinned fast path); "
        f"frames/s {shared.metrics['frames_per_s']:,.0f} (a different model: every thread "
        "time-shares every core)"
    )


if __name__ == "__main__":
    main()
