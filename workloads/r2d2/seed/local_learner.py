"""Learner side of ``--inference local`` (Ape-X / R2D2 layout): actors act with their own copy of the
network and ship finished sequences; the learner inserts them into replay, trains at the replay ratio
and answers parameter requests.

One thread does all three, so every phase it marks lies either inside its own ``learner_step`` or in
no step at all (a second thread's phases would be attributed by time to whatever step the process had
open). Parameter requests wait while an update runs; actors ask only every 400 steps.
"""

from __future__ import annotations

import selectors
import socket
import time
from typing import Any

import numpy as np

from archsim.capture.markers import phase, step
from workloads.r2d2.seed import protocol
from workloads.r2d2.seed.rate import may_train
from workloads.r2d2.seed.settings import SeedSettings

POLL_S = 0.001


class SequenceServer:
    def __init__(self, listener: socket.socket, settings: SeedSettings, learner: Any, replay: Any):
        self.listener, self.settings, self.learner, self.replay = (
            listener,
            settings,
            learner,
            replay,
        )
        self.selector = selectors.DefaultSelector()
        self.selector.register(listener, selectors.EVENT_READ, None)
        self.actors: dict[socket.socket, int] = {}
        self.lost_actors: list[int] = []
        self.inserted = 0
        self.params_served = 0
        self._params_cache: tuple[int, bytes] | None = None

    def _accept(self) -> None:
        conn, _ = self.listener.accept()
        conn.settimeout(self.settings.connect_timeout_s)
        actor, n_envs = protocol.decode_hello(protocol.recv_message(conn))
        if n_envs != self.settings.envs_per_actor or not 0 <= actor < self.settings.actors:
            conn.close()
            raise ValueError(f"unexpected hello from actor {actor} with {n_envs} envs")
        self.actors[conn] = actor
        self.selector.register(conn, selectors.EVENT_READ, None)

    def _drop(self, conn: socket.socket) -> None:
        self.lost_actors.append(self.actors.pop(conn))
        self.selector.unregister(conn)
        conn.close()

    def _params(self) -> bytes:
        if self._params_cache is None or self._params_cache[0] != self.learner.updates:
            state = self.learner.online.state_dict()
            self._params_cache = (self.learner.updates, protocol.encode_params(state))
        return self._params_cache[1]

    def _read(self, conn: socket.socket) -> None:
        try:
            payload = protocol.recv_message(conn)
        except (protocol.ConnectionClosed, ConnectionError, TimeoutError):
            self._drop(conn)
            return
        cfg = self.settings.r2d2
        if payload[0] == protocol.KIND_SEQUENCE:
            with phase("replay_insert"):
                seq = protocol.decode_sequence(
                    payload, cfg.sequence_length, cfg.frame_stack, cfg.lstm_size
                )
                self.replay.add(seq)
            self.inserted += 1
        elif payload[0] == protocol.KIND_PARAMS_REQUEST:
            with phase("param_publish"):
                try:
                    protocol.send_message(conn, self._params())
                except OSError:
                    self._drop(conn)
                    return
            self.params_served += 1
        else:
            raise ValueError(f"unknown message kind {payload[0]} from actor {self.actors[conn]}")

    def _may_train(self) -> bool:
        return may_train(
            len(self.replay),
            self.learner.updates,
            self.settings.r2d2.batch_size,
            self.settings.replay_ratio,
            self.inserted,
        )

    def _train(self) -> None:
        batch_size = self.settings.r2d2.batch_size
        with step("learner", batch_size=batch_size):
            with phase("replay_sample"):
                indices, weights = self.replay.sample(batch_size)
                batch = self.replay.batch(indices)
            result = self.learner.train_step(batch, weights)
            with phase("priority_update"):
                self.replay.update_priorities(indices, result.priorities)

    def serve(self, stop: Any, poll: Any = lambda: None) -> None:
        """Until ``stop``: insert sequences, answer parameter requests, train; ``poll`` per round."""
        while not stop.is_set():
            poll()
            for key, _ in self.selector.select(timeout=0 if self._may_train() else POLL_S):
                if key.fileobj is self.listener:
                    self._accept()
                else:
                    self._read(key.fileobj)
            if self._may_train():
                self._train()
            elif not self.actors:
                time.sleep(POLL_S)

    def stats(self) -> dict:
        return {
            "sequences_inserted": self.inserted,
            "params_served": self.params_served,
            "updates": self.learner.updates,
            "lost_actors": list(np.asarray(self.lost_actors).tolist()),
        }

    def close(self) -> None:
        for conn in list(self.actors):
            conn.close()
        self.selector.close()
        self.listener.close()
