"""``archsim capture WORKLOAD ...``: run a bundled workload under the profiler and save a trace."""

from __future__ import annotations

import argparse

from archsim.capture.workloads import (
    add_schedule_arguments,
    known_names,
    workload_module,
)
from archsim.commands._common import add_out_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "capture",
        help="profile a bundled workload (e.g. dqn), or any program (run), into a trace",
        description="Run a bundled RL workload under torch.profiler and save a normalized trace. "
        "Options after WORKLOAD belong to it: archsim capture dqn --help. Any program, unmodified: "
        "archsim capture run --out DIR -- SCRIPT.py ARGS.",
        epilog=f"workloads: {', '.join(known_names())}",
    )
    parser.add_argument(
        "workload", metavar="WORKLOAD", nargs="?", help=f"one of: {', '.join(known_names())}"
    )
    parser.add_argument("workload_args", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    parser.set_defaults(func=run)


def workload_parser(name: str) -> argparse.ArgumentParser:
    """The option parser of one workload (its own options, the schedule, --out/--force)."""
    from archsim.cli import OneLineParser

    module = workload_module(name)
    parser = OneLineParser(prog=f"archsim capture {name}", description=module.SUMMARY)
    module.add_arguments(parser)
    add_schedule_arguments(parser)
    add_out_argument(parser)
    return parser


def run(args: argparse.Namespace) -> int:
    # The workload name is checked here (not by argparse choices) so an unknown name is a one-line
    # error listing the known ones, like every other archsim input error.
    if args.workload is None:
        from archsim.errors import ArchsimError

        raise ArchsimError(f"capture: expected a WORKLOAD, one of: {', '.join(known_names())}")
    workload_args = workload_parser(args.workload).parse_args(args.workload_args)
    from archsim.capture.quiet import quiet_profiler_noise

    with quiet_profiler_noise():
        return workload_module(args.workload).run_capture(workload_args)
