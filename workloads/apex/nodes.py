"""Entry points of the Ape-X processes (replay server, learner, actors), each profiled by itself.

Every process enters its network namespace first (``--netns``), then profiles itself with the R2D2
runtime's ProcessProfiler (trace + sidecar, clock sync, unprofiled second half) and logs each message
it sends or receives to ``<role>-<index>.messages.json`` beside its trace, also when it fails. A server
reports ``("ready", label, port)`` on ``status``; an actor ``("ready", label, 0)`` once it has its first
parameters; a failure ``("error", label, reason)`` and exit code 1.
"""

from __future__ import annotations

import faulthandler
import signal
import threading
import time
from pathlib import Path
from typing import Any

from workloads.apex import wire
from workloads.apex.channel import MessageLog, Stopped, connect
from workloads.apex.settings import ApexSettings

FRAME_STACK_SHAPE = (4, 84, 84)  # Nature DQN's input: 4 stacked 84x84 uint8 frames (28,224 B)
# While the replay holds less than a batch the learner asks again this often (serving actors in
# between): a design choice, short against the second or more that actors take to fill one batch.
WARM_S = 0.1
# What a closed peer looks like from a process still sending or waiting.
GO_POLL_S = 0.05
_PEER_GONE = (wire.ConnectionClosed, wire.ProtocolError, ConnectionError, TimeoutError)


def messages_path(raw_dir: str | Path, role: str, index: int) -> Path:
    return Path(raw_dir) / f"{role}-{index}.messages.json"


def node_main(
    role: str,
    index: int,
    settings: ApexSettings,
    raw_dir: str,
    status: Any,
    stop: Any,
    namespace: str | None,
    bind_host: str,
    peers: dict[str, tuple[str, int]],
    go: Any,
) -> None:
    """Process entry point; ``peers`` maps "learner" / "replay" to the (host, port) to connect to;
    actors start acting once ``go`` is set (every actor ready)."""
    label = f"{role}-{index}"
    log = MessageLog(label)
    try:
        faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints this process's stacks
        if namespace:
            from workloads.apex.netns import enter

            enter(namespace)
        import torch

        torch.set_num_threads(settings.torch_threads)
        body = {"replay": _replay, "learner": _learner, "actor": _actor}[role]
        body(index, settings, raw_dir, status, stop, bind_host, peers, log, go)
    except Stopped:
        return  # stopped before it was connected: a clean exit, nothing to report
    except BaseException as exc:
        status.put(("error", label, f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None
    finally:
        log.write(messages_path(raw_dir, role, index))


def _replay(index, settings, raw_dir, status, stop, bind_host, peers, log, go) -> None:
    from workloads.apex.hub import Hub
    from workloads.apex.prioritized import TransitionReplay
    from workloads.r2d2.seed.learner_process import bind_listener
    from workloads.r2d2.seed.profiling import ProcessProfiler

    listener = bind_listener(bind_host, 0)
    replay = TransitionReplay(settings.replay_capacity, FRAME_STACK_SHAPE, seed=settings.seed)
    hub = Hub(listener, log, replay)
    with ProcessProfiler(raw_dir, "replay", index, settings.record_shapes) as prof:
        status.put(("ready", log.label, listener.getsockname()[1]))
        try:
            hub.serve(stop, prof.poll)
        finally:
            hub.close()
            prof.sidecar["stats"] = dict(hub.stats, lost=hub.lost, size=len(replay))


def _num_actions(seed: int) -> int:
    from workloads.r2d2.seed.learner_process import num_actions_of_pong

    return num_actions_of_pong(seed)


class _Sampler:
    """The learner's view of the replay: in memory (placement learner) or over a channel (server)."""

    def __init__(self, settings: ApexSettings, replay: Any, lock: threading.Lock, channel: Any):
        self.batch_size, self.replay, self.lock, self.channel = (
            settings.batch_size,
            replay,
            lock,
            channel,
        )

    def sample(self) -> list | None:
        """[indices, weights, obs, actions, returns, discounts, next_obs], or None while the replay
        holds less than a batch."""
        if self.channel is None:
            with self.lock:
                if len(self.replay) < self.batch_size:
                    return None
                indices, weights = self.replay.sample(self.batch_size)
                return [indices, weights, *self.replay.batch(indices)]
        import numpy as np

        start_ns = time.time_ns()
        self.channel.send(wire.SAMPLE_REQUEST, [np.array([self.batch_size], dtype=np.int32)])
        kind, arrays, record = self.channel.recv()
        if kind != wire.SAMPLE:
            raise wire.ProtocolError(f"apex: expected a sample, got {wire.KIND_NAMES[kind]}")
        record["request_start_ns"] = start_ns  # the round trip as the learner sees it
        return arrays or None

    def update(self, indices: Any, priorities: Any) -> None:
        if self.channel is None:
            with self.lock:
                self.replay.update_priorities(indices, priorities)
        else:
            self.channel.send(wire.PRIORITY_UPDATE, [indices, priorities], items=len(indices))


def _learner(index, settings, raw_dir, status, stop, bind_host, peers, log, go) -> None:
    from archsim.capture.markers import phase, step
    from workloads.apex.hub import Hub
    from workloads.apex.learner import ApexLearner
    from workloads.apex.prioritized import TransitionReplay
    from workloads.r2d2.seed.learner_process import bind_listener
    from workloads.r2d2.seed.profiling import ProcessProfiler

    learner = ApexLearner(_num_actions(settings.seed), settings.target_period, seed=settings.seed)
    listener = bind_listener(bind_host, 0)
    lock = threading.Lock()
    replay = channel = None
    if settings.replay_placement == "learner":
        replay = TransitionReplay(settings.replay_capacity, FRAME_STACK_SHAPE, seed=settings.seed)
    else:
        host, port = peers["replay"]
        channel = connect(host, port, log, "replay-0", settings.start_timeout_s, stop)
        channel.sock.settimeout(settings.reply_timeout_s)
    hub = Hub(listener, log, replay, lock, learner.param_arrays)
    sampler = _Sampler(settings, replay, lock, channel)
    with ProcessProfiler(raw_dir, "learner", index, settings.record_shapes) as prof:
        status.put(("ready", log.label, listener.getsockname()[1]))
        try:
            # until the run starts (actors fetch parameters meanwhile) and the replay holds a batch:
            # serve actors, ask for a batch every WARM_S
            warm = False
            while not stop.is_set():
                prof.poll()
                hub.serve_once(0.0 if warm else WARM_S)
                if not warm:
                    warm = go.is_set() and sampler.sample() is not None
                    continue
                with step("learner", batch_size=settings.batch_size):
                    with phase("replay_sample"):
                        batch = sampler.sample()
                    priorities = learner.train(*batch[1:])
                    with phase("priority_update"):
                        sampler.update(batch[0], priorities)
                prof.stepped()  # the runner keeps recording until the first one (runner.py)
        except _PEER_GONE:
            if not stop.is_set():  # at the end of a run the replay server may close first
                raise
        finally:
            hub.close()
            if channel is not None:
                channel.close()
            prof.sidecar["stats"] = dict(hub.stats, updates=learner.updates, lost=hub.lost)


def _actor(index, settings, raw_dir, status, stop, bind_host, peers, log, go) -> None:
    from workloads.apex.actor import run_actor
    from workloads.r2d2.seed.profiling import ProcessProfiler

    channels = []
    stats = {"actor_steps": 0, "episodes": 0, "inserts": 0, "param_fetches": 0}
    # placement learner: one connection to the learner carries inserts and parameter fetches
    wanted = ("learner", "replay") if settings.replay_placement == "server" else ("learner",)
    # The profiler starts before the actor connects: its first start in a fresh process takes
    # seconds (workloads/r2d2/seed/actor_process.py), which would otherwise be cut from the run.
    try:
        with ProcessProfiler(raw_dir, "actor", index, settings.record_shapes) as prof:
            prof.sidecar["stats"] = stats
            for peer in wanted:
                host, port = peers[peer]
                channel = connect(host, port, log, f"{peer}-0", settings.start_timeout_s, stop)
                channel.sock.settimeout(settings.reply_timeout_s)
                channels.append(channel)

            def ready() -> bool:
                """Report ready, then wait for every actor to be (the run starts for all at once);
                False if the run was stopped meanwhile."""
                status.put(("ready", log.label, 0))
                while not go.wait(GO_POLL_S):
                    if stop.is_set():
                        return False
                return True

            try:
                run_actor(index, settings, channels[0], channels[-1], stop, ready, prof.poll, stats)
            except _PEER_GONE:
                if not stop.is_set():  # at the end of a run the servers close first
                    raise
    finally:
        for channel in channels:
            channel.close()
