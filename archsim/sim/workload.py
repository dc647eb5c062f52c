"""Service times of the simulated system, derived once per (trace, hardware, knobs) in vectorized
passes: the engine then only draws and adds numbers.

- CPU work is thread CPU time where the capture recorded it, wall time otherwise
  (archsim.sim.step_work), with the profiler's own cost taken out where the capture timed its
  unprofiled steps (archsim.sim.profiler_cost).
- Actor CPU work per env step: the trace's actor steps (env_step + preprocess, plus act and
  replay_insert for local inference, plus the per-message cost of sending: the capture's own CPU
  per request when a central capture timed it, else the network model's stack cost), as an
  empirical distribution the engine draws from; divided by the target thread's speed in the engine.
- Inference GPU time for every batch size 1..inference_batch: the act/inference ops of a few
  representative steps, resized with ``scale_ops_to_batch`` and predicted with ``predict_op_seconds``
  in ONE call on the concatenated table; plus the host-to-device copy of the observations
  (84x84x4 uint8 each) unless the trace already holds its memcpys.
- Learner step: the train ops at ``learner_batch``; CPU launch overhead = kernels x
  ``gpu.launch_overhead_us`` on the learner thread; replay sampling from the learner steps.
- SM share of a job: blocks / (SMs x resident blocks per SM), capped at 1, time-weighted over its ops.
- SEED-style traces (R2D2, central inference, archsim.sim.recorded): the inference GPU time comes from
  the learner's recorded inference batches' ops (LSTM step included); the server pays, per batch,
  the recorded CPU time outside those ops plus one launch per kernel (without a GPU: the recorded
  batches' whole CPU time at every batch size, shaped by the capture's inference probe), and per
  request the CPU it spent between batches reading requests (``gap_cpu_us``); ``learner_batch`` counts
  sequences of the trace's length (meta.workload.settings.r2d2.sequence_length + burn_in).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.network import (
    ACTION_BYTES,
    OBS_BYTES,
    host_copy_seconds,
    message_seconds,
    stack_seconds_per_message,
)
from archsim.sim.config import SimConfig
from archsim.sim.metrics import PowerModel
from archsim.sim.profiler_cost import without_profiler_cost
from archsim.sim.recorded import (
    fold_sequence_dims,
    inference_batch_cpu_s,
    recorded_inference_steps,
    sequence_settings,
    server_overhead_capture_s,
    server_request_cpu_s,
)
from archsim.sim.rnn_lowering import lower_lstm_ops
from archsim.sim.step_work import (
    has_cpu_time,
    phase_work_us,
    phases_work_us,
    typical_us,
    whole_steps,
)
from archsim.sim.system import Machine, ServiceTimes
from archsim.trace.schema import PHASE_GROUPS

# Steps whose ops represent "one step" for GPU time: a handful of typical ones (the modal op count)
# is plenty and keeps the one vectorized prediction over (steps x batch sizes) small.
REPRESENTATIVE_STEPS = 8
# Nature DQN parameters, 1.69 M (REFERENCE.md "RL workloads"), as fp32: the parameter publication size
# when the trace does not say.
DEFAULT_PARAM_BYTES = 1.69e6 * 4
COPY_KINDS = ("memcpy",)
# Ape-X actors copy the learner's parameters every 400 frames (Horgan et al. 2018, "Distributed
# Prioritized Experience Replay"); 4 frames per env step (REFERENCE.md).
PARAM_FETCH_EVERY_ENV_STEPS = 400 / 4


def derive_machine(hw, config: SimConfig) -> Machine:
    """The CPU and power figures of ``hw`` (a HardwareConfig) that the engine uses."""
    if hw.gpu is not None and config.gpus > hw.gpu.count:
        raise ArchsimError(f"--gpus: {config.gpus} is more than the {hw.gpu.count} of {hw.name}")
    cpu = hw.cpu
    return Machine(
        hw_threads=cpu.hw_threads,
        cores=cpu.cores,
        sockets=cpu.sockets,
        cores_per_socket=cpu.cores_per_socket,
        thread_speed_rel=cpu.thread_speed_rel,
        smt_yield=cpu.smt_yield,
        power=PowerModel(
            gpus=config.gpus if hw.gpu is not None else 0,
            gpu_idle_w=hw.gpu.idle_power_w if hw.gpu is not None else 0.0,
            gpu_max_w=hw.gpu.max_power_w if hw.gpu is not None else 0.0,
            sockets=cpu.sockets,
            cpu_idle_w=cpu.idle_power_w,
            cpu_max_w=cpu.max_power_w,
        ),
    )


def trace_learner_batch(trace) -> int:
    """Batch size of the trace's learner steps (the default of --learner-batch)."""
    learner = trace.steps[trace.steps["role"] == "learner"]
    if learner.empty:
        raise ArchsimError(
            "trace: no learner steps (steps.parquet has no role == 'learner' rows); the simulator "
            "takes the learner's work from them"
        )
    return max(1, int(learner["batch_size"].median()))


def derive_service_times(trace, hw, config: SimConfig, learner_batch: int) -> ServiceTimes:
    """Per-step work of every component for ``trace`` on ``hw`` under ``config``."""
    from archsim.perf.kernel import predict_op_seconds, source_hw_for_trace

    trace = without_profiler_cost(trace)
    trace = dataclasses.replace(trace, steps=whole_steps(trace.steps))
    source = source_hw_for_trace(trace)
    steps = trace.steps
    speed_rel = hw.cpu.thread_speed_rel
    envs = config.envs_per_actor
    stack_capture_s = stack_seconds_per_message(hw.network) * speed_rel  # as capture-thread seconds

    actor = steps[steps["role"] == "actor"]
    if actor.empty or actor["env_step_us"].isna().all():
        raise ArchsimError(
            "trace: no actor steps with an env_step phase (steps.parquet role == 'actor'); "
            f"--inference {config.inference} needs them for environment-step times"
        )
    if config.inference == "local" and actor["act_us"].isna().all():
        raise ArchsimError(
            "trace: its actor steps have no act phase (a central-inference capture), so "
            "--inference local has no policy time to give the actors; use --inference central"
        )
    per_env = np.maximum(actor["batch_size"].to_numpy(dtype=float), 1.0)
    phases = ["env_step", "preprocess"]
    if config.inference == "local":
        phases += ["act", "replay_insert"]
    work_us = phases_work_us(actor, phases).to_numpy(dtype=float) / per_env
    # One message per actor step. A central capture that timed its actors' CPU while they sent a
    # request and took the reply (serialisation, socket calls) carries that cost itself; otherwise
    # the network model's per-message stack cost stands in for it.
    if config.inference == "central" and has_cpu_time(actor, "inference_wait"):
        message_us = phase_work_us(actor, "inference_wait").fillna(0.0).to_numpy(dtype=float)
        actor_cpu_s = (work_us + message_us / per_env) * 1e-6
    else:
        actor_cpu_s = work_us * 1e-6 + stack_capture_s / envs
    settings = ((trace.meta or {}).get("workload") or {}).get("settings") or {}
    param_bytes = float(settings.get("param_bytes", DEFAULT_PARAM_BYTES))
    # Receiving and copying one parameter set: a message, then param_bytes through host memory.
    param_copy_capture_s = (
        stack_seconds_per_message(hw.network) + param_bytes / (hw.memory.host_dram_bw_gbs * 1e9)
    ) * speed_rel
    if config.inference == "local":
        actor_cpu_s = actor_cpu_s + param_copy_capture_s / PARAM_FETCH_EVERY_ENV_STEPS
    actor_cpu_s = actor_cpu_s[np.isfinite(actor_cpu_s)]

    insert_us = np.nan_to_num(
        typical_us(phase_work_us(actor, "replay_insert"), has_cpu_time(actor, "replay_insert")),
        nan=0.0,
    )
    # Per request the server reads it off the network: what a SEED capture measured between its
    # batches, else the network model's per-message stack cost.
    request_capture_s = server_request_cpu_s(trace)
    if request_capture_s is None:
        request_capture_s = stack_capture_s
    server_cpu_s_per_obs = insert_us / float(np.median(per_env)) * 1e-6 + request_capture_s / envs
    if hw.gpu is None:
        return _cpu_only_times(
            trace,
            config,
            learner_batch,
            actor_cpu_s,
            server_cpu_s_per_obs,
            param_copy_capture_s,
            hw,
        )
    # A SEED trace times the server itself: its replay insert and request handling are in the
    # recorded per-batch overhead (the actor rows hold no replay_insert then).
    recorded = not recorded_inference_steps(trace).empty
    server_cpu_s_per_batch = server_overhead_capture_s(trace) if recorded else 0.0
    sequence = sequence_settings(trace)
    max_batch = config.inference_batch if config.inference == "central" else 1
    inf_ops, inf_steps, inf_from = _representative_ops(trace, PHASE_GROUPS["inference"], "actor")
    inf_ops, inf_from = _lowered(inf_ops, inf_from, backward_steps=None)
    inference_gpu_s = np.zeros(max_batch + 1)
    inference_frac = np.zeros(max_batch + 1)
    if config.inference == "central":
        if inf_ops.empty:
            raise ArchsimError(
                "trace: no act/inference_batch ops; --inference central needs the policy's ops"
            )
        sizes = np.arange(1, max_batch + 1)
        seconds, frac = _job_times(
            inf_ops, inf_steps, inf_from, sizes, hw, source, predict_op_seconds
        )
        # A batch may be padded to any larger size, so b observations never need longer than
        # the fastest size >= b: the suffix minimum (the kernel model's wave quantisation can make
        # a bigger batch faster than a smaller one).
        order = np.minimum.accumulate(seconds[::-1])[::-1]
        frac = np.where(order < seconds, np.nan, frac)
        frac = pd.Series(frac).bfill().to_numpy()
        seconds = order
        has_copies = inf_ops["kind"].isin(COPY_KINDS).any()
        copies = np.array(
            [0.0 if has_copies else host_copy_seconds(b * OBS_BYTES, hw.host_link) for b in sizes]
        )
        inference_gpu_s[1:] = seconds + copies
        inference_frac[1:] = frac * seconds / np.maximum(seconds + copies, 1e-30)
        if recorded:
            # On a GPU the policy's ops leave the server thread but each costs a kernel launch.
            kernels_per_batch = len(inf_ops) / inf_steps
            server_cpu_s_per_batch += (
                kernels_per_batch * hw.gpu.launch_overhead_us * 1e-6 * speed_rel
            )

    train_ops, train_steps, train_from = _representative_ops(
        trace, PHASE_GROUPS["train"], "learner"
    )
    if train_ops.empty:
        raise ArchsimError("trace: no training ops (train_forward/backward/optimizer phases)")
    steps_per_sample = 2  # DQN: s and s' per transition (REFERENCE.md "RL workloads")
    if sequence is not None:
        length, burn_in = sequence
        # The learner unrolls burn-in and training parts apart or together: fold those time axes.
        unrolls = tuple(sorted({length, burn_in, length + burn_in} - {0}))
        train_ops, train_from = _lowered(train_ops, train_from, backward_steps=length)
        train_ops = fold_sequence_dims(train_ops, train_from, unrolls)
        steps_per_sample = length + burn_in  # one observation per step of a sequence
    seconds, frac = _job_times(
        train_ops,
        train_steps,
        train_from,
        np.array([learner_batch]),
        hw,
        source,
        predict_op_seconds,
    )
    has_copies = train_ops["kind"].isin(COPY_KINDS).any()
    batch_bytes = learner_batch * steps_per_sample * OBS_BYTES
    copy_s = 0.0 if has_copies else host_copy_seconds(batch_bytes, hw.host_link)
    learner_gpu_s = float(seconds[0]) + copy_s
    learner_frac = float(frac[0]) * float(seconds[0]) / max(learner_gpu_s, 1e-30)
    kernels_per_step = len(train_ops) / train_steps
    launch_capture_s = kernels_per_step * hw.gpu.launch_overhead_us * 1e-6 * speed_rel

    learner = steps[steps["role"] == "learner"]
    sample_us = _sample_us(learner)
    trace_batch = max(1.0, float(learner["batch_size"].median()))
    sample_capture_s = sample_us * 1e-6 * learner_batch / trace_batch

    return ServiceTimes(
        actor_step_cpu_s=actor_cpu_s,
        request_up_s=message_seconds(envs * OBS_BYTES, hw.network),
        response_down_s=message_seconds(envs * ACTION_BYTES, hw.network),
        server_cpu_s_per_obs=server_cpu_s_per_obs,
        inference_gpu_s=inference_gpu_s,
        inference_sm_fraction=np.clip(inference_frac, 0.0, 1.0),
        learner_sample_cpu_s=sample_capture_s,
        learner_launch_cpu_s=launch_capture_s,
        learner_gpu_s=learner_gpu_s,
        learner_sm_fraction=float(np.clip(learner_frac, 0.0, 1.0)),
        publish_cpu_s=param_copy_capture_s,  # serialize once per publication; actors fetch it
        server_cpu_s_per_batch=server_cpu_s_per_batch,
        batch_when_server_free=recorded,
    )


# Learner phases whose work grows with the batch (forward and backward passes, priorities); the
# optimizer step and target sync touch only the parameters.
BATCH_LEARNER_PHASES = ("train_forward", "train_backward", "priority_update")
FIXED_LEARNER_PHASES = ("optimizer_step", "target_sync")
# Learner phases that hold the params lock in the bundled R2D2 runtime (workloads/r2d2/learner.py:
# the optimizer step; workloads/r2d2/seed/learner_process.py: the priority update; the replay
# sample holds it too and is timed on its own).
LOCKED_GROWING_PHASES = ("priority_update",)
LOCKED_FIXED_PHASES = ("optimizer_step",)


def _cpu_only_times(
    trace,
    config,
    learner_batch,
    actor_cpu_s,
    server_cpu_s_per_obs,
    param_copy_capture_s,
    hw,
) -> ServiceTimes:
    """No GPU: the policy and the training step run on CPU threads, as the trace measured them
    (CPU time of its steps' phases where recorded, else their wall time, in capture-thread seconds),
    the learner's resized linearly to the batch. A SEED trace's server costs per batch what its
    recorded batches cost (``inference_batch_cpu_s``); otherwise the actors' act phase per
    observation."""
    steps = trace.steps
    actor = steps[steps["role"] == "actor"]
    learner = steps[steps["role"] == "learner"]
    max_batch = config.inference_batch if config.inference == "central" else 1
    # A SEED trace's recorded batches hold the server's whole per-batch CPU (request handling,
    # forward pass, replay insert): nothing is charged per batch beside them.
    recorded = inference_batch_cpu_s(trace, max_batch)
    inference_locked_s = None
    if recorded is not None:
        inference_s, inference_locked_s = recorded
    else:
        per_env = np.maximum(actor["batch_size"].to_numpy(dtype=float), 1.0)
        act_us = phase_work_us(actor, "act").fillna(0.0).to_numpy(dtype=float) / per_env
        act_typical = typical_us(pd.Series(act_us), has_cpu_time(actor, "act"))
        act_s = float(np.nan_to_num(act_typical, nan=0.0)) * 1e-6
        if config.inference == "central" and act_s <= 0:
            raise ArchsimError("trace: actor steps have no act phase to time CPU inference with")
        inference_s = act_s * np.arange(max_batch + 1, dtype=float)
    trace_batch = max(1.0, float(learner["batch_size"].median()))
    scale = learner_batch / trace_batch
    cpu_time = has_cpu_time(learner)
    grows = typical_us(phases_work_us(learner, BATCH_LEARNER_PHASES), cpu_time)
    fixed = typical_us(phases_work_us(learner, FIXED_LEARNER_PHASES), cpu_time)
    train_s = (float(grows) * scale + float(fixed)) * 1e-6
    # the part done under a params lock: the parameter and priority updates
    locked_grows = typical_us(phases_work_us(learner, LOCKED_GROWING_PHASES), cpu_time)
    locked_fixed = typical_us(phases_work_us(learner, LOCKED_FIXED_PHASES), cpu_time)
    locked_s = min((float(locked_grows) * scale + float(locked_fixed)) * 1e-6, train_s)
    sample_us = _sample_us(learner)
    envs = config.envs_per_actor
    return ServiceTimes(
        actor_step_cpu_s=actor_cpu_s,
        request_up_s=message_seconds(envs * OBS_BYTES, hw.network),
        response_down_s=message_seconds(envs * ACTION_BYTES, hw.network),
        server_cpu_s_per_obs=server_cpu_s_per_obs,
        inference_gpu_s=inference_s,
        inference_sm_fraction=np.zeros(max_batch + 1),
        learner_sample_cpu_s=sample_us * 1e-6 * scale,
        learner_launch_cpu_s=0.0,
        learner_gpu_s=train_s,
        learner_sm_fraction=0.0,
        publish_cpu_s=param_copy_capture_s,
        on_gpu=False,
        batch_when_server_free=recorded is not None,
        learner_locked_cpu_s=locked_s,
        inference_locked_s=inference_locked_s,
    )


def _sample_us(learner: pd.DataFrame) -> float:
    """Typical replay-sample work of a learner step, 0 when the trace has none."""
    sample = typical_us(
        phase_work_us(learner, "replay_sample"), has_cpu_time(learner, "replay_sample")
    )
    return float(np.nan_to_num(sample, nan=0.0))


def _representative_ops(
    trace, phases: tuple[str, ...], role: str
) -> tuple[pd.DataFrame, int, np.ndarray]:
    """(ops of up to REPRESENTATIVE_STEPS typical steps, number of those steps, batch of each op's
    step). Ops not tied to a step are spread evenly over the trace's steps of ``role``."""
    ops = trace.ops[trace.ops["phase"].isin(phases)]
    if ops.empty:
        return ops, 1, np.ones(0)
    steps = trace.steps.set_index("step_id")
    linked = ops[ops["step_id"].isin(steps.index)]
    if linked.empty:
        n_steps = max(1, int((trace.steps["role"] == role).sum()))
        return ops.reset_index(drop=True), n_steps, np.ones(len(ops))
    counts = linked.groupby("step_id").size()
    modal = counts[counts == counts.mode().iloc[0]].index.to_numpy()
    pick = modal[np.linspace(0, len(modal) - 1, min(REPRESENTATIVE_STEPS, len(modal))).astype(int)]
    chosen = linked[linked["step_id"].isin(pick)].reset_index(drop=True)
    batch = steps.loc[chosen["step_id"], "batch_size"].to_numpy(dtype=float)
    return chosen, len(np.unique(pick)), np.maximum(batch, 1.0)


def _lowered(
    ops: pd.DataFrame, from_batch: np.ndarray, backward_steps: int | None
) -> tuple[pd.DataFrame, np.ndarray]:
    """LSTM ops as their GPU kernels (archsim.sim.rnn_lowering), keeping each row's batch."""
    tagged = ops.assign(_from_batch=from_batch)
    low = lower_lstm_ops(tagged, backward_steps)
    return low.drop(columns="_from_batch").reset_index(drop=True), low["_from_batch"].to_numpy(
        dtype=float
    )


def _job_times(
    ops: pd.DataFrame,
    n_steps: int,
    from_batch: np.ndarray,
    sizes: np.ndarray,
    hw,
    source,
    predict_op_seconds,
) -> tuple[np.ndarray, np.ndarray]:
    """GPU seconds of one step and its SM share, for every batch size in ``sizes``, in one pass."""
    from archsim.perf.kernel import launch_shape, scale_ops_to_batch
    from archsim.perf.occupancy import blocks_per_sm

    tables = []
    for size in sizes:
        parts = [
            scale_ops_to_batch(group, int(b), int(size))
            for b, group in ops.groupby(from_batch, sort=True)
        ]
        table = pd.concat(parts, ignore_index=True)
        table["_size"] = int(size)
        tables.append(table)
    big = pd.concat(tables, ignore_index=True)
    seconds = predict_op_seconds(big.drop(columns="_size"), hw, source)
    blocks, threads, regs, smem = launch_shape(big)
    resident = blocks_per_sm(threads, regs, smem, hw.gpu)
    frac = np.minimum(1.0, blocks / (hw.gpu.sms * np.maximum(resident, 1.0)))
    frame = pd.DataFrame({"size": big["_size"], "t": seconds, "tf": seconds * frac})
    sums = frame.groupby("size").sum().reindex(sizes)
    total = sums["t"].to_numpy() / n_steps
    weighted = sums["tf"].to_numpy() / np.maximum(sums["t"].to_numpy(), 1e-30)
    return total, weighted
