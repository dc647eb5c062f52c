"""``archsim breakdown TRACE --hw NAME [--phase all|inference|train] --out DIR``: sequential
idealization of the trace's GPU op sequence per step of each phase (CSV, Parquet, stacked bars),
optionally GPU time per step versus SM count (``--sms 2,4,...,80``); ``--learner-batch`` and
``--inference-batch`` resize the ops as ``simulate`` does."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from archsim.argtypes import hw_name
from archsim.commands._common import add_out_argument
from archsim.hw.args import add_hw_arguments


def register(subparsers: argparse._SubParsersAction) -> None:
    parser = subparsers.add_parser(
        "breakdown", help="where GPU time goes: sequential idealization of the op sequence"
    )
    parser.add_argument("trace", type=Path, help="trace directory, or a Kineto .json/.json.gz")
    add_hw_arguments(parser)
    parser.add_argument(
        "--phase",
        default="all",
        choices=("all", "inference", "train"),
        help="which ops to break down: every op, the acting forward passes, or the learner's "
        "training (default all)",
    )
    parser.add_argument(
        "--calibration", type=Path, help="efficiency overlay from `archsim calibrate` (YAML)"
    )
    parser.add_argument(
        "--source-hw",
        type=hw_name,
        help="preset of the GPU the trace was measured on (default: matched from the trace's GPU name)",
    )
    parser.add_argument("--sms", help="also sweep SM counts, e.g. 2,4,...,80")
    parser.add_argument(
        "--learner-batch", help="resize the train ops to this batch (default: the trace's)"
    )
    parser.add_argument(
        "--inference-batch",
        help="resize the inference ops to this many observations (default: each step's)",
    )
    add_out_argument(parser)
    parser.set_defaults(func=handle)


def _check_batch_known(trace, batches: dict) -> None:
    """Steps that ingest inferred for a trace without archsim markers carry the schema's fill
    batch (1), not a measurement: resizing from it would silently change nothing."""
    from archsim.errors import ArchsimError

    given = [name for name, value in batches.items() if value is not None]
    if given and (trace.meta.get("ingest") or {}).get("inferred_steps"):
        flag = "--" + given[0].replace("_", "-")
        raise ArchsimError(
            f"{flag}: the trace's steps were inferred by ingest (no archsim markers), so the batch "
            "its ops were captured at is unknown; capture with archsim to resize batches"
        )


def handle(args: argparse.Namespace) -> int:
    from archsim.analysis.breakdown import breakdown, parse_sm_counts, resize_batches, sm_curve
    from archsim.atomic import atomic_output_dir, check_output_dir
    from archsim.commands._common import refuse_output_over_inputs
    from archsim.commands._trace_input import load_trace_input
    from archsim.hw.args import hw_from_args
    from archsim.hw.presets import load_hw
    from archsim.perf.calibrate import load_efficiency
    from archsim.perf.kernel import source_hw_for_trace
    from archsim.report.breakdown_chart import draw_breakdown, draw_sm_curve

    refuse_output_over_inputs(args.out, args.trace, args.calibration, Path(args.hw))
    check_output_dir(args.out, args.force)
    hw = hw_from_args(args)
    batches = {name: _batch_arg(args, name) for name in ("learner_batch", "inference_batch")}
    sm_counts = parse_sm_counts(args.sms) if args.sms is not None else None  # "": an error
    efficiency = load_efficiency(args.calibration) if args.calibration else None
    trace = load_trace_input(args.trace)
    from archsim.errors import name_trace_in_errors
    from archsim.sim.rnn_lowering import lower_trace_ops

    with name_trace_in_errors(args.trace):  # "trace: no ops in phase ..." names the path
        source = load_hw(args.source_hw) if args.source_hw else source_hw_for_trace(trace)
        ops = lower_trace_ops(trace)  # LSTMs as the kernels a GPU runs for them
        _check_batch_known(trace, batches)
        ops = resize_batches(ops, trace.steps, **batches, unrolls=_unrolls(trace))
        table = breakdown(ops, hw, args.phase, source, efficiency)
        curve = sm_curve(ops, hw, sm_counts, source, efficiency, args.phase) if sm_counts else None
    knobs = [f"{k.split('_')[0]} batch {v}" for k, v in batches.items() if v is not None]
    title = f"{args.trace.name} on {hw.name}" + "".join(
        f", {text}" for text in (*knobs, "calibrated" if efficiency else "") if text
    )
    with atomic_output_dir(args.out, force=args.force) as tmp:
        table.to_csv(tmp / "breakdown.csv", index=False)
        table.to_parquet(tmp / "breakdown.parquet", index=False)
        draw_breakdown(table, tmp / "breakdown", title)
        if curve is not None:
            curve.to_csv(tmp / "sm_curve.csv", index=False)
            curve.to_parquet(tmp / "sm_curve.parquet", index=False)
            draw_sm_curve(curve, tmp / "sm_curve", title)
    for bar in dict.fromkeys(table["phase"]):
        rows = table[table.phase == bar]
        parts = ", ".join(f"{r.component} {100 * r.share:.1f}%" for r in rows.itertuples())
        steps = int(rows.steps.iloc[0])
        what = (  # the all bar adds one step of each group above; steps is their distinct count
            "one step of each phase above added up, over"
            if bar == "all" and table.phase.nunique() > 1
            else "mean of"
        )
        print(
            f"{bar}: {1e3 * rows.seconds.sum():.3f} ms GPU time per step "
            f"({what} {steps} step{'s' * (steps != 1)}): {parts}"
        )
    from archsim.perf.bf16 import emulated_bf16_note
    from archsim.perf.fp8 import fp8_port_note
    from archsim.trace.learner_batch import learner_batch_flag_note

    learner = batches["learner_batch"]
    batch_note = learner_batch_flag_note(trace, learner) if learner is not None else None
    for note in filter(None, [emulated_bf16_note(ops, hw), fp8_port_note(ops, hw), batch_note]):
        print(f"{args.trace}: {note}", file=sys.stderr)
    print(f"wrote {args.out}")
    return 0


def _batch_arg(args: argparse.Namespace, name: str) -> int | None:
    """--learner-batch / --inference-batch parsed as ``simulate`` parses them."""
    from archsim.sim.knobs import KNOB_BY_NAME, parse_knob

    text = getattr(args, name)
    return None if text is None else parse_knob(KNOB_BY_NAME[name], text)


def _unrolls(trace) -> tuple[int, ...]:
    """Time steps a recurrent learner unrolls at once: burn-in and training parts apart or together
    (as archsim.sim.learner_work folds them); () for a trace without sequences."""
    from archsim.sim.recorded import sequence_settings

    sequence = sequence_settings(trace)
    if sequence is None:
        return ()
    length, burn_in = sequence
    return tuple(sorted({length, burn_in, length + burn_in} - {0}))
