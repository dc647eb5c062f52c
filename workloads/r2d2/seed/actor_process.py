"""An actor process: steps K real ALE Pong environments and asks the learner for every action.

Per actor step (one ``archsim::actor_step``): send the K newest frames with the previous rewards and
episode ends, wait for K actions (``inference_wait``), then step each env (``env_step``) and turn its
raw frames into an 84x84 frame (``preprocess``). Env and preprocessing come from the DQN workload.
A central-inference actor stops recording mid-run when the learner's reply says so, after that step
(learner_process.py: the learner leads the stop, so both sides record the same steps); a
local-inference actor polls the runner's request itself.
"""

from __future__ import annotations

import faulthandler
import signal
import socket
import time
from typing import Any

import numpy as np

from archsim.capture.markers import phase, step
from workloads.r2d2.seed import protocol
from workloads.r2d2.seed.profiling import ProcessProfiler
from workloads.r2d2.seed.settings import SeedSettings

CONNECT_RETRY_S = 0.05


class LearnerGone(Exception):
    """The learner closed the connection or stopped answering."""


def connect(host: str, port: int, timeout_s: float, stop: Any) -> socket.socket | None:
    """Connect, retrying until ``timeout_s`` (the learner may still be starting); None if the run
    was stopped meanwhile."""
    deadline = time.monotonic() + timeout_s
    while not stop.is_set():
        try:
            sock = socket.create_connection((host, port), timeout=timeout_s)
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError(
                    f"cannot connect to the learner at {host}:{port} within {timeout_s:g} s ({exc})"
                ) from None
            time.sleep(CONNECT_RETRY_S)
            continue
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return sock
    return None


def actor_main(
    actor: int, settings: SeedSettings, port: int, raw_dir: str, stop: Any, status: Any
) -> None:
    """Process entry point; exits 0 on a requested stop, non-zero (reason on ``status``) on failure."""
    try:
        _run_actor(actor, settings, port, raw_dir, stop, status)
    except BaseException as exc:
        status.put(("error", f"actor {actor}", f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


class _Envs:
    """K real ALE Pong envs with DQN preprocessing; keeps each env's newest frame, reward and end."""

    def __init__(self, actor: int, settings: SeedSettings):
        from workloads.dqn.env import AtariEnv, FramePreprocessor

        k = settings.envs_per_actor
        self.envs = [AtariEnv(seed=settings.seed + 1000 * (actor + 1) + i) for i in range(k)]
        self.preps = [FramePreprocessor(env.raw_shape) for env in self.envs]
        self.num_actions = self.envs[0].num_actions
        self.frames = np.zeros((k, *protocol.FRAME_SHAPE), dtype=np.uint8)
        for i, env in enumerate(self.envs):
            first = env.reset()
            self.frames[i] = self.preps[i].frame(first.last, first.previous)
        self.rewards = np.zeros(k, dtype=np.float32)
        self.dones = np.zeros(k, dtype=bool)
        self.stats = {"actor_steps": 0, "episodes": 0, "param_fetches": 0}

    def step(self, actions: np.ndarray) -> None:
        self.stats["actor_steps"] += 1
        self.stats["episodes"] += int(self.dones.sum())
        for i, env in enumerate(self.envs):
            with phase("env_step"):
                out = env.step_frames(int(actions[i]))
                self.rewards[i] = out.reward
                self.dones[i] = out.terminated or out.truncated
                if self.dones[i]:  # the next observation is the new episode's first frame
                    out = env.reset()
            with phase("preprocess"):
                self.frames[i] = self.preps[i].frame(out.last, out.previous)

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _run_actor(
    actor: int, settings: SeedSettings, port: int, raw_dir: str, stop: Any, status: Any
) -> None:
    import torch

    faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints this process's stacks
    torch.set_num_threads(settings.torch_threads)
    envs = _Envs(actor, settings)
    # The profiler starts before the actor reports ready: its first start in a fresh process takes
    # seconds here (3.4 s measured under load), which would otherwise be cut from the run.
    sock = None
    try:
        with ProcessProfiler(raw_dir, "actor", actor, settings.record_shapes) as prof:
            prof.sidecar["stats"] = envs.stats
            sock = connect(settings.host, port, settings.connect_timeout_s, stop)
            if sock is None:
                return
            sock.settimeout(settings.reply_timeout_s)
            protocol.send_message(sock, protocol.encode_hello(actor, settings.envs_per_actor))
            if settings.inference == "central":
                loop, on_step = _central_loop, prof.stop_recording
            else:
                loop, on_step = _local_loop, prof.poll

            def ready() -> None:
                status.put(("ready", f"actor {actor}", ""))

            try:
                loop(actor, settings, sock, envs, stop, ready, on_step, prof.stepped)
            except (protocol.ConnectionClosed, ConnectionError, TimeoutError) as exc:
                if not stop.is_set():
                    raise LearnerGone(f"actor {actor}: lost the learner ({exc!r})") from None
    finally:
        if sock is not None:
            sock.close()
        envs.close()


def _central_loop(
    actor: int,
    settings: SeedSettings,
    sock: Any,
    envs: _Envs,
    stop: Any,
    ready: Any,
    stop_recording: Any,
    stepped: Any,
) -> None:
    """SEED: ship each observation, wait for the action; ``stop_recording`` after the step whose
    reply says the learner is stopping its recording; ``stepped`` after every step."""
    k = settings.envs_per_actor
    ready()
    while not stop.is_set():
        with step("actor", actor=actor, batch_size=k):
            with phase("inference_wait"):
                protocol.send_message(
                    sock, protocol.encode_request(envs.frames, envs.rewards, envs.dones)
                )
                actions, last_recorded = protocol.decode_reply(protocol.recv_message(sock))
            envs.step(actions)
        stepped()
        if last_recorded:
            stop_recording()


def _local_loop(
    actor: int,
    settings: SeedSettings,
    sock: Any,
    envs: _Envs,
    stop: Any,
    ready: Any,
    poll: Any,
    stepped: Any,
) -> None:
    """Ape-X / R2D2: act with a local copy of the network (refreshed every param_update_interval
    steps), cut sequences here and ship them to the learner's replay; ``stepped`` after every step."""
    from workloads.r2d2.model import R2D2Net
    from workloads.r2d2.seed.inference import EnvStates, apex_epsilons

    k = settings.envs_per_actor
    cfg = settings.r2d2
    model = R2D2Net(envs.num_actions, cfg.frame_stack, cfg.lstm_size)
    epsilons = apex_epsilons(settings.total_envs)[actor * k : (actor + 1) * k]
    states = EnvStates(k, cfg, protocol.FRAME_SHAPE, seed=settings.seed + actor, epsilons=epsilons)
    ids = np.arange(k)

    def fetch_params() -> None:
        # no phase name exists for the actor's side of a parameter fetch: it stays in the step's
        # time but in none of its phase columns
        protocol.send_message(sock, protocol.encode_params_request())
        model.load_state_dict(protocol.decode_params(protocol.recv_message(sock)))
        envs.stats["param_fetches"] += 1

    fetch_params()
    ready()  # model built and loaded: acting starts now
    steps = 0
    while not stop.is_set():
        poll()
        with step("actor", actor=actor, batch_size=k):
            with phase("act"):
                sequences = states.observe(ids, envs.frames, envs.rewards, envs.dones)
                actions = states.act(model, ids)
            if sequences:
                with phase("replay_insert"):
                    for seq in sequences:
                        protocol.send_message(sock, protocol.encode_sequence(seq))
            envs.step(actions)
            steps += 1
            if steps % settings.param_update_interval == 0:
                fetch_params()
        stepped()
