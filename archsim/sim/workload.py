"""Service times of the simulated system, derived once per (trace, hardware, knobs) in vectorized
passes: the engine then only draws and adds numbers. This module composes the parts:

- archsim.sim.machine: the CPU and power figures of the hardware (``derive_machine``);
- archsim.sim.actor_work: actor CPU work per env step and the server's CPU per observation;
- archsim.sim.inference_work: inference GPU time for every batch size, server CPU per batch;
- archsim.sim.learner_work: one learner step (GPU time, launches, replay sampling);
- archsim.sim.cpu_only_work: all of it on a machine without a GPU.

CPU work is thread CPU time where the capture recorded it, wall time otherwise
(archsim.sim.step_work), with the profiler's own cost taken out where the capture timed its
unprofiled steps (archsim.sim.profiler_cost): per process for the vector-env workers of a ``capture
run`` trace, as ``--loop sequential`` does (archsim.sim.vector_workers).
"""

from __future__ import annotations

import dataclasses

import numpy as np
import pandas as pd

from archsim.perf.network import ACTION_BYTES, OBS_BYTES, message_seconds
from archsim.sim.actor_work import derive_actor_work
from archsim.sim.config import SimConfig
from archsim.sim.cpu_only_work import cpu_only_times, learner_scale, learner_step_s
from archsim.sim.inference_work import derive_inference_work
from archsim.sim.learner_work import derive_learner_work, trace_learner_batch
from archsim.sim.machine import derive_machine
from archsim.sim.marker_cost import without_marker_cost
from archsim.sim.pacing import trace_frames_per_env_step
from archsim.sim.profiler_cost import without_profiler_cost
from archsim.sim.python_share import (
    derive_python_share,
    with_learner_python_s,
    with_server,
)
from archsim.sim.step_work import whole_steps
from archsim.sim.system import ServiceTimes

__all__ = ["derive_machine", "derive_service_times", "trace_learner_batch"]


def derive_service_times(trace, hw, config: SimConfig, learner_batch: int) -> ServiceTimes:
    """Per-step work of every component for ``trace`` on ``hw`` under ``config``."""
    from archsim.perf.conv_impl import trace_with_conv_impl
    from archsim.perf.kernel import source_hw_for_trace

    # --conv-impl (issue 15): read here, so a sweep's memo of this derivation keys on it
    trace = trace_with_conv_impl(trace, hw, config.conv_impl)
    # the Python share of the learner process's bursts: op and phase times both as profiled
    python = derive_python_share(trace)
    trace = without_process_profiler_cost(trace)
    trace = dataclasses.replace(trace, steps=whole_steps(trace.steps))
    frames_per_env_step = trace_frames_per_env_step(trace)
    source = source_hw_for_trace(trace)
    actor = derive_actor_work(trace, hw, config)
    if hw.gpu is None:
        times = cpu_only_times(trace, config, learner_batch, actor, hw)
        python = with_server(python, actor.server_cpu_s_per_obs, actor.server_python_s_per_obs)
        python = with_inference_python_s(python, trace)
        step_s, locked_s = learner_step_s(trace.steps[trace.steps["role"] == "learner"], 1.0)
        scale = learner_scale(trace, learner_batch)
        python = with_learner_python_s(python, step_s, locked_s, scale)
        return dataclasses.replace(times, frames_per_env_step=frames_per_env_step, python=python)
    inference = derive_inference_work(trace, hw, config, source)
    learner = derive_learner_work(trace, hw, learner_batch, source)
    envs = config.envs_per_actor
    times = ServiceTimes(
        actor_step_cpu_s=actor.actor_step_cpu_s,
        request_up_s=message_seconds(envs * OBS_BYTES, hw.network),
        response_down_s=message_seconds(envs * ACTION_BYTES, hw.network),
        server_cpu_s_per_obs=actor.server_cpu_s_per_obs,
        inference_gpu_s=inference.gpu_s,
        inference_sm_fraction=inference.sm_fraction,
        learner_sample_cpu_s=learner.sample_cpu_s,
        learner_launch_cpu_s=learner.launch_cpu_s,
        learner_gpu_s=learner.gpu_s,
        learner_sm_fraction=learner.sm_fraction,
        publish_cpu_s=actor.param_copy_capture_s,  # serialize once per publication; actors fetch it
        server_cpu_s_per_batch=inference.server_cpu_s_per_batch,
        batch_when_server_free=inference.recorded,
        inference_dram_bytes=inference.dram_bytes,
        learner_dram_bytes=learner.dram_bytes,
    )
    if hw.memory.shared_with_gpu:
        times = with_shared_dram(times, hw, config)
    python = with_server(
        python,
        actor.server_cpu_s_per_obs,
        actor.server_python_s_per_obs,
        inference.server_cpu_s_per_batch,
        inference.server_python_s_per_batch,
    )
    return dataclasses.replace(times, frames_per_env_step=frames_per_env_step, python=python)


def with_inference_python_s(python, trace):
    """``python`` with the Python seconds of one CPU inference batch (PythonShare.inference_burst):
    the share measured on the recorded batches times their typical CPU work at their mean size.
    Unchanged for traces without recorded inference batches."""
    from archsim.sim.recorded import inference_batch_cpu_s, recorded_inference_batch_mean

    mean = recorded_inference_batch_mean(trace)
    if mean is None:
        return python
    work_s, _ = inference_batch_cpu_s(trace, int(np.ceil(mean)))
    recorded_s = float(np.interp(mean, np.arange(len(work_s)), work_s))
    return dataclasses.replace(python, inference_python_s=python.inference.share * recorded_s)


def without_process_profiler_cost(trace):
    """``trace`` without the profiler's cost (archsim.sim.profiler_cost) and then capture run's markers'
    own (archsim.sim.marker_cost, the parent's steps only), where its env steps ran in
    vector-env worker processes (archsim.trace.info.loop_of_steps) each process by its own figures:
    the parent's steps by its share of the pooled ones (vector_workers.loop_meta), each worker's by
    ``meta.capture.processes[i]`` (vector_workers.without_worker_profiler_cost). The pooled actor
    figures would scale the parent's cheap vector steps and the workers' env steps alike by one
    factor, which is right for neither. Rows keep their order; other traces as profiler_cost does."""
    from archsim.sim.vector_workers import loop_meta, split_workers, without_worker_profiler_cost
    from archsim.trace.info import loop_of_steps

    if not loop_of_steps(trace.steps)[0]:
        return without_marker_cost(without_profiler_cost(trace))
    loop_steps, workers = split_workers(trace.steps)
    if workers.empty:
        return without_marker_cost(without_profiler_cost(trace))
    loop_trace = dataclasses.replace(trace, meta=loop_meta(trace.meta), steps=loop_steps)
    # the markers' cost measured in the parent: out of the parent's steps only
    clean = without_marker_cost(without_profiler_cost(loop_trace)).steps
    workers = without_worker_profiler_cost(workers, trace.meta)
    return dataclasses.replace(trace, steps=pd.concat([clean, workers]).sort_index())


def with_shared_dram(times: ServiceTimes, hw, config: SimConfig) -> ServiceTimes:
    """``times`` on an SoC whose CPU and GPU share one DRAM (archsim.perf.shared_memory): the
    learner's GPU work runs beside the actors' CPU work, taken as busy the whole time (the
    distributed loop keeps its actors stepping while the learner trains: an upper bound on the
    overlap). Actor DRAM demand: each env step writes its observation (OBS_BYTES per environment,
    the 84x84x4 uint8 stack of Mnih et al. 2015), a lower bound on its traffic; GPU demand: the
    learner step's DRAM bytes over its time. Both sides are stretched by the same factor."""
    from archsim.perf.shared_memory import achievable_gbs, busy_side_stretch

    step_s = float(np.mean(times.actor_step_cpu_s)) / hw.cpu.thread_speed_rel
    actors = min(config.actors, hw.cpu.cores)
    cpu_gbs = actors * config.envs_per_actor * OBS_BYTES / step_s / 1e9 if step_s > 0 else 0.0
    gpu_gbs = times.learner_dram_bytes / times.learner_gpu_s / 1e9 if times.learner_gpu_s else 0.0
    stretch = busy_side_stretch(cpu_gbs, gpu_gbs, achievable_gbs(hw))
    if stretch == 1.0:
        return times
    return dataclasses.replace(
        times,
        actor_step_cpu_s=times.actor_step_cpu_s * stretch,
        learner_gpu_s=times.learner_gpu_s * stretch,
        inference_gpu_s=times.inference_gpu_s * stretch,
    )
