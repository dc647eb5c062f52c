"""Ape-X runtime pieces worked by hand: the prioritized replay (sum-tree totals, proportional sample
indices for given uniform draws, importance weights), the actors' n-step transitions and initial
priorities, and the binary wire format (round trips; truncated, oversized and malformed messages
refused in one line)."""

from __future__ import annotations

import socket
import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from workloads.apex import wire
from workloads.apex.actor import NStepBuffer, _Step
from workloads.apex.prioritized import (
    IMPORTANCE_EXPONENT,
    PRIORITY_EXPONENT,
    TransitionReplay,
    proportional_indices,
)

OBS = (1, 2, 2)  # tiny observations: the replay does not care about their size


def filled(priorities, alpha=1.0, capacity=None):
    n = len(priorities)
    replay = TransitionReplay(capacity or n, OBS, alpha=alpha)
    obs = np.arange(n * 4, dtype=np.uint8).reshape(n, *OBS)
    replay.add(obs, np.arange(n), np.zeros(n), np.ones(n), obs, np.asarray(priorities, float))
    return replay


def test_ape_x_exponents():
    assert (PRIORITY_EXPONENT, IMPORTANCE_EXPONENT) == (0.6, 0.4)


def test_sum_tree_totals_with_alpha():
    # alpha 0.6: 32 ** 0.6 = 2 ** 3 = 8, 1 ** 0.6 = 1 -> leaves 1 and 8, total 9
    replay = filled([1.0, 32.0], alpha=0.6)
    assert replay.tree.leaf(np.array([0, 1])) == pytest.approx([1.0, 8.0])
    assert replay.tree.total == pytest.approx(9.0)
    replay.update_priorities(np.array([0]), np.array([243.0]))  # 243 ** 0.6 = 3 ** 3 = 27
    assert replay.tree.total == pytest.approx(35.0)


def test_proportional_sample_indices_and_weights_by_hand():
    # priorities 1, 2, 3, 4 (alpha 1): cumulative intervals [0,1) [1,3) [3,6) [6,10), total 10.
    replay = filled([1.0, 2.0, 3.0, 4.0])
    assert replay.tree.total == pytest.approx(10.0)
    # batch 2: strata [0, 5) and [5, 10); draws 0.1 and 0.5 -> masses 0.5 and 7.5 -> slots 0, 3
    indices, weights = replay.sample(2, uniforms=np.array([0.1, 0.5]))
    assert indices.tolist() == [0, 3]
    # P = 0.1 and 0.4; w = (N P) ** -0.4 = 0.4 ** -0.4 and 1.6 ** -0.4, over the larger:
    # 1 and (1.6 / 0.4) ** -0.4 = 4 ** -0.4 = 0.574349...
    assert weights == pytest.approx([1.0, 4.0**-0.4])
    # draws 0 and 0 -> masses 0 and 5 -> slots 0 and 2; a mass on a boundary (1.0) goes right
    assert replay.sample(2, uniforms=np.array([0.0, 0.0]))[0].tolist() == [0, 2]
    assert replay.sample(1, uniforms=np.array([0.1]))[0].tolist() == [1]
    # the learner's update: slot 3 down to 0 (floored at 1e-6) -> total 6, slot 3 never drawn
    replay.update_priorities(np.array([3]), np.array([0.0]))
    assert replay.tree.total == pytest.approx(6.0, abs=1e-5)
    assert replay.sample(1, uniforms=np.array([0.999]))[0].tolist() == [2]


def test_inserts_overwrite_the_oldest_slots():
    replay = TransitionReplay(4, OBS, alpha=1.0)
    for start in (0, 3):
        n = 3
        replay.add(
            np.full((n, *OBS), start, np.uint8),
            np.arange(start, start + n),
            np.zeros(n),
            np.ones(n),
            np.zeros((n, *OBS), np.uint8),
            np.full(n, start + 1.0),
        )
    assert len(replay) == 4 and replay.inserted == 6
    assert replay.actions.tolist() == [4, 5, 2, 3]  # slots 0, 1 rewritten by the second batch
    assert replay.tree.total == pytest.approx(4 + 4 + 1 + 4)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.floats(0.0, 100.0), min_size=1, max_size=20),
    st.lists(st.floats(0.0, 0.999), min_size=1, max_size=8),
)
def test_samples_land_on_live_slots_with_weights_in_0_1(priorities, draws):
    replay = filled(priorities, alpha=PRIORITY_EXPONENT, capacity=32)
    indices, weights = replay.sample(len(draws), uniforms=np.array(draws))
    assert ((indices >= 0) & (indices < len(priorities))).all()
    assert weights.max() == pytest.approx(1.0) and (weights > 0).all()
    # totals are the sum of the leaves
    assert replay.tree.total == pytest.approx(replay.tree.leaf(np.arange(32)).sum())


def test_stratified_draws_cover_the_strata_in_order():
    replay = filled([1.0] * 8)
    # equal priorities: draw k of 4 at the middle of its stratum lands on slot 2k (+0.5 -> 2k+1)
    assert proportional_indices(replay.tree, np.full(4, 0.25), 8).tolist() == [0, 2, 4, 6]
    assert proportional_indices(replay.tree, np.full(4, 0.75), 8).tolist() == [1, 3, 5, 7]


def q(*values):
    return np.array(values, dtype=np.float32)


def test_n_step_transitions_and_initial_priorities_by_hand():
    obs = [np.full((1,), k, np.uint8) for k in range(5)]
    buffer = NStepBuffer(n=2, gamma=0.5)
    buffer.add(_Step(obs[0], 1, q(0.0, 1.0), reward=1.0))
    buffer.add(_Step(obs[1], 0, q(2.0, 0.0), reward=2.0))
    assert buffer.ready == []  # step 0 needs the Q-values of step 2
    buffer.add(_Step(obs[2], 0, q(3.0, 8.0), reward=4.0))
    # R = 1 + 0.5 * 2 = 2, discount 0.25, bootstrap max Q(s2) = 8: |2 + 2 - Q(s0, a0 = 1) = 1| = 3
    o, a, ret, disc, nxt, prio = buffer.ready[0]
    assert (a, ret, disc, prio) == (1, 2.0, 0.25, pytest.approx(3.0)) and nxt is obs[2]
    # an episode end inside the window: no bootstrap, discount 0
    buffer.add(_Step(obs[3], 1, q(0.0, 0.5), reward=-1.0, done=True))
    # step 1: R = 2 + 0.5 * 4 = 4 with s3 = [0, 0.5] -> |4 + 0.25 * 0.5 - 2| = 2.125
    # step 2: R = 4 + 0.5 * (-1) = 3.5, ends at step 3 -> |3.5 - 3| = 0.5
    # step 3: R = -1, ends -> |-1 - 0.5| = 1.5
    got = [(r[2], r[3], round(r[5], 6)) for r in buffer.ready[1:]]
    assert got == [(4.0, 0.25, 2.125), (3.5, 0.0, 0.5), (-1.0, 0.0, 1.5)]
    arrays = buffer.take()
    assert [a.dtype for a in arrays] == [
        np.uint8,
        np.int64,
        np.float32,
        np.float32,
        np.uint8,
        np.float32,
    ]
    assert arrays[1].tolist() == [1, 0, 0, 1] and buffer.ready == []


# ---- wire format ---------------------------------------------------------------------------------


def test_message_round_trip_keeps_kinds_dtypes_and_shapes():
    arrays = [
        np.arange(2 * 4 * 84 * 84, dtype=np.uint8).reshape(2, 4, 84, 84),
        np.array([3, -1], dtype=np.int64),
        np.array([0.5, 1.5], dtype=np.float32),
        np.array([[1, 2, 3]], dtype=np.int32),
        np.array(2.0),  # a 0-d float64
        np.zeros((0, 3), dtype=np.float32),
    ]
    data = wire.encode_message(wire.INSERT, 7, arrays)
    # header 12 B + count 2 B + per array (code, rank) 2 B + 4 B per dimension + the data
    dims = sum(a.ndim for a in arrays)
    assert len(data) == 12 + 2 + 2 * len(arrays) + 4 * dims + sum(a.nbytes for a in arrays)
    kind, seq, back = wire.decode_message(data)
    assert (kind, seq) == (wire.INSERT, 7)
    for a, b in zip(arrays, back, strict=True):
        assert a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b)
    assert wire.decode_message(wire.encode_message(wire.PARAM_REQUEST, 1, []))[2] == []


def one_line(exc: BaseException) -> str:
    text = str(exc)
    assert "\n" not in text and isinstance(exc, ArchsimError)
    return text


def test_truncated_and_malformed_messages_are_refused_in_one_line():
    data = wire.encode_message(wire.SAMPLE, 3, [np.arange(10, dtype=np.float32)])
    with pytest.raises(wire.ProtocolError) as info:
        wire.decode_message(data[:-1])
    assert "truncated" in one_line(info.value)
    with pytest.raises(wire.ProtocolError, match="truncated header"):
        wire.decode_message(data[:5])
    with pytest.raises(wire.ProtocolError, match="bad magic"):
        wire.decode_message(b"XX" + data[2:])
    with pytest.raises(wire.ProtocolError, match="unknown kind 99"):
        wire.decode_message(data[:2] + bytes([99]) + data[3:])
    with pytest.raises(wire.ProtocolError, match="cannot cross the wire"):
        wire.encode_message(wire.INSERT, 1, [np.array([True])])
    # a payload whose array claims more bytes than follow
    payload = struct.pack("!HBBI", 1, 4, 1, 1000) + b"\0" * 8
    with pytest.raises(wire.ProtocolError, match="needs 4000 B, 8 B left"):
        wire.decode_arrays(payload)


def test_oversized_message_is_refused_before_its_payload_is_read():
    header = struct.pack("!2sBBII", wire.MAGIC, wire.PARAMS, 0, 5, wire.MAX_PAYLOAD_BYTES + 1)
    with pytest.raises(wire.ProtocolError) as info:
        wire.unpack_header(header)
    assert "exceeds the 67108864 B limit" in one_line(info.value)
    left, right = socket.socketpair()
    with left, right:
        left.sendall(header)  # no payload follows: the receiver must not wait for 64 MiB
        with pytest.raises(wire.ProtocolError, match="exceeds"):
            wire.recv_message(right)
    with pytest.raises(wire.ProtocolError, match="exceeds"):
        wire.pack_header(wire.PARAMS, 1, wire.MAX_PAYLOAD_BYTES + 1)


def test_socket_cut_mid_message_is_a_protocol_error_and_between_messages_a_close():
    data = wire.encode_message(wire.INSERT, 1, [np.zeros(100, np.uint8)])
    left, right = socket.socketpair()
    with right:
        left.sendall(data + data[:20])
        left.close()
        kind, seq, payload = wire.recv_message(right)
        assert (kind, seq, len(payload)) == (wire.INSERT, 1, len(data) - 12)
        with pytest.raises(wire.ProtocolError, match="connection closed after 8 of"):
            wire.recv_message(right)
    left, right = socket.socketpair()
    with right:
        left.close()
        with pytest.raises(wire.ConnectionClosed):
            wire.recv_message(right)


def test_recording_stops_at_half_once_the_learner_has_recorded_a_step():
    from workloads.apex.runner import _recorded_enough
    from workloads.apex.settings import ApexSettings

    run = ApexSettings(seconds=3.0, start_timeout_s=120.0)  # half: 1.5 s; give up 121.5 s in
    assert not _recorded_enough(1.4, run, learner_stepped=True)
    assert not _recorded_enough(1.5, run, learner_stepped=False)
    assert _recorded_enough(1.5, run, learner_stepped=True)
    assert not _recorded_enough(121.4, run, learner_stepped=False)
    assert _recorded_enough(121.5, run, learner_stepped=False)  # a learner that never trains


def test_replay_smaller_than_a_batch_is_refused_in_one_line():
    from workloads.apex.settings import ApexSettings

    with pytest.raises(ArchsimError, match=r"^--replay-capacity 8: expected >= --batch-size 16 "):
        ApexSettings(replay_capacity=8, batch_size=16)


def test_a_process_writes_its_stepped_file_once_for_its_first_recorded_step(tmp_path):
    import time

    from workloads.r2d2.seed.profiling import ProcessProfiler, stepped_path

    path = stepped_path(tmp_path, "learner", 0)
    assert path == tmp_path / "learner-0.stepped"
    before_ns = time.time_ns()
    with ProcessProfiler(tmp_path, "learner", 0, record_shapes=False) as prof:
        assert not path.exists()
        prof.stepped()
        assert before_ns <= int(path.read_text()) <= time.time_ns()
        path.unlink()
        prof.stepped()  # once: later steps write nothing
        assert not path.exists()
        prof.stop_recording()
        prof.stepped()
    idle = ProcessProfiler(tmp_path, "actor", 1)
    idle.stepped()  # not recording (not entered, as after stop_recording): not a recorded step
    assert not stepped_path(tmp_path, "actor", 1).exists()
