"""The archsim runs behind docs/PUBLISHED.md (benchmarks/published_results.py): each returns, through
archsim's Python API, the figure a published row states, in that row's unit, on the closest bundled
trace and preset. Every run is deterministic, so the page is reproducible."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import network_paper as paper  # noqa: E402

TRACES = ROOT / "traces"
# R2D2 (Kapturowski et al., ICLR 2019, sec. 2.3 and Table 2): 64 sequences of 80 steps, each with a
# 40-step burn-in prefix, per update.
R2D2_BATCH, R2D2_SEQUENCE_STEPS = 64, 80 + 40
NETWORK_SETS = paper.NETWORK_SETS  # benchmarks/network_paper.py's system: 40GbE, measured TCP cost


def _simulate(trace: str, hw: str, **knobs):
    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.run import simulate
    from archsim.trace.format import load

    return simulate(load(TRACES / trace), load_hw(hw), SimConfig(**knobs))


SEED_KNOBS = dict(actors=256, envs_per_actor=1, inference="central", learner_batch=R2D2_BATCH)
R2D2_LEARNER_KNOBS = dict(SEED_KNOBS, replay_ratio=None)
R2D2_ACTORS = 8
R2D2_ACTOR_KNOBS = dict(actors=R2D2_ACTORS, inference="local", replay_ratio=None)
APEX_KNOBS = dict(actors=360, inference="local", learner_batch=512, replay_ratio=None)


def seed_frames_per_s() -> float:
    return _simulate("r2d2-seed-2x2-cpu", "dgx1-v100", **SEED_KNOBS).metrics["frames_per_s"]


def trace_sequence_steps(trace: str) -> int:
    """Steps per replayed sequence of an R2D2 capture (its sequence length plus burn-in)."""
    from archsim.trace.format import load

    r2d2 = load(TRACES / trace).meta["workload"]["settings"]["r2d2"]
    return int(r2d2["sequence_length"]) + int(r2d2["burn_in"])


def r2d2_learner_steps_per_s() -> float:
    """Sequence steps trained per second (updates/s x sequences x steps each): the trace's
    sequences are shorter than R2D2's, so the rate of sequence steps is what compares."""
    trace = "r2d2-seed-2x2-cpu"
    updates = _simulate(trace, "dgx1-v100", **R2D2_LEARNER_KNOBS).metrics["learner_updates_per_s"]
    return updates * R2D2_BATCH * trace_sequence_steps(trace)


def r2d2_actor_env_steps_per_s() -> float:
    """Env steps per second of one actor with local inference (the system's over its actors)."""
    metrics = _simulate("apex-dqn-cpu", "dgx1-v100", **R2D2_ACTOR_KNOBS).metrics
    return metrics["env_steps_per_s"] / R2D2_ACTORS


def apex_learner_batches_per_s() -> float:
    return _simulate("apex-dqn-cpu", "dgx1-v100", **APEX_KNOBS).metrics["learner_updates_per_s"]


def envpool_thread_frames_per_s() -> float:
    """Frames per second of one DGX A100 host thread doing nothing but the actor's work of the DQN
    trace under central inference (env step, preprocessing, sending the observation): archsim's
    actor service time (archsim.sim.workload.derive_service_times), at that thread's speed."""
    import numpy as np

    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.workload import derive_service_times, trace_learner_batch
    from archsim.trace.format import load

    trace = load(TRACES / "dqn-pong-cpu")
    hw = load_hw("dgx-a100")
    config = SimConfig(actors=1, inference="central")
    times = derive_service_times(trace, hw, config, trace_learner_batch(trace))
    # actor_step_cpu_s is in capture-thread seconds; the engine divides by the target thread's speed
    seconds = float(np.mean(times.actor_step_cpu_s)) / hw.cpu.thread_speed_rel
    return times.frames_per_env_step / seconds


# NVIDIA, "GPU-Based Deep Learning Inference: A Performance and Power Analysis" (whitepaper, Nov
# 2015), Table 3 as docs/ACCURACY.md reads it: AlexNet, Caffe + cuDNN 4, Jetson TX1 at 998 MHz.
def tx1_alexnet_images_per_s(trace_name: str, batch: int) -> float:
    from archsim.analysis.predict import predict_inference
    from archsim.hw import load_hw
    from archsim.perf.batch import scale_ops_to_batch
    from archsim.trace.format import load

    trace = load(TRACES / trace_name)
    captured = int(trace.meta["workload"]["settings"]["batch_size"])
    if batch != captured:
        trace = dataclasses.replace(trace, ops=scale_ops_to_batch(trace.ops, captured, batch))
    result = predict_inference(trace, load_hw("jetson-tx1"), source=None)
    return batch / result["gpu_seconds"]


def network_reductions() -> dict[str, float]:
    """benchmarks/network_paper.py's system with the capture's recorded replay work (the
    deterministic half of that script): reductions in % keyed as its comparisons."""
    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.trace.format import load

    trace = load(TRACES / "apex-dqn-cpu")
    base = SimConfig(
        actors=8, inference="local", nodes=4, replay_placement="server", replay_ratio=1.0
    )
    runs = {}
    for stack in paper.STACKS:
        hw = load_hw("dgx1-v100", [*NETWORK_SETS, f"network.stack={stack}"])
        for placement in paper.PLACEMENTS:
            config = base.replace(replay_placement=placement)
            runs[stack, placement] = paper.run_point(trace, hw, config, None)
    tcp, byp = runs["kernel_tcp", "server"], runs["kernel_bypass", "server"]
    out = {
        "bypass_network_part": paper.cut(paper.network_part_us(tcp), paper.network_part_us(byp)),
        "bypass_access": paper.cut(
            tcp.metrics["replay_access_latency_us"], byp.metrics["replay_access_latency_us"]
        ),
    }
    for stack in paper.STACKS:
        server, near = runs[stack, "server"].metrics, runs[stack, "in-network"].metrics
        for metric, name in (
            ("replay_access_latency_us", "access"),
            ("priority_sampling_latency_us", "sampling"),
        ):
            out[f"in_network_{name}_{stack}"] = paper.cut(server[metric], near[metric])
    return out


def dgx_peak_pflops(preset: str, rate: str, sparsity: bool = False) -> float:
    """The box's peak from the preset: GPUs x SMs x per-SM rate x clock (x2 for the 2:4
    structured sparsity that the data sheets' headline figures assume)."""
    from archsim.hw import load_hw

    gpu = load_hw(preset).gpu
    per_gpu = {
        "fp16": gpu.fp16_peak_flops,
        "tensor": gpu.tensor_peak_flops,
        "fp8": gpu.fp8_flops_per_clk_per_sm * gpu.sms * gpu.clock_mhz * 1e6,
    }[rate]
    return gpu.count * per_gpu * (2 if sparsity else 1) / 1e15
