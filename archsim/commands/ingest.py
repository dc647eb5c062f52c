"""``archsim ingest TRACE.json[.gz] --out DIR``: normalize any torch.profiler (Kineto) trace."""

from __future__ import annotations

import argparse
from pathlib import Path

from archsim.commands._common import add_out_argument


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "ingest",
        help="normalize a torch.profiler (Kineto) trace into a trace directory",
        description="Read a torch.profiler Chrome trace (CPU-only or CUDA/ROCm, current or "
        "2021-era event names; GPU-only traces too), link GPU work to the cpu ops that launched it, compute FLOPs and "
        "bytes from recorded shapes, and save meta.yaml + ops.parquet + steps.parquet + the raw "
        "trace to the --out directory.",
    )
    parser.add_argument("trace", type=Path, metavar="TRACE", help="Kineto JSON or JSON.gz file")
    add_out_argument(parser)
    parser.add_argument("--name", help="workload name recorded in meta (default: the file name)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from archsim.atomic import check_output_dir
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.trace.format import save
    from archsim.trace.ingest import describe_repairs

    refuse_output_over_inputs(args.out, args.trace)
    check_output_dir(args.out, args.force)  # refuse before spending time on parsing
    meta = {"workload": {"name": args.name}} if args.name else None
    trace = ingest_with_progress(args.trace, meta)
    save(trace, args.out, force=args.force)
    info = trace.meta["ingest"]
    kinds = trace.ops["kind"].value_counts().to_dict()
    print(
        f"wrote {args.out}: {len(trace.ops)} ops "
        f"({', '.join(f'{v} {k}' for k, v in kinds.items()) or 'none'}), {len(trace.steps)} steps, "
        f"{info['ops_without_formula']} ops without a FLOP formula"
    )
    repairs = describe_repairs(info)
    if repairs:
        print(repairs)
    return 0


def ingest_with_progress(path: Path, meta: dict | None = None):  # -> archsim.trace.format.Trace
    """``archsim.trace.ingest.ingest`` with a bar by bytes of the file read, on a terminal only
    (nothing in pipes and CI logs); used by every command that takes a raw Kineto file."""
    from archsim.capture.progress import Progress
    from archsim.trace.ingest import ingest

    size = path.stat().st_size if path.is_file() else None
    progress = Progress(size, desc=f"ingest {path.name}", unit="B", unit_scale=True)
    try:
        trace = ingest(path, meta, on_bytes=progress.set_to)
    finally:
        progress.close()
    from archsim.trace.format import check_trace

    check_trace(path, trace)  # what load would refuse (a negative block size) is refused here
    return trace
