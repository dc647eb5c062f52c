"""Where an Ape-X run's CPU went, per env step, from its own trace (issue 14 item 5).

The validation compares frames per CPU-second of the run's processes with the simulator's
(``benchmarks/apex_validation.py``). To say why they differ, this splits the CPU the run's process
tree spent over its timed window (every actor inserting unprofiled; ``archsim.validate.apex``) into
what the capture itself recorded, each per env step of the window:

- ``actor_phases_us``: the actors' ``env_step + preprocess + act`` plus ``replay_insert`` over
  ``send_every`` (one insert per ``send_every`` steps): the phases the simulator charges an actor;
- ``actor_unphased_us``: the actor step's CPU outside those phases (the n-step buffer, the loop, and
  the parameter fetch, which the actor makes inside its step but in none of its phases);
- ``learner_us``: the learner's training steps, one per prioritized sample (``priority_update``
  messages sent in the window) at the learner's own step CPU;
- ``replay_us``: the replay server's recorded work on inserts, sample requests and priority updates
  (``server_cpu_us`` of those messages);
- ``param_serve_us``: the learner's recorded work answering parameter requests;
- ``unaccounted_us``: the rest of the measured CPU (selector loops between messages, the runner and
  the capture's parent process, message receipt outside any timed part).

Step CPU figures are the run's own unprofiled means (``meta.capture.processes[].unprofiled_cpu_us``),
so the same window's work under the same load. Pure reads of a capture directory; no model.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np

from archsim.errors import ArchsimError
from archsim.validate.apex import (
    FRAMESKIP,
    cpus_over,
    load_messages,
    read_meta,
    unprofiled_frames_per_s,
    unprofiled_window_ns,
)

ACTOR_PHASES = ("env_step", "preprocess", "act")
REPLAY_KINDS = ("insert", "sample_request", "priority_update")


@dataclasses.dataclass(frozen=True)
class CpuBudget:
    """Per env step of the timed window, in microseconds of CPU (NaN where not measurable)."""

    window_s: float
    env_steps: float
    measured_us: float
    actor_phases_us: float
    actor_unphased_us: float
    learner_us: float
    replay_us: float
    param_serve_us: float

    @property
    def unaccounted_us(self) -> float:
        parts = (
            self.actor_phases_us,
            self.actor_unphased_us,
            self.learner_us,
            self.replay_us,
            self.param_serve_us,
        )
        return self.measured_us - sum(parts)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self) | {"unaccounted_us": self.unaccounted_us}


def unprofiled_means_us(meta: dict, role: str) -> dict[str, float]:
    """{phase or 'step': mean CPU us} of ``role``'s unprofiled steps over its processes, each
    process weighted by its step count."""
    sums: dict[str, float] = {}
    counts: dict[str, float] = {}
    for proc in (meta.get("capture") or {}).get("processes") or []:
        phases = (proc.get("unprofiled_cpu_us") or {}).get(role) or {}
        for name, figures in phases.items():
            n = float(figures.get("steps", 0))
            if n > 0 and "mean_us" in figures:
                sums[name] = sums.get(name, 0.0) + float(figures["mean_us"]) * n
                counts[name] = counts.get(name, 0.0) + n
    return {name: sums[name] / counts[name] for name in sums}


def cpu_budget(trace_dir: Path, cpu_samples: list[list[float]]) -> CpuBudget:
    """The timed window's CPU of the capture in ``trace_dir`` split as the module says.
    ``cpu_samples``: [time_ns, machine busy s, run's CPU s] rows (benchmarks/apex_validation.py)."""
    trace_dir = Path(trace_dir)
    meta = read_meta(trace_dir)
    settings = (meta.get("workload") or {}).get("settings") or {}
    send_every = float(settings.get("send_every", 0))
    if send_every <= 0:
        raise ArchsimError(f"{trace_dir / 'meta.yaml'}: workload.settings.send_every missing")
    table = load_messages(trace_dir)
    window = unprofiled_window_ns(table)
    nan = math.nan
    if window is None:
        return CpuBudget(nan, nan, nan, nan, nan, nan, nan, nan)
    own_cpus, _ = cpus_over(cpu_samples, *window)
    window_s = (window[1] - window[0]) * 1e-9
    env_steps = unprofiled_frames_per_s(table) / FRAMESKIP * window_s
    sent = table["sent_unix_ns"]
    inside = table[(sent >= window[0]) & (sent < window[1])]
    server_s = inside.groupby("kind")["server_cpu_us"].sum() * 1e-6

    actor = unprofiled_means_us(meta, "actor")
    phases = (
        sum(actor.get(p, nan) for p in ACTOR_PHASES) + actor.get("replay_insert", 0.0) / send_every
    )
    learner = unprofiled_means_us(meta, "learner")
    updates = float((inside["kind"] == "priority_update").sum())
    # placement learner: its steps sample from its own memory and send no priority_update
    server = settings.get("replay_placement", "server") == "server"
    learner_s = updates * learner.get("step", nan) * 1e-6 if server else nan

    def per_step(seconds: float) -> float:
        return seconds * 1e6 / env_steps if env_steps > 0 else nan

    return CpuBudget(
        window_s=window_s,
        env_steps=env_steps,
        measured_us=per_step(own_cpus * window_s),
        actor_phases_us=phases,
        actor_unphased_us=actor.get("step", nan) - phases,
        learner_us=per_step(learner_s),
        replay_us=per_step(float(sum(server_s.get(k, 0.0) for k in REPLAY_KINDS))),
        param_serve_us=per_step(float(server_s.get("param_request", 0.0))),
    )


def baseline_actor_us(trace_dir: Path) -> tuple[float, float]:
    """(actor phases, actor unphased) CPU us per env step of a capture without CPU samples (the
    baseline), from its unprofiled step means as in :func:`cpu_budget`."""
    import yaml

    meta = yaml.safe_load((Path(trace_dir) / "meta.yaml").read_text()) or {}
    send_every = float(((meta.get("workload") or {}).get("settings") or {}).get("send_every", 1))
    actor = unprofiled_means_us(meta, "actor")
    phases = float(
        np.nansum([actor.get(p, math.nan) for p in ACTOR_PHASES])
        + actor.get("replay_insert", 0.0) / send_every
    )
    return phases, actor.get("step", math.nan) - phases
