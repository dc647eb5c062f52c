"""Builders for the simulator tests (no tests here): resolved service times, a machine, and a tiny Trace
built from DataFrames through the schema, with realistic phase durations from REFERENCE.md."""

from __future__ import annotations

import numpy as np
import pandas as pd

from archsim.sim.metrics import PowerModel
from archsim.sim.system import Machine, ServiceTimes
from archsim.trace import Trace

# ALE Pong on one core: ~4,400 agent steps/s, i.e. ~227 us per env step (REFERENCE.md).
ENV_STEP_US = 227.0


def machine(threads: int = 8, cores: int | None = None, smt_yield: float = 1.0) -> Machine:
    cores = cores or threads
    return Machine(
        hw_threads=threads,
        cores=cores,
        sockets=1,
        cores_per_socket=cores,
        thread_speed_rel=1.0,
        smt_yield=smt_yield,
        # DGX-1 figures (hwconfigs/dgx1-v100.yaml): V100 55-300 W, Xeon socket 40-135 W.
        power=PowerModel(
            gpus=1, gpu_idle_w=55, gpu_max_w=300, sockets=1, cpu_idle_w=40, cpu_max_w=135
        ),
    )


def service_times(
    actor_step_s=(250e-6,),
    up_s: float = 0.0,
    down_s: float = 0.0,
    server_s: float = 0.0,
    inference_s: float = 0.0,
    inference_frac: float = 0.0,
    max_batch: int = 64,
    learner_gpu_s: float = 1e-3,
    learner_frac: float = 0.3,
    learner_cpu_s: float = 0.0,
    launch_s: float = 0.0,
    on_gpu: bool = True,
) -> ServiceTimes:
    return ServiceTimes(
        actor_step_cpu_s=np.asarray(actor_step_s, dtype=float),
        request_up_s=up_s,
        response_down_s=down_s,
        server_cpu_s_per_obs=server_s,
        inference_gpu_s=np.full(max_batch + 1, inference_s),
        inference_sm_fraction=np.full(max_batch + 1, inference_frac),
        learner_sample_cpu_s=learner_cpu_s,
        learner_launch_cpu_s=launch_s,
        learner_gpu_s=learner_gpu_s,
        learner_sm_fraction=learner_frac,
        publish_cpu_s=0.0,
        on_gpu=on_gpu,
    )


def tiny_trace(n_actor: int = 24, n_learner: int = 3, seed: int = 0) -> Trace:
    """A DQN-like CPU capture: actor steps with env_step/preprocess/act/insert phases, Nature-DQN act
    ops (18.7 MFLOP per forward, REFERENCE.md) and learner steps at batch 32."""
    rng = np.random.default_rng(seed)
    steps, ops = [], []
    step_id = op_id = 0
    # 18.7 MFLOP split over the three convs and two linears by their MAC counts.
    forward = [("conv", 6.5e6), ("conv", 5.1e6), ("conv", 3.8e6), ("gemm", 3.2e6), ("gemm", 0.1e6)]
    for i in range(n_actor):
        steps.append(
            dict(
                step_id=step_id,
                role="actor",
                actor=0,
                batch_size=1,
                start_us=i * 400.0,
                dur_us=380.0,
                env_step_us=ENV_STEP_US + rng.normal(0, 20),
                preprocess_us=70.0,  # 3,300 vs 4,400 steps/s with DQN preprocessing (REFERENCE.md)
                act_us=60.0,
                replay_insert_us=10.0,
            )
        )
        for k, (cls, flops) in enumerate(forward):
            ops.append(_op(op_id, f"aten::{cls}{k}", cls, "act", step_id, flops, 2e5, 5e4))
            op_id += 1
        step_id += 1
    train = [
        ("train_forward", "conv", 32 * 18.7e6),
        ("train_backward", "conv", 2 * 32 * 18.7e6),
        ("optimizer_step", "elementwise", 1.69e6 * 4),
    ]
    for i in range(n_learner):
        steps.append(
            dict(
                step_id=step_id,
                role="learner",
                batch_size=32,
                start_us=1e5 + i * 5000.0,
                dur_us=4000.0,
                replay_sample_us=300.0,
                train_forward_us=1000.0,
                train_backward_us=2000.0,
                optimizer_step_us=500.0,
            )
        )
        for k, (phase, cls, flops) in enumerate(train):
            ops.append(_op(op_id, f"aten::train{k}", cls, phase, step_id, flops, 7e6, 7e6))
            op_id += 1
        step_id += 1
    meta = {"workload": {"name": "tiny", "settings": {}}, "source": {"device": "cpu"}}
    return Trace(meta=meta, ops=pd.DataFrame(ops), steps=pd.DataFrame(steps))


def _op(op_id, name, cls, phase, step_id, flops, read, written) -> dict:
    return dict(
        op_id=op_id,
        kind="cpu",
        name=name,
        launch_op=name,
        op_class=cls,
        phase=phase,
        step_id=step_id,
        dtype="float32",
        flops=flops,
        bytes_read=read,
        bytes_written=written,
        has_formula=True,
        dur_us=10.0,
    )
