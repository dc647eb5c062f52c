"""The validation plan as data: one baseline and several variants per workload.

DQN (workloads/dqn) is one process with one actor and the learner on the same thread, so its knobs
are the learner batch and the train frequency (the replay ratio follows: batch / train_every samples
per transition). R2D2 (workloads/r2d2, SEED-style central inference) gives actors, environments per
actor and the inference batch. Every variant is predicted from its workload's BASELINE trace only.
"""

from __future__ import annotations

import dataclasses

WORKLOADS = ("dqn", "r2d2")

# DQN baseline: Nature DQN minibatch 32, update every 4 steps (Mnih et al. 2015, Extended Data
# Table 1; REFERENCE.md "Nature DQN"), as in workloads/dqn/settings.py.
DQN_BATCH = 32
DQN_TRAIN_EVERY = 4
# R2D2 baseline: the bundled example trace's layout (traces/r2d2-seed-2x2-cpu): 2 actors x 2 envs,
# inference batch 4 (every env), replay ratio 1 sequence sampled per sequence inserted. Sequences of
# 20 (10 burn-in, overlap 10) and a learner batch of 2 sequences keep a learner step short enough
# that this 2-core box trains during a run of seconds (REFERENCE.md's 80/40 and batch 64 would not).
R2D2_ACTORS = 2
R2D2_ENVS_PER_ACTOR = 2
R2D2_INFERENCE_BATCH = 4
R2D2_REPLAY_RATIO = 1.0
R2D2_SEQUENCE_LENGTH = 20
R2D2_BURN_IN = 10
R2D2_SEQUENCE_OVERLAP = 10
R2D2_BATCH = 2
R2D2_REPLAY_CAPACITY = 256  # sequences: a few MB preallocated per run, plenty for runs of seconds


@dataclasses.dataclass(frozen=True)
class RunConfig:
    """One real configuration of one workload (the knobs the real runtime exposes)."""

    name: str
    workload: str  # "dqn" or "r2d2"
    learner_batch: int
    train_every: int = 1  # DQN: agent steps per learner step
    actors: int = 1
    envs_per_actor: int = 1
    inference_batch: int = 1  # R2D2 central inference: observations per batch
    replay_ratio: float = 1.0  # R2D2: sequences sampled per sequence inserted

    @property
    def dqn_replay_ratio(self) -> float:
        """DQN samples per inserted transition: one batch every train_every steps."""
        return self.learner_batch / self.train_every

    def knobs(self) -> str:
        """Short human description for tables."""
        if self.workload == "dqn":
            return f"batch {self.learner_batch}, train every {self.train_every}"
        return (
            f"{self.actors} actors x {self.envs_per_actor} envs, inference batch "
            f"{self.inference_batch}"
        )


def dqn(name: str, batch: int = DQN_BATCH, train_every: int = DQN_TRAIN_EVERY) -> RunConfig:
    return RunConfig(name, "dqn", learner_batch=batch, train_every=train_every)


def r2d2(
    name: str,
    actors: int = R2D2_ACTORS,
    envs: int = R2D2_ENVS_PER_ACTOR,
    inference_batch: int = R2D2_INFERENCE_BATCH,
) -> RunConfig:
    return RunConfig(
        name,
        "r2d2",
        learner_batch=R2D2_BATCH,
        actors=actors,
        envs_per_actor=envs,
        inference_batch=inference_batch,
        replay_ratio=R2D2_REPLAY_RATIO,
    )


BASELINES = {"dqn": dqn("dqn-base"), "r2d2": r2d2("r2d2-base")}

# Variants: each changes one or two knobs of its baseline (issue 6: actors 1 to 4, envs per actor,
# inference batch, learner batch, replay ratio, train frequency).
FULL_VARIANTS = (
    dqn("dqn-batch64", batch=64),  # learner batch x2 (replay ratio 16)
    dqn("dqn-every2", train_every=2),  # train frequency x2 (replay ratio 16)
    dqn("dqn-every8", train_every=8),  # train frequency /2 (replay ratio 4)
    r2d2("r2d2-1x2", actors=1, envs=2, inference_batch=2),
    r2d2("r2d2-4x1", actors=4, envs=1, inference_batch=4),
    r2d2("r2d2-3x2", actors=3, envs=2, inference_batch=6),
    r2d2("r2d2-2x4", actors=2, envs=4, inference_batch=8),
    r2d2("r2d2-2x2-ib2", inference_batch=2),  # smaller batches: more, shorter server steps
)
QUICK_VARIANTS = (
    dqn("dqn-every8", train_every=8),
    r2d2("r2d2-1x2", actors=1, envs=2, inference_batch=2),
)


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one validation run does: baselines, variants, and how long each real run lasts."""

    baselines: dict[str, RunConfig]
    variants: tuple[RunConfig, ...]
    dqn_capture_repeat: int  # profiled windows in the DQN baseline capture
    dqn_measure_steps: int  # agent steps measured per DQN run (after learn start and warm-up)
    r2d2_capture_s: float  # seconds of the profiled R2D2 baseline capture
    r2d2_measure_s: float  # seconds of each unprofiled R2D2 run
    baseline_repeats: int = 2  # unprofiled runs of each baseline (their spread is the noise floor)
    # unprofiled runs of each variant: on this shared 2-core box one R2D2 run moved by up to 50%
    # between two validation runs (other jobs' load), so the full plan averages two
    variant_repeats: int = 1

    @property
    def configs(self) -> tuple[RunConfig, ...]:
        return (*self.baselines.values(), *self.variants)


# Run lengths: DQN runs ~40 steps/s here (docs/SIMULATOR.md consistency check), so 600 measured
# steps take ~15 s; R2D2 runs get 15 s after every process is up (start-up takes seconds more).
FULL_PLAN = Plan(
    BASELINES,
    FULL_VARIANTS,
    dqn_capture_repeat=8,
    dqn_measure_steps=600,
    r2d2_capture_s=8.0,
    r2d2_measure_s=15.0,
    variant_repeats=2,
)
# --quick (the test suite): two variants, runs of a few seconds; minutes in all.
QUICK_PLAN = Plan(
    BASELINES,
    QUICK_VARIANTS,
    dqn_capture_repeat=4,
    dqn_measure_steps=150,
    r2d2_capture_s=3.0,
    r2d2_measure_s=5.0,
    baseline_repeats=1,
)
