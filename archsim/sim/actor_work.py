"""CPU work on the actor side and the per-observation server work, in capture-thread seconds.

- Actor CPU work per env step: the trace's actor steps (env_step + preprocess, plus act and
  replay_insert for local inference, plus the per-message cost of sending: the capture's own CPU
  per request when a central capture timed it, else the network model's stack cost), as an
  empirical distribution the engine draws from; divided by the target thread's speed in the engine.
  Each phase is first scaled by its kind of work (archsim.perf.cpu_speed: the env step at the
  emulator speed, act at the SIMD speed, the rest at the interpreter speed), which changes nothing
  when a preset gives no per-class speeds.
- Local inference adds the actors' share of fetching the learner's parameters: the step's recorded
  CPU outside its phases where an Ape-X capture fetched inside its steps, else a modelled copy.
- Server CPU per observation: the replay insert plus reading the request (what a SEED capture
  measured between its batches, else the network model's stack cost).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError
from archsim.perf.cpu_speed import phase_speed
from archsim.perf.network import stack_seconds_per_message
from archsim.sim.config import SimConfig
from archsim.sim.recorded import server_request_cpu_s
from archsim.sim.step_work import has_cpu_time, phase_work_us, typical_us

# Nature DQN parameters, 1.69 M (the network of Mnih et al. 2015, "Human-level control through deep
# reinforcement learning": 3 conv layers, a 512-unit layer, 18 actions), as fp32: the parameter
# publication size when the trace does not say.
DEFAULT_PARAM_BYTES = 1.69e6 * 4
# Ape-X actors copy the learner's parameters every 400 frames (Horgan et al. 2018, "Distributed
# Prioritized Experience Replay"); 4 frames per env step (ALE frameskip, Mnih et al. 2015).
PARAM_FETCH_EVERY_ENV_STEPS = 400 / 4


@dataclass(frozen=True)
class ActorWork:
    """Actor-side CPU work of one env step (samples) and the server's per-observation CPU."""

    actor_step_cpu_s: np.ndarray
    server_cpu_s_per_obs: float
    param_copy_capture_s: float  # receive and copy one parameter set
    # the Python part of server_cpu_s_per_obs, which holds the learner process's GIL (archsim.sim.gil)
    server_python_s_per_obs: float = 0.0


def actor_rows(steps: pd.DataFrame, config: SimConfig) -> pd.DataFrame:
    """The trace's actor steps, checked for what ``config.inference`` needs of them."""
    actor = steps[steps["role"] == "actor"]
    if actor.empty or actor["env_step_us"].isna().all():
        raise ArchsimError(
            "trace: no actor steps with an env_step phase (steps.parquet role == 'actor'); "
            f"--inference {config.inference} needs them for environment-step times"
        )
    if config.inference == "local" and actor["act_us"].isna().all():
        raise ArchsimError(
            "trace: its actor steps have no act phase (a central-inference capture), so "
            "--inference local has no policy time to give the actors; use --inference central"
        )
    return actor


def fetches_in_step(settings: dict, actor: pd.DataFrame) -> bool:
    """True when the capture says its actors fetch parameters inside their steps (an Ape-X
    capture's ``param_fetch_frames`` setting) and the steps record their own CPU time."""
    return "param_fetch_frames" in settings and has_cpu_time(actor)


def unphased_step_us(actor: pd.DataFrame, phases: list[str]) -> float:
    """Mean CPU of an actor step outside ``phases``: the mean step ``cpu_us`` less the mean of the
    phases' CPU, over the rows that record the step's CPU; 0 when none (never below 0: a phase
    cannot hold more CPU than its step, so a negative mean is rounding)."""
    rows = actor[actor["cpu_us"].notna()] if "cpu_us" in actor else actor.iloc[0:0]
    if rows.empty:
        return 0.0
    inside = sum(phase_work_us(rows, p).fillna(0.0) for p in phases)
    return max(0.0, float(rows["cpu_us"].astype(float).mean() - inside.mean()))


def derive_actor_work(trace, hw, config: SimConfig) -> ActorWork:
    """Actor CPU work per env step and the server's CPU per observation for ``trace`` on ``hw``
    (``trace`` already without the profiler's cost and cut to whole steps)."""
    speed_rel = hw.cpu.thread_speed_rel
    envs = config.envs_per_actor
    stack_capture_s = stack_seconds_per_message(hw.network) * speed_rel  # as capture-thread seconds
    actor = actor_rows(trace.steps, config)
    per_env = np.maximum(actor["batch_size"].to_numpy(dtype=float), 1.0)
    phases = ["env_step", "preprocess"]
    if config.inference == "local":
        phases += ["act", "replay_insert"]
    # Per-phase speed (archsim.perf.cpu_speed): each phase as capture-thread microseconds at the
    # thread's speed, so the engine's division by thread_speed_rel leaves the phase's own speed.
    work_us = (
        sum(
            phase_work_us(actor, p).fillna(0.0).to_numpy(dtype=float)
            * (speed_rel / phase_speed(hw.cpu, p))
            for p in phases
        )
        / per_env
    )
    # One message per actor step. A central capture that timed its actors' CPU while they sent a
    # request and took the reply (serialisation, socket calls) carries that cost itself; otherwise
    # the network model's per-message stack cost stands in for it.
    if config.inference == "central" and has_cpu_time(actor, "inference_wait"):
        message_us = phase_work_us(actor, "inference_wait").fillna(0.0).to_numpy(dtype=float)
        actor_cpu_s = (work_us + message_us / per_env) * 1e-6
    else:
        actor_cpu_s = work_us * 1e-6 + stack_capture_s / envs
    settings = ((trace.meta or {}).get("workload") or {}).get("settings") or {}
    param_bytes = float(settings.get("param_bytes", DEFAULT_PARAM_BYTES))
    # Receiving and copying one parameter set: a message, then param_bytes through host memory.
    param_copy_capture_s = (
        stack_seconds_per_message(hw.network) + param_bytes / (hw.memory.host_dram_bw_gbs * 1e9)
    ) * speed_rel
    if config.inference == "local" and fetches_in_step(settings, actor):
        # The Ape-X runtime fetches parameters inside the actor step, in none of its phases
        # (workloads/apex/actor.py): the recorded CPU outside the phases holds the fetch (receive,
        # decode, load) at its recorded rate, so it replaces the modelled copy (issue 14 item 5:
        # 79 us per env step in runs/apexval/base's unprofiled steps against the model's 1.4 us
        # on --hw local: a 139 us copy every 100 env steps).
        extra_us = unphased_step_us(actor, phases) * speed_rel / phase_speed(hw.cpu, "other")
        actor_cpu_s = actor_cpu_s + extra_us * 1e-6 / per_env
    elif config.inference == "local":
        actor_cpu_s = actor_cpu_s + param_copy_capture_s / PARAM_FETCH_EVERY_ENV_STEPS
    actor_cpu_s = actor_cpu_s[np.isfinite(actor_cpu_s)]

    insert_us = np.nan_to_num(
        typical_us(phase_work_us(actor, "replay_insert"), has_cpu_time(actor, "replay_insert")),
        nan=0.0,
    )
    # Per request the server reads it off the network: what a SEED capture measured between its
    # batches, else the network model's per-message stack cost.
    request_capture_s = server_request_cpu_s(trace)
    if request_capture_s is None:
        request_capture_s = stack_capture_s
    server_cpu_s_per_obs = insert_us / float(np.median(per_env)) * 1e-6 + request_capture_s / envs
    # Python: the replay insert, and a SEED capture's measured request reads (unpickling). The
    # network model's stack cost is the socket call itself, which CPython makes without the GIL
    # (Modules/socketmodule.c releases it around send/recv).
    server_python_s_per_obs = insert_us / float(np.median(per_env)) * 1e-6
    if server_request_cpu_s(trace) is not None:
        server_python_s_per_obs += request_capture_s / envs
    return ActorWork(
        actor_step_cpu_s=actor_cpu_s,
        server_cpu_s_per_obs=float(server_cpu_s_per_obs),
        server_python_s_per_obs=float(server_python_s_per_obs),
        param_copy_capture_s=param_copy_capture_s,
    )
