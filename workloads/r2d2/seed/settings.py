"""Settings of a SEED-style R2D2 run (one dataclass, picklable, so it crosses process boundaries)."""

from __future__ import annotations

import dataclasses

from archsim.errors import ArchsimError
from workloads.r2d2.config import R2D2Config

LOCALHOST = "127.0.0.1"
INFERENCE_MODES = ("central", "local")


@dataclasses.dataclass(frozen=True)
class SeedSettings:
    actors: int = 2
    # central: SEED RL (actors send observations, the learner batches inference);
    # local: Ape-X / R2D2 (each actor runs the network itself and ships finished sequences).
    inference: str = "central"
    # local mode: actors fetch fresh parameters every 400 env steps (Kapturowski et al. 2019, Table 2:
    # "actor parameter update interval 400 environment steps").
    param_update_interval: int = 400
    envs_per_actor: int = 2
    seconds: float = 60.0
    # Requests are batched up to this many observations (SEED's inference batch knob).
    inference_batch: int = 4
    # How long the server waits for a batch to fill after its first request. SEED RL's default
    # dynamic-batching timeout is in the low milliseconds; 5 ms keeps actors from stalling on this box.
    inference_timeout_ms: float = 5.0
    # Sequences sampled for training per sequence inserted. R2D2 at REFERENCE.md scale: 256 actors x
    # ~260 env steps/s / 40 new steps per sequence = ~1,664 sequences/s in, 5 updates/s x 64 = 320
    # sampled/s -> ~0.2 (derived).
    replay_ratio: float = 0.2
    host: str = LOCALHOST
    port: int = 0  # 0: the OS picks a free port
    learner_start_timeout_s: float = 60.0  # spawn + import torch + model build on a busy 2-core box
    connect_timeout_s: float = 60.0
    # An actor waiting longer than this for an action treats the learner as hung.
    reply_timeout_s: float = 60.0
    shutdown_timeout_s: float = 60.0  # per process, covers the profiler's trace export
    torch_threads: int = 1
    seed: int = 0
    record_shapes: bool = True
    r2d2: R2D2Config = dataclasses.field(default_factory=R2D2Config)

    def __post_init__(self) -> None:
        for name in ("actors", "envs_per_actor", "inference_batch", "torch_threads"):
            if getattr(self, name) < 1:
                raise ArchsimError(
                    f"--{name.replace('_', '-')} {getattr(self, name)}: expected >= 1"
                )
        if self.inference not in INFERENCE_MODES:
            raise ArchsimError(
                f"--inference {self.inference}: expected one of {', '.join(INFERENCE_MODES)}"
            )
        if self.param_update_interval < 1:
            raise ArchsimError(
                f"--param-update-interval {self.param_update_interval}: expected >= 1"
            )
        if self.seconds <= 0:
            raise ArchsimError(f"--seconds {self.seconds}: expected > 0")
        if self.replay_ratio <= 0:
            raise ArchsimError(f"--replay-ratio {self.replay_ratio}: expected > 0")
        if not 0 <= self.port <= 65535:
            raise ArchsimError(f"--port {self.port}: expected 0..65535")
        cfg = self.r2d2
        if not 0 <= cfg.burn_in < cfg.sequence_length:
            raise ArchsimError(
                f"--burn-in {cfg.burn_in}: expected 0 <= burn-in < --sequence-length {cfg.sequence_length}"
            )
        if not 0 <= cfg.sequence_overlap < cfg.sequence_length:
            raise ArchsimError(
                f"--sequence-overlap {cfg.sequence_overlap}: expected < --sequence-length {cfg.sequence_length}"
            )

    @property
    def total_envs(self) -> int:
        return self.actors * self.envs_per_actor

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
