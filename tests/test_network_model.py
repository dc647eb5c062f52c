"""Network model (issue 14 item 2): hand-worked messages on 40GbE, invariants, schema refusals."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw import NetworkConfig, load_hw
from archsim.perf.network import (
    OBS_BYTES,
    MessageTime,
    frame_count,
    message_breakdown,
    message_seconds,
    polling_cores_per_node,
    stack_cpu_seconds,
    stack_seconds_per_message,
    wakeup_seconds,
    wire_bytes,
)
from archsim.sim.network_links import HOST, IN_PATH_HARDWARE, IN_PATH_SERVER, Paths


def net40(stack: str = "kernel_tcp", **kw) -> NetworkConfig:
    """40GbE (5 GB/s line rate), every field explicit so that the hand-worked values below hold."""
    fields = dict(
        nic_bw_gbs=5.0,
        latency_us=1.0,
        stack=stack,
        kernel_tcp_us_per_msg=7.0,
        kernel_bypass_us_per_msg=2.0,
        rdma_us_per_msg=0.8,
        kernel_tcp_ns_per_byte=0.11,
        kernel_tcp_us_per_segment=0.4,
        kernel_tcp_wakeup_us=2.8,
        mtu_bytes=1500,
        switch_hops=1,
        switch_latency_ns=500.0,
        switch_mode="store_and_forward",
        link_length_m=3.0,
    )
    fields.update(kw)
    return NetworkConfig(**fields)


def _us(x: float) -> float:
    return x * 1e6


def test_observation_kernel_tcp_by_hand():
    # 28,224 B / 1,460 B a segment (1,500 - 40) = 19.3 -> 20 frames, the last carrying 484 B.
    # Wire: 19 x 1,538 + (484 + 40 + 38) = 29,784 B / 5e9 B/s = 5.9568 us.
    # Switch: 0.5 us + one full frame (1,538 B = 0.3076 us). Propagation: 2 links x 3 m x 5 ns.
    # Stack work: fixed 7 us; streamed 19 x 0.4 + 28,224 B x 0.11 ns = 10.70464 us, of which the
    # first segment's share 10.70464 / 20 = 0.535232 us shows; the rest, 10.169408 us, is 5.084704
    # us an end, under the 5.9568 us of wire: hidden. Shown: 7.535232 us, half at each end, of which
    # the receiver's 2.8 us wake-up is shown apart: 3.767616 send, 0.967616 receive, 2.8 wake-up.
    m = message_breakdown(OBS_BYTES, net40("kernel_tcp"))
    assert OBS_BYTES == 28_224 and m.frames == 20
    assert wire_bytes(OBS_BYTES, net40()) == 29_784
    assert _us(m.wire_s) == pytest.approx(5.9568)
    assert _us(m.switch_s) == pytest.approx(0.8076)
    assert _us(m.propagation_s) == pytest.approx(0.03)
    assert _us(m.stack_send_s) == pytest.approx(3.767616)
    assert _us(m.stack_recv_s) == pytest.approx(0.967616)
    assert _us(m.wakeup_s) == pytest.approx(2.8)
    assert _us(stack_cpu_seconds(OBS_BYTES, net40())) == pytest.approx(17.70464)
    assert _us(m.total_s) == pytest.approx(14.329632)


def test_observation_kernel_bypass_by_hand():
    # UDP: 1,472 B a frame -> 20 frames, last 256 B; wire 19 x 1,538 + (256 + 28 + 38) = 29,544 B
    # = 5.9088 us; switch 0.5 + 1,538 B / 5e9 = 0.8076 us; stack 2 us; total 8.7464 us.
    m = message_breakdown(OBS_BYTES, net40("kernel_bypass"))
    assert m.frames == 20
    assert _us(m.wire_s) == pytest.approx(5.9088)
    assert _us(m.switch_s) == pytest.approx(0.8076)
    assert _us(m.stack_send_s + m.stack_recv_s) == pytest.approx(2.0)
    assert m.wakeup_s == 0.0  # the receiver polls: nothing to wake
    assert _us(m.total_s) == pytest.approx(8.7464)
    assert polling_cores_per_node(net40("kernel_bypass")) == 1


def test_observation_rdma_by_hand():
    # RoCEv2: 1,456 B a packet -> 20 packets, last 560 B; wire 19 x 1,538 + (560 + 44 + 38) = 29,864
    # B = 5.9728 us; switch 0.5 + 1,538 B / 5e9 = 0.8076 us; stack 0.8 us; total 7.6104 us.
    m = message_breakdown(OBS_BYTES, net40("rdma"))
    assert m.frames == 20
    assert _us(m.wire_s) == pytest.approx(5.9728)
    assert _us(m.total_s) == pytest.approx(7.6104)
    assert m.wakeup_s == 0.0  # completions are polled
    assert polling_cores_per_node(net40("rdma")) == 0
    assert polling_cores_per_node(net40("kernel_tcp")) == 0


def test_small_message_is_padded_frame_by_hand():
    # 64 B + 40 B headers = 104 B IP packet (over the 46 B minimum) + 38 = 142 B = 28.4 ns.
    # Total: stack 7 + 64 x 0.11 ns = 7.00704 us; wire 0.0284; switch 0.5284; propagation 0.03.
    m = message_breakdown(64, net40())
    assert m.frames == 1
    assert _us(m.wire_s) == pytest.approx(0.0284)
    assert _us(m.total_s) == pytest.approx(7.59384)
    # A 1 B message pads to the 46 B minimum payload: 46 + 38 = 84 B on the wire.
    assert wire_bytes(1, net40()) == 84


def test_one_mebibyte_by_hand():
    # 1,048,576 / 1,460 = 718.2 -> 719 frames, last 296 B; wire 718 x 1,538 + 374 = 1,104,658 B =
    # 220.9316 us; switch 0.8076. Stack: fixed 7; streamed 718 x 0.4 + 1,048,576 x 0.11e-3 =
    # 402.54336 us; first segment's share 402.54336 / 719 = 0.5598656 us; the rest is 200.9917472
    # us an end, hidden under the wire.
    m = message_breakdown(1 << 20, net40())
    assert m.frames == 719
    assert _us(m.wire_s) == pytest.approx(220.9316)
    assert _us(m.stack_send_s + m.stack_recv_s + m.wakeup_s) == pytest.approx(7.5598656)
    assert _us(m.total_s) == pytest.approx(7.5598656 + 220.9316 + 0.8076 + 0.03)


def test_one_mebibyte_on_400gbe_is_stack_bound_by_hand():
    # 50 GB/s: wire 1,104,658 B = 22.09316 us, under the 200.9917472 us an end of streamed stack
    # work: the stack shows 7 + 0.5598656 + 200.9917472 us; switch 0.5 + 1,538 B / 50e9 = 0.53076.
    m = message_breakdown(1 << 20, net40(nic_bw_gbs=50.0))
    assert _us(m.wire_s) == pytest.approx(22.09316)
    assert _us(m.total_s) == pytest.approx(7 + 0.5598656 + 200.9917472 + 0.53076 + 0.03)


def test_cut_through_adds_only_the_port_latency():
    m = message_breakdown(OBS_BYTES, net40(switch_mode="cut_through", switch_hops=3))
    assert _us(m.switch_s) == pytest.approx(1.5)
    assert _us(m.propagation_s) == pytest.approx(0.06)  # 4 links x 3 m


def test_full_frames_take_1538_bytes_at_the_line_rate():
    # docs/REFERENCE.md "Network": a 1,538 B frame every 307 ns on 40GbE.
    assert wire_bytes(1460, net40()) == 1538
    assert _us(message_breakdown(1460, net40()).wire_s) == pytest.approx(0.3076)


def test_legacy_functions_keep_their_meaning():
    net = net40("rdma")
    assert stack_seconds_per_message(net) == pytest.approx(0.8e-6)
    assert message_seconds(1000, net) == pytest.approx(1e-6 + 0.8e-6 + 1000 / 5e9)


sizes = st.floats(min_value=0, max_value=4 << 20, allow_nan=False)
stacks = st.sampled_from(["kernel_tcp", "kernel_bypass", "rdma"])


@settings(max_examples=150, deadline=None)
@given(n=sizes, stack=stacks, bw=st.floats(0.01, 100), more=st.floats(1.0, 10.0),
       hops=st.integers(0, 5), mode=st.sampled_from(["cut_through", "store_and_forward"]))  # fmt: skip
def test_more_bandwidth_and_fewer_hops_never_slower(n, stack, bw, more, hops, mode):
    base = net40(stack, nic_bw_gbs=bw, switch_hops=hops, switch_mode=mode)
    t = message_breakdown(n, base).total_s
    assert message_breakdown(n, net40(stack, nic_bw_gbs=bw * more, switch_hops=hops,
                                      switch_mode=mode)).total_s <= t * (1 + 1e-12)  # fmt: skip
    if hops:
        fewer = net40(stack, nic_bw_gbs=bw, switch_hops=hops - 1, switch_mode=mode)
        assert message_breakdown(n, fewer).total_s < t


@settings(max_examples=150, deadline=None)
@given(n=sizes, stack=stacks, cut=st.floats(0.0, 1.0))
def test_lower_stack_cost_never_slower_and_parts_sum(n, stack, cut):
    full = net40(stack)
    cheaper = net40(
        stack,
        kernel_tcp_us_per_msg=7.0 * cut,
        kernel_bypass_us_per_msg=2.0 * cut,
        rdma_us_per_msg=0.8 * cut,
        kernel_tcp_ns_per_byte=0.11 * cut,
        kernel_tcp_us_per_segment=0.4 * cut,
    )
    m = message_breakdown(n, full)
    assert message_breakdown(n, cheaper).total_s <= m.total_s * (1 + 1e-12)
    parts = (m.stack_send_s, m.stack_recv_s, m.wakeup_s, m.wire_s, m.switch_s, m.propagation_s)
    assert all(p >= 0 for p in parts)
    assert sum(parts) == pytest.approx(m.total_s)
    # Physics: the line cannot carry the payload faster than its rate, nor an end do its share of
    # the stack work faster than that work takes.
    assert m.wire_s * 5e9 >= n
    assert m.total_s >= stack_cpu_seconds(n, full) / 2
    assert m.frames == frame_count(n, full)


@settings(max_examples=100, deadline=None)
@given(n=st.integers(0, 1 << 20), extra=st.integers(1, 1 << 16), stack=stacks)
def test_bigger_message_never_faster(n, extra, stack):
    assert (
        message_breakdown(n + extra, net40(stack)).total_s
        >= message_breakdown(n, net40(stack)).total_s
    )


def test_set_stack_rdma_accepted():
    hw = load_hw("dgx1-v100", ["network.stack=rdma", "network.mtu_bytes=9000"])
    assert hw.network.stack == "rdma" and hw.network.mtu_bytes == 9000


@pytest.mark.parametrize(
    ("override", "names"),
    [
        ("network.stack=quic", "network.stack"),
        ("network.mtu_bytes=40", "network.mtu_bytes"),
        ("network.switch_mode=teleport", "network.switch_mode"),
        ("network.switch_hops=-1", "network.switch_hops"),
    ],
)
def test_bad_network_settings_refused_in_one_line(override, names):
    with pytest.raises(ArchsimError) as info:
        load_hw("dgx1-v100", [override])
    message = str(info.value)
    assert "\n" not in message and names in message


def test_network_doc_table_is_what_the_benchmark_prints(capsys):
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    trace = root / "traces" / "apex-dqn-cpu"
    if not (trace / "messages.csv").exists():
        pytest.skip("traces/apex-dqn-cpu/messages.csv is not in this checkout")
    spec = importlib.util.spec_from_file_location(
        "network_stack", root / "benchmarks" / "network_stack.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    bench.apex_table(str(trace))
    rows = capsys.readouterr().out.splitlines()
    page = (root / "docs" / "NETWORK.md").read_text()
    assert len(rows) == 9  # header, rule, the observation and 6 message kinds
    for row in rows:
        assert row in page


@settings(max_examples=100, deadline=None)
@given(n=sizes, stack=stacks, hops=st.integers(0, 5))
def test_cut_through_never_slower_than_store_and_forward(n, stack, hops):
    saf = message_breakdown(n, net40(stack, switch_hops=hops, switch_mode="store_and_forward"))
    ct = message_breakdown(n, net40(stack, switch_hops=hops, switch_mode="cut_through"))
    assert ct.total_s <= saf.total_s
    assert ct.total_s == pytest.approx(saf.total_s - (saf.switch_s - ct.switch_s))


def test_wakeup_is_part_of_the_receivers_half_by_hand():
    # 64 B under kernel TCP: stack 7 + 64 x 0.11 ns = 7.00704 us, 3.50352 an end; the receiver's
    # 2.8 us wake-up leaves it 0.70352. A 4 us per-message cost caps the wake-up at its 2 us half.
    m = message_breakdown(64, net40())
    assert _us(m.stack_send_s) == pytest.approx(3.50352)
    assert _us(m.stack_recv_s) == pytest.approx(0.70352)
    assert _us(m.wakeup_s) == pytest.approx(2.8)
    assert _us(wakeup_seconds(net40(kernel_tcp_us_per_msg=4.0))) == pytest.approx(2.0)
    assert wakeup_seconds(net40("kernel_bypass")) == wakeup_seconds(net40("rdma")) == 0.0
    # the wake-up is a share of the measured per-message CPU, not more CPU
    assert _us(stack_cpu_seconds(64, net40())) == pytest.approx(7.00704)


def test_simulator_path_delays_a_host_receiver_by_its_wakeup():
    # Host to host: the receiver's end is its stack share and its wake-up, the total the closed
    # form's. To a poll-mode replay server in the path (bypass end): no wake-up; to hardware: none.
    net = net40()
    m = message_breakdown(OBS_BYTES, net)
    host = Paths(net).parts(OBS_BYTES, HOST, HOST)
    assert host.stack_recv_s == pytest.approx(m.stack_recv_s + m.wakeup_s)
    assert host.total_s == pytest.approx(m.total_s)
    assert host.recv_cpu_s == pytest.approx(stack_cpu_seconds(OBS_BYTES, net) / 2)  # CPU unchanged
    to_server = Paths(net).parts(OBS_BYTES, HOST, IN_PATH_SERVER)
    assert _us(to_server.stack_recv_s) == pytest.approx(1.0)  # bypass's 2 us, half an end
    assert Paths(net).parts(OBS_BYTES, HOST, IN_PATH_HARDWARE).stack_recv_s == 0.0
    # a host receiving from the in-path server is woken as from a host
    back = Paths(net).parts(OBS_BYTES, IN_PATH_SERVER, HOST)
    assert back.stack_recv_s == pytest.approx(host.stack_recv_s)
    # the breakdowns' wake-up: wherever a host receives under kernel TCP, nowhere else
    assert host.wakeup_s == back.wakeup_s == pytest.approx(2.8e-6)
    assert to_server.wakeup_s == 0.0
    assert Paths(net40("kernel_bypass")).parts(OBS_BYTES, HOST, HOST).wakeup_s == 0.0


def test_chart_breakdown_shows_the_wakeup_per_receiving_host():
    # Closed form of docs/NETWORK.md's charts: an insert to a replay server wakes that host once
    # (2.8 us), a sample (request + batch) wakes the server and then the learner (5.6 us); with the
    # replay in the network path, its poll-mode end is not woken, only the learner on the reply.
    from archsim.report.network_charts import ReplayMessages, access_breakdown

    msgs = ReplayMessages(insert_bytes=OBS_BYTES, request_bytes=24, reply_bytes=OBS_BYTES,
                          insert_server_us=100.0, sample_server_us=200.0)  # fmt: skip
    tcp, bypass = net40(), net40("kernel_bypass")
    assert access_breakdown(msgs, tcp, "server", "insert")["wakeup_us"] == pytest.approx(2.8)
    assert access_breakdown(msgs, tcp, "server", "sample")["wakeup_us"] == pytest.approx(5.6)
    assert access_breakdown(msgs, tcp, "in-network", "insert")["wakeup_us"] == 0.0
    assert access_breakdown(msgs, tcp, "in-network", "sample")["wakeup_us"] == pytest.approx(2.8)
    assert access_breakdown(msgs, bypass, "server", "sample")["wakeup_us"] == 0.0
    # the wake-up is moved out of "stack", not added: stack + wakeup is the stack time shown
    m = message_breakdown(OBS_BYTES, tcp)
    insert = access_breakdown(msgs, tcp, "server", "insert")
    assert insert["stack_us"] + insert["wakeup_us"] == pytest.approx(
        _us(m.stack_send_s + m.stack_recv_s + m.wakeup_s)
    )


@settings(max_examples=150, deadline=None)
@given(n=sizes, bw=st.floats(0.01, 100), hops=st.integers(0, 5),
       wake=st.floats(0.0, 50.0), mode=st.sampled_from(["cut_through", "store_and_forward"]))  # fmt: skip
def test_bypass_never_slower_than_kernel_tcp(n, bw, hops, wake, mode):
    # Bypass's per-message cost (2 us) is under kernel TCP's (7 us), its frames carry more payload
    # under a smaller header and it has no per-byte copy: never slower, whatever the wake-up.
    kw = dict(nic_bw_gbs=bw, switch_hops=hops, switch_mode=mode, kernel_tcp_wakeup_us=wake)
    tcp = message_breakdown(n, net40("kernel_tcp", **kw))
    byp = message_breakdown(n, net40("kernel_bypass", **kw))
    assert byp.total_s <= tcp.total_s * (1 + 1e-12)
    assert isinstance(tcp, MessageTime) and 0 <= tcp.wakeup_s <= 3.5e-6  # at most the 7 us's half


def test_wakeup_pingpong_measures_both_modes():
    # A short real ping-pong over loopback (no timing asserted): both modes deliver every round trip
    # and report ordered percentiles; the blocking ends' CPU is positive.
    import importlib.util
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    spec = importlib.util.spec_from_file_location(
        "network_wakeup", root / "benchmarks" / "network_wakeup.py"
    )
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    for poll in (False, True):
        row = bench.run_pingpong([], [], "127.0.0.1", poll=poll, iters=50)
        assert 0 < row["one_way_us_p10"] <= row["one_way_us_median"] <= row["one_way_us_p90"]
        assert row["client_cpu_us_per_round_trip"] > 0 and row["server_cpu_us_per_round_trip"] > 0


@pytest.mark.parametrize("placement", ["server", "in-network"])
def test_simulators_wakeup_breakdown_is_the_closed_forms(placement):
    # One actor on the bundled Ape-X trace under kernel TCP: the simulator's insert and sample
    # breakdowns carry the wake-up of each receiving host (2.8 us an insert to a server host, none to
    # the poll-mode replay in the path; a sample wakes the server and the learner, or the learner
    # only), as the closed form has it, and the wake-up is not also left in "stack".
    from pathlib import Path

    from archsim.report.network_charts import ReplayMessages, access_breakdown
    from archsim.sim.config import SimConfig
    from archsim.sim.replay_traffic import traffic_from_messages
    from archsim.sim.run import simulate
    from archsim.trace.format import load

    trace = Path(__file__).resolve().parents[1] / "traces" / "apex-dqn-cpu"
    if not (trace / "messages.csv").exists():
        pytest.skip("traces/apex-dqn-cpu/messages.csv is not in this checkout")
    hw = load_hw("local", ["network.nic_bw_gbs=5", "network.stack=kernel_tcp"])
    config = SimConfig(
        actors=1, replay_placement=placement, inference="local", loop="distributed", sim_seconds=0.5
    )
    net = simulate(load(trace), hw, config).network
    traffic = traffic_from_messages(trace / "messages.csv")
    m = ReplayMessages(traffic.insert_bytes(traffic.insert_items), 24, 32, 0.0, 0.0)
    sim = net["insert_latency_breakdown_us"]
    closed = access_breakdown(m, hw.network, placement, "insert")
    assert sim["wakeup"] == pytest.approx(closed["wakeup_us"], abs=1e-9)
    assert sim["stack"] == pytest.approx(closed["stack_us"], rel=1e-6)
    assert sim["wakeup"] == pytest.approx(2.8 if placement == "server" else 0.0)
    sample = net.get("sample_latency_breakdown_us")
    if sample:  # wake-ups do not depend on the sizes
        assert sample["wakeup"] == pytest.approx(5.6 if placement == "server" else 2.8)
