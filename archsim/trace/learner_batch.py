"""Whether a capture measured its learner batch.

``archsim capture run`` (archsim.capture.auto_markers) learns the learner batch from a
``train_forward`` call's input batch or a replay ``sample(n)`` call; until one is seen a learner step
carries the marker's default, 1. An on-policy loop that computes its loss from the forward passes it
ran while acting (A2C: ``loss.backward()`` right after the rollout, no forward of its own in the
update) records neither, so its learner steps say batch 1 while the update covered the whole rollout
(num_envs x steps per rollout), which the shapes of the backward ops do not say in one number (one
backward per rollout step, each at the env batch). Such a batch is unknown, not 1: predict reports no
batch, and ``--learner-batch`` resizes from 1 (only train ops whose batch dimension is 1 grow), which
breakdown and simulate say in one line (:func:`learner_batch_flag_note`).
"""

from __future__ import annotations

from typing import Any

from archsim.trace.schema import PHASE_GROUPS

# Phases whose call measured the learner batch at capture (forward_markers._forward_phase and the
# replay_sample wrapper).
MEASURING_PHASES = frozenset({"train_forward", "replay_sample"})


def unknown_learner_batch(trace: Any) -> str | None:
    """Why the learner steps' batch_size of an ``archsim capture run`` trace is not a measurement
    (no step ran a train forward or replay sample), else None. Traces marked by hand
    (archsim.step(..., batch_size=N)) state their batch and are never flagged."""
    workload = trace.meta.get("workload") or {}
    if not str(workload.get("name", "")).startswith("run:"):
        return None
    steps = trace.steps
    learner_ids = steps.loc[steps["role"].astype(str) == "learner", "step_id"]
    if learner_ids.empty:
        return None
    ops = trace.ops
    phases = set(ops.loc[ops["step_id"].isin(learner_ids), "phase"].astype(str))
    if phases & MEASURING_PHASES or not phases & set(PHASE_GROUPS["train"]):
        return None
    return (
        f"the learner batch of this trace is unknown: its {len(learner_ids)} learner steps ran no "
        "forward pass or replay sample of their own (an on-policy update on the forward passes "
        "made while acting), so their recorded batch 1 is a default, not a measurement"
    )


def updates_differ(trace: Any) -> bool:
    """Whether the learner steps of an ``archsim capture run`` trace are updates that stepped
    several optimizers (its counts say more optimizer steps than learner steps), which may differ
    from one update to the next by design: TD3's actor steps on every second update (Fujimoto et
    al. 2018), CleanRL's SAC its actor and temperature twice every second one. No one update is
    then typical; their mean is. Older traces say nothing and are read as before."""
    workload = trace.meta.get("workload") or {}
    counts = (workload.get("settings") or {}).get("counts") if isinstance(workload, dict) else None
    if not isinstance(counts, dict):
        return False
    optimizer, learner = counts.get("optimizer_steps"), counts.get("learner_steps")
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in (optimizer, learner)):
        return False
    return optimizer > learner > 0


def learner_batch_flag_note(trace: Any, learner_batch: int | None) -> str | None:
    """The one line to print when ``--learner-batch`` (None: not given) meets an unknown batch."""
    reason = unknown_learner_batch(trace)
    if reason is None:
        return None
    if learner_batch is None:
        return f"{reason}; learner samples count one per update"
    return (
        f"{reason}; --learner-batch {learner_batch} resized the train ops from batch 1, so only "
        "those whose batch dimension is 1 grew: not an update of that many samples"
    )
