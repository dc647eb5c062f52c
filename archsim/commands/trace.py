"""``archsim trace info DIR``: summarize a normalized trace directory."""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser("trace", help="inspect normalized trace directories")
    actions = parser.add_subparsers(dest="trace_action", metavar="ACTION")
    actions.required = True
    info = actions.add_parser(
        "info",
        help="ops by phase, step-time percentiles and source hardware of a trace",
        description="Print ops by phase (count, time, FLOPs, bytes), actor/learner/inference "
        "step and phase times (p50, p95) and the source hardware of a trace directory.",
    )
    info.add_argument(
        "directory",
        type=Path,
        metavar="DIR",
        help="trace directory (or a raw Kineto .json/.json.gz, ingested on the fly)",
    )
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    info.set_defaults(func=_info)


def _info(args: argparse.Namespace) -> int:
    import json

    from archsim.commands._trace_input import load_trace_input
    from archsim.trace.info import format_summary, summarize

    summary = summarize(load_trace_input(args.directory))
    print(json.dumps(summary, indent=2) if args.json else format_summary(summary))
    return 0
