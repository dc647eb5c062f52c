"""The simulator's knobs as command-line flags, shared by ``archsim simulate`` (one value each) and
``archsim sweep`` (comma lists whose product is swept). A knob is a SimConfig field or a hardware
field (``--sms`` sets gpu.sms); sweep CSV columns are named after the knob (``actors``, ``sms``).
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from archsim.errors import ArchsimError
from archsim.sim.config import (
    CONV_IMPLS,
    CPU_SCHEDULERS,
    DISTRIBUTED_KNOBS,
    ENGINES,
    INFERENCE_MODES,
    LOOP_TRACE,
    LOOPS,
    REPLAY_LIMITS,
    REPLAY_PLACEMENTS,
    REPLAY_RATIO_TRACE,
    SMT_MODELS,
    SWITCHES,
)

# archsim.hw.schema.NetworkConfig.stack's words (archsim.perf.network)
NETWORK_STACKS = ("kernel_tcp", "kernel_bypass", "rdma")


def _int(text: str) -> int:
    return int(text)


def _float(text: str) -> float:
    value = float(text)
    if value != value:  # NaN
        raise ValueError(text)
    return value


def _replay_ratio(text: str) -> float | str | None:
    """A number, ``trace`` (the captured workload's pacing) or ``none`` (unpaced)."""
    word = text.lower()
    if word == REPLAY_RATIO_TRACE:
        return REPLAY_RATIO_TRACE
    return None if word in ("none", "off") else _float(text)


def _choice(options: tuple[str, ...]) -> Callable[[str], str]:
    def parse(text: str) -> str:
        # any case: the help prints the choices upper-cased as its metavar (CENTRAL|LOCAL)
        word = text.lower()
        if word not in options:
            raise ValueError(text)
        return word

    parse.__name__ = "one of " + "|".join(options)
    return parse


@dataclass(frozen=True)
class Knob:
    name: str  # SimConfig field, or the sweep column of a hardware knob
    parse: Callable[[str], Any]
    kind: str  # human name of the expected value, for errors
    help: str
    hw_field: str | None = None  # hardware knobs: the --set key they override

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")


KNOBS: tuple[Knob, ...] = (
    Knob("actors", _int, "integer", "actor threads (default 256, SEED RL's R2D2)"),
    Knob("envs_per_actor", _int, "integer", "environments each actor steps (default 1)"),
    Knob(
        "inference",
        _choice(INFERENCE_MODES),
        "central|local",
        "central (SEED: batched on the learner's GPU; the default) or local (each actor's CPU)",
    ),
    Knob("inference_batch", _int, "integer", "max observations per inference batch (64)"),
    Knob("inference_timeout_us", _float, "number", "batching timeout in us (default 1000)"),
    Knob("learner_batch", _int, "integer", "learner batch (default: the trace's)"),
    Knob(
        "replay_ratio",
        _replay_ratio,
        "number|trace|none",
        "samples per inserted transition: a number, none (unpaced) or trace (default: the "
        "captured workload's pacing)",
    ),
    Knob("replay_slack_batches", _float, "number", "rate-limiter slack in batches (default 4)"),
    Knob(
        "replay_limit",
        _choice((*REPLAY_LIMITS, REPLAY_RATIO_TRACE)),
        "both|learner|trace",
        "what the replay ratio throttles: both sides, only the learner, or trace (default: the "
        "captured workload's; both when it does not say)",
    ),
    Knob("cpu_threads", _int, "integer", "hardware threads to use (default: all of --hw)"),
    Knob("learner_cpu_threads", _int, "integer", "threads for the learner (default 2/1)"),
    Knob("gpus", _int, "integer", "GPUs in use, for power (default 1)"),
    Knob(
        "publish_every",
        _int,
        "integer",
        "learner steps per parameter publication (local inference only; default 1)",
    ),
    Knob("sim_seconds", _float, "number", "simulated seconds (default 2)"),
    Knob("seed", _int, "integer", "random seed (default 0)"),
    Knob(
        "engine",
        _choice(ENGINES),
        "auto|fast|simpy|steady",
        "simulation path (default auto); steady: the shortest window whose rates have settled",
    ),
    Knob("smt_model", _choice(SMT_MODELS), "busy|static", "SMT slowdown model (default busy)"),
    Knob(
        "cpu_sched",
        _choice(CPU_SCHEDULERS),
        "pinned|shared",
        "pinned FIFO threads (default) or OS time-sharing of all threads",
    ),
    Knob(
        "param_lock",
        _choice(SWITCHES),
        "off|on",
        "inference and parameter updates exclude each other (CPU-only; default off)",
    ),
    Knob("sms", _int, "integer", "SMs of the GPU (sets gpu.sms)", hw_field="gpu.sms"),
    Knob(
        "nodes",
        _int,
        "integer",
        "actor nodes, each with --hw's CPU; actors split evenly, the learner on node 0 (default 1)",
    ),
    Knob(
        "replay_placement",
        _choice(REPLAY_PLACEMENTS),
        "learner|server|in-network",
        "prioritized replay in the learner process (default), on its own node, or in the network "
        "path (a replay server in the network path, one hop closer to both sides); network stack: --set network.stack=kernel_tcp|kernel_bypass|rdma",
    ),
    Knob(
        "network_stack",
        _choice(NETWORK_STACKS),
        "kernel_tcp|kernel_bypass|rdma",
        "node-to-node stack (sets network.stack; a sweep column)",
        hw_field="network.stack",
    ),
    Knob(
        "loop",
        _choice(LOOPS),
        "sequential|distributed",
        "the program as it ran (one thread: env step, act, train every k steps) or the "
        "actor/learner system (default: sequential for a single-threaded loop's trace unless a "
        "distributed-only knob such as --actors is given)",
    ),
    Knob(
        "conv_impl",
        _choice(CONV_IMPLS[1:]),
        "cudnn|unfold",
        "price the trace's convolutions on the target GPU as library convolutions or as unfold + "
        "GEMM (default: as captured)",
    ),
)
KNOB_BY_NAME = {knob.name: knob for knob in KNOBS}


def add_knob_arguments(parser: argparse.ArgumentParser, lists: bool) -> None:
    group = parser.add_argument_group("simulation knobs" + (" (comma lists)" if lists else ""))
    for knob in KNOBS:
        group.add_argument(
            knob.flag,
            dest=f"knob_{knob.name}",
            default=None,
            metavar="LIST" if lists else knob.kind.upper().split()[0],
            help=knob.help,
        )


def parse_knob(knob: Knob, text: str) -> Any:
    try:
        return knob.parse(text.strip())
    except ValueError:
        raise ArchsimError(f"{knob.flag}: {text.strip()!r} is not a valid {knob.kind}") from None


def knobs_from_args(args: argparse.Namespace, lists: bool) -> dict[str, list[Any]]:
    """{knob name: values} for the knobs given on the command line (one value unless ``lists``)."""
    out: dict[str, list[Any]] = {}
    for knob in KNOBS:
        text = getattr(args, f"knob_{knob.name}", None)
        if text is None:
            continue
        parts = text.split(",") if lists else [text]
        if any(not p.strip() for p in parts):
            empty = [p.strip() for p in parts].index("") + 1
            raise ArchsimError(
                f"{knob.flag}: {text!r}: item {empty} is empty (expected a comma list of "
                f"{knob.kind} values)"
            )
        values = [parse_knob(knob, p) for p in parts]
        if len(set(map(repr, values))) != len(values):
            raise ArchsimError(f"{knob.flag}: {text!r} repeats a value")
        out[knob.name] = values
    return out


def split_point(point: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(SimConfig fields, hardware --set overrides) of one point. Without --loop, a distributed-only
    knob (--actors, ...) selects --loop distributed, else the trace decides (LOOP_TRACE)."""
    given = [name for name in DISTRIBUTED_KNOBS if name in point]
    if "loop" not in point:
        point = {**point, "loop": "distributed" if given else LOOP_TRACE}
    elif point["loop"] == "sequential" and given:
        flags = ", ".join(KNOB_BY_NAME[name].flag for name in given)
        raise ArchsimError(
            f"--loop sequential: {flags} only mean(s) something for the distributed actor/learner "
            "system; drop it or use --loop distributed"
        )
    sim: dict[str, Any] = {}
    overrides: list[str] = []
    for name, value in point.items():
        knob = KNOB_BY_NAME[name]
        if knob.hw_field:
            overrides.append(f"{knob.hw_field}={value}")
        else:
            sim[name] = value
    return sim, overrides
