"""DQN steps/s with and without archsim.capture (default schedule), same seed, same machine, one run.

Goal (issue 2): capture costs at most 10% of steps/s with the default schedule. For the captured run
two figures are printed: the loop alone (what training feels while it is profiled) and end to end
(plus merging the windows, ingest and saving the trace, paid once at the end). Rates are given per
wall second and per process-CPU second; on a shared machine the CPU-time rate is the steadier one.
Rounds alternate plain and captured runs; the median of each is compared.

    python benchmarks/capture_overhead.py --steps 700 --learn-start 100 --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

from workloads.dqn.capture import capture_dqn, default_schedule
from workloads.dqn.run import DqnRunStats, run_dqn
from workloads.dqn.settings import DqnConfig


def marker_cost_us(repeats: int = 100_000) -> tuple[float, float]:
    """Microseconds per ``archsim.phase`` enter/exit with no profiler running, and per bare
    ``torch.profiler.record_function`` (what the marker would cost without its enabled check)."""
    from torch.profiler import record_function

    from archsim.capture.markers import phase

    start = time.perf_counter()
    for _ in range(repeats):
        with phase("act"):
            pass
    guarded = (time.perf_counter() - start) / repeats * 1e6
    start = time.perf_counter()
    for _ in range(repeats):
        with record_function("archsim::act"):
            pass
    bare = (time.perf_counter() - start) / repeats * 1e6
    return guarded, bare


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=700)
    parser.add_argument("--learn-start", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3, help="alternating plain/captured runs")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    config = DqnConfig(seed=args.seed, learn_start=args.learn_start)
    schedule = default_schedule(config)
    if args.steps <= schedule.first_recorded_step():
        parser.error(f"--steps must exceed {schedule.first_recorded_step()} to record a window")
    guarded_us, bare_us = marker_cost_us()
    print(
        f"archsim.phase with no profiler: {guarded_us:.2f} us per use "
        f"(bare record_function: {bare_us:.2f} us)"
    )
    print(f"DQN Pong, {args.steps} steps, learn start {args.learn_start}, {schedule}")
    rates: dict[str, list[float]] = {
        k: [] for k in ("plain", "plain_cpu", "loop", "loop_cpu", "e2e", "e2e_cpu")
    }
    for round_index in range(args.rounds):
        stats = run_dqn(config, args.steps)
        rates["plain"].append(stats.steps_per_s)
        rates["plain_cpu"].append(stats.steps_per_cpu_s)
        captured: list[DqnRunStats] = []
        with tempfile.TemporaryDirectory() as tmp:
            start, start_cpu = time.perf_counter(), time.process_time()
            trace = capture_dqn(config, args.steps, Path(tmp) / "t", on_stats=captured.append)
            rates["e2e"].append(args.steps / (time.perf_counter() - start))
            rates["e2e_cpu"].append(args.steps / (time.process_time() - start_cpu))
        rates["loop"].append(captured[0].steps_per_s)
        rates["loop_cpu"].append(captured[0].steps_per_cpu_s)
        print(
            f"round {round_index + 1}: plain {rates['plain'][-1]:.1f} steps/s "
            f"({rates['plain_cpu'][-1]:.1f}/cpu-s); captured loop {rates['loop'][-1]:.1f} "
            f"({rates['loop_cpu'][-1]:.1f}/cpu-s); captured end-to-end {rates['e2e'][-1]:.1f} "
            f"({rates['e2e_cpu'][-1]:.1f}/cpu-s); trace: {len(trace.steps)} step rows, "
            f"{len(trace.ops)} ops"
        )
    median = {k: statistics.median(v) for k, v in rates.items()}
    print(
        f"median plain               {median['plain']:7.1f} steps/s  {median['plain_cpu']:7.1f} steps/cpu-s"
    )
    for key, label in (("loop", "captured loop"), ("e2e", "captured end-to-end")):
        print(
            f"median {label:<19} {median[key]:7.1f} steps/s  {median[key + '_cpu']:7.1f} steps/cpu-s"
            f"  ratio to plain: wall {median[key] / median['plain']:.3f}, "
            f"cpu {median[key + '_cpu'] / median['plain_cpu']:.3f}"
        )


if __name__ == "__main__":
    main()
