"""Service times on a machine without a GPU: the policy and the training step run on CPU threads,
as the trace measured them (CPU time of its steps' phases where recorded, else their wall time, in
capture-thread seconds), the learner's resized linearly to the batch. A SEED trace's server costs
per batch what its recorded batches cost (``inference_batch_cpu_s``, shaped by the capture's
inference probe); otherwise the actors' act phase per observation."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.network import ACTION_BYTES, OBS_BYTES, message_seconds
from archsim.sim.actor_work import ActorWork
from archsim.sim.config import SimConfig
from archsim.sim.learner_work import sample_us
from archsim.sim.recorded import inference_batch_cpu_s
from archsim.sim.step_work import has_cpu_time, phase_work_us, phases_work_us, typical_us
from archsim.sim.system import ServiceTimes

# Learner phases whose work grows with the batch (forward and backward passes, priorities); the
# optimizer step and target sync touch only the parameters.
BATCH_LEARNER_PHASES = ("train_forward", "train_backward", "priority_update")
FIXED_LEARNER_PHASES = ("optimizer_step", "target_sync")
# Learner phases that hold the params lock in the bundled R2D2 runtime (workloads/r2d2/learner.py:
# the optimizer step; workloads/r2d2/seed/learner_process.py: the priority update; the replay
# sample holds it too and is timed on its own).
LOCKED_GROWING_PHASES = ("priority_update",)
LOCKED_FIXED_PHASES = ("optimizer_step",)


def learner_scale(trace, learner_batch: int) -> float:
    """``learner_batch`` over the trace's learner batch (its median)."""
    steps = trace.steps
    learner = steps[steps["role"] == "learner"]
    return learner_batch / max(1.0, float(learner["batch_size"].median()))


def learner_step_s(learner: pd.DataFrame, scale: float) -> tuple[float, float]:
    """A CPU learner step's work at ``scale`` x the trace's batch and its part done under a params
    lock (the parameter and priority updates), from the learner's step rows."""
    cpu_time = has_cpu_time(learner)
    grows = typical_us(phases_work_us(learner, BATCH_LEARNER_PHASES), cpu_time)
    fixed = typical_us(phases_work_us(learner, FIXED_LEARNER_PHASES), cpu_time)
    train_s = (float(grows) * scale + float(fixed)) * 1e-6
    locked_grows = typical_us(phases_work_us(learner, LOCKED_GROWING_PHASES), cpu_time)
    locked_fixed = typical_us(phases_work_us(learner, LOCKED_FIXED_PHASES), cpu_time)
    return train_s, min((float(locked_grows) * scale + float(locked_fixed)) * 1e-6, train_s)


def cpu_only_times(
    trace, config: SimConfig, learner_batch: int, actor: ActorWork, hw
) -> ServiceTimes:
    """Service times of ``trace`` on ``hw`` without a GPU (see the module docstring)."""
    steps = trace.steps
    actor_rows = steps[steps["role"] == "actor"]
    learner = steps[steps["role"] == "learner"]
    max_batch = config.inference_batch if config.inference == "central" else 1
    # A SEED trace's recorded batches hold the server's whole per-batch CPU (request handling,
    # forward pass, replay insert): nothing is charged per batch beside them.
    recorded = inference_batch_cpu_s(trace, max_batch)
    inference_locked_s = None
    if recorded is not None:
        inference_s, inference_locked_s = recorded
    else:
        per_env = np.maximum(actor_rows["batch_size"].to_numpy(dtype=float), 1.0)
        act_us = phase_work_us(actor_rows, "act").fillna(0.0).to_numpy(dtype=float) / per_env
        act_typical = typical_us(pd.Series(act_us), has_cpu_time(actor_rows, "act"))
        act_s = float(np.nan_to_num(act_typical, nan=0.0)) * 1e-6
        if config.inference == "central" and act_s <= 0:
            raise ArchsimError("trace: actor steps have no act phase to time CPU inference with")
        inference_s = act_s * np.arange(max_batch + 1, dtype=float)
    scale = learner_scale(trace, learner_batch)
    train_s, locked_s = learner_step_s(learner, scale)
    envs = config.envs_per_actor
    return ServiceTimes(
        actor_step_cpu_s=actor.actor_step_cpu_s,
        request_up_s=message_seconds(envs * OBS_BYTES, hw.network),
        response_down_s=message_seconds(envs * ACTION_BYTES, hw.network),
        server_cpu_s_per_obs=actor.server_cpu_s_per_obs,
        inference_gpu_s=inference_s,
        inference_sm_fraction=np.zeros(max_batch + 1),
        learner_sample_cpu_s=sample_us(learner) * 1e-6 * scale,
        learner_launch_cpu_s=0.0,
        learner_gpu_s=train_s,
        learner_sm_fraction=0.0,
        publish_cpu_s=actor.param_copy_capture_s,
        on_gpu=False,
        batch_when_server_free=recorded is not None,
        learner_locked_cpu_s=locked_s,
        inference_locked_s=inference_locked_s,
    )
