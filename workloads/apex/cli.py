"""Options and entry point of ``archsim capture apex``. Imports torch only inside :func:`run_capture`."""

from __future__ import annotations

import argparse
from pathlib import Path

from archsim.argtypes import positive_float, positive_int
from workloads.apex.settings import PLACEMENTS, ApexSettings

SUMMARY = (
    "Ape-X-style distributed DQN on real ALE Pong: actor processes with local inference ship "
    "prioritized transitions over TCP to a replay (in the learner or its own server process); "
    "every message is timed on both sides"
)


def non_negative_float(text: str) -> float:
    """A number >= 0 (shaping knobs, 0 = off)."""
    value = float(text)
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"expected a number >= 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = ApexSettings()
    parser.add_argument(
        "--actors",
        type=positive_int,
        default=d.actors,
        help="actor processes (default: %(default)s)",
    )
    parser.add_argument(
        "--replay-placement",
        choices=PLACEMENTS,
        default=d.replay_placement,
        help="learner: the replay lives in the learner process; server: in its own process "
        "(default: %(default)s)",
    )
    parser.add_argument(
        "--seconds",
        type=positive_float,
        default=d.seconds,
        help="run length once every actor is acting (default: %(default)s; first half profiled, "
        "longer if the learner has not yet recorded a training step, the timed part keeping its length)",
    )
    parser.add_argument(
        "--netns",
        action="store_true",
        help="run each process in its own Linux network namespace, joined by veth pairs to a "
        "bridge (needs root and iproute2; removed again on every exit path)",
    )
    parser.add_argument(
        "--link-delay-ms",
        type=non_negative_float,
        default=0.0,
        help="with --netns: delay added to every node's outgoing packets by tc netem (needs the "
        "kernel's sch_netem; default: none)",
    )
    parser.add_argument(
        "--link-rate-mbit",
        type=non_negative_float,
        default=0.0,
        help="with --netns: every node's outgoing rate limited by tc tbf, in Mbit/s "
        "(default: unlimited)",
    )
    parser.add_argument(
        "--send-every",
        type=positive_int,
        default=d.send_every,
        help="transitions per insert message, Ape-X's local buffer B (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=d.batch_size,
        help="learner batch in transitions (default: %(default)s; Ape-X: 512)",
    )
    parser.add_argument(
        "--replay-capacity",
        type=positive_int,
        default=d.replay_capacity,
        help="replay size in transitions (default: %(default)s; Ape-X: 2,000,000)",
    )
    parser.add_argument(
        "--n-step",
        type=positive_int,
        default=d.n_step,
        help="n of the returns (default: %(default)s)",
    )
    parser.add_argument(
        "--param-fetch-frames",
        type=positive_int,
        default=d.param_fetch_frames,
        help="frames between an actor's parameter fetches (default: %(default)s)",
    )
    parser.add_argument(
        "--torch-threads",
        type=positive_int,
        default=d.torch_threads,
        help="torch threads per process (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=d.seed)
    parser.add_argument(
        "--process-dir",
        type=Path,
        default=None,
        help="also keep each process's trace, sidecar and message log here (default: discard)",
    )


def settings_from_args(args: argparse.Namespace) -> ApexSettings:
    return ApexSettings(
        actors=args.actors,
        replay_placement=args.replay_placement,
        seconds=args.seconds,
        netns=args.netns,
        link_delay_ms=args.link_delay_ms,
        link_rate_mbit=args.link_rate_mbit,
        send_every=args.send_every,
        batch_size=args.batch_size,
        replay_capacity=args.replay_capacity,
        n_step=args.n_step,
        param_fetch_frames=args.param_fetch_frames,
        torch_threads=args.torch_threads,
        seed=args.seed,
    )


def run_capture(args: argparse.Namespace) -> int:
    """Run the Ape-X processes under the profiler and write the merged trace and messages.csv."""
    from archsim.errors import ArchsimError
    from workloads.apex.capture import capture_apex, message_summary

    given = [
        f
        for f in ("skip_first", "wait", "warmup", "active", "repeat")
        if getattr(args, f, None) is not None
    ]
    if given:
        raise ArchsimError(
            f"--{given[0].replace('_', '-')}: apex records the first half of each process's run "
            "and times the second half (length set by --seconds); profiler schedule options do not apply"
        )
    settings = settings_from_args(args)
    _, table = capture_apex(settings, args.out, force=args.force, process_dir=args.process_dir)
    print(f"wrote {args.out} ({settings.replay_placement} placement):")
    for kind, figures in message_summary(table).items():
        line = f"  {kind}: {figures['count']} messages, mean {figures['bytes_mean']:,.0f} B"
        if "latency_mean_us" in figures:
            line += f", one-way mean {figures['latency_mean_us']:,.0f} us"
        if "round_trip_mean_us" in figures:
            line += f", round trip mean {figures['round_trip_mean_us']:,.0f} us"
        print(line)
    return 0
