"""The learner's default pacing and the frames per env step of a simulated run, from the trace
(archsim.trace.pacing): ``--replay-ratio trace`` (the default) becomes the captured workload's
samples per inserted transition, or no rate limiter with a note when the trace does not say;
``--replay-limit trace`` (the default) the side its runtime throttles."""

from __future__ import annotations

from archsim.sim.config import REPLAY_RATIO_TRACE, SimConfig
from archsim.trace.pacing import frames_per_env_step, replay_limit, samples_per_insert

UNPACED_NOTE = (
    "note: the trace does not say how its learner is paced (meta.workload.samples_per_insert), "
    "so the learner runs unpaced; give --replay-ratio NUMBER to pace it"
)


def resolve_pacing(trace, config: SimConfig) -> tuple[SimConfig, tuple[str, ...]]:
    """``config`` with ``replay_ratio="trace"`` replaced by the trace's ratio (None: unpaced) and
    ``replay_limit="trace"`` by the side it throttles, and the notes to show (one line each)."""
    notes: tuple[str, ...] = ()
    if config.replay_limit == REPLAY_RATIO_TRACE:
        config = config.replace(replay_limit=replay_limit(trace.meta))
    if config.replay_ratio == REPLAY_RATIO_TRACE:
        ratio, _ = samples_per_insert(trace.meta)
        notes = (UNPACED_NOTE,) if ratio is None else ()
        config = config.replace(replay_ratio=ratio)
    return config, notes


def trace_frames_per_env_step(trace) -> float:
    """Frames per env step of the trace's environment (1 when it does not say)."""
    return frames_per_env_step(trace.meta)[0]
