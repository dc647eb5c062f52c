"""Knobs of one simulated run (desmod style: configuration apart from the model). Every knob is
validated here so the model never sees an impossible value; errors name the knob (the CLI flag).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from archsim.errors import ArchsimError

INFERENCE_MODES = ("central", "local")
# "steady": the fast engine on doubling windows until the steady state shows (archsim.sim.steady)
ENGINES = ("auto", "fast", "simpy", "steady")
SMT_MODELS = ("busy", "static")
CPU_SCHEDULERS = ("pinned", "shared")
SWITCHES = ("off", "on")
# --replay-placement (issue 14): replay memory in the learner process, on its own node, or in the
# network path (a server between the switch and both sides, one hop closer); archsim.sim.replay_server.
REPLAY_PLACEMENTS = ("learner", "server", "in-network")
REPLAY_LIMITS = ("both", "learner")
# --replay-ratio trace and --replay-limit trace (the defaults): the captured workload's pacing
# (archsim.trace.pacing), resolved by archsim.sim.run.simulate; unpaced and "both" when the trace
# does not say.
REPLAY_RATIO_TRACE = "trace"
# --loop: the single-threaded program as it ran (archsim.sim.sequential) or the actor/learner system;
# "trace" (what the CLI passes when no distributed-only knob is given) resolves to sequential for a
# trace of one single-threaded loop (archsim.trace.info.loop_of_steps), else distributed.
LOOPS = ("sequential", "distributed")
# --conv-impl: the trace's convolutions as captured ("trace"), or as library convolutions / unfold +
# GEMM on the target GPU (a what-if; archsim.perf.conv_rewrite).
CONV_IMPLS = ("trace", "cudnn", "unfold")
LOOP_TRACE = "trace"
# Knobs that only mean something for the distributed system: given on the command line without
# --loop they select --loop distributed; --loop sequential refuses them.
DISTRIBUTED_KNOBS = (
    "actors",
    "envs_per_actor",
    "inference",
    "inference_batch",
    "inference_timeout_us",
    "learner_cpu_threads",
    "cpu_threads",
    "cpu_sched",
    "param_lock",
    "publish_every",
    "replay_slack_batches",
    "replay_limit",
    "smt_model",
    "engine",
    "nodes",
    "replay_placement",
)
# Knobs that take one of a few words, and the words.
CHOICES = {
    "inference": INFERENCE_MODES,
    "smt_model": SMT_MODELS,
    "cpu_sched": CPU_SCHEDULERS,
    "param_lock": SWITCHES,
    "replay_limit": (*REPLAY_LIMITS, REPLAY_RATIO_TRACE),
    "engine": ENGINES,
    "loop": (*LOOPS, LOOP_TRACE),
    "conv_impl": CONV_IMPLS,
    "replay_placement": REPLAY_PLACEMENTS,
}
# Default largest inference batch: R2D2's batch of 64 (REFERENCE.md "RL workloads"); SEED RL leaves
# it a knob. A design default, capped at the number of environments so a batch can fill.
DEFAULT_INFERENCE_BATCH = 64


@dataclass(frozen=True)
class SimConfig:
    """One point of the design space. ``None`` means "derive from the trace / hardware"."""

    actors: int = 256  # SEED RL R2D2 runs 256 actors (REFERENCE.md "RL workloads")
    envs_per_actor: int = 1
    inference: str = "central"  # SEED RL (central, GPU) or Ape-X/R2D2 (local, actor's CPU)
    # SEED RL's dynamic batcher: batch up to this many observations or until the timeout.
    # None: DEFAULT_INFERENCE_BATCH, or every environment when there are fewer.
    inference_batch: int | None = None
    inference_timeout_us: float = 1000.0
    learner_batch: int | None = None  # None: the trace's learner batch
    # Samples drawn per inserted transition. "trace": the captured workload's (DQN: batch / train
    # frequency; R2D2: its replay ratio per transition); None: no rate limiter (--replay-ratio none).
    replay_ratio: float | str | None = REPLAY_RATIO_TRACE
    # Rate limiter slack, in learner batches: how far either side may run ahead (Reverb's error
    # buffer). A design default: small against a run, at least one insert and one sample wide.
    replay_slack_batches: float = 4.0
    # Which side the replay ratio throttles: "both" (Reverb's SampleToInsertRatio: inserts wait for
    # the learner too) or "learner" (actors never wait; the learner trains at most ratio x inserted,
    # as workloads/r2d2's trainer does); "trace": the captured workload's ("both" when unknown).
    replay_limit: str = REPLAY_RATIO_TRACE
    # Steps take a millisecond or less, so 2 s holds thousands of learner and inference steps and the
    # cold start is negligible; short enough for sweeps of many points.
    sim_seconds: float = 2.0
    seed: int = 0
    cpu_threads: int | None = None  # None: all hardware threads of the config
    # Threads of the learner process: the training loop, and in central mode inference server
    # threads that take batches in turn (default: one). The actors get the remaining threads.
    learner_cpu_threads: int | None = None
    gpus: int = 1  # GPUs in use (power and the per-GPU CPU/GPU ratio)
    publish_every: int = 1  # learner steps between parameter publications (local inference)
    engine: str = "auto"  # fast path where it is exact, else the plain simpy model
    # SMT: "busy" slows a thread by its sibling's measured busy fraction (archsim.perf.cpu);
    # "static" runs every thread of a shared core at smt_yield (the pessimistic bound).
    smt_model: str = "busy"
    # "pinned": every software thread on its own hardware thread, FIFO (a thread-affinity
    # deployment; archsim.sim.cpu). "shared": the OS time-shares all hardware threads among all
    # runnable software threads, as Linux does for threads that are not pinned (archsim.sim.shared_cpu).
    cpu_sched: str = "pinned"
    # "on": inference batches and the learner's parameter and replay updates exclude each other, as
    # the bundled R2D2 runtime's params lock does (workloads/r2d2/seed/learner_process.py): the
    # server's forward pass against the learner's replay sample, optimizer step and priority update.
    # Modelled on CPU-only hardware, where those run on the CPU while holding the lock.
    param_lock: str = "off"
    # "distributed" here (the defaults above are that system's); the CLI passes "trace" unless a
    # distributed-only knob is given (archsim.sim.knobs.split_point), resolved by the trace.
    loop: str = "distributed"
    conv_impl: str = "trace"  # CONV_IMPLS: the captured convolutions, or the other implementation
    # Actor nodes, each with the hardware config's CPU; the learner runs on node 0 beside its share
    # of the actors (1: today's single machine). archsim.sim.nodes.
    nodes: int = 1
    # Where the prioritized replay lives: "learner" (in the learner process), "server" (its own
    # node) or "in-network" (a replay server in the network path). archsim.sim.replay_server.
    replay_placement: str = "learner"

    def __post_init__(self) -> None:
        if self.inference_batch is None and isinstance(self.actors, int):
            envs = max(1, self.actors) * max(1, self.envs_per_actor)
            batch = min(DEFAULT_INFERENCE_BATCH, envs)
            batch -= batch % max(1, self.envs_per_actor)
            object.__setattr__(self, "inference_batch", max(batch, self.envs_per_actor))
        positive_ints = (
            "actors",
            "envs_per_actor",
            "inference_batch",
            "gpus",
            "publish_every",
            "nodes",
        )
        for name in positive_ints:
            _check_int(name, getattr(self, name), minimum=1)
        for name in ("learner_batch", "cpu_threads", "learner_cpu_threads"):
            value = getattr(self, name)
            if value is not None:
                _check_int(name, value, minimum=1)
        for name, options in CHOICES.items():
            _check_choice(name, getattr(self, name), options)
        if not 0 < self.sim_seconds < float("inf"):
            raise ArchsimError(
                f"--sim-seconds: expected a positive finite duration, got {self.sim_seconds}"
            )
        if not self.inference_timeout_us >= 0:
            raise ArchsimError(
                f"--inference-timeout-us: expected >= 0, got {self.inference_timeout_us}"
            )
        ratio = self.replay_ratio
        paced = ratio is not None and ratio != REPLAY_RATIO_TRACE
        number = isinstance(ratio, int | float) and not isinstance(ratio, bool)
        if paced and not (number and ratio > 0):
            raise ArchsimError(
                f"--replay-ratio: expected a number > 0, trace or none, got {ratio!r}"
            )
        if not self.replay_slack_batches >= 1:
            raise ArchsimError(
                f"--replay-slack-batches: expected >= 1 (below that both sides could wait on each "
                f"other), got {self.replay_slack_batches}"
            )
        if self.inference == "central":
            envs = self.actors * self.envs_per_actor
            if self.inference_batch > envs:
                raise ArchsimError(
                    f"--inference-batch: {self.inference_batch} is larger than actors x "
                    f"envs-per-actor = {envs}, so a batch could never fill"
                )
            if self.inference_batch < self.envs_per_actor:
                raise ArchsimError(
                    f"--inference-batch: {self.inference_batch} is smaller than one actor's "
                    f"request of --envs-per-actor {self.envs_per_actor} observations"
                )
        if not isinstance(self.seed, int) or isinstance(self.seed, bool) or self.seed < 0:
            raise ArchsimError(f"--seed: expected a non-negative integer, got {self.seed!r}")
        if self.loop == "sequential":
            _check_sequential(self)
        from archsim.sim.limits import check_knob_ranges

        check_knob_ranges(self)  # documented ranges (docs/LIMITS.md), before any work
        if self.nodes > self.actors:
            raise ArchsimError(
                f"--nodes: {self.nodes} actor nodes is more than the {self.actors} actors "
                "(every node needs at least one actor)"
            )

    @property
    def samples_per_insert(self) -> float | None:
        """The rate limiter's ratio; None when unpaced (also "trace" left unresolved, as in
        ``simulate_system``, which has no trace to ask)."""
        if self.replay_ratio is None or self.replay_ratio == REPLAY_RATIO_TRACE:
            return None
        return float(self.replay_ratio)

    @property
    def learner_threads(self) -> int:
        """Threads the learner process occupies (train loop; plus the inference server if central)."""
        if self.learner_cpu_threads is not None:
            return self.learner_cpu_threads
        return 2 if self.inference == "central" else 1

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def replace(self, **changes: Any) -> SimConfig:
        return dataclasses.replace(self, **changes)


def _check_sequential(config: SimConfig) -> None:
    """--loop sequential with a distributed-only knob away from its default: one line."""
    defaults = SimConfig.__dataclass_fields__
    changed = [
        "--" + name.replace("_", "-")
        for name in DISTRIBUTED_KNOBS
        # inference_batch is filled from actors; replay_limit is resolved from the trace by then
        if name not in ("inference_batch", "replay_limit")
        and getattr(config, name) != defaults[name].default
    ]
    if changed:
        raise ArchsimError(
            f"--loop sequential: {', '.join(changed)} only mean(s) something for the distributed "
            "actor/learner system; use --loop distributed"
        )


def _check_choice(name: str, value: object, options: tuple[str, ...]) -> None:
    if value not in options:
        flag = "--" + name.replace("_", "-")
        raise ArchsimError(f"{flag}: {value!r} is not one of {', '.join(options)}")


def _check_int(name: str, value: object, minimum: int) -> None:
    flag = "--" + name.replace("_", "-")
    if not isinstance(value, int) or isinstance(value, bool):
        raise ArchsimError(f"{flag}: expected an integer, got {value!r}")
    if value < minimum:
        raise ArchsimError(f"{flag}: expected an integer >= {minimum}, got {value}")


KNOB_NAMES = tuple(f.name for f in dataclasses.fields(SimConfig))
