"""Issue 14 item 5: the measured side of the Ape-X validation, from the bundled capture's
messages.csv (hand-checked rows), and the closed-form prediction's hand-worked cases and invariants."""

from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw import NetworkConfig
from archsim.perf.network import message_breakdown
from archsim.validate.apex import (
    BaselineCosts,
    baseline_costs,
    insert_latencies_us,
    load_messages,
    measure_capture,
    predict,
    sample_round_trips_us,
    sampling_latencies_us,
    signed_error,
    unprofiled_frames_per_s,
    unprofiled_window_ns,
)

TRACE = Path(__file__).resolve().parents[1] / "traces" / "apex-dqn-cpu"


def csv_rows(kind: str) -> list[dict]:
    with open(TRACE / "messages.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["kind"] == kind]


def test_insert_latencies_are_the_insert_rows():
    got = insert_latencies_us(load_messages(TRACE))
    rows = csv_rows("insert")
    assert len(got) == len(rows) == 28
    # the first two inserts in send order (actor-1 then actor-0), read off the file by hand
    assert got.iloc[0] == pytest.approx(31986.147)
    assert got.iloc[1] == pytest.approx(34573.296)
    assert got.mean() == pytest.approx(sum(float(r["latency_us"]) for r in rows) / 28)


def test_sample_round_trips_leave_out_empty_replies():
    got = sample_round_trips_us(load_messages(TRACE))
    full = [r for r in csv_rows("sample") if int(r["items"]) > 0]
    assert len(got) == len(full) == 13  # meta.capture.messages.sample: 13, plus 4 empty
    assert got.iloc[0] == pytest.approx(29381.652)  # seq 5, the first non-empty reply
    assert got.mean() == pytest.approx(sum(float(r["round_trip_us"]) for r in full) / 13)


def test_sampling_latency_pairs_each_update_with_the_sample_before_it():
    got = sampling_latencies_us(load_messages(TRACE))
    # the warm-up's first full sample (seq 5) is not trained on: 12 updates for 13 samples, and
    # the last update was cut by the stop (no receiving side, no latency): 11 figures
    updates = csv_rows("priority_update")
    assert len(updates) == 12 and sum(r["latency_us"] == "" for r in updates) == 1
    assert len(got) == 11
    # update seq 10 follows sample seq 6 (round trip 52,201.208 us), its own one way 8,106.681 us
    assert got.iloc[0] == pytest.approx(52201.208 + 8106.681)
    # update seq 12 follows sample seq 7 (18,450.108 us), one way 595.548 us
    assert got.iloc[1] == pytest.approx(18450.108 + 595.548)


def test_measured_access_latency_is_the_mean_over_inserts_and_samples():
    m = measure_capture(TRACE)
    table = load_messages(TRACE)
    ins, smp = insert_latencies_us(table), sample_round_trips_us(table)
    assert (m.inserts, m.samples, m.actors, m.placement, m.send_every) == (28, 13, 2, "server", 16)
    by_hand = (ins.sum() + smp.sum()) / (28 + 13)
    assert m.replay_access_latency_us == pytest.approx(by_hand)
    assert min(ins.mean(), smp.mean()) <= m.replay_access_latency_us <= max(ins.mean(), smp.mean())
    assert m.frames_per_s > 0


def test_frames_per_s_from_unprofiled_inserts_by_hand():
    t = pd.DataFrame(
        {
            "kind": ["insert"] * 6,
            "src": ["actor-0", "actor-1", "actor-0", "actor-0", "actor-1", "actor-1"],
            "items": [16] * 6,
            "sent_unix_ns": [0, 1, 2, 3, 4, 5],
            "profiled": [False] * 6,
        }
    )
    t["sent_unix_ns"] *= 1_000_000_000
    # actor-0: 32 transitions after its first insert over 3 s; actor-1: 32 over 4 s; x frameskip 4
    assert unprofiled_frames_per_s(t) == pytest.approx((32 / 3 + 32 / 4) * 4)
    # every actor inserting unprofiled: from actor-1's first (1 s) to actor-0's last (3 s)
    assert unprofiled_window_ns(t) == (1_000_000_000, 3_000_000_000)
    t.loc[0, "profiled"] = True  # actor-0's first now profiled: 16 over 1 s
    assert unprofiled_frames_per_s(t) == pytest.approx((16 / 1 + 32 / 4) * 4)
    t.loc[2, "profiled"] = True  # actor-0 has one unprofiled insert left: no rate for the run
    assert math.isnan(unprofiled_frames_per_s(t))
    assert unprofiled_window_ns(t) is None


def test_bundled_frames_per_s_matches_a_hand_count():
    rows = [r for r in csv_rows("insert") if r["profiled"] == "False"]
    rate = 0.0
    for actor in ("actor-0", "actor-1"):
        mine = [r for r in rows if r["src"] == actor]
        span_s = (int(mine[-1]["sent_unix_ns"]) - int(mine[0]["sent_unix_ns"])) * 1e-9
        rate += sum(int(r["items"]) for r in mine[1:]) / span_s
    assert unprofiled_frames_per_s(load_messages(TRACE)) == pytest.approx(4 * rate)


def loopback(**kw) -> NetworkConfig:
    fields = dict(
        nic_bw_gbs=1000.0,
        latency_us=0.0,
        stack="kernel_tcp",
        kernel_tcp_us_per_msg=7.2,
        kernel_bypass_us_per_msg=2.0,
        mtu_bytes=65535,
        switch_hops=0,
        link_length_m=0.0,
    )
    fields.update(kw)
    return NetworkConfig(**fields)


COSTS = BaselineCosts(
    insert_bytes_per_item=56_000.0,
    insert_ends_us_per_item=10.0,
    insert_cpu_us_per_item=20.0,
    reply_bytes_per_item=56_000.0,
    sample_cpu_us_per_item=90.0,
    local_sample_us_per_item=25.0,
    reply_decode_us_per_item=3.0,
    request_bytes=24.0,
    request_ends_us=30.0,
    update_bytes=410.0,
    update_ends_us=100.0,
    update_cpu_us=150.0,
)


def test_closed_form_by_hand():
    net = loopback()
    net_us = {
        b: message_breakdown(b, net).total_s * 1e6 for b in (24, 410, 16 * 56_000, 32 * 56_000)
    }
    got = predict(
        COSTS, net, placement="server", send_every=16, batch_size=32, inserts=3, samples=1
    )
    insert = 16 * (10 + 20) + net_us[16 * 56_000]
    sample = 30 + net_us[24] + 32 * (90 + 3) + net_us[32 * 56_000]
    assert got["insert_latency_us"] == pytest.approx(insert)
    assert got["sample_latency_us"] == pytest.approx(sample)
    assert got["replay_access_latency_us"] == pytest.approx((3 * insert + sample) / 4)
    assert got["priority_sampling_latency_us"] == pytest.approx(sample + 100 + 150 + net_us[410])
    local = predict(
        COSTS, net, placement="learner", send_every=16, batch_size=32, inserts=3, samples=1
    )
    assert local["sample_latency_us"] == pytest.approx(32 * 25)
    assert local["priority_sampling_latency_us"] == pytest.approx(32 * 25 + 150)
    assert local["insert_latency_us"] == pytest.approx(insert)  # inserts cross the network still


@settings(max_examples=40, deadline=None)
@given(
    send_every=st.integers(1, 256),
    batch=st.integers(1, 512),
    stack=st.sampled_from(["kernel_tcp", "kernel_bypass", "rdma"]),
)
def test_closed_form_invariants(send_every, batch, stack):
    net = loopback(stack=stack)
    kw = dict(batch_size=batch, inserts=1, samples=1)
    server = predict(COSTS, net, placement="server", send_every=send_every, **kw)
    bigger = predict(COSTS, net, placement="server", send_every=send_every + 1, **kw)
    local = predict(COSTS, net, placement="learner", send_every=send_every, **kw)
    # a bigger insert is never faster; a sample in the learner's memory never slower than over TCP
    assert bigger["insert_latency_us"] >= server["insert_latency_us"]
    assert local["sample_latency_us"] <= server["sample_latency_us"]
    # the end-to-end sample holds the sample itself
    assert server["priority_sampling_latency_us"] >= server["sample_latency_us"]
    for value in server.values():
        assert value > 0


def test_baseline_costs_of_the_bundled_capture():
    c = baseline_costs(TRACE)
    # every insert: 903,562 B of 16 transitions; every full sample: 1,807,312 B of 32
    assert c.insert_bytes_per_item == pytest.approx(903_562 / 16)
    assert c.reply_bytes_per_item == pytest.approx(1_807_312 / 32)
    assert (c.request_bytes, c.update_bytes) == (24.0, 410.0)
    assert c.local_sample_us_per_item <= c.sample_cpu_us_per_item * 10  # finite and of that order
    assert all(math.isfinite(v) and v >= 0 for v in vars(c).values())


def test_signed_error():
    assert signed_error(110.0, 100.0) == pytest.approx(0.10)
    assert signed_error(90.0, 100.0) == pytest.approx(-0.10)
    assert math.isnan(signed_error(1.0, 0.0))
    assert math.isnan(signed_error(math.nan, 1.0))


def test_bad_input_is_one_line(tmp_path):
    with pytest.raises(ArchsimError, match="messages.csv: not found"):
        load_messages(tmp_path)
    (tmp_path / "messages.csv").write_text("kind,src\ninsert,actor-0\n")
    with pytest.raises(ArchsimError, match="missing column"):
        load_messages(tmp_path)
    with pytest.raises(ArchsimError, match="meta.yaml"):
        measure_capture(tmp_path)


def test_transfer_medians_by_hand():
    from statistics import median

    from archsim.validate.apex import transfer_medians

    got = transfer_medians(load_messages(TRACE))
    assert list(got.index) == ["insert", "sample_request", "sample", "priority_update"]
    rows = [r for r in csv_rows("priority_update") if r["latency_us"]]
    by_hand = median(
        float(r["latency_us"])
        - float(r["serialize_us"])
        - float(r["decode_us"])
        - float(r["server_us"])
        for r in rows
    )
    assert got.loc["priority_update", "count"] == len(rows) == 11
    assert got.loc["priority_update", "transfer_us"] == pytest.approx(by_hand)
    assert got.loc["sample", "bytes"] == 1_807_312  # the empty replies (14 B) are left out
    assert (got["transfer_us"] > 0).all()  # the receiver never has the bytes before they are sent
