"""Binary wire format of the Ape-X runtime: a fixed 12-byte header, then numpy arrays.

Header (network byte order): magic ``b"AX"``, kind (u8), flags (u8, 0), sequence (u32: the sender's
message counter, so sender and receiver logs pair up), payload length (u32). Payload: array count
(u16), then per array its dtype code (u8), rank (u8), each dimension (u32) and the raw C-order bytes.
Only the dtypes below cross the wire: nothing is unpickled, a malformed message is refused in one line.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Sequence

import numpy as np

from archsim.errors import ArchsimError

MAGIC = b"AX"
HEADER = struct.Struct("!2sBBII")
HEADER_BYTES = HEADER.size  # 12
# Largest payload accepted: a learner batch of 512 transitions (Ape-X's batch, Horgan et al. 2018)
# of two 4x84x84 uint8 stacks is 512 x 56,448 B = 28.9 MB; parameters of Nature DQN are 6.7 MB.
MAX_PAYLOAD_BYTES = 64 << 20

HELLO = 1  # payload: [role code, index] int32 (who is on this connection)
INSERT = 2  # actor -> replay: obs, actions, returns, discounts, next_obs, priorities
SAMPLE_REQUEST = 3  # learner -> replay: [batch size] int32
SAMPLE = 4  # replay -> learner: indices, weights, obs, actions, returns, discounts, next_obs
PRIORITY_UPDATE = 5  # learner -> replay: indices, priorities
PARAM_REQUEST = 6  # actor -> learner: no arrays
PARAMS = 7  # learner -> actor: the network's tensors in state_dict order
KIND_NAMES = {
    HELLO: "hello",
    INSERT: "insert",
    SAMPLE_REQUEST: "sample_request",
    SAMPLE: "sample",
    PRIORITY_UPDATE: "priority_update",
    PARAM_REQUEST: "param_request",
    PARAMS: "params",
}
ROLES = ("actor", "learner", "replay")

_DTYPES = {
    1: np.dtype(np.uint8),
    2: np.dtype(np.int32),
    3: np.dtype(np.int64),
    4: np.dtype(np.float32),
    5: np.dtype(np.float64),
}
_CODES = {dtype: code for code, dtype in _DTYPES.items()}
_COUNT = struct.Struct("!H")
_ARRAY = struct.Struct("!BB")
_DIM = struct.Struct("!I")


class ProtocolError(ArchsimError):
    """A message that does not follow the format (truncated, oversized, unknown kind or dtype)."""


class ConnectionClosed(Exception):
    """The peer closed the socket between messages."""


def encode_arrays(arrays: Sequence[np.ndarray]) -> bytes:
    """Payload of ``arrays`` (each must have one of the wire dtypes)."""
    parts = [_COUNT.pack(len(arrays))]
    for array in arrays:
        array = np.asarray(array)
        if not array.flags.c_contiguous:  # (np.ascontiguousarray would turn a 0-d array 1-d)
            array = array.copy(order="C")
        code = _CODES.get(array.dtype)
        if code is None:
            raise ProtocolError(f"apex message: dtype {array.dtype} cannot cross the wire")
        parts.append(_ARRAY.pack(code, array.ndim))
        parts.extend(_DIM.pack(d) for d in array.shape)
        parts.append(array.tobytes())
    return b"".join(parts)


def decode_arrays(payload: bytes | memoryview, what: str = "apex message") -> list[np.ndarray]:
    """Arrays of a payload (read-only views into it); a malformed payload is one ProtocolError."""
    view = memoryview(payload)
    if len(view) < _COUNT.size:
        raise ProtocolError(f"{what}: truncated payload ({len(view)} B, no array count)")
    (count,) = _COUNT.unpack_from(view, 0)
    offset = _COUNT.size
    arrays = []
    for i in range(count):
        if offset + _ARRAY.size > len(view):
            raise ProtocolError(f"{what}: truncated at array {i} of {count}")
        code, ndim = _ARRAY.unpack_from(view, offset)
        offset += _ARRAY.size
        dtype = _DTYPES.get(code)
        if dtype is None:
            raise ProtocolError(f"{what}: array {i} has unknown dtype code {code}")
        if offset + ndim * _DIM.size > len(view):
            raise ProtocolError(f"{what}: truncated in the shape of array {i}")
        shape = tuple(_DIM.unpack_from(view, offset + k * _DIM.size)[0] for k in range(ndim))
        offset += ndim * _DIM.size
        nbytes = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize
        if offset + nbytes > len(view):
            raise ProtocolError(
                f"{what}: array {i} needs {nbytes} B, {len(view) - offset} B left (truncated)"
            )
        arrays.append(np.frombuffer(view, dtype, nbytes // dtype.itemsize, offset).reshape(shape))
        offset += nbytes
    if offset != len(view):
        raise ProtocolError(f"{what}: {len(view) - offset} B after the last array")
    return arrays


def pack_header(kind: int, seq: int, length: int) -> bytes:
    if not 0 <= length <= MAX_PAYLOAD_BYTES:
        raise ProtocolError(
            f"apex message kind {kind} seq {seq}: payload of {length} B exceeds the "
            f"{MAX_PAYLOAD_BYTES} B limit"
        )
    return HEADER.pack(MAGIC, kind, 0, seq & 0xFFFFFFFF, length)


def unpack_header(header: bytes) -> tuple[int, int, int]:
    """(kind, sequence, payload length) of a 12-byte header; refuses a bad one in one line."""
    if len(header) != HEADER_BYTES:
        raise ProtocolError(f"apex message: truncated header ({len(header)} of {HEADER_BYTES} B)")
    magic, kind, _flags, seq, length = HEADER.unpack(header)
    if magic != MAGIC:
        raise ProtocolError(f"apex message: bad magic {magic!r} (expected {MAGIC!r})")
    if kind not in KIND_NAMES:
        raise ProtocolError(f"apex message seq {seq}: unknown kind {kind}")
    if length > MAX_PAYLOAD_BYTES:
        raise ProtocolError(
            f"apex message kind {KIND_NAMES[kind]} seq {seq}: payload of {length} B exceeds "
            f"the {MAX_PAYLOAD_BYTES} B limit"
        )
    return kind, seq, length


def encode_message(kind: int, seq: int, arrays: Sequence[np.ndarray]) -> bytes:
    payload = encode_arrays(arrays)
    return pack_header(kind, seq, len(payload)) + payload


def decode_message(data: bytes) -> tuple[int, int, list[np.ndarray]]:
    """(kind, sequence, arrays) of one whole message held in ``data`` (tests, offline use)."""
    kind, seq, length = unpack_header(bytes(data[:HEADER_BYTES]))
    if len(data) - HEADER_BYTES != length:
        raise ProtocolError(
            f"apex message kind {KIND_NAMES[kind]} seq {seq}: {len(data) - HEADER_BYTES} B of "
            f"payload, header says {length} (truncated)"
            if len(data) - HEADER_BYTES < length
            else f"apex message kind {KIND_NAMES[kind]} seq {seq}: "
            f"{len(data) - HEADER_BYTES - length} B after the payload"
        )
    return kind, seq, decode_arrays(memoryview(data)[HEADER_BYTES:], f"apex {KIND_NAMES[kind]}")


def recv_exact(sock: socket.socket, n: int, *, first: bool = False) -> bytearray:
    """Exactly ``n`` bytes; ConnectionClosed if the peer closes before the first byte of a message
    (``first``), a ProtocolError if it closes in the middle of one."""
    buffer = bytearray(n)
    view = memoryview(buffer)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], min(n - got, 1 << 20))
        if k == 0:
            if first and got == 0:
                raise ConnectionClosed()
            raise ProtocolError(f"apex message: connection closed after {got} of {n} B")
        got += k
    return buffer


def recv_message(sock: socket.socket) -> tuple[int, int, bytearray]:
    """(kind, sequence, payload bytes) of the next message on ``sock``."""
    kind, seq, length = unpack_header(bytes(recv_exact(sock, HEADER_BYTES, first=True)))
    return kind, seq, recv_exact(sock, length)
