"""Options and entry point of ``archsim capture dqn``. Imports torch only inside :func:`run_capture`."""

from __future__ import annotations

import argparse

from workloads.dqn.settings import (
    DEFAULT_LEARN_START,
    DEFAULT_REPLAY_CAPACITY,
    DEFAULT_TARGET_PERIOD,
    FULL_LEARN_START,
    FULL_REPLAY_CAPACITY,
    FULL_TARGET_PERIOD,
)

SUMMARY = "Nature DQN learning ALE Pong (real env, real network, phase-marked)"
DEFAULT_STEPS = 600  # with the default schedule: 6 windows, 48 recorded steps, 12 of them training


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--steps",
        type=_positive,
        default=DEFAULT_STEPS,
        help="agent steps, 4 frames each (default: %(default)s)",
    )
    parser.add_argument(
        "--learn-start",
        type=_non_negative,
        default=DEFAULT_LEARN_START,
        help=f"steps of pure acting before training starts (default: %(default)s; full DQN run: {FULL_LEARN_START})",
    )
    parser.add_argument(
        "--target-period",
        type=_positive,
        default=DEFAULT_TARGET_PERIOD,
        help=f"learner updates between target-network syncs (default: %(default)s; full DQN run: {FULL_TARGET_PERIOD})",
    )
    parser.add_argument(
        "--replay-capacity",
        type=_positive,
        default=DEFAULT_REPLAY_CAPACITY,
        help=f"transitions kept in replay (default: %(default)s; full DQN run: {FULL_REPLAY_CAPACITY})",
    )
    parser.add_argument(
        "--device", default="cpu", help="cpu, cuda or cuda:N (default: %(default)s)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--torch-threads",
        type=_positive,
        default=1,
        help="torch intra-op threads (default: %(default)s)",
    )


def run_capture(args: argparse.Namespace) -> int:
    """Run DQN under archsim.capture and write the trace to ``args.out``."""
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
    )
    schedule = schedule_from_args(args, default_schedule(config))
    trace = capture_dqn(
        config, args.steps, args.out, schedule=schedule, force=args.force, progress=True
    )
    steps = trace.steps
    print(
        f"wrote {args.out}: {len(trace.ops)} ops, {int((steps.role == 'actor').sum())} actor steps, "
        f"{int((steps.role == 'learner').sum())} learner steps"
    )
    return 0
