"""Simulator speed (issue 17): archsim's simulated env steps per second of wall and of CPU time, with
pinned and with time-shared CPUs (``--cpu-sched shared``), at 256 and 4,096 actors, side by side with
a bare simpy loop that takes one timeout per env step for the same number of steps; and archsim's
peak memory at two simulated lengths (flat when the longer run needs no more).

Every archsim run is a child process of its own (a fresh interpreter: its peak resident memory,
VmHWM, is that run's alone; imports and the trace's service-time derivation are outside the timed
part). CPU time is the process's own (``time.process_time``), which other load on the machine does
not inflate the way it does wall time; the ratio to the bare loop is taken on CPU time.

Uses traces/dqn-pong-cpu on the dgx1-v100 preset when present (the bundled DQN capture), else the
tiny synthetic DQN-like trace the tests build. Pacing as ``archsim simulate`` sets it (the trace's
replay ratio) or none (``--replay-ratio none``: the actors run free, many more env steps per
simulated second). Prints figures; asserts nothing (timings vary with the machine's load).

Engines: ``auto`` (the exact fast paths) for --sim-seconds (8 s; 2 s above 1,024 actors, what the
run-time bound allows unpaced), and ``steady`` (archsim.sim.steady: one exact run read at growing checkpoints, the
rest extrapolated at their steady rates) for --steady-seconds (60 s, issue 17's example). A steady
row's steps are the steps its result stands for (its env steps/s x the simulated seconds asked).

    python benchmarks/sim_speed.py [--sim-seconds 8] [--actors 256 4096] [--pacing trace none]
        [--engine auto steady] [--steady-seconds 60]
"""

from __future__ import annotations

import argparse
import itertools
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DQN_TRACE = ROOT / "traces" / "dqn-pong-cpu"


def bare_simpy(steps: int) -> tuple[float, float]:
    """(wall s, CPU s) of ``steps`` timeouts through one simpy process: one event per env step."""
    import simpy

    env = simpy.Environment()

    def loop():
        for _ in range(steps):
            yield env.timeout(1e-6)

    env.process(loop())
    wall, cpu = time.perf_counter(), time.process_time()
    env.run()
    return time.perf_counter() - wall, time.process_time() - cpu


def peak_rss_mb() -> float:
    """This process's peak resident memory (VmHWM), MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def load_trace(path: Path | None):
    from archsim.trace import load

    if path is not None:
        return load(path), str(path)
    if DQN_TRACE.is_dir():
        return load(DQN_TRACE), str(DQN_TRACE.relative_to(ROOT))
    sys.path.insert(0, str(ROOT))
    from tests.test_sim_support import tiny_trace

    return tiny_trace(), "synthetic DQN-like trace (tests/test_sim_support.py)"


def one_run(args: argparse.Namespace) -> None:
    """Child: one simulation, timed; prints one JSON line."""
    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.pacing import resolve_pacing
    from archsim.sim.run import simulate_system
    from archsim.sim.workload import derive_machine, derive_service_times, trace_learner_batch

    trace, name = load_trace(args.trace)
    hw = load_hw(args.hw)
    pacing = {} if args.pacing == "trace" else {"replay_ratio": None}
    config = SimConfig(
        actors=args.actors,
        sim_seconds=args.sim_seconds,
        cpu_sched=args.cpu_sched,
        engine=args.engine[0],
        **pacing,
    )
    batch = trace_learner_batch(trace)
    config, _ = resolve_pacing(trace, config.replace(learner_batch=batch))
    times = derive_service_times(trace, hw, config, batch)
    machine = derive_machine(hw, config)
    wall, cpu = time.perf_counter(), time.process_time()
    result = simulate_system(times, machine, config, batch)
    wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
    steps = result.metrics["env_steps_per_s"] * args.sim_seconds
    row = {"trace": name, "wall_s": wall, "cpu_s": cpu, "steps": steps, "events": result.events}
    row.update(path=result.engine, frames_per_s=result.metrics["frames_per_s"])
    row["peak_mb"] = peak_rss_mb()
    print(json.dumps(row))


def child(
    args: argparse.Namespace, actors: int, sched: str, pacing: str, seconds: float, engine: str
) -> dict:
    command = [sys.executable, __file__, "--one", "--actors", str(actors), "--cpu-sched", sched]
    command += ["--engine", engine]
    command += ["--pacing", pacing, "--sim-seconds", str(seconds), "--hw", args.hw]
    if args.trace is not None:
        command += ["--trace", str(args.trace)]
    done = subprocess.run(command, capture_output=True, text=True, cwd=ROOT)
    if done.returncode != 0:
        sys.exit(f"{' '.join(command[1:])} failed:\n{done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", type=Path, default=None)
    parser.add_argument("--hw", default="dgx1-v100")
    parser.add_argument("--sim-seconds", type=float, default=8.0)
    parser.add_argument(
        "--sim-seconds-large",
        type=float,
        default=2.0,
        help="simulated seconds above 1,024 actors (archsim's run-time bound, docs/LIMITS.md, "
        "refuses 8 s of 4,096 unpaced actors)",
    )
    parser.add_argument("--actors", type=int, nargs="+", default=[256, 4096])
    parser.add_argument("--pacing", nargs="+", default=["trace", "none"], choices=["trace", "none"])
    parser.add_argument("--cpu-sched", nargs="+", default=["pinned", "shared"])
    parser.add_argument(
        "--engine",
        nargs="+",
        default=["auto", "steady"],
        choices=["auto", "fast", "simpy", "steady"],
        help="engines to time (steady: archsim.sim.steady, run for --steady-seconds)",
    )
    parser.add_argument(
        "--steady-seconds",
        type=float,
        default=60.0,
        help="simulated seconds of the steady engine's rows (issue 17's example: 60)",
    )
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one:
        args.actors, args.cpu_sched, args.pacing = args.actors[0], args.cpu_sched[0], args.pacing[0]
        args.engine = args.engine[:1]
        one_run(args)
        return
    print(
        f"{args.hw}; sim s: simulated seconds (peak memory MB also at a quarter of them); steps: "
        "simulated env steps; per second of wall / of the run's own CPU time"
    )
    header = (
        f"{'pacing':>6} {'actors':>6} {'cpu':>6} {'path':>13} {'sim s':>5} {'steps':>10} "
        f"{'archsim/wall':>12} {'archsim/cpu':>11} {'bare/cpu':>10} {'ratio':>6} "
        f"{'MB 1/4':>6} {'MB':>6}"
    )
    printed = False
    for pacing in args.pacing:
        for actors in args.actors:
            for sched, engine in itertools.product(args.cpu_sched, args.engine):
                seconds = args.sim_seconds if actors <= 1024 else args.sim_seconds_large
                if engine == "steady":
                    seconds = args.steady_seconds
                long = child(args, actors, sched, pacing, seconds, engine)
                brief = child(args, actors, sched, pacing, seconds / 4, engine)
                if not printed:
                    print(f"trace: {long['trace']}")
                    print(header)
                    printed = True
                steps = int(round(long["steps"]))
                _, bare_cpu = bare_simpy(steps)
                bare_rate = steps / bare_cpu
                rate = steps / long["cpu_s"]
                print(
                    f"{pacing:>6} {actors:>6} {sched:>6} {long['path']:>13} {seconds:>5g} "
                    f"{steps:>10,} {steps / long['wall_s']:>12,.0f} {rate:>11,.0f} "
                    f"{bare_rate:>10,.0f} {rate / bare_rate:>6.2f} {brief['peak_mb']:>6.0f} "
                    f"{long['peak_mb']:>6.0f}"
                )
    print(
        "ratio = archsim's steps per CPU second / the bare loop's (>= 1: archsim is faster than "
        "one simpy timeout per env step)"
    )


if __name__ == "__main__":
    main()
