"""Wire format between actors and the learner: length-prefixed binary messages over a TCP socket.

hello   actor -> learner: actor index, number of envs
request actor -> learner: for each env the newest 84x84 uint8 frame, the reward and episode-end flag
        of its previous step (SEED sends observations, not stacks: the learner keeps the stacks)
reply   learner -> actor: one int32 action per env, then one byte: 1 when the learner is stopping
        its recording and this is the last reply to a recorded request of this actor (the actor
        stops recording after this step; seed/learner_process.py, InferenceServer)
"""

from __future__ import annotations

import socket
import struct

import numpy as np

FRAME_SHAPE = (84, 84)  # REFERENCE.md: 84x84 uint8 grayscale = 7,056 B per frame
FRAME_BYTES = FRAME_SHAPE[0] * FRAME_SHAPE[1]
_LENGTH = struct.Struct("!I")
_HELLO = struct.Struct("!4sII")
MAGIC = b"R2D2"


class ConnectionClosed(Exception):
    """The peer closed the socket."""


def send_message(sock: socket.socket, payload: bytes) -> None:
    sock.sendall(_LENGTH.pack(len(payload)) + payload)


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    chunks = []
    while n:
        chunk = sock.recv(min(n, 1 << 20))
        if not chunk:
            raise ConnectionClosed()
        chunks.append(chunk)
        n -= len(chunk)
    return b"".join(chunks)


def recv_message(sock: socket.socket) -> bytes:
    (length,) = _LENGTH.unpack(_recv_exact(sock, _LENGTH.size))
    return _recv_exact(sock, length)


def encode_hello(actor: int, n_envs: int) -> bytes:
    return _HELLO.pack(MAGIC, actor, n_envs)


def decode_hello(payload: bytes) -> tuple[int, int]:
    magic, actor, n_envs = _HELLO.unpack(payload)
    if magic != MAGIC:
        raise ValueError(f"bad hello magic {magic!r}")
    return actor, n_envs


def encode_request(frames: np.ndarray, rewards: np.ndarray, dones: np.ndarray) -> bytes:
    """frames [K, 84, 84] uint8, rewards [K] float, dones [K] bool."""
    return (
        np.ascontiguousarray(frames, dtype=np.uint8).tobytes()
        + np.asarray(rewards, dtype=np.float32).tobytes()
        + np.asarray(dones, dtype=np.uint8).tobytes()
    )


def decode_request(payload: bytes, n_envs: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    frames_end = n_envs * FRAME_BYTES
    rewards_end = frames_end + 4 * n_envs
    if len(payload) != rewards_end + n_envs:
        raise ValueError(f"request of {len(payload)} B, expected {rewards_end + n_envs}")
    frames = np.frombuffer(payload, np.uint8, frames_end).reshape(n_envs, *FRAME_SHAPE)
    rewards = np.frombuffer(payload, np.float32, n_envs, frames_end)
    dones = np.frombuffer(payload, np.uint8, n_envs, rewards_end).astype(bool)
    return frames, rewards, dones


def encode_reply(actions: np.ndarray, stop_recording: bool = False) -> bytes:
    return np.asarray(actions, dtype=np.int32).tobytes() + bytes([int(stop_recording)])


def decode_reply(payload: bytes) -> tuple[np.ndarray, bool]:
    """(actions, stop_recording) of a reply."""
    if len(payload) % 4 != 1:
        raise ValueError(f"reply of {len(payload)} B, expected 4 B per action and 1 flag byte")
    return np.frombuffer(payload, np.int32, len(payload) // 4).astype(np.int64), bool(payload[-1])


# ---- local-inference mode (Ape-X / R2D2 layout): actors send finished sequences, fetch parameters
KIND_SEQUENCE = 1
KIND_PARAMS_REQUEST = 2


def _sequence_layout(length: int, stack: int, lstm: int) -> list[tuple[str, np.dtype, tuple]]:
    return [
        ("frames", np.dtype(np.uint8), (length + stack - 1, *FRAME_SHAPE)),
        ("actions", np.dtype(np.int64), (length,)),
        ("rewards", np.dtype(np.float32), (length,)),
        ("dones", np.dtype(np.float32), (length,)),
        ("valid", np.dtype(np.bool_), (length,)),
        ("prev_actions", np.dtype(np.int64), (length,)),
        ("prev_rewards", np.dtype(np.float32), (length,)),
        ("h0", np.dtype(np.float32), (lstm,)),
        ("c0", np.dtype(np.float32), (lstm,)),
    ]


def encode_sequence(seq) -> bytes:
    """KIND_SEQUENCE, the start index, then every array of the Sequence in a fixed order."""
    length, stack = len(seq.actions), seq.frames.shape[0] - len(seq.actions) + 1
    parts = [bytes([KIND_SEQUENCE]), np.int64(seq.start).tobytes()]
    for name, dtype, _ in _sequence_layout(length, stack, len(seq.h0)):
        parts.append(np.ascontiguousarray(getattr(seq, name), dtype=dtype).tobytes())
    return b"".join(parts)


def decode_sequence(payload: bytes, length: int, stack: int, lstm: int):
    from workloads.r2d2.sequences import Sequence

    if payload[0] != KIND_SEQUENCE:
        raise ValueError(f"message kind {payload[0]}, expected a sequence ({KIND_SEQUENCE})")
    offset = 9
    start = int(np.frombuffer(payload, np.int64, 1, 1)[0])
    fields = {}
    for name, dtype, shape in _sequence_layout(length, stack, lstm):
        count = int(np.prod(shape))
        fields[name] = np.frombuffer(payload, dtype, count, offset).reshape(shape)
        offset += count * dtype.itemsize
    if offset != len(payload):
        raise ValueError(f"sequence message of {len(payload)} B, expected {offset}")
    return Sequence(start=start, **fields)


def encode_params_request() -> bytes:
    return bytes([KIND_PARAMS_REQUEST])


def encode_params(state_dict) -> bytes:
    import io

    import torch

    buffer = io.BytesIO()
    torch.save(state_dict, buffer)
    return buffer.getvalue()


def decode_params(payload: bytes):
    import io

    import torch

    # weights_only: parameters cross a socket; never unpickle arbitrary objects from it
    return torch.load(io.BytesIO(payload), weights_only=True)
