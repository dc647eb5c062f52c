"""archsim's prediction for a validation configuration: its knobs mapped onto SimConfig, the `local`
hardware config (detected from this machine), and the workload's BASELINE trace only.

DQN: the simulator has no "actor and learner alternate on one thread" mode; the DQN loop is modelled
as one actor with local inference and the learner pinned to the same single hardware thread
(``cpu_threads=1``), a FIFO thread serving whichever is ready, with the replay-ratio limiter
(batch / train_every samples per transition) pacing the learner against the actor. That is the
DQN loop except for the costs the simulator adds for a distributed layout (parameter publication and
the per-message network stack), see docs/SIMULATOR.md.

R2D2: SEED-style central inference with the run's actors, envs per actor, inference batch and
dynamic-batching timeout; the runtime's replay ratio (sequences sampled per sequence inserted) is
sequences per transition in the simulator's units: ratio / (sequence_length - overlap), since each
environment inserts one sequence per (sequence_length - overlap) steps and a sampled sequence is one
sample of a learner batch. Three knobs say how the bundled runtime (workloads/r2d2/seed) runs:
``cpu_sched="shared"`` (its processes are not pinned: Linux time-shares both cores among the
learner's two threads and the actors), ``replay_limit="learner"`` (only its trainer waits for the
ratio; actors never do) and ``param_lock="on"`` (its params lock makes the server's forward pass and
the trainer's replay sample, optimizer step and priority update take turns).
"""

from __future__ import annotations

from archsim.validate.configs import R2D2_SEQUENCE_LENGTH, R2D2_SEQUENCE_OVERLAP, RunConfig

# SeedSettings.inference_timeout_ms default (workloads/r2d2/seed/settings.py): 5 ms.
R2D2_INFERENCE_TIMEOUT_US = 5000.0
# Simulated seconds per prediction: R2D2 here runs ~300 env steps/s and DQN ~80, so 10 s holds
# thousands of steps and hundreds of learner updates; the cold start is then negligible.
SIM_SECONDS = 10.0


def sim_config(config: RunConfig, hw_threads: int) -> object:
    """The SimConfig of one validation configuration."""
    from archsim.sim.config import SimConfig

    if config.workload == "dqn":
        return SimConfig(
            actors=1,
            envs_per_actor=1,
            inference="local",
            cpu_threads=1,
            learner_batch=config.learner_batch,
            replay_ratio=config.dqn_replay_ratio,
            replay_limit="both",  # the sequential DQN loop: neither side runs ahead
            sim_seconds=SIM_SECONDS,
        )
    steps_per_sequence = R2D2_SEQUENCE_LENGTH - R2D2_SEQUENCE_OVERLAP
    return SimConfig(
        actors=config.actors,
        envs_per_actor=config.envs_per_actor,
        inference="central",
        inference_batch=config.inference_batch,
        inference_timeout_us=R2D2_INFERENCE_TIMEOUT_US,
        learner_batch=config.learner_batch,
        replay_ratio=config.replay_ratio / steps_per_sequence,
        replay_limit="learner",
        cpu_threads=hw_threads,
        cpu_sched="shared",
        param_lock="on",
        sim_seconds=SIM_SECONDS,
    )


def predict(config: RunConfig, trace: object, hw: object) -> dict[str, float]:
    """frames/s, learner updates/s, CPU utilization (of ALL hardware threads) and the CPU seconds
    per second the run's threads are busy (``cpu_busy_s_per_s``), predicted."""
    from archsim.sim.run import simulate

    hw_threads = hw.cpu.sockets * hw.cpu.cores_per_socket * hw.cpu.threads_per_core
    sim = sim_config(config, hw_threads)
    metrics = simulate(trace, hw, sim).metrics
    # the simulator's cpu_util is over the threads it was given; the measurement's is over all
    used_threads = sim.cpu_threads or hw_threads
    return {
        "frames_per_s": float(metrics["frames_per_s"]),
        "learner_updates_per_s": float(metrics["learner_updates_per_s"]),
        "cpu_util": float(metrics["cpu_util"]) * used_threads / hw_threads,
        "cpu_busy_s_per_s": float(metrics["cpu_util"]) * used_threads,
    }
