"""One learner step on a GPU: the train ops at ``learner_batch`` (archsim.sim.gpu_jobs) plus the
host-to-device copy of the batch unless the trace holds its memcpys; CPU launch overhead = kernels x
``gpu.launch_overhead_us`` on the learner thread; replay sampling from the learner steps. For an
R2D2 trace ``learner_batch`` counts sequences of the trace's length
(meta.workload.settings.r2d2.sequence_length, burn-in included)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.launch import launch_calls
from archsim.perf.network import OBS_BYTES, host_copy_seconds
from archsim.perf.shared_memory import shared_copy_seconds
from archsim.sim.gpu_jobs import has_copies, job_times, lowered, representative_ops
from archsim.sim.recorded import fold_sequence_dims, sequence_settings
from archsim.sim.step_work import has_cpu_time, phase_work_us, typical_us
from archsim.trace.learner_batch import updates_differ
from archsim.trace.schema import PHASE_GROUPS

# One 84x84 uint8 grayscale ALE frame (Mnih et al. 2015 preprocessing): an observation stacks 4.
FRAME_BYTES = 84 * 84
# Frames per observation stack when the trace's R2D2 settings do not say (Mnih et al. 2015).
DEFAULT_FRAME_STACK = 4


def learner_batch_bytes(trace, learner_batch: int) -> float:
    """Bytes of one learner batch copied to the GPU. DQN: s and s' per transition (Mnih et al. 2015
    store transitions (s, a, r, s')), each a 4-frame stack. R2D2: each sequence holds its
    ``sequence_length`` steps (burn-in included) as single frames plus the frame_stack - 1 frames
    before them, stacked on the device as a view (workloads/r2d2/learner.py, batch_to_tensors)."""
    sequence = sequence_settings(trace)
    if sequence is None:
        return float(learner_batch * 2 * OBS_BYTES)
    settings = ((trace.meta or {}).get("workload") or {}).get("settings") or {}
    r2d2 = settings.get("r2d2") if isinstance(settings.get("r2d2"), dict) else {}
    stack = int(r2d2.get("frame_stack", DEFAULT_FRAME_STACK))
    length, _ = sequence
    return float(learner_batch * (length + stack - 1) * FRAME_BYTES)


@dataclass(frozen=True)
class LearnerWork:
    sample_cpu_s: float  # replay sampling and batch assembly, capture-thread seconds
    launch_cpu_s: float  # kernel launches, capture-thread seconds
    gpu_s: float  # the step on the GPU, batch copy included
    sm_fraction: float
    dram_bytes: float = 0.0  # GPU DRAM bytes of the step (its ops and the batch copy), for power


def trace_learner_batch(trace) -> int:
    """Batch size of the trace's learner steps (the default of --learner-batch)."""
    learner = trace.steps[trace.steps["role"] == "learner"]
    if learner.empty:
        raise ArchsimError(
            "trace: no learner steps (steps.parquet has no role == 'learner' rows); the simulator "
            "takes the learner's work from them"
        )
    return max(1, int(learner["batch_size"].median()))


def sample_us(learner: pd.DataFrame) -> float:
    """Typical replay-sample work of a learner step, 0 when the trace has none."""
    sample = typical_us(
        phase_work_us(learner, "replay_sample"), has_cpu_time(learner, "replay_sample")
    )
    return float(np.nan_to_num(sample, nan=0.0))


def derive_learner_work(trace, hw, learner_batch: int, source) -> LearnerWork:
    """A learner step of ``learner_batch`` samples on ``hw`` (a GPU machine)."""
    train_ops, train_steps, train_from = representative_ops(
        trace, PHASE_GROUPS["train"], "learner", every_step=updates_differ(trace)
    )
    if train_ops.empty:
        raise ArchsimError("trace: no training ops (train_forward/backward/optimizer phases)")
    sequence = sequence_settings(trace)
    if sequence is not None:
        length, burn_in = sequence
        # The learner unrolls burn-in and training parts apart or together: fold those time axes.
        unrolls = tuple(sorted({length, burn_in, length + burn_in} - {0}))
        train_ops, train_from = lowered(train_ops, train_from, backward_steps=length)
        train_ops = fold_sequence_dims(train_ops, train_from, unrolls)
    seconds, frac, nbytes = job_times(
        train_ops, train_steps, train_from, np.array([learner_batch]), hw, source
    )
    batch_bytes = learner_batch_bytes(trace, learner_batch)
    copy_s = 0.0 if has_copies(train_ops) else host_copy_seconds(batch_bytes, hw.host_link)
    shared_s = shared_copy_seconds(batch_bytes, hw)  # a shared-DRAM SoC: DRAM copy or zero-copy
    if shared_s is not None and not has_copies(train_ops):
        copy_s = shared_s
    gpu_s = float(seconds[0]) + copy_s
    learner_frac = float(frac[0]) * float(seconds[0]) / max(gpu_s, 1e-30)
    kernels_per_step = launch_calls(train_ops).sum() / train_steps  # a graph launch: one call
    speed_rel = hw.cpu.thread_speed_rel
    launch_capture_s = kernels_per_step * hw.gpu.launch_overhead_us * 1e-6 * speed_rel

    learner = trace.steps[trace.steps["role"] == "learner"]
    trace_batch = max(1.0, float(learner["batch_size"].median()))
    sample_capture_s = sample_us(learner) * 1e-6 * learner_batch / trace_batch
    return LearnerWork(
        sample_cpu_s=sample_capture_s,
        launch_cpu_s=launch_capture_s,
        gpu_s=gpu_s,
        sm_fraction=float(np.clip(learner_frac, 0.0, 1.0)),
        # the batch copied to the GPU is written to its DRAM once (unless the ops hold the copy)
        dram_bytes=float(nbytes[0]) + (0.0 if has_copies(train_ops) else float(batch_bytes)),
    )
