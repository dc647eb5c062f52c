"""``archsim sweep TRACE --hw NAME --actors 4,8,...`` : simulate the product of the knob lists.

Writes ``sweep.csv`` (one row per point, appended as batches of points finish; an interrupted sweep
resumes), ``sweep.json`` (the settings a resume must match), ``sweep.parquet`` (streamed as points
finish, renamed into place when complete) and charts (PNG and SVG).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

# Rows printed after a sweep: all of a small one; the best by frames/s of a larger one.
SUMMARY_ROWS = 40


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "sweep",
        help="simulate every combination of comma-listed knobs (actors, sms, cpu-threads, ...)",
        description=(
            "Run the system simulator over the product of the knob lists, in parallel, writing "
            "one CSV row per point as it finishes, then charts. Re-running the same command "
            "resumes an interrupted sweep."
        ),
    )
    parser.add_argument("trace", type=Path, metavar="TRACE", help="trace directory")
    from archsim.hw.args import add_hw_arguments
    from archsim.sim.knobs import add_knob_arguments

    add_hw_arguments(parser)
    add_knob_arguments(parser, lists=True)
    parser.add_argument(
        "--jobs",
        default="1",
        help="points run in parallel (default 1; 1 to the CPUs this process may use, docs/LIMITS.md)",
    )
    parser.add_argument(
        "--backend",
        default="process",
        choices=("process", "dask"),
        help="local process pool (default) or Dask distributed",
    )
    parser.add_argument(
        "--scheduler",
        default=None,
        metavar="tcp://HOST:PORT",
        help="Dask scheduler of a running cluster (default: a LocalCluster on 127.0.0.1)",
    )
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")
    parser.add_argument("--out", type=Path, required=True, help="output directory")
    parser.add_argument(
        "--force", action="store_true", help="discard earlier results in --out and start over"
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from archsim.analysis.sweep import SweepSpec
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.errors import ArchsimError
    from archsim.sim.knobs import knobs_from_args

    refuse_output_over_inputs(args.out, args.trace, Path(args.hw))
    knobs = knobs_from_args(args, lists=True)
    swept = [name for name, values in knobs.items() if len(values) > 1]
    if not swept:
        raise ArchsimError("sweep: give at least one knob as a comma list, e.g. --actors 4,8,16")
    try:
        jobs = int(args.jobs)
    except ValueError:
        raise ArchsimError(f"--jobs: {args.jobs!r} is not an integer") from None
    if not args.trace.exists():
        raise ArchsimError(f"{args.trace}: no such trace directory or file")
    spec = SweepSpec(trace=args.trace, hw=args.hw, hw_set=list(args.hw_set), knobs=knobs)
    if args.force and args.out.is_dir() and any(args.out.iterdir()):
        # --force on finished results: the new sweep is built beside them and swapped in whole when
        # it is complete (archsim.atomic), so a kill at any instant leaves the old results or the
        # new ones, never neither. A killed forced sweep is not resumable: rerun it with --force.
        from archsim.atomic import atomic_output_dir

        with atomic_output_dir(args.out, force=True) as work:
            _run_and_write(args, spec, swept, knobs, jobs, work, force=False)
    else:
        _run_and_write(args, spec, swept, knobs, jobs, args.out, force=args.force)
    return 0


def _run_and_write(
    args, spec, swept: list[str], knobs: dict, jobs: int, out: Path, force: bool
) -> None:
    """Run the sweep into ``out`` (resuming what it holds unless ``force``; it streams sweep.csv and
    sweep.parquet), then the charts, and print the summary."""
    from archsim.analysis.sweep import run_sweep
    from archsim.report.sweep_charts import sweep_charts

    table = run_sweep(
        spec,
        out,
        jobs=jobs,
        backend=args.backend,
        scheduler=args.scheduler,
        force=force,
        progress=not args.no_progress,
    )
    _note_unpaced(args.trace, knobs)  # after the points: an error stays the one stderr line
    charts = sweep_charts(table, swept, out, f"{args.trace.name} on {args.hw}")
    columns = [*swept, "frames_per_s", "learner_updates_per_s", "gpu_util", "cpu_util"]
    columns += ["gpu_power_w", "frames_per_joule"]
    shown = table.sort_values(swept)
    if len(table) > SUMMARY_ROWS:  # a 10,000-point sweep is read from its files, not the terminal
        print(f"{len(table):,} points; the {SUMMARY_ROWS} with the most frames/s:")
        shown = table.nlargest(SUMMARY_ROWS, "frames_per_s")
    print(shown[columns].to_string(index=False, float_format="{:,.3g}".format))
    written = args.out / "sweep.csv"
    print(f"wrote {written}" + (f" and {len(charts)} chart files" if charts else ""))


def _note_unpaced(trace: Path, knobs: dict) -> None:
    """Once per sweep (not per point): the note that the trace does not say how its learner is
    paced, when some point takes the trace's pacing (``--replay-ratio trace``, the default)."""
    from archsim.errors import name_trace_in_errors
    from archsim.sim.config import REPLAY_RATIO_TRACE
    from archsim.sim.pacing import UNPACED_NOTE
    from archsim.trace.format import load
    from archsim.trace.pacing import samples_per_insert

    if REPLAY_RATIO_TRACE not in knobs.get("replay_ratio", [REPLAY_RATIO_TRACE]):
        return
    meta = load(trace).meta if trace.is_dir() else {}  # a raw Kineto file has no workload meta
    with name_trace_in_errors(trace):
        ratio, _ = samples_per_insert(meta)
    if ratio is None:
        print(f"{trace}: {UNPACED_NOTE}", file=sys.stderr)
