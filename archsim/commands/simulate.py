"""``archsim simulate TRACE --hw NAME [knobs] --out DIR``: one simulated run of the whole system.

Writes ``metrics.json`` (resolved knobs, hardware, seed and metrics, named as the sweep CSV columns),
``metrics.csv`` (the same as one row) and, with ``--timeline``, ``timeline.json`` for Perfetto.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim.commands._common import add_out_argument

# Power-series bins written into the timeline's power counter track.
TIMELINE_POWER_BINS = 200


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "simulate",
        help="simulate actors, inference, replay and learner of a trace on a hardware config",
        description=(
            "Discrete-event simulation (simpy, with exact fast paths) of TRACE's RL training on "
            "--hw, as a distributed actor/learner system or, for a single-threaded program's "
            "capture, its own sequential loop (--loop): frames/s, learner updates/s, CPU and GPU "
            "utilization, queueing, power and energy per frame."
        ),
    )
    parser.add_argument("trace", type=Path, metavar="TRACE", help="trace directory")
    from archsim.hw.args import add_hw_arguments
    from archsim.sim.knobs import add_knob_arguments

    add_hw_arguments(parser)
    add_knob_arguments(parser, lists=False)
    parser.add_argument(
        "--timeline", action="store_true", help="also write timeline.json (Chrome trace, Perfetto)"
    )
    add_out_argument(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from archsim.atomic import atomic_output_dir, check_output_dir
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.commands._trace_input import load_trace_input
    from archsim.errors import name_trace_in_errors
    from archsim.hw.presets import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.knobs import knobs_from_args, split_point
    from archsim.sim.report import result_record, write_metrics
    from archsim.sim.run import simulate
    from archsim.sim.timeline import write_chrome_trace

    # The output path first: a path that cannot be written is refused before any work.
    refuse_output_over_inputs(args.out, args.trace, Path(args.hw))
    check_output_dir(args.out, args.force)
    point = {name: values[0] for name, values in knobs_from_args(args, lists=False).items()}
    sim_knobs, hw_overrides = split_point(point)
    config = SimConfig(**sim_knobs)
    hw = load_hw(args.hw, [*args.hw_set, *hw_overrides])
    trace = load_trace_input(args.trace)
    bins = TIMELINE_POWER_BINS if args.timeline else 0
    with name_trace_in_errors(args.trace):
        result = simulate(trace, hw, config, timeline=args.timeline, series_bins=bins)
    record = result_record(result, hw, trace_path=args.trace, hw_name=args.hw, hw_set=args.hw_set)
    with atomic_output_dir(args.out, force=args.force) as tmp:
        write_metrics(tmp, record)
        if args.timeline:
            write_chrome_trace(tmp / "timeline.json", result.timeline or [], result.power_series)
    for note in result.notes:  # e.g. the trace does not say how its learner is paced
        print(f"{args.trace}: {note}", file=sys.stderr)
    m = result.metrics
    print(
        f"{args.trace} on {hw.name}: {m['frames_per_s']:,.0f} frames/s, "
        f"{m['learner_updates_per_s']:,.1f} updates/s, CPU {m['cpu_util']:.0%}, "
        f"GPU {m['gpu_util']:.0%}, {m['avg_power_w']:,.0f} W, "
        f"{m['frames_per_joule']:,.1f} frames/J ({result.engine} path, {result.events:,} events)"
    )
    print(f"wrote {args.out / 'metrics.json'}" + (" and timeline.json" if args.timeline else ""))
    return 0
