"""``archsim validate --out DIR [--quick]``: archsim's predictions versus real runs of this machine.

Captures one baseline trace per workload (DQN; R2D2 with central inference), runs the real workloads
at the other configurations of the plan (archsim/validate/configs.py) without the profiler, predicts
each from its baseline trace on the `local` hardware config, and writes ``validation.csv`` (frames/s
error on the wall clock, and per CPU-second of the run's own processes, which other jobs on the box
cannot move much; the machine's load during every run and capture),
``validation.md``, ``validation_scatter.png``/``.svg``, ``summary.json`` and the baseline traces.
``--from DIR`` redoes an earlier run's predictions; ``--pool DIR DIR ...`` pools earlier runs.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from archsim.commands._common import add_out_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="compare archsim's predictions with real runs of the bundled workloads on this machine",
        description=(
            "Capture a baseline trace of DQN and of SEED-style R2D2, run both for real at other "
            "configurations (no profiler), and compare measured frames/s, learner updates/s and CPU "
            "utilization with archsim's predictions for --hw local from the baseline traces alone."
        ),
    )
    parser.add_argument(
        "--quick",
        action="store_true",
        help="two variants and runs of a few seconds (the test suite's version; minutes in all)",
    )
    parser.add_argument(
        "--from",
        dest="from_dir",
        type=Path,
        default=None,
        metavar="DIR",
        help="no runs: redo the predictions from an earlier --out DIR's traces and measurements "
        "(after a model change)",
    )
    parser.add_argument(
        "--pool",
        type=Path,
        nargs="+",
        default=None,
        metavar="DIR",
        help="no runs: pool two or more earlier --out DIRs into one table (per configuration, the "
        "mean of every measured run and of every run's prediction)",
    )
    add_out_argument(parser)
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    import json
    import math

    from archsim.atomic import atomic_output_dir, check_output_dir
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.errors import ArchsimError
    from archsim.validate.configs import FULL_PLAN, QUICK_PLAN
    from archsim.validate.report import markdown_table, scatter_chart, summary, write_csv
    from archsim.validate.run import MEASUREMENTS_FILE, repredict, run_validation

    refuse_output_over_inputs(args.out, *(args.pool or ()))
    check_output_dir(args.out, args.force)  # refuse before minutes of runs, not after
    plan = QUICK_PLAN if args.quick else FULL_PLAN
    if args.pool is not None and args.from_dir is not None:
        raise ArchsimError("--pool and --from: give one of them")
    with atomic_output_dir(args.out, force=args.force) as tmp:
        if args.pool is not None:
            from archsim.validate.pool import pool_rows

            rows = pool_rows(args.pool)
        elif args.from_dir is not None:
            import shutil

            rows = repredict(args.from_dir)
            shutil.copytree(args.from_dir / "traces", tmp / "traces")
            shutil.copy2(args.from_dir / MEASUREMENTS_FILE, tmp / MEASUREMENTS_FILE)
        else:
            from archsim.capture.quiet import quiet_profiler_noise

            # its captures' profiler chatter (Kineto's USDT lines) stays off stderr, as in capture
            with quiet_profiler_noise():
                rows = run_validation(plan, tmp, progress=True)
        write_csv(rows, tmp / "validation.csv")
        table = markdown_table(rows)
        (tmp / "validation.md").write_text(table)
        scatter_chart(rows, tmp / "validation_scatter")
        # strict JSON: a figure that could not be computed (no load readings, say) is null
        strict = {
            k: None if isinstance(v, float) and not math.isfinite(v) else v
            for k, v in summary(rows).items()
        }
        (tmp / "summary.json").write_text(json.dumps(strict, indent=1, allow_nan=False) + "\n")
    print(table, end="")
    print(f"wrote {args.out}/validation.csv, validation.md, validation_scatter.png/.svg")
    return 0
