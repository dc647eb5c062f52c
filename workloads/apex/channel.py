"""One TCP connection of the Ape-X runtime that logs every message it sends or receives.

Each process keeps a :class:`MessageLog`; each record is one message seen from this side with
``time.time_ns()`` stamps (CLOCK_REALTIME: one clock for every process of this machine, network
namespaces included), so the capture pairs a sender's record with the receiver's by (source,
sequence) and gets serialize, send, receive and server-work times and the one-way latency.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from workloads.apex import wire


class MessageLog:
    """Thread-safe list of message records of one process, written as JSON at the end."""

    def __init__(self, label: str):
        self.label = label
        self.records: list[dict] = []
        self._lock = threading.Lock()
        self._seq = 0

    def next_seq(self) -> int:
        with self._lock:
            self._seq += 1
            return self._seq

    def add(self, record: dict) -> dict:
        """Keep ``record`` (the caller may still add stamps to it before the log is written)."""
        with self._lock:
            self.records.append(record)
        return record

    def write(self, path: Path) -> None:
        tmp = Path(path).with_suffix(".tmp")
        with self._lock:
            tmp.write_text(json.dumps(self.records))
        os.replace(tmp, path)


class Channel:
    """A connected socket between this process (``log.label``) and ``peer``."""

    def __init__(self, sock: socket.socket, log: MessageLog, peer: str = "?"):
        self.sock, self.log, self.peer = sock, log, peer

    def send(self, kind: int, arrays: Sequence[np.ndarray], items: int = 0) -> int:
        """Serialize and send one message; returns its total size in bytes."""
        seq = self.log.next_seq()
        t0 = time.time_ns()
        data = wire.encode_message(kind, seq, arrays)
        t1 = time.time_ns()
        self.sock.sendall(data)
        t2 = time.time_ns()
        self.log.add(
            {
                "side": "send",
                "kind": wire.KIND_NAMES[kind],
                "seq": seq,
                "src": self.log.label,
                "dst": self.peer,
                "bytes": len(data),
                "items": items,
                "serialize_start_ns": t0,
                "send_start_ns": t1,
                "send_end_ns": t2,
            }
        )
        return len(data)

    def recv(self) -> tuple[int, list[np.ndarray], dict]:
        """(kind, arrays, record) of the next message; ``record`` is logged and can take more stamps
        (the server's ``work_end_ns``) until the caller is done with it."""
        t0 = time.time_ns()
        kind, seq, payload = wire.recv_message(self.sock)
        t1 = time.time_ns()
        arrays = wire.decode_arrays(payload, f"apex {wire.KIND_NAMES[kind]} from {self.peer}")
        t2 = time.time_ns()
        record = self.log.add(
            {
                "side": "recv",
                "kind": wire.KIND_NAMES[kind],
                "seq": seq,
                "src": self.peer,
                "dst": self.log.label,
                "bytes": wire.HEADER_BYTES + len(payload),
                "recv_start_ns": t0,
                "recv_end_ns": t1,
                "decode_end_ns": t2,
            }
        )
        return kind, arrays, record

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()


class Stopped(Exception):
    """The run was stopped while this process was still connecting: nothing failed here."""


CONNECT_ATTEMPT_S = 1.0  # one attempt's limit, so that a stop is seen within a second


def connect(
    host: str, port: int, log: MessageLog, peer: str, timeout_s: float, stop: Any = None
) -> Channel:
    """Connect (retrying while the server starts), introduce ourselves with HELLO. Gives up with
    Stopped once ``stop`` is set: a stopped run's servers close their listeners, and retrying
    until ``timeout_s`` would keep the whole run waiting for this process."""
    deadline = time.monotonic() + timeout_s
    while True:
        if stop is not None and stop.is_set():
            raise Stopped(f"stopped while connecting to {peer}")
        try:
            attempt_s = max(0.05, min(CONNECT_ATTEMPT_S, deadline - time.monotonic()))
            sock = socket.create_connection((host, port), timeout=attempt_s)
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise TimeoutError(f"cannot connect to {peer} at {host}:{port} ({exc})") from None
            time.sleep(0.05)
    sock.settimeout(timeout_s)  # create_connection left the attempt's limit on it
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    channel = Channel(sock, log, peer)
    role, _, index = log.label.partition("-")
    channel.send(wire.HELLO, [np.array([wire.ROLES.index(role), int(index)], dtype=np.int32)])
    return channel


def label_of_hello(arrays: list[np.ndarray]) -> str:
    """``role-index`` from a HELLO payload; a bad one is a ProtocolError."""
    if len(arrays) != 1 or arrays[0].shape != (2,) or not 0 <= arrays[0][0] < len(wire.ROLES):
        raise wire.ProtocolError("apex hello: expected [role code, index] int32")
    return f"{wire.ROLES[int(arrays[0][0])]}-{int(arrays[0][1])}"
