"""The learner process: an inference server (main thread) and a training thread sharing one network.

Inference batches requests until ``inference_batch`` observations are waiting, every connected actor
is waiting, or ``inference_timeout_ms`` has passed since the oldest request. Training samples replay
whenever the replay ratio allows. A lock serialises the optimizer step against inference forwards, as
a single GPU would serialise them.

Mid-run the learner leads the stop of recording, so that the recorded inference batches answer
exactly the recorded actor steps (each actor step sends one request). Once the runner asks
(STOP_RECORDING_FILE), each actor's next reply says so; the actor records that step and no more.
Requests an actor sends after such a reply are held back until every connected actor has had one;
then the learner stops recording and answers them unrecorded. Were each process to stop when it saw
the file itself, the windows would differ by whatever steps fit between the two instants (a poll
period and any scheduling delay on a loaded machine): 38 requests of one actor answered in recorded
batches against 37 recorded steps, measured beside two busy loops on a 2-core box.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import faulthandler
import selectors
import signal
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from archsim.capture.markers import phase, step
from workloads.r2d2.seed import protocol
from workloads.r2d2.seed.inference import EnvStates
from workloads.r2d2.seed.probe import probe_inference, probe_sizes
from workloads.r2d2.seed.profiling import ProcessProfiler
from workloads.r2d2.seed.rate import may_train
from workloads.r2d2.seed.settings import SeedSettings

POLL_S = 0.001  # selector poll / idle sleep: short against a ~ms inference batch


@dataclasses.dataclass
class _Request:
    conn: socket.socket
    actor: int
    env_ids: np.ndarray
    payload: bytes
    arrived_s: float


@dataclasses.dataclass
class LearnerStats:
    inference_batches: int = 0
    inference_requests: int = 0
    sequences_inserted: int = 0
    updates: int = 0
    env_steps: int = 0


def num_actions_of_pong(seed: int) -> int:
    from workloads.dqn.env import AtariEnv

    env = AtariEnv(seed=seed)
    try:
        return env.num_actions
    finally:
        env.close()


def bind_listener(host: str, port: int) -> socket.socket:
    """Listen on host:port; a port in use raises OSError with a clear message."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        listener.bind((host, port))
    except OSError as exc:
        listener.close()
        if exc.errno == errno.EADDRINUSE:
            raise OSError(exc.errno, f"port {host}:{port} is already in use") from None
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror}") from None
    listener.listen()
    return listener


class Trainer(threading.Thread):
    """Trains from replay while ``updates * batch <= replay_ratio * sequences inserted``."""

    def __init__(self, learner: Any, replay: Any, lock: threading.Lock, settings: SeedSettings):
        super().__init__(name="r2d2-trainer", daemon=True)
        self.learner, self.replay, self.lock, self.settings = learner, replay, lock, settings
        self.halt = threading.Event()
        self.inserted = 0
        self.error: BaseException | None = None

    def _may_train(self) -> bool:
        return may_train(
            len(self.replay),
            self.learner.updates,
            self.settings.r2d2.batch_size,
            self.settings.replay_ratio,
            self.inserted,
        )

    def run(self) -> None:
        try:
            while not self.halt.is_set():
                with self.lock:
                    ready = self._may_train()
                if not ready:
                    time.sleep(POLL_S)
                    continue
                batch_size = self.settings.r2d2.batch_size
                with step("learner", batch_size=batch_size):
                    with phase("replay_sample"), self.lock:
                        indices, weights = self.replay.sample(batch_size)
                        batch = self.replay.batch(indices)
                    result = self.learner.train_step(batch, weights)
                    with phase("priority_update"), self.lock:
                        self.replay.update_priorities(indices, result.priorities)
        except BaseException as exc:  # reported by the process's main thread
            self.error = exc


class InferenceServer:
    def __init__(self, listener: socket.socket, settings: SeedSettings, model: Any, lock: Any):
        self.listener = listener
        self.settings = settings
        self.model = model
        self.lock = lock
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.actors: dict[socket.socket, tuple[int, np.ndarray]] = {}
        self.pending: list[_Request] = []
        self.states = EnvStates(
            settings.total_envs, settings.r2d2, protocol.FRAME_SHAPE, seed=settings.seed
        )
        self.stats = LearnerStats()
        self.lost_actors: list[int] = []
        # recording stop (module docstring): asked for, actors that had their last recorded reply,
        # and their next requests, held until the learner has stopped recording
        self.stopping_recording = False
        self.recording_stopped = False
        self.told: set[socket.socket] = set()
        self.held: list[_Request] = []

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(self.settings.connect_timeout_s)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        actor, n_envs = protocol.decode_hello(protocol.recv_message(conn))
        if n_envs != self.settings.envs_per_actor or not 0 <= actor < self.settings.actors:
            conn.close()
            raise ValueError(f"unexpected hello from actor {actor} with {n_envs} envs")
        env_ids = actor * n_envs + np.arange(n_envs)
        self.actors[conn] = (actor, env_ids)
        self.selector.register(conn, selectors.EVENT_READ, None)

    def _drop(self, conn: socket.socket) -> None:
        actor, _ = self.actors.pop(conn)
        self.lost_actors.append(actor)
        self.selector.unregister(conn)
        conn.close()
        self.pending = [r for r in self.pending if r.conn is not conn]
        self.held = [r for r in self.held if r.conn is not conn]
        self.told.discard(conn)

    def _read(self, conn: socket.socket) -> None:
        try:
            payload = protocol.recv_message(conn)
        except (protocol.ConnectionClosed, ConnectionError, TimeoutError):
            self._drop(conn)
            return
        actor, env_ids = self.actors[conn]
        request = _Request(conn, actor, env_ids, payload, time.perf_counter())
        # after its last recorded reply, an actor's request waits for the learner's recording to stop
        (self.held if conn in self.told else self.pending).append(request)

    def _batch_due(self) -> bool:
        if not self.pending:
            return False
        waiting = sum(len(r.env_ids) for r in self.pending)
        everyone_waiting = len(self.pending) + len(self.held) >= len(self.actors)
        waited_s = time.perf_counter() - self.pending[0].arrived_s
        return (
            waiting >= self.settings.inference_batch
            or everyone_waiting
            or waited_s * 1e3 >= self.settings.inference_timeout_ms
        )

    def _take_batch(self) -> list[_Request]:
        """Oldest requests first, whole requests, up to inference_batch observations (at least one)."""
        taken, size = [], 0
        while self.pending:
            n = len(self.pending[0].env_ids)
            if taken and size + n > self.settings.inference_batch:
                break
            taken.append(self.pending.pop(0))
            size += n
        return taken

    def _run_batch(self, requests: list[_Request], trainer: Trainer, replay: Any) -> None:
        env_ids = np.concatenate([r.env_ids for r in requests])
        with step("inference", batch_size=len(env_ids)):
            with phase("inference_batch"):
                sequences = []
                for r in requests:
                    frames, rewards, dones = protocol.decode_request(r.payload, len(r.env_ids))
                    sequences += self.states.observe(r.env_ids, frames, rewards, dones)
                with self.lock:
                    actions = self.states.act(self.model, env_ids)
                offset = 0
                for r in requests:
                    n = len(r.env_ids)
                    with contextlib.suppress(OSError):
                        protocol.send_message(
                            r.conn,
                            protocol.encode_reply(
                                actions[offset : offset + n], self.stopping_recording
                            ),
                        )
                    offset += n
                    if self.stopping_recording:
                        self.told.add(r.conn)
            if sequences:
                with phase("replay_insert"), self.lock:
                    for seq in sequences:
                        replay.add(seq)
                    trainer.inserted += len(sequences)
        self.stats.inference_batches += 1
        self.stats.inference_requests += len(requests)
        self.stats.sequences_inserted += len(sequences)

    def _follow_recording_stop(
        self, stop_requested: Callable[[], bool], stop_recording: Callable[[], None]
    ) -> None:
        """Between batches: start telling actors once a stop is asked for; stop recording once
        every connected actor has had its last recorded reply, then serve the held requests."""
        if self.recording_stopped:
            return
        if not self.stopping_recording:
            self.stopping_recording = stop_requested()
            return
        if not self.told.issuperset(self.actors):
            return
        stop_recording()
        self.pending = sorted(self.pending + self.held, key=lambda r: r.arrived_s)
        self.held = []
        self.told.clear()
        self.stopping_recording = False
        self.recording_stopped = True

    def serve(
        self,
        stop: Any,
        trainer: Trainer,
        replay: Any,
        stop_requested: Callable[[], bool] = lambda: False,
        stop_recording: Callable[[], None] = lambda: None,
    ) -> None:
        """Until ``stop``: read requests, run the batches that are due; between rounds, ask
        ``stop_requested`` whether to stop recording and lead that stop (module docstring)."""
        while not stop.is_set():
            self._follow_recording_stop(stop_requested, stop_recording)
            if trainer.error is not None:
                raise RuntimeError(f"training thread failed: {trainer.error!r}") from trainer.error
            for key, _ in self.selector.select(timeout=POLL_S):
                if key.fileobj is self.listener:
                    self._accept()
                else:
                    self._read(key.fileobj)
            while self._batch_due():
                self._run_batch(self._take_batch(), trainer, replay)
        self.stats.env_steps = self.states.env_steps

    def close(self) -> None:
        for conn in list(self.actors):
            with contextlib.suppress(OSError):
                conn.close()
        self.selector.close()
        self.listener.close()


def learner_main(settings: SeedSettings, raw_dir: str, status: Any, stop: Any) -> None:
    """Process entry point. Reports ("ready", port) or ("error", message) on ``status``."""
    import torch

    from workloads.r2d2.learner import Learner
    from workloads.r2d2.replay import SequenceReplay

    try:
        faulthandler.register(signal.SIGUSR1)  # `kill -USR1 PID` prints this process's stacks
        torch.set_num_threads(settings.torch_threads)
        listener = bind_listener(settings.host, settings.port)
    except BaseException as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        status.put(("error", "learner", reason))
        raise SystemExit(1) from None
    try:
        cfg = settings.r2d2
        learner = Learner(cfg, num_actions_of_pong(settings.seed), seed=settings.seed)
        replay = SequenceReplay(
            cfg.replay_capacity_sequences,
            cfg.sequence_length,
            protocol.FRAME_SHAPE,
            cfg.frame_stack,
            cfg.lstm_size,
            cfg.priority_exponent,
            cfg.importance_exponent,
            seed=settings.seed,
        )
        if settings.inference == "local":
            _serve_local(listener, settings, learner, replay, raw_dir, status, stop)
            return
        lock = threading.Lock()
        learner.params_lock = lock
        server = InferenceServer(listener, settings, learner.online, lock)
        trainer = Trainer(learner, replay, lock, settings)
        with ProcessProfiler(raw_dir, "learner", 0, settings.record_shapes) as prof:
            status.put(("ready", "learner", listener.getsockname()[1]))
            trainer.start()
            try:
                server.serve(stop, trainer, replay, prof.stop_requested, prof.stop_recording)
            finally:
                trainer.halt.set()
                trainer.join(timeout=settings.shutdown_timeout_s)
                server.close()
                stats = dataclasses.asdict(server.stats)
                stats["updates"] = learner.updates
                stats["lost_actors"] = server.lost_actors
                prof.sidecar["stats"] = stats
            # a finished run only, with the profiler off: batches of other sizes
            if not prof.times_after_run:
                return
            prof.stop()
            prof.sidecar["inference_probe"] = probe_inference(
                learner.online, settings, lock, probe_sizes(settings.inference_batch)
            )
    except BaseException as exc:
        status.put(("error", "learner", f"{type(exc).__name__}: {exc}"))
        raise SystemExit(1) from None


def _serve_local(
    listener: socket.socket,
    settings: SeedSettings,
    learner: Any,
    replay: Any,
    raw_dir: str,
    status: Any,
    stop: Any,
) -> None:
    from workloads.r2d2.seed.local_learner import SequenceServer

    server = SequenceServer(listener, settings, learner, replay)
    with ProcessProfiler(raw_dir, "learner", 0, settings.record_shapes) as prof:
        status.put(("ready", "learner", listener.getsockname()[1]))
        try:
            server.serve(stop, prof.poll)
        finally:
            server.close()
            prof.sidecar["stats"] = server.stats()
