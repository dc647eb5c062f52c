"""``archsim predict TRACE --hw NAME [--phase all|inference|train|PHASE] [--model-only]
[--source-hw NAME] [--json]``: predicted time per batch (and items/s) on a target GPU, beside the GPU
time the trace itself measured when it came from a GPU."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from archsim.argtypes import hw_name


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "predict",
        help="predict time per inference batch / learner step of a trace on a target GPU",
        description=(
            "Predict the GPU time of one step of TRACE's phase on one GPU of the hardware config "
            "(the sum of per-op kernel-model times), the CPU-side launch overhead, and their "
            "maximum as the time per batch."
        ),
    )
    parser.add_argument(
        "trace", type=Path, metavar="TRACE", help="trace directory, or a Kineto .json/.json.gz"
    )
    from archsim.hw.args import add_hw_arguments

    add_hw_arguments(parser)
    parser.add_argument(
        "--phase",
        default="inference",
        help="all, a phase group (inference, train) or one phase name (default inference)",
    )
    parser.add_argument(
        "--model-only",
        action="store_true",
        help="predict every op from the model alone (shapes, FLOPs, bytes, launch geometry), "
        "ignoring the durations the trace measured",
    )
    parser.add_argument(
        "--source-hw",
        type=hw_name,
        help="preset or YAML of the GPU the trace was measured on (default: from the trace's "
        "deviceProperties, GPU name or kernel names)",
    )
    parser.add_argument(
        "--calibration", type=Path, help="efficiency overlay from `archsim calibrate` (YAML)"
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    parser.set_defaults(func=handle)


def _format_seconds(seconds: float) -> str:
    if seconds >= 1.0:
        return f"{seconds:.3f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.3f} ms"
    return f"{seconds * 1e6:.1f} us"


def format_report(trace_path: Path, result: dict[str, Any]) -> str:
    """The human-readable lines of a prediction."""
    per = {"train": "learner step", "all": "step"}.get(result["phase"], "batch")
    rate_name = result.get("rate_unit", "items/s")
    measured = result.get("measured_gpu_seconds")
    measured_line = (
        [f"GPU time per {per} measured in the trace: {_format_seconds(measured)}"]
        if measured is not None
        else []
    )
    bound = "launch-bound (CPU)" if result["launch_bound"] else "GPU-bound"
    batch = result["batch"] if result["batch_known"] else "not recorded (rates are per step)"
    return "\n".join(
        [
            f"trace: {trace_path}  phase: {result['phase']}  batch: {batch}  "
            f"dtype: {result['dtype']}",
            f"hardware: {result['hw']} ({result['gpu']})"
            + (" with calibrated efficiencies" if result.get("calibrated") else ""),
            f"ops per step: {result['n_ops']} (median over {result['n_steps']} steps)",
            f"GPU time per {per}: {_format_seconds(result['gpu_seconds'])}"
            + (" (model only)" if result.get("model_only") else ""),
            *measured_line,
            f"CPU launch overhead per {per}: {_format_seconds(result['launch_overhead_seconds'])} "
            f"({result['launches']} launches)",
            f"predicted time per {per}: {_format_seconds(result['seconds_per_batch'])} ({bound})",
            f"{rate_name}: {result['items_per_s']:,.1f}",
        ]
    )


def handle(args: argparse.Namespace) -> int:
    from archsim.analysis.predict import predict_inference, predict_phase
    from archsim.commands._trace_input import load_trace_input
    from archsim.errors import name_trace_in_errors
    from archsim.hw.args import hw_from_args
    from archsim.perf.source import resolve_source_hw
    from archsim.trace.concurrency import concurrency_note
    from archsim.trace.unpriced import unpriced_note

    hw = hw_from_args(args)
    efficiency = None
    if args.calibration is not None:
        from archsim.perf.calibrate import load_efficiency

        efficiency = load_efficiency(args.calibration)
    trace = load_trace_input(args.trace)
    with name_trace_in_errors(args.trace):  # "trace: deviceProperties..." names the path
        source = None if args.model_only else resolve_source_hw(trace, args.source_hw)
        if args.model_only and args.source_hw:  # accepted (the interface), checked, noted
            resolve_source_hw(trace, args.source_hw)  # a typo is still refused in one line
        predict = predict_phase if args.phase == "train" else predict_inference
        result = predict(
            trace, hw, args.phase, args.hw, str(args.trace), efficiency, source, args.model_only
        )
    result["calibrated"] = efficiency is not None
    overlap = concurrency_note(trace.ops)  # kernels side by side: the sums overstate the step
    shapes = bool(trace.meta.get("ingest", {}).get("shapes_recorded", True))
    unpriced = unpriced_note(trace.ops, shapes) if args.model_only else None
    ignored_source = (
        f"--source-hw {args.source_hw} has no effect with --model-only, which prices every op from "
        "the model alone and does not scale the trace's measured times"
        if args.model_only and args.source_hw
        else None
    )
    for note in (overlap, unpriced, ignored_source):
        if note:
            result.setdefault("notes", []).append(note)
    for note in result.get("notes", []):  # e.g. bf16 ops on a GPU without BF16 math
        print(f"{args.trace}: {note}", file=sys.stderr)
    if args.json:
        print(json.dumps(result))
    else:
        print(format_report(args.trace, result))
    return 0
