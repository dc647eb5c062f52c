"""``archsim ratio --hw NAME``: the CPU/GPU ratio by threads and by cores, per box and per GPU in use."""

from __future__ import annotations

import argparse
import json


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ratio",
        help="CPU/GPU ratio (hardware threads or cores per SM) of a hardware config",
        description=(
            "Print the CPU/GPU ratio of Inci et al. (CPU hardware threads / GPU SMs) and the "
            "core-based variant, for the whole box and for the GPUs in use."
        ),
    )
    from archsim.hw.args import add_hw_arguments

    add_hw_arguments(parser)
    parser.add_argument(
        "--gpus", default="1", help="GPUs in use (default 1; the paper's runs use one)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from archsim.analysis.ratio import cpu_gpu_ratio, format_ratio
    from archsim.errors import ArchsimError
    from archsim.hw.args import hw_from_args

    try:
        gpus = int(args.gpus)
    except ValueError:
        raise ArchsimError(f"--gpus: {args.gpus!r} is not an integer") from None
    ratio = cpu_gpu_ratio(hw_from_args(args), gpus)
    print(json.dumps(ratio.as_dict(), indent=2) if args.json else format_ratio(ratio))
    return 0
