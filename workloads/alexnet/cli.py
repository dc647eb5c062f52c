"""Options and entry point of ``archsim capture alexnet``. Imports torch only inside :func:`run_capture`."""

from __future__ import annotations

import argparse

from archsim.argtypes import positive_int

SUMMARY = "AlexNet inference (torchvision layers, random weights, 224x224 images)"
DTYPE_CHOICES = ("fp32", "fp16")
CAPTURE_DTYPE_CHOICES = ("auto", "target", "fp32")  # == workloads.alexnet.run.CAPTURE_DTYPE_CHOICES


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--batch",
        type=positive_int,
        default=32,
        help="images per forward pass (default: %(default)s)",
    )
    parser.add_argument(
        "--dtype",
        choices=DTYPE_CHOICES,
        default="fp32",
        help="target dtype, recorded as target_dtype in the trace meta (default: %(default)s)",
    )
    parser.add_argument(
        "--capture-dtype",
        choices=CAPTURE_DTYPE_CHOICES,
        default="auto",
        help="dtype to run in: auto = the target, except fp32 on a CPU without native fp16 "
        "(emulated fp16 is ~40x slower); target = the target dtype whenever the device runs it; "
        "fp32 = always fp32 (default: %(default)s)",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0, help="weights and images seed")


def run_capture(args: argparse.Namespace) -> int:
    """Run AlexNet inference under archsim.capture and write the trace to ``args.out``."""
    from archsim.capture.progress import stderr_is_terminal
    from archsim.capture.session import check_device
    from archsim.capture.workloads import schedule_from_args
    from workloads.alexnet.run import capture_alexnet, default_schedule

    device = check_device(args.device)
    schedule = schedule_from_args(args, default_schedule())
    trace = capture_alexnet(
        args.out,
        args.batch,
        args.dtype,
        schedule=schedule,
        device=device,
        capture_dtype=args.capture_dtype,
        force=args.force,
        seed=args.seed,
        progress=stderr_is_terminal(),
    )
    settings = trace.meta["workload"]["settings"]
    print(
        f"wrote {args.out}: {len(trace.ops)} ops, {int((trace.steps.role == 'inference').sum())} "
        f"inference steps, batch {args.batch}, target {trace.meta['target_dtype']} "
        f"(captured in {settings['capture_dtype']}: {settings['capture_dtype_reason']})"
    )
    return 0
