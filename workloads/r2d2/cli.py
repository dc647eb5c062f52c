"""Options and entry point of ``archsim capture r2d2``. Imports torch only inside :func:`run_capture`."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from archsim.argtypes import non_negative_int, positive_float, positive_int
from workloads.r2d2.config import R2D2Config
from workloads.r2d2.seed.settings import INFERENCE_MODES, SeedSettings

SUMMARY = (
    "R2D2 on real ALE Pong with SEED-style central inference: actor processes send observations "
    "to a learner process that batches inference, keeps LSTM state, and trains from replay"
)
# A small replay by default: it is preallocated (each 80-step sequence holds 83 frames of 7,056 B,
# ~0.6 MB), and a minute-long capture fills only a few hundred sequences anyway.
DEFAULT_REPLAY_SEQUENCES = 256
# Learner batch for CPU captures: R2D2's 64 x 80-step sequences take tens of seconds per update on
# a shared 2-core CPU; the simulator rescales batch-dependent work (kernel.scale_ops_to_batch).
DEFAULT_CPU_BATCH = 8


def add_arguments(parser: argparse.ArgumentParser) -> None:
    d = SeedSettings()
    c = R2D2Config()
    parser.add_argument(
        "--actors",
        type=positive_int,
        default=d.actors,
        help="actor processes (default: %(default)s)",
    )
    parser.add_argument(
        "--envs-per-actor",
        type=positive_int,
        default=d.envs_per_actor,
        help="ALE Pong envs per actor (default: %(default)s)",
    )
    parser.add_argument(
        "--seconds",
        type=positive_float,
        default=d.seconds,
        help="run length once all actors are connected (default: %(default)s)",
    )
    parser.add_argument(
        "--inference",
        choices=INFERENCE_MODES,
        default=d.inference,
        help="central: SEED-style batched inference on the learner (default); local: Ape-X/R2D2 "
        "layout, each actor runs the network and ships finished sequences",
    )
    parser.add_argument(
        "--param-update-interval",
        type=positive_int,
        default=d.param_update_interval,
        help="local inference: actor steps between parameter fetches (default: %(default)s)",
    )
    parser.add_argument(
        "--inference-batch",
        type=positive_int,
        default=d.inference_batch,
        help="max observations per inference batch (default: %(default)s)",
    )
    parser.add_argument(
        "--inference-timeout-ms",
        type=positive_float,
        default=d.inference_timeout_ms,
        help="max wait for a batch to fill (default: %(default)s)",
    )
    parser.add_argument(
        "--replay-ratio",
        type=positive_float,
        default=d.replay_ratio,
        help="sequences sampled per sequence inserted (default: %(default)s)",
    )
    parser.add_argument(
        "--batch-size",
        type=positive_int,
        default=DEFAULT_CPU_BATCH,
        help=f"learner batch in sequences (default: %(default)s; R2D2: {c.batch_size})",
    )
    parser.add_argument(
        "--sequence-length",
        type=positive_int,
        default=c.sequence_length,
        help="steps per replay sequence (default: %(default)s)",
    )
    parser.add_argument(
        "--burn-in",
        type=non_negative_int,
        default=c.burn_in,
        help="leading steps that only warm up the LSTM (default: %(default)s)",
    )
    parser.add_argument(
        "--sequence-overlap",
        type=non_negative_int,
        default=c.sequence_overlap,
        help="steps shared by adjacent sequences (default: %(default)s)",
    )
    parser.add_argument(
        "--n-step",
        type=positive_int,
        default=c.n_step,
        help="n of the n-step targets (default: %(default)s)",
    )
    parser.add_argument(
        "--target-update-period",
        type=positive_int,
        default=c.target_update_period,
        help="learner updates between target syncs (default: %(default)s)",
    )
    parser.add_argument(
        "--replay-capacity",
        type=positive_int,
        default=DEFAULT_REPLAY_SEQUENCES,
        help=f"replay size in sequences (default: %(default)s; R2D2: {c.replay_capacity_sequences})",
    )
    parser.add_argument(
        "--host", default=d.host, help="learner address (default: %(default)s, this machine only)"
    )
    parser.add_argument(
        "--port",
        type=non_negative_int,
        default=d.port,
        help="learner port (default: 0 = any free port)",
    )
    parser.add_argument(
        "--learner-start-timeout",
        type=positive_float,
        default=d.learner_start_timeout_s,
        help="seconds to wait for the learner process (default: %(default)s)",
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
        help="also keep each process's own trace, sidecar and processes.json here (default: discard)",
    )


def settings_from_args(args: argparse.Namespace) -> SeedSettings:
    r2d2 = dataclasses.replace(
        R2D2Config(),
        batch_size=args.batch_size,
        sequence_length=args.sequence_length,
        burn_in=args.burn_in,
        sequence_overlap=args.sequence_overlap,
        n_step=args.n_step,
        target_update_period=args.target_update_period,
        replay_capacity_sequences=args.replay_capacity,
    )
    return SeedSettings(
        actors=args.actors,
        envs_per_actor=args.envs_per_actor,
        inference=args.inference,
        param_update_interval=args.param_update_interval,
        seconds=args.seconds,
        inference_batch=args.inference_batch,
        inference_timeout_ms=args.inference_timeout_ms,
        replay_ratio=args.replay_ratio,
        host=args.host,
        port=args.port,
        learner_start_timeout_s=args.learner_start_timeout,
        torch_threads=args.torch_threads,
        seed=args.seed,
        r2d2=r2d2,
    )


def run_capture(args: argparse.Namespace) -> int:
    """Run the SEED-style R2D2 processes under the profiler and write the merged trace."""
    from archsim.errors import ArchsimError
    from workloads.r2d2.capture import capture_r2d2

    given = [
        f
        for f in ("skip_first", "wait", "warmup", "active", "repeat")
        if getattr(args, f, None) is not None
    ]
    if given:
        raise ArchsimError(
            f"--{given[0].replace('_', '-')}: r2d2 records the first half of each process's "
            "run and times the second half (length set by --seconds); profiler schedule options "
            "do not apply"
        )
    trace = capture_r2d2(
        settings_from_args(args), args.out, force=args.force, process_dir=args.process_dir
    )
    steps = trace.steps
    actors = steps[steps.role == "actor"]
    inference = steps[steps.role == "inference"]
    batches = (
        f"{len(inference)} inference batches (mean size {inference.batch_size.mean():.2f}), "
        if len(inference)
        else ""
    )
    print(
        f"wrote {args.out}: {len(actors)} actor steps from {actors.actor.nunique()} actors, "
        f"{batches}{int((steps.role == 'learner').sum())} learner steps"
    )
    return 0
