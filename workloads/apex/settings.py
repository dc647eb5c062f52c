"""Settings of an Ape-X run (one picklable dataclass, no torch import: the CLI builds its options)."""

from __future__ import annotations

import dataclasses

from archsim.errors import ArchsimError

PLACEMENTS = ("learner", "server")
LOCALHOST = "127.0.0.1"


@dataclasses.dataclass(frozen=True)
class ApexSettings:
    actors: int = 2
    # learner: the replay lives in the learner process (actors insert over TCP, the learner samples
    # in memory); server: in its own process, so samples and priority updates cross the network too.
    replay_placement: str = "server"
    seconds: float = 20.0
    # Transitions an actor gathers before one insert message: Ape-X's local buffer, B = 50
    # (Horgan et al. 2018, Algorithm 1 and Appendix).
    send_every: int = 50
    n_step: int = 3  # multi-step returns, n = 3 (Horgan et al. 2018, Sec. 4)
    gamma: float = 0.99  # discount (Mnih et al. 2015, Extended Data Table 1)
    # Ape-X trains on 512 (Horgan et al. 2018, Appendix); a CPU capture on a shared 2-core box
    # cannot, and the simulator rescales batch-dependent work (kernel.scale_ops_to_batch).
    batch_size: int = 32
    # Ape-X holds 2M transitions (REFERENCE.md); preallocated here at 56,448 B per slot, so small.
    replay_capacity: int = 4096
    # Actors copy the learner's parameters every 400 frames (Horgan et al. 2018, Sec. 4).
    param_fetch_frames: int = 400
    # Target network copied every 2,500 training batches (Horgan et al. 2018, Appendix).
    target_period: int = 2500
    # Optional shaping of every node's egress link (--netns only; 0 = none): a delay with tc netem,
    # a rate with tc tbf.
    netns: bool = False
    link_delay_ms: float = 0.0
    link_rate_mbit: float = 0.0
    host: str = LOCALHOST
    start_timeout_s: float = 120.0  # spawn + import torch + ALE on a busy 2-core box
    reply_timeout_s: float = 60.0
    shutdown_timeout_s: float = 60.0  # per process, covers the profiler's trace export
    torch_threads: int = 1
    seed: int = 0
    record_shapes: bool = True

    def __post_init__(self) -> None:
        for name in ("actors", "send_every", "n_step", "batch_size", "replay_capacity"):
            if getattr(self, name) < 1:
                raise ArchsimError(
                    f"--{name.replace('_', '-')} {getattr(self, name)}: expected >= 1"
                )
        if self.replay_placement not in PLACEMENTS:
            raise ArchsimError(
                f"--replay-placement {self.replay_placement}: expected one of {', '.join(PLACEMENTS)}"
            )
        if self.replay_capacity < self.batch_size:
            raise ArchsimError(
                f"--replay-capacity {self.replay_capacity}: expected >= --batch-size "
                f"{self.batch_size} (the learner samples a whole batch)"
            )
        if self.seconds <= 0:
            raise ArchsimError(f"--seconds {self.seconds}: expected > 0")
        if self.param_fetch_frames < 1:
            raise ArchsimError(f"--param-fetch-frames {self.param_fetch_frames}: expected >= 1")
        if self.link_delay_ms < 0 or self.link_rate_mbit < 0:
            raise ArchsimError("--link-delay-ms / --link-rate-mbit: expected >= 0")
        if (self.link_delay_ms or self.link_rate_mbit) and not self.netns:
            raise ArchsimError("--link-delay-ms / --link-rate-mbit: shaping needs --netns")

    def as_dict(self) -> dict:
        return dataclasses.asdict(self)
