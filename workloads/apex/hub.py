"""The serving side of the Ape-X runtime: one selector loop answering whatever the process holds.

The replay server process holds the replay: it takes actors' inserts, answers the learner's sample
requests and applies its priority updates. The learner process serves the actors between its training
steps, on its one thread: parameter requests always, and inserts too when the replay lives there (as
R2D2's local-inference learner does, workloads/r2d2/seed/local_learner.py; a request that arrives
during a training step waits for it, and the message log shows that wait). Server work is
marked with the phase it is (``replay_insert``, ``replay_sample``, ``priority_update``,
``param_publish``); every message is logged on both sides (workloads/apex/channel.py).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from archsim.capture.markers import phase
from workloads.apex import wire
from workloads.apex.channel import Channel, MessageLog, label_of_hello
from workloads.apex.prioritized import TransitionReplay

POLL_S = 0.001  # selector timeout: short against ms-long messages


class Hub:
    """Accepts connections on ``listener`` and serves INSERT / SAMPLE_REQUEST / PRIORITY_UPDATE (with
    a ``replay``) and PARAM_REQUEST (with ``params``: a callable returning the arrays to publish)."""

    def __init__(
        self,
        listener: socket.socket,
        log: MessageLog,
        replay: TransitionReplay | None = None,
        lock: threading.Lock | None = None,
        params: Callable[[], list[np.ndarray]] | None = None,
    ):
        self.listener, self.log, self.replay, self.params = listener, log, replay, params
        self.lock = lock or threading.Lock()
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.channels: list[Channel] = []
        self.stats = {"inserts": 0, "transitions": 0, "samples": 0, "priority_updates": 0}
        self.stats["param_fetches"] = 0
        self.lost: list[str] = []

    def _accept(self) -> None:
        sock, _ = self.listener.accept()
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        channel = Channel(sock, self.log)
        kind, arrays, record = channel.recv()
        if kind != wire.HELLO:
            raise wire.ProtocolError(f"apex: first message {wire.KIND_NAMES[kind]}, expected hello")
        channel.peer = record["src"] = label_of_hello(arrays)  # the sender is known from here on
        self.channels.append(channel)
        self.selector.register(sock, selectors.EVENT_READ, channel)

    def _drop(self, channel: Channel) -> None:
        self.lost.append(channel.peer)
        self.selector.unregister(channel.sock)
        self.channels.remove(channel)
        channel.close()

    def _serve(self, channel: Channel) -> None:
        try:
            kind, arrays, record = channel.recv()
        except (wire.ConnectionClosed, ConnectionError):
            self._drop(channel)
            return
        # thread CPU beside wall time: on a loaded machine the wall time of the work includes
        # waiting for a core (after a blocking sendall, say)
        cpu_ns = time.thread_time_ns()
        if kind == wire.INSERT:
            with phase("replay_insert"):
                self._insert(arrays)
        elif kind == wire.SAMPLE_REQUEST:
            with phase("replay_sample"):
                self._sample(channel, int(arrays[0][0]))
        elif kind == wire.PRIORITY_UPDATE:
            with phase("priority_update"):
                indices, priorities = arrays
                with self.lock:
                    self.replay.update_priorities(indices, priorities)
                self.stats["priority_updates"] += 1
        elif kind == wire.PARAM_REQUEST and self.params is not None:
            with phase("param_publish"):
                channel.send(wire.PARAMS, self.params())
                self.stats["param_fetches"] += 1
        else:
            raise wire.ProtocolError(
                f"apex: {channel.peer} sent {wire.KIND_NAMES[kind]}, which this process does not serve"
            )
        record["work_end_ns"] = time.time_ns()
        record["work_cpu_ns"] = time.thread_time_ns() - cpu_ns

    def _insert(self, arrays: list[np.ndarray]) -> None:
        obs, actions, returns, discounts, next_obs, priorities = arrays
        with self.lock:
            self.replay.add(obs, actions, returns, discounts, next_obs, priorities)
        self.stats["inserts"] += 1
        self.stats["transitions"] += len(actions)

    def _sample(self, channel: Channel, batch_size: int) -> None:
        """A batch, or an empty reply while the replay holds less than one batch."""
        with self.lock:
            if len(self.replay) < batch_size:
                arrays = []
            else:
                indices, weights = self.replay.sample(batch_size)
                arrays = [indices, weights, *self.replay.batch(indices)]
        channel.send(wire.SAMPLE, arrays, items=len(arrays and arrays[0]))
        self.stats["samples"] += bool(arrays)

    def serve_once(self, timeout_s: float = POLL_S) -> int:
        """Accept, read and answer what is waiting (up to ``timeout_s`` for something to arrive);
        the number of sockets served."""
        events = self.selector.select(timeout=timeout_s)
        for key, _ in events:
            if key.data is None:
                self._accept()
            else:
                self._serve(key.data)
        return len(events)

    def serve(self, stop: Any, poll: Callable[[], None] = lambda: None) -> None:
        """Until ``stop`` is set: accept, read and answer; ``poll`` between rounds."""
        while not stop.is_set():
            poll()
            self.serve_once()

    def close(self) -> None:
        for channel in list(self.channels):
            channel.close()
        self.selector.close()
        with contextlib.suppress(OSError):
            self.listener.close()
