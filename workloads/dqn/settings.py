"""Settings of the DQN workload (no torch import: the CLI builds its options from these)."""

from __future__ import annotations

import dataclasses
from typing import Any

ENV_ID = "ALE/Pong-v5"
# Mnih et al. 2015, Extended Data Table 1 (REFERENCE.md "Nature DQN").
EPS_START = 1.0  # initial exploration
EPS_END = 0.1  # final exploration
EPS_DECAY_STEPS = (
    1_000_000  # "final exploration frame", counted in agent steps by the DeepMind code
)
# Mnih et al. 2015, Extended Data Table 1: minibatch 32, update frequency 4, replay memory 1M,
# replay start 50,000, target network update every 10,000 updates. The defaults below keep the
# batch and update frequency and shrink the rest so a capture of a few hundred steps trains.
BATCH_SIZE = 32
TRAIN_EVERY = 4
FULL_LEARN_START = 50_000
FULL_TARGET_PERIOD = 10_000
FULL_REPLAY_CAPACITY = 1_000_000
DEFAULT_LEARN_START = 100
DEFAULT_TARGET_PERIOD = 10
# Convolution paths of the network (model.py): the library's conv2d, or unfold + GEMM.
CONV_IMPLS = ("cudnn", "unfold")
DEFAULT_REPLAY_CAPACITY = 100_000  # 3.5 GB when full at 35,280 B per slot (see replay.py)


@dataclasses.dataclass
class DqnConfig:
    env_id: str = ENV_ID
    seed: int = 0
    device: str = "cpu"
    learn_start: int = DEFAULT_LEARN_START
    train_every: int = TRAIN_EVERY
    batch_size: int = BATCH_SIZE
    target_period: int = DEFAULT_TARGET_PERIOD
    replay_capacity: int = DEFAULT_REPLAY_CAPACITY
    eps_decay_steps: int = EPS_DECAY_STEPS
    # torch intra-op threads. 1 by default: a batch-1 forward gains nothing from more, and on a shared
    # or busy machine 2 threads ran the loop 9x slower here (12.6 vs 110 steps/s, 300-step runs).
    torch_threads: int = 1
    # Draw the game screen every display_every-th agent step (phase "display"); None: never.
    display_every: int | None = None
    conv_impl: str = "cudnn"  # one of CONV_IMPLS

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)
