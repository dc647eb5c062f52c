"""``archsim calibrate TRACE [--hw NAME | --source-hw NAME] --out FILE.yaml``: fit per-op-class
efficiencies of the kernel model from a real GPU trace and write them as an overlay for ``archsim
breakdown --calibration FILE``. The fit runs on the hardware the trace was measured on: ``--hw`` or
``--source-hw`` when given, else the preset matching the trace's GPU, else a config built from its
deviceProperties (archsim.perf.source)."""

from __future__ import annotations

import argparse
from pathlib import Path

from archsim.argtypes import hw_name
from archsim.hw.args import add_hw_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "calibrate", help="fit kernel-model efficiencies per op class from a real GPU trace"
    )
    parser.add_argument("trace", type=Path, help="trace directory, or a Kineto .json/.json.gz")
    add_hw_arguments(parser, default=None, required=False)
    parser.add_argument(
        "--source-hw",
        type=hw_name,
        help="preset or YAML of the GPU the trace was measured on, when --hw is not given "
        "(default: from the trace's deviceProperties, GPU name or kernel names)",
    )
    parser.add_argument(
        "--out", type=Path, required=True, help="calibration overlay to write (YAML)"
    )
    parser.set_defaults(func=handle)


def handle(args: argparse.Namespace) -> int:
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.commands._trace_input import load_trace_input
    from archsim.hw.args import hw_from_args
    from archsim.perf.calibrate import (
        calibration_document,
        fit_table,
        left_out_table,
        write_calibration,
    )
    from archsim.perf.classes import UNFITTED_REASON

    refuse_output_over_inputs(args.out, args.trace)
    trace = load_trace_input(args.trace)
    if args.hw is None:  # the GPU the trace was measured on
        from archsim.errors import ArchsimError, name_trace_in_errors
        from archsim.hw.presets import list_presets
        from archsim.perf.source import resolve_source_hw

        with name_trace_in_errors(args.trace):  # "trace: deviceProperties..." names the path
            source = resolve_source_hw(trace, args.source_hw)
        if source is None:
            raise ArchsimError(f"{args.trace}: a CPU capture has no measured GPU times to fit")
        if args.source_hw or source.name in list_presets():
            args.hw = args.source_hw or source.name
            hw = hw_from_args(args)
        else:  # built from the trace (architecture table): no preset name to reload
            from archsim.hw.presets import apply_overrides, validate_hw

            label = f"source config {source.name}"
            data = apply_overrides(source.model_dump(), args.hw_set, label)
            hw = validate_hw(data, label)
            args.hw = source.name
    else:
        hw = hw_from_args(args)
    table = fit_table(trace.ops, hw)
    left_out = left_out_table(trace.ops, hw)
    document = calibration_document(table, str(args.trace), hw, args.hw_set, left_out)
    write_calibration(args.out, document)
    # efficiency is clipped to 1 (archsim.perf.calibrate); model/measured shows the unclipped ratio
    print(
        f"{'class':14s} {'ops':>6s} {'measured ms':>12s} {'model ms':>10s} "
        f"{'model/meas':>10s} {'efficiency':>10s}"
    )
    for name, row in table.iterrows():
        print(
            f"{name:14s} {int(row.ops):6d} {1e3 * row.measured_s:12.3f} "
            f"{1e3 * row.bound_s:10.3f} {row.model_over_measured:10.3f} {row.efficiency:10.3f}"
        )
    for name, row in left_out.iterrows():  # collectives: not fitted (archsim.perf.classes)
        print(
            f"{name:14s} {int(row.ops):6d} {1e3 * row.measured_s:12.3f} "
            f"{1e3 * row.bound_s:10.3f} {row.bound_s / row.measured_s:10.3f} {'left out':>10s}"
        )
    if len(left_out):
        print(f"left out of the fit: {', '.join(left_out.index)} ({UNFITTED_REASON})")
    if (table["model_over_measured"] > 1).any():
        print(
            "efficiency is at most 1: where model/meas > 1 the model's inferred work for that "
            "class is too large (e.g. GEMM depth from a grid); it keeps the model's time"
        )
    print(f"wrote {args.out}")
    return 0
