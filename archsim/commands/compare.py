"""``archsim compare A B [--out DIR] [--json]``: what changed between two traces or two simulations.

Traces: op time per step by phase and by op class, median step times; simulations: every metric and
the knobs that differ. Prints a table; ``--out`` also writes ``compare.csv`` and ``compare.png``/.svg.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from archsim.commands._common import add_out_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "compare",
        help="what changed between two traces or two simulation outputs",
        description=(
            "Compare two traces (per phase, op class and step) or two simulation outputs (every "
            "metric and the knobs that differ): B against A."
        ),
    )
    parser.add_argument("a", type=Path, metavar="A", help="trace or simulation output (baseline)")
    parser.add_argument("b", type=Path, metavar="B", help="trace or simulation output to compare")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON")
    add_out_argument(parser, required=False)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import json

    from archsim.analysis.compare import format_table, load_pair
    from archsim.atomic import atomic_output_dir
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.report.compare_chart import compare_chart

    refuse_output_over_inputs(args.out, args.a, args.b)
    kind, table = load_pair(args.a, args.b)
    if args.out is not None:
        with atomic_output_dir(args.out, force=args.force) as tmp:
            table.to_csv(tmp / "compare.csv", index=False)
            compare_chart(table, tmp, f"{args.b.name} (B) vs {args.a.name} (A)")
    if args.json:
        rows = table.astype(object).where(table.notna(), None).to_dict(orient="records")
        print(
            json.dumps({"kind": kind, "a": str(args.a), "b": str(args.b), "rows": rows}, indent=1)
        )
    else:
        print(f"{kind}: A = {args.a}, B = {args.b}")
        print(format_table(table))
    return 0
