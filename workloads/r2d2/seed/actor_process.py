"""An actor process: steps K real ALE Pong environments and asks the learner for every action.

Per actor step (one ``archsim::actor_step``): send the K newest frames with the previous rewards and
episode ends, wait for K actions (``inference_wait``), then step each env (``env_step``) and turn its
raw frames into an 84x84 frame (``preprocess``). Env and preprocessing come from the DQN workload.
"""

from __future__ import annotations

import socket
import time
from typing import Any

import numpy as np

from workloads.r2d2.markers import phase, step
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


def _run_actor(
    actor: int, settings: SeedSettings, port: int, raw_dir: str, stop: Any, status: Any
) -> None:
    import torch

    from workloads.dqn.env import AtariEnv, FramePreprocessor

    torch.set_num_threads(settings.torch_threads)
    k = settings.envs_per_actor
    envs = [AtariEnv(seed=settings.seed + 1000 * (actor + 1) + i) for i in range(k)]
    preps = [FramePreprocessor(env.raw_shape) for env in envs]
    frames = np.zeros((k, *protocol.FRAME_SHAPE), dtype=np.uint8)
    for i, env in enumerate(envs):
        first = env.reset()
        frames[i] = preps[i].frame(first.last, first.previous)
    rewards = np.zeros(k, dtype=np.float32)
    dones = np.zeros(k, dtype=bool)
    sock = connect(settings.host, port, settings.connect_timeout_s, stop)
    if sock is None:
        return
    sock.settimeout(settings.reply_timeout_s)
    protocol.send_message(sock, protocol.encode_hello(actor, k))
    status.put(("ready", f"actor {actor}", ""))
    try:
        with ProcessProfiler(raw_dir, "actor", actor, settings.record_shapes):
            while not stop.is_set():
                with step("actor", actor=actor, batch_size=k):
                    with phase("inference_wait"):
                        try:
                            protocol.send_message(
                                sock, protocol.encode_request(frames, rewards, dones)
                            )
                            actions = protocol.decode_reply(protocol.recv_message(sock))
                        except (protocol.ConnectionClosed, ConnectionError, TimeoutError) as exc:
                            if stop.is_set():
                                break
                            raise LearnerGone(
                                f"actor {actor}: lost the learner while waiting for actions ({exc!r})"
                            ) from None
                    for i, env in enumerate(envs):
                        with phase("env_step"):
                            out = env.step_frames(int(actions[i]))
                            rewards[i] = out.reward
                            dones[i] = out.terminated or out.truncated
                            if dones[i]:  # the learner gets the new episode's first frame
                                out = env.reset()
                        with phase("preprocess"):
                            frames[i] = preps[i].frame(out.last, out.previous)
    finally:
        sock.close()
        for env in envs:
            env.close()
