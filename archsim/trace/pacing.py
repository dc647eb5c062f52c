"""What a trace says about its workload's pacing and frames, read from its meta.

- Pacing: learner samples drawn per inserted transition (the simulator's replay ratio). A capture
  writes it as ``meta.workload.samples_per_insert``; older traces of the bundled workloads carry
  the settings it follows from: DQN trains a batch of ``batch_size`` every ``train_every`` env
  steps (``batch_size / train_every``, 32 / 4 = 8 in Nature DQN, Mnih et al. 2015, Extended Data
  Table 1); R2D2 samples ``replay_ratio`` sequences per sequence inserted and inserts one sequence
  every ``sequence_length - sequence_overlap`` env steps (workloads/r2d2/sequences.py), so
  ``replay_ratio / (sequence_length - sequence_overlap)`` sequences per transition, in the unit
  of its learner batch (sequences).
- Which side that ratio throttles: ``meta.workload.replay_limit``, else by workload: the bundled
  R2D2 trainer waits for data while its actors never wait for it (workloads/r2d2/seed/rate.py:
  "learner"); the single DQN loop alternates acting and training, so neither side runs ahead
  ("both"); "both" when the trace does not say.
- Frames per env step: ``meta.workload.frames_per_env_step`` (the ALE frameskip of the bundled
  workloads, 4 as in Mnih et al. 2015), else a ``frame_skip`` setting, else 4 for a capture of a
  bundled ALE workload (dqn, r2d2) made before its meta said; 1 when the trace does not say (an
  environment without frameskip renders one frame per step).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from archsim.errors import ArchsimError

# Which side the ratio throttles for the bundled workloads (see the module docstring).
BUNDLED_REPLAY_LIMIT = {"dqn": "both", "r2d2": "learner"}
REPLAY_LIMIT_WORDS = ("both", "learner")
# Frames per env step when the trace does not say: one frame per step.
UNKNOWN_FRAMES_PER_ENV_STEP = 1.0
# The bundled ALE workloads repeat every action 4 frames (workloads/dqn/env.py FRAME_SKIP, Mnih et
# al. 2015), also in captures made before their meta carried frames_per_env_step.
BUNDLED_ALE_FRAMES_PER_ENV_STEP = {"dqn": 4.0, "r2d2": 4.0}


@dataclass(frozen=True)
class WorkloadPacing:
    """The captured workload's pacing and frames, with where each came from (for trace info)."""

    samples_per_insert: float | None  # None: the trace does not say (the learner runs unpaced)
    pacing_source: str
    replay_limit: str  # "both" or "learner": which side the ratio throttles
    frames_per_env_step: float
    frames_source: str


def _workload(meta: dict[str, Any] | None) -> dict[str, Any]:
    workload = (meta or {}).get("workload")
    return workload if isinstance(workload, dict) else {}


def _positive(value: Any, field: str) -> float:
    """``value`` as a positive finite number, or a one-line error naming the meta field."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        number = math.nan
    if isinstance(value, bool) or not (0 < number < math.inf):
        raise ArchsimError(f"trace: meta.yaml {field}: expected a positive number, got {value!r}")
    return number


def samples_per_insert(meta: dict[str, Any] | None) -> tuple[float | None, str]:
    """(learner samples per inserted transition, where it came from); None when not known."""
    workload = _workload(meta)
    if "samples_per_insert" in workload:
        field = "workload.samples_per_insert"
        return _positive(workload["samples_per_insert"], field), f"meta {field}"
    settings = workload.get("settings")
    settings = settings if isinstance(settings, dict) else {}
    name = workload.get("name")
    if name == "dqn" and "batch_size" in settings and "train_every" in settings:
        batch = _positive(settings["batch_size"], "workload.settings.batch_size")
        every = _positive(settings["train_every"], "workload.settings.train_every")
        return batch / every, f"meta settings: a batch of {batch:g} every {every:g} env steps"
    r2d2 = settings.get("r2d2")
    if name == "r2d2" and isinstance(r2d2, dict) and "replay_ratio" in settings:
        ratio = _positive(settings["replay_ratio"], "workload.settings.replay_ratio")
        length = _positive(r2d2.get("sequence_length"), "workload.settings.r2d2.sequence_length")
        overlap = float(r2d2.get("sequence_overlap", 0))
        stride = _positive(length - overlap, "workload.settings.r2d2 sequence_length - overlap")
        return ratio / stride, (
            f"meta settings: {ratio:g} sequences sampled per sequence inserted, one sequence per "
            f"{stride:g} env steps"
        )
    return None, "not in the trace's meta"


def replay_limit(meta: dict[str, Any] | None) -> str:
    """Which side the trace's ratio throttles: "both" or "learner" (see the module docstring)."""
    workload = _workload(meta)
    if "replay_limit" in workload:
        value = workload["replay_limit"]
        if value not in REPLAY_LIMIT_WORDS:
            raise ArchsimError(
                f"trace: meta.yaml workload.replay_limit: expected both or learner, got {value!r}"
            )
        return str(value)
    return BUNDLED_REPLAY_LIMIT.get(workload.get("name"), "both")


def frames_per_env_step(meta: dict[str, Any] | None) -> tuple[float, str]:
    """(frames per env step, where it came from); 1 when the trace does not say."""
    workload = _workload(meta)
    if "frames_per_env_step" in workload:
        field = "workload.frames_per_env_step"
        why = workload.get("frames_per_env_step_source")  # capture run: read off the env's wrappers
        source = f"meta {field}" + (f": {why}" if isinstance(why, str) and why else "")
        return _positive(workload["frames_per_env_step"], field), source
    settings = workload.get("settings")
    if isinstance(settings, dict) and "frame_skip" in settings:
        field = "workload.settings.frame_skip"
        return _positive(settings["frame_skip"], field), f"meta {field}"
    name = workload.get("name")
    if name in BUNDLED_ALE_FRAMES_PER_ENV_STEP:
        frames = BUNDLED_ALE_FRAMES_PER_ENV_STEP[name]
        return frames, f"the bundled {name} workload's ALE action repeat"
    return UNKNOWN_FRAMES_PER_ENV_STEP, "not in the trace's meta: 1 frame per env step"


def workload_pacing(meta: dict[str, Any] | None) -> WorkloadPacing:
    """Both of the above for one trace's meta."""
    ratio, ratio_source = samples_per_insert(meta)
    frames, frames_source = frames_per_env_step(meta)
    return WorkloadPacing(ratio, ratio_source, replay_limit(meta), frames, frames_source)
