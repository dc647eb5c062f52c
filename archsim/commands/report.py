"""``archsim report DIR... --out FILE.html``: one self-contained HTML page for a study.

Any folder of archsim outputs (a trace, ``simulate``, ``sweep``, ``breakdown``, ``validate`` results, or
a folder holding several of them, such as ``runs/demo``): headline numbers, what limits throughput and
why, every chart with a caption, the tables, and the knobs, seed, resolved hardware and versions.
"""

from __future__ import annotations

import argparse
from pathlib import Path


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "report",
        help="one self-contained HTML page for folders of archsim outputs",
        description=(
            "Collect every archsim output under DIR (traces, simulations, sweeps, breakdowns, "
            "validations) into one HTML page with charts, tables and settings inline."
        ),
    )
    parser.add_argument("dirs", type=Path, nargs="+", metavar="DIR", help="folders of outputs")
    parser.add_argument("--out", type=Path, required=True, help="the HTML file to write")
    parser.add_argument("--title", default=None, help="page title (default: the folder names)")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from archsim.errors import ArchsimError
    from archsim.report.html_page import write_report

    if args.out.suffix.lower() not in (".html", ".htm"):
        raise ArchsimError(f"--out {args.out}: expected a .html file name")
    path = write_report(args.dirs, args.out, args.title)
    print(path)
    return 0
