"""The single-loop program (``--loop sequential``): one thread steps the environment (and draws the
screen when the trace has a ``display`` phase), acts, and every k-th iteration runs a learner update
(replay sample, forward, backward, optimizer step, target sync), strictly in turn, waiting for its
GPU work. This is how single-file DQN programs run (CleanRL's dqn_atari.py, the bundled
workloads/dqn loop, the original DQN): no queue, no second thread, so throughput is a closed form.

Per loop iteration (one actor step of ``e`` env steps; ``u`` learner updates per iteration, the
trace's train frequency), in seconds on the target:

- ``act_s = cpu_a / speed + max(launch_a, gpu_a)``: the iteration's CPU work outside GPU phases
  (env step, preprocess, display, replay insert, the loop's own code), and on a GPU the act forward:
  the kernel launches on this thread overlap the GPU's time (asynchronous launches) and the thread
  waits for the result before stepping the environment. Without a GPU the act forward is CPU work.
- ``learn_s = cpu_l / speed + max(launch_l, gpu_l)``: likewise for one update.
- ``T = act_s + u x learn_s``; ``env_steps_per_s = e / T``, ``learner_updates_per_s = u / T``.

An actor step that stepped no environment (an A2C's value forward for its bootstrap after the
rollout) is work of the iterations around it, not an iteration: the actor steps' mean work and act
share are divided by the share of them that stepped an env.

CPU work is capture-thread seconds (CPU time of the whole step and the loop code between steps,
``cpu_us + gap_cpu_us``, with the profiler's cost taken out) divided by the target thread's speed for
its kind of work (archsim.perf.cpu_speed: env step and display at the emulator speed, the CPU-only
network at the SIMD speed, the rest at the interpreter speed; each falls back to
``cpu.thread_speed_rel``); GPU time from the kernel model (archsim.sim.gpu_jobs).

Shared DRAM (``memory.shared_with_gpu``, archsim.perf.shared_memory): the thread waits for its GPU
work, so CPU phases and kernels overlap only while the thread launches kernels that the GPU is
already running; launches move almost no DRAM bytes, so no contention is modelled here (it is 0 by
construction, not neglected). Host-device copies become DRAM-to-DRAM copies (or none with
``memory.zero_copy``): archsim.perf.copies and archsim.sim.learner_work. The training
frequency is the trace's pacing (``samples_per_insert / learner_batch`` updates per env step: DQN's
batch / train_every, a ``capture run`` trace's observed samples per transition), else the ratio of
learner to actor steps in the trace. The result is the steady state after learn-start.

Vector-env workers (a ``capture run`` trace of a program whose N environments step in worker
processes, archsim.sim.vector_workers): the loop's own steps are the program process's; an iteration
steps the N envs (``e = N``) and its env phase lasts as long as the slowest worker's step on the
target (``worker_env_s``, added to ``act_s``); the parent's CPU around the vector step (sending
actions, receiving observations) is in its own steps, as interpreter work, not emulator work.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.cpu import place_threads_on
from archsim.perf.cpu_speed import EMULATOR, INTERPRETER, SIMD, class_speed
from archsim.perf.launch import launch_calls
from archsim.sim.config import LOOP_TRACE, SimConfig
from archsim.sim.metrics import Recorder, summarize
from archsim.sim.step_work import has_cpu_time, phases_work_us, step_work_us, typical_us
from archsim.trace.info import loop_of_steps
from archsim.trace.schema import PHASE_GROUPS

# Phases whose work moves to the GPU on a GPU target (their CPU part there is the kernel launches).
ACT_GPU_PHASES = ("act",)
LEARNER_GPU_PHASES = ("train_forward", "train_backward", "optimizer_step", "target_sync")
# Timeline slices kept at most (a long window of short iterations would make a huge file).
MAX_TIMELINE_SLICES = 20_000


@dataclass(frozen=True)
class LoopTimes:
    """One loop iteration and one learner update on the target, in seconds (see module docstring)."""

    act_cpu_s: float  # CPU work of an iteration outside its GPU work (target seconds)
    act_launch_s: float  # kernel launches of the act forward (0 without a GPU)
    act_gpu_s: float  # GPU time of the act forward, its copies included (0 without a GPU)
    learn_cpu_s: float
    learn_launch_s: float
    learn_gpu_s: float
    updates_per_iteration: float  # u: learner updates per loop iteration
    env_steps_per_iteration: float  # e: environments stepped per iteration (vector envs)
    act_sm_fraction: float = 0.0
    learn_sm_fraction: float = 0.0
    act_dram_bytes: float = 0.0
    learn_dram_bytes: float = 0.0
    env_workers: int = 0  # N vector-env worker processes (0: the env steps on the loop's thread)
    worker_env_s: float = 0.0  # expected slowest worker step per iteration (the loop waits for it)
    worker_busy_s: float = 0.0  # mean CPU seconds of one worker's step

    @property
    def act_s(self) -> float:
        return self.act_cpu_s + self.worker_env_s + max(self.act_launch_s, self.act_gpu_s)

    @property
    def learn_s(self) -> float:
        return self.learn_cpu_s + max(self.learn_launch_s, self.learn_gpu_s)

    @property
    def iteration_s(self) -> float:
        """Mean seconds per loop iteration: the closed form ``act_s + u x learn_s``."""
        return self.act_s + self.updates_per_iteration * self.learn_s


def resolve_loop(trace, config: SimConfig) -> SimConfig:
    """``config`` with ``loop="trace"`` resolved: sequential for one single-threaded loop's trace,
    else distributed."""
    if config.loop != LOOP_TRACE:
        return config
    single, _ = loop_of_steps(trace.steps)
    return config.replace(loop="sequential" if single else "distributed")


def check_sequential_trace(trace) -> None:
    """One line when the trace is not one loop on one thread (``--loop sequential`` refused)."""
    single, why = loop_of_steps(trace.steps)
    if not single:
        raise ArchsimError(f"--loop sequential: the trace is not a single-threaded loop ({why})")


def _env_step_share(actor: pd.DataFrame) -> float:
    """The share of actor steps that stepped the environment, 1 when none did (env steps not
    marked). An actor step without one (an A2C's value forward for its bootstrap after the rollout,
    a no-grad forward before training) is still work of the loop: an iteration stepping the env
    carries the actor steps' mean work divided by this share."""
    if "env_step_us" not in actor or actor.empty:
        return 1.0
    share = float(actor["env_step_us"].notna().mean())
    return share if share > 0.0 else 1.0


def _mean_work_us(rows: pd.DataFrame, gpu_phases: tuple[str, ...]) -> tuple[float, float]:
    """(mean work of a step and the loop code before it, of which in ``gpu_phases``), in us."""
    gap = rows["gap_cpu_us"] if "gap_cpu_us" in rows else pd.Series(0.0, index=rows.index)
    whole = step_work_us(rows) + gap.astype(float).fillna(0.0)
    cpu_time = "cpu_us" in rows and bool(rows["cpu_us"].notna().any())
    total = typical_us(whole, cpu_time)
    in_gpu = typical_us(phases_work_us(rows, gpu_phases), cpu_time)
    return float(np.nan_to_num(total)), float(np.nan_to_num(in_gpu))


# Phases of the emulator's process (archsim.perf.cpu_speed: integer C++ work, not interpreter work).
EMULATOR_PHASES = ("env_step", "display")


def _class_seconds(
    rows: pd.DataFrame,
    total_us: float,
    simd_phases: tuple[str, ...],
    cpu,
    emulator_phases: tuple[str, ...] = EMULATOR_PHASES,
) -> float:
    """Target seconds of ``total_us`` capture-thread microseconds of ``rows``' work: the emulator
    phases at the emulator speed, ``simd_phases`` at the SIMD-kernel speed, the rest (preprocess,
    replay, the loop's code) at the interpreter speed (archsim.perf.cpu_speed)."""
    cpu_time = has_cpu_time(rows)
    emulator_us = float(np.nan_to_num(typical_us(phases_work_us(rows, emulator_phases), cpu_time)))
    simd_us = 0.0
    if simd_phases:
        simd_us = float(np.nan_to_num(typical_us(phases_work_us(rows, simd_phases), cpu_time)))
    emulator_us = min(max(emulator_us, 0.0), max(total_us, 0.0))
    simd_us = min(max(simd_us, 0.0), max(total_us - emulator_us, 0.0))
    rest_us = max(total_us - emulator_us - simd_us, 0.0)
    return 1e-6 * (
        emulator_us / class_speed(cpu, EMULATOR)
        + simd_us / class_speed(cpu, SIMD)
        + rest_us / class_speed(cpu, INTERPRETER)
    )


def updates_per_env_step(trace, config: SimConfig, learner_batch: int) -> float:
    """Learner updates per env step: the resolved replay ratio / batch, else the trace's ratio of
    learner steps to env steps (the loop's actor steps x their batch; vector-env workers' own
    steps are the same env steps again)."""
    from archsim.sim.vector_workers import split_workers

    ratio = config.samples_per_insert
    if ratio is not None:
        return ratio / learner_batch
    steps, _ = split_workers(trace.steps)
    actor = steps[steps["role"] == "actor"]
    learner = steps[steps["role"] == "learner"]
    env_steps = float(np.maximum(actor["batch_size"].to_numpy(dtype=float), 1.0).sum())
    return len(learner) / env_steps if env_steps else 0.0


def derive_loop_times(trace, hw, config: SimConfig, learner_batch: int) -> LoopTimes:
    """The iteration and update times of ``trace``'s loop on ``hw`` (trace already without the
    profiler's cost and cut to whole steps)."""
    from archsim.perf.kernel import source_hw_for_trace
    from archsim.sim.gpu_jobs import representative_ops
    from archsim.sim.inference_work import derive_inference_work
    from archsim.sim.learner_work import derive_learner_work, sample_us
    from archsim.sim.vector_workers import split_workers, worker_phase, worker_step_seconds

    steps, worker_rows = split_workers(trace.steps)
    actor = steps[steps["role"] == "actor"]
    learner = steps[steps["role"] == "learner"]
    if actor.empty or learner.empty:
        raise ArchsimError(
            "trace: --loop sequential needs actor and learner steps (steps.parquet roles)"
        )
    envs = max(1, int(np.median(np.maximum(actor["batch_size"].to_numpy(dtype=float), 1.0))))
    u = updates_per_env_step(trace, config, learner_batch) * envs
    # Env workers: one env each, so N = the loop's vector batch; the parent's env_step is its
    # send/receive (interpreter work), the env steps themselves the workers'.
    workers = envs if not worker_rows.empty else 0
    phase = worker_phase(worker_step_seconds(worker_rows, hw.cpu), workers, hw.cpu)
    emulator = EMULATOR_PHASES if not workers else ("display",)
    on_workers = {
        "env_workers": workers,
        "worker_env_s": phase.slowest_s,
        "worker_busy_s": phase.busy_s,
    }
    interp = class_speed(hw.cpu, INTERPRETER)
    act_total, act_gpu_part = _mean_work_us(actor, ACT_GPU_PHASES)
    per_env = _env_step_share(actor)
    act_total, act_gpu_part = act_total / per_env, act_gpu_part / per_env
    learn_total, learn_gpu_part = _mean_work_us(learner, LEARNER_GPU_PHASES)
    trace_batch = max(1.0, float(learner["batch_size"].median()))
    if hw.gpu is None:
        # Everything is CPU work; the batch-sized learner phases grow linearly with the batch
        # (archsim.sim.cpu_only_work's rule).
        from archsim.sim.cpu_only_work import BATCH_LEARNER_PHASES

        cpu_time = "cpu_us" in learner and bool(learner["cpu_us"].notna().any())
        grows = float(
            np.nan_to_num(typical_us(phases_work_us(learner, BATCH_LEARNER_PHASES), cpu_time))
        )
        learn_us = learn_total + grows * (learner_batch / trace_batch - 1.0)
        # the batch-sized learner phases' growth is SIMD-kernel work (it is the network's)
        learn_cpu_s = _class_seconds(learner, learn_total, LEARNER_GPU_PHASES, hw.cpu)
        learn_cpu_s += max(learn_us - learn_total, 0.0) * 1e-6 / class_speed(hw.cpu, SIMD)
        learn_cpu_s -= max(learn_total - learn_us, 0.0) * 1e-6 / class_speed(hw.cpu, SIMD)
        return LoopTimes(
            act_cpu_s=_class_seconds(actor, act_total, ACT_GPU_PHASES, hw.cpu, emulator),
            act_launch_s=0.0,
            act_gpu_s=0.0,
            learn_cpu_s=max(learn_cpu_s, 0.0),
            learn_launch_s=0.0,
            learn_gpu_s=0.0,
            updates_per_iteration=u,
            env_steps_per_iteration=float(envs),
            **on_workers,
        )
    source = source_hw_for_trace(trace)
    # The act forward of one iteration: a batch of the loop's environments, run when the policy acts
    # (an epsilon-greedy loop skips it on random actions: the share of steps with an act phase).
    acts = float(actor["act_us"].notna().mean()) / per_env if "act_us" in actor else 0.0
    inf_ops, inf_steps, _ = representative_ops(trace, PHASE_GROUPS["inference"], "actor")
    act_gpu_s = act_sm = act_bytes = act_launch_s = 0.0
    if inf_ops.empty:  # no policy ops recorded: the act phase stays CPU work, as captured
        act_gpu_part = 0.0
    else:
        act_config = config.replace(
            loop="distributed",
            actors=1,
            envs_per_actor=envs,
            inference="central",
            inference_batch=envs,
        )
        inference = derive_inference_work(trace, hw, act_config, source)
        act_gpu_s, act_sm = float(inference.gpu_s[envs]), float(inference.sm_fraction[envs])
        if inference.dram_bytes is not None:
            act_bytes = float(inference.dram_bytes[envs])
        act_launch_s = launch_calls(inf_ops).sum() / inf_steps * hw.gpu.launch_overhead_us * 1e-6
    learner_work = derive_learner_work(trace, hw, learner_batch, source)
    # the replay sample (in learn_total, at the trace's batch) grows with the batch
    learn_us = learn_total - learn_gpu_part + sample_us(learner) * (learner_batch / trace_batch - 1)
    return LoopTimes(
        act_cpu_s=_class_seconds(actor, max(act_total - act_gpu_part, 0.0), (), hw.cpu, emulator),
        act_launch_s=acts * act_launch_s,
        act_gpu_s=acts * act_gpu_s,
        learn_cpu_s=max(learn_us, 0.0) * 1e-6 / interp,  # replay sample, the loop's code
        learn_launch_s=learner_work.launch_cpu_s / interp,  # framework dispatch: interpreter work
        learn_gpu_s=learner_work.gpu_s,
        updates_per_iteration=u,
        env_steps_per_iteration=float(envs),
        act_sm_fraction=act_sm,
        learn_sm_fraction=learner_work.sm_fraction,
        act_dram_bytes=acts * act_bytes,
        learn_dram_bytes=learner_work.dram_bytes,
        **on_workers,
    )


def loop_metrics(
    times: LoopTimes, machine, frames_per_env_step: float, learner_batch: int, sim_seconds: float
) -> dict[str, float]:
    """The run's metrics (named as the distributed loop's) from the closed form; energy over
    ``sim_seconds`` of the steady state."""
    record = loop_record(times, machine, frames_per_env_step)
    return record_metrics(record, times, machine, learner_batch, sim_seconds)


def record_metrics(
    record: tuple[Recorder, np.ndarray, np.ndarray, np.ndarray],
    times: LoopTimes,
    machine,
    learner_batch: int,
    sim_seconds: float,
) -> dict[str, float]:
    """loop_metrics of a loop_record already built (simulate_sequential reads it for the power
    cap too)."""
    rec, socket_of_thread, per_socket, smt_sibling = record
    t, u, e = times.iteration_s, times.updates_per_iteration, times.env_steps_per_iteration
    metrics = summarize(rec, machine.power, socket_of_thread, per_socket, smt_sibling)
    metrics["energy_j"] = metrics["avg_power_w"] * sim_seconds
    metrics["samples_per_insert"] = u * learner_batch / e
    metrics["seconds_per_1000_steps"] = 1000.0 * t / e
    metrics["iteration_s"] = t
    # cpu_core_util_max / _mean come from summarize (archsim.sim.metrics.core_utilization): the
    # loop's core is the busiest, the mean is over every core of the machine.
    return metrics


def loop_record(
    times: LoopTimes, machine, frames_per_env_step: float
) -> tuple[Recorder, np.ndarray, np.ndarray, np.ndarray]:
    """One iteration of the loop as a Recorder, with its threads' sockets, threads per socket and
    SMT siblings: what loop_metrics and the power cap (archsim.sim.power_cap) read."""
    t = times.iteration_s
    if not t > 0:
        raise ArchsimError(
            "trace: a loop iteration takes no time; its throughput would be infinite"
        )
    u, e = times.updates_per_iteration, times.env_steps_per_iteration
    layout = place_threads_on(machine, n_reserved=1, n_actors=0)
    # One iteration of the mean cycle as the window: the rates are exact, no end effects.
    rec = Recorder(end=t, hw_threads=machine.hw_threads, frames_per_env_step=frames_per_env_step)
    rec.env_steps = e  # type: ignore[assignment]  # a mean count per iteration (float)
    rec.learner_updates = u  # type: ignore[assignment]
    rec.inference_batches = 1 if times.act_gpu_s > 0 or times.act_cpu_s > 0 else 0
    rec.inference_obs = e  # type: ignore[assignment]
    # The thread is busy with CPU work and launches; it waits (idle) for GPU time beyond them.
    rec.cpu_busy_s[0] = times.act_cpu_s + times.act_launch_s
    rec.cpu_busy_s[0] += u * (times.learn_cpu_s + times.learn_launch_s)
    # each worker's steps on its own thread next to the loop's (which waits while they step)
    for worker in range(times.env_workers):
        rec.cpu_busy_s[(1 + worker) % machine.hw_threads] += times.worker_busy_s
    rec.gpu_any_busy_s = times.act_gpu_s + u * times.learn_gpu_s
    rec.gpu_sm_busy_s = (
        times.act_gpu_s * times.act_sm_fraction + u * times.learn_gpu_s * times.learn_sm_fraction
    )
    rec.gpu_dram_bytes = times.act_dram_bytes + u * times.learn_dram_bytes
    rec.actor_wait_s = u * times.learn_s  # the environment waits while the loop trains
    socket_of_thread = layout.socket_of_thread()
    per_socket = np.bincount(socket_of_thread, minlength=machine.sockets)
    smt_sibling = np.arange(layout.hw_threads) >= layout.cores
    return rec, socket_of_thread, per_socket, smt_sibling


def timeline_slices(times: LoopTimes, sim_seconds: float) -> list:
    """(label, track, start s, duration s) slices of the loop over ``sim_seconds``: CPU work on
    cpu0, GPU work on gpu, vector-env workers' steps on workers, an update after every 1/u
    iterations (accumulated, so the mean holds)."""
    out: list = []
    now, owed = 0.0, 0.0
    while now < sim_seconds and len(out) < MAX_TIMELINE_SLICES:
        if times.worker_env_s > 0:  # the loop waits for its slowest env worker
            out.append(("env_workers", "workers", now, times.worker_env_s))
            now += times.worker_env_s
        now = _phase(out, now, "iteration", times.act_cpu_s, times.act_launch_s, times.act_gpu_s)
        owed += times.updates_per_iteration
        while owed >= 1.0 and now < sim_seconds:
            owed -= 1.0
            now = _phase(
                out, now, "learner_step", times.learn_cpu_s, times.learn_launch_s, times.learn_gpu_s
            )
    return out


def _phase(out: list, now: float, label: str, cpu_s: float, launch_s: float, gpu_s: float) -> float:
    if cpu_s > 0:
        out.append((label, "cpu0", now, cpu_s))
    now += cpu_s
    if launch_s > 0:
        out.append(("kernel_launches", "cpu0", now, launch_s))
    if gpu_s > 0:
        out.append((label, "gpu", now, gpu_s))
    return now + max(launch_s, gpu_s)


def simulate_sequential(
    trace, hw, config: SimConfig, learner_batch: int, timeline: bool, series_bins: int
):
    """``archsim.sim.run.simulate`` for ``--loop sequential``: a SimResult of the closed form."""
    from archsim.perf.conv_impl import trace_with_conv_impl
    from archsim.sim.machine import derive_machine
    from archsim.sim.pacing import trace_frames_per_env_step
    from archsim.sim.power_cap import run_clock_caps
    from archsim.sim.run import SimResult
    from archsim.sim.step_work import whole_steps
    from archsim.sim.workload import without_process_profiler_cost

    check_sequential_trace(trace)
    trace = trace_with_conv_impl(trace, hw, config.conv_impl)  # --conv-impl (issue 15)
    machine = derive_machine(hw, config)
    # the loop's steps and the env workers' (if any) lose the profiler's cost each by their own
    # unprofiled figures, as the distributed path does
    clean = without_process_profiler_cost(trace)
    clean = dataclasses.replace(clean, steps=whole_steps(clean.steps.reset_index(drop=True)))
    times = derive_loop_times(clean, hw, config, learner_batch)
    record = loop_record(times, machine, trace_frames_per_env_step(trace))
    metrics = record_metrics(record, times, machine, learner_batch, config.sim_seconds)
    rec, socket_of_thread, _, smt_sibling = record
    series = None
    if series_bins:  # the steady state draws constant power
        width = config.sim_seconds / series_bins
        series = (np.arange(series_bins) * width, np.full(series_bins, metrics["avg_power_w"]))
    return SimResult(
        metrics=metrics,
        config=config,
        engine="sequential",
        events=0,
        timeline=timeline_slices(times, config.sim_seconds) if timeline else None,
        power_series=series,
        clock_caps=run_clock_caps(rec, machine.power, socket_of_thread, smt_sibling),
    )
