"""Options and entry point of ``archsim capture dqn``. Imports torch only inside :func:`run_capture`."""

from __future__ import annotations

import argparse

from archsim.argtypes import non_negative_int, positive_int
from workloads.dqn.settings import (
    CONV_IMPLS,
    DEFAULT_LEARN_START,
    DEFAULT_REPLAY_CAPACITY,
    DEFAULT_TARGET_PERIOD,
    FULL_LEARN_START,
    FULL_REPLAY_CAPACITY,
    FULL_TARGET_PERIOD,
)

SUMMARY = "Nature DQN learning ALE Pong (real env, real network, phase-marked)"
DEFAULT_STEPS = 600  # with the default schedule: 6 windows, 48 recorded steps, 12 of them training


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps",
        type=positive_int,
        default=DEFAULT_STEPS,
        help="agent steps, 4 frames each (default: %(default)s)",
    )
    parser.add_argument(
        "--learn-start",
        type=non_negative_int,
        default=DEFAULT_LEARN_START,
        help=f"steps of pure acting before training starts (default: %(default)s; full DQN run: {FULL_LEARN_START})",
    )
    parser.add_argument(
        "--target-period",
        type=positive_int,
        default=DEFAULT_TARGET_PERIOD,
        help=f"learner updates between target-network syncs (default: %(default)s; full DQN run: {FULL_TARGET_PERIOD})",
    )
    parser.add_argument(
        "--replay-capacity",
        type=positive_int,
        default=DEFAULT_REPLAY_CAPACITY,
        help=f"transitions kept in replay (default: %(default)s; full DQN run: {FULL_REPLAY_CAPACITY})",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--display-every",
        type=positive_int,
        default=None,
        metavar="K",
        help="draw the game screen in a window every K-th step, as phase 'display' (needs pygame; "
        "Xvfb is started where there is no DISPLAY) (default: never)",
    )
    parser.add_argument(
        "--conv-impl",
        choices=CONV_IMPLS,
        default="cudnn",
        help="convolutions through the library (torch conv2d: cuDNN on CUDA) or as unfold + matrix "
        "multiply, as Torch7's SpatialConvolutionMM did (default: %(default)s)",
    )
    parser.add_argument(
        "--torch-threads",
        type=positive_int,
        default=1,
        help="torch intra-op threads (default: %(default)s)",
    )


def run_capture(args: argparse.Namespace) -> int:
    """Run DQN under archsim.capture and write the trace to ``args.out``."""
    from archsim.atomic import check_output_dir
    from archsim.capture.session import check_device
    from archsim.capture.workloads import schedule_from_args
    from workloads.dqn.capture import capture_dqn, default_schedule
    from workloads.dqn.settings import DqnConfig

    config = DqnConfig(
        seed=args.seed,
        device=check_device(args.device),
        learn_start=args.learn_start,
        target_period=args.target_period,
        replay_capacity=args.replay_capacity,
        torch_threads=args.torch_threads,
        display_every=args.display_every,
        conv_impl=args.conv_impl,
    )
    schedule = schedule_from_args(args, default_schedule(config))
    check_output_dir(args.out, args.force)
    first = schedule.first_recorded_step()
    if args.steps <= first:  # refuse now rather than after running every step for nothing
        from archsim.errors import ArchsimError

        raise ArchsimError(
            f"--steps {args.steps}: the profiler schedule records from step {first + 1} "
            f"(skip-first {schedule.skip_first} + wait {schedule.wait} + warmup "
            f"{schedule.warmup}), so nothing would be recorded; give --steps above {first} or "
            "shorten the schedule (--learn-start, --skip-first, --wait, --warmup)"
        )
    trace = capture_dqn(
        config, args.steps, args.out, schedule=schedule, force=args.force, progress=True
    )
    steps = trace.steps
    print(
        f"wrote {args.out}: {len(trace.ops)} ops, {int((steps.role == 'actor').sum())} actor steps, "
        f"{int((steps.role == 'learner').sum())} learner steps"
    )
    return 0
