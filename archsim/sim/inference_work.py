"""Inference GPU time for every batch size 1..inference_batch, and the server's CPU per batch.

- The act/inference ops of a few representative steps (archsim.sim.gpu_jobs), plus the
  host-to-device copy of the observations (84x84x4 uint8 each) unless the trace already holds its
  memcpys.
- SEED-style traces (R2D2, central inference, archsim.sim.recorded): the GPU time comes from the
  learner's recorded inference batches' ops (LSTM step included); the server pays, per batch, the
  recorded CPU time outside those ops plus one launch per kernel.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.launch import launch_calls
from archsim.perf.network import OBS_BYTES, host_copy_seconds
from archsim.sim.config import SimConfig
from archsim.sim.gpu_jobs import has_copies, job_times, lowered, representative_ops
from archsim.sim.recorded import recorded_inference_steps, server_overhead_capture_s
from archsim.trace.schema import PHASE_GROUPS


@dataclass(frozen=True)
class InferenceWork:
    """Index = batch size in observations (0 unused)."""

    gpu_s: np.ndarray
    sm_fraction: np.ndarray
    server_cpu_s_per_batch: float
    recorded: bool  # a SEED trace: batches close when a server thread is free
    # the Python part of server_cpu_s_per_batch (the recorded time outside the policy's ops; the
    # kernel launches are native), which holds the learner process's GIL (archsim.sim.gil)
    server_python_s_per_batch: float = 0.0
    dram_bytes: np.ndarray | None = None  # GPU DRAM bytes of a batch of each size, for power


def derive_inference_work(trace, hw, config: SimConfig, source) -> InferenceWork:
    """GPU time and SM share of an inference batch of every size on ``hw`` (a GPU machine)."""
    speed_rel = hw.cpu.thread_speed_rel
    # A SEED trace times the server itself: its replay insert and request handling are in the
    # recorded per-batch overhead (the actor rows hold no replay_insert then).
    recorded = not recorded_inference_steps(trace).empty
    server_cpu_s_per_batch = server_overhead_capture_s(trace) if recorded else 0.0
    max_batch = config.inference_batch if config.inference == "central" else 1
    inf_ops, inf_steps, inf_from = representative_ops(trace, PHASE_GROUPS["inference"], "actor")
    inf_ops, inf_from = lowered(inf_ops, inf_from, backward_steps=None)
    inference_gpu_s = np.zeros(max_batch + 1)
    inference_frac = np.zeros(max_batch + 1)
    inference_bytes = np.zeros(max_batch + 1)
    if config.inference == "central":
        if inf_ops.empty:
            raise ArchsimError(
                "trace: no act/inference_batch ops; --inference central needs the policy's ops"
            )
        sizes = np.arange(1, max_batch + 1)
        seconds, frac, nbytes = job_times(inf_ops, inf_steps, inf_from, sizes, hw, source)
        # A batch may be padded to any larger size, so b observations never need longer than
        # the fastest size >= b: the suffix minimum (the kernel model's wave quantisation can make
        # a bigger batch faster than a smaller one).
        order = np.minimum.accumulate(seconds[::-1])[::-1]
        frac = np.where(order < seconds, np.nan, frac)
        frac = pd.Series(frac).bfill().to_numpy()
        nbytes = pd.Series(np.where(order < seconds, np.nan, nbytes)).bfill().to_numpy()
        seconds = order
        copied = has_copies(inf_ops)
        copies = np.array(
            [0.0 if copied else host_copy_seconds(b * OBS_BYTES, hw.host_link) for b in sizes]
        )
        inference_gpu_s[1:] = seconds + copies
        inference_frac[1:] = frac * seconds / np.maximum(seconds + copies, 1e-30)
        # the observations copied to the GPU are written to its DRAM once
        inference_bytes[1:] = nbytes + (0.0 if copied else sizes * OBS_BYTES)
        if recorded:
            # On a GPU the policy's ops leave the server thread but each costs a kernel launch.
            kernels_per_batch = launch_calls(inf_ops).sum() / inf_steps  # a graph: one call
            server_cpu_s_per_batch += (
                kernels_per_batch * hw.gpu.launch_overhead_us * 1e-6 * speed_rel
            )
    return InferenceWork(
        gpu_s=inference_gpu_s,
        sm_fraction=np.clip(inference_frac, 0.0, 1.0),
        server_cpu_s_per_batch=server_cpu_s_per_batch,
        recorded=recorded,
        dram_bytes=inference_bytes,
        server_python_s_per_batch=server_overhead_capture_s(trace) if recorded else 0.0,
    )
