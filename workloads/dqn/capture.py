"""Capture a DQN run: the schedule starts recording once training has begun (see default_schedule)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from archsim.capture.session import DEFAULT_SCHEDULE, CaptureSchedule, capture
from workloads.dqn.env import FRAME_SKIP
from workloads.dqn.run import DqnRunStats, run_dqn
from workloads.dqn.settings import DqnConfig

# Training steps that run before the first recorded window: the first updates pay one-off costs
# (allocator growth, optimizer state creation) that a steady-state run does not.
TRAIN_WARMUP_STEPS = 8


def default_schedule(config: DqnConfig) -> CaptureSchedule:
    """The default schedule, shifted past the replay fill so that windows hold training steps."""
    skip = config.learn_start + TRAIN_WARMUP_STEPS * config.train_every
    return CaptureSchedule(
        skip_first=skip,
        wait=DEFAULT_SCHEDULE.wait,
        warmup=DEFAULT_SCHEDULE.warmup,
        active=DEFAULT_SCHEDULE.active,
        repeat=DEFAULT_SCHEDULE.repeat,
    )


def capture_dqn(
    config: DqnConfig,
    steps: int,
    out_dir: Path,
    *,
    schedule: CaptureSchedule | None = None,
    force: bool = False,
    progress: bool = False,
    on_stats: Callable[[DqnRunStats], None] | None = None,
) -> Any:
    """Run ``steps`` DQN steps under archsim.capture; returns the saved Trace."""
    schedule = schedule or default_schedule(config)
    meta = {
        "name": "dqn",
        "settings": {**config.as_dict(), "steps": steps},
        # What the simulator needs to run this program as it ran (archsim.trace.pacing): emulator
        # frames per env step (AtariEnv's action repeat), and learner samples per inserted
        # transition, one batch every train_every env steps, in one loop that alternates acting
        # and training (neither side runs ahead of the other: the limiter throttles both).
        "frames_per_env_step": FRAME_SKIP,
        "samples_per_insert": config.batch_size / config.train_every,
        "replay_limit": "both",
    }
    with capture(out_dir, meta, schedule=schedule, device=config.device, force=force) as cap:
        stats = run_dqn(config, steps, on_step=cap.step, progress=progress)
        meta["settings"]["learner_updates"] = stats.learner_updates
        # Measured cost of each drawn frame (display.GameDisplay.cost); empty without --display-every.
        meta["settings"].update(stats.display)
    if on_stats is not None:
        on_stats(stats)
    return cap.trace
