"""Issue 14 item 6: the replay latency breakdown and the nodes x placement x stack sweep charts, drawn
from real model output (perf.network's closed form; archsim simulate on the bundled Ape-X trace);
checked by their data (bars per panel, components that sum to the total), not pixels."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.report.network_charts import (
    COLUMNS,
    PLACEMENTS,
    STACKS,
    ReplayMessages,
    _draw_breakdown,
    _draw_sweep,
    _simulate,
    access_breakdown,
    add_queueing,
    breakdown_chart,
    breakdown_table,
    simulated_rows,
    sweep_chart,
)
from archsim.validate.apex import baseline_costs

TRACE = Path(__file__).resolve().parents[1] / "traces" / "apex-dqn-cpu"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def net40(stack: str):
    return load_hw("dgx1-v100", ["network.nic_bw_gbs=5", f"network.stack={stack}"]).network


def bundled_messages() -> ReplayMessages:
    """The bundled capture's messages: inserts of 16, batches of 32, the replay's measured work."""
    c = baseline_costs(TRACE)
    return ReplayMessages(
        insert_bytes=16 * c.insert_bytes_per_item,
        request_bytes=c.request_bytes,
        reply_bytes=32 * c.reply_bytes_per_item,
        insert_server_us=16 * c.insert_cpu_us_per_item,
        sample_server_us=32 * c.sample_cpu_us_per_item,
    )


def test_breakdown_chart_has_a_bar_per_row_and_component(tmp_path):
    table = breakdown_table(bundled_messages(), {s: net40(s) for s in STACKS})
    assert len(table) == 2 * len(PLACEMENTS) * len(STACKS)
    assert (table[list(COLUMNS)].sum(axis=1) - table["total_us"]).abs().max() < 1e-9
    fig = _draw_breakdown(table, "test")
    for ax, access in zip(fig.axes, ("insert", "sample"), strict=True):
        rows = table[table["access"] == access]
        drawn = [c for c in COLUMNS if (rows[c] > 0).any()]
        # one rectangle per row for every component that is non-zero somewhere in the panel
        assert len(ax.patches) == len(rows) * len(drawn)
        assert len(ax.get_xticklabels()) == len(rows)
    paths = breakdown_chart(table, tmp_path, "test")
    png = tmp_path / "network_latency_breakdown.png"
    assert png in paths and png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000


def test_learner_placement_samples_without_network():
    m = bundled_messages()
    parts = access_breakdown(m, net40("kernel_tcp"), "learner", "sample")
    assert parts["stack_us"] == parts["wire_us"] == parts["switch_us"] == 0
    assert parts["server_us"] == pytest.approx(m.sample_server_us)
    # its inserts cross the network like the server placement's
    assert access_breakdown(m, net40("rdma"), "learner", "insert") == access_breakdown(
        m, net40("rdma"), "server", "insert"
    )


@settings(max_examples=30, deadline=None)
@given(
    n_bytes=st.integers(1, 4_000_000),
    stack=st.sampled_from(STACKS),
    hops=st.integers(1, 4),
    access=st.sampled_from(["insert", "sample"]),
)
def test_in_network_never_crosses_more_network_than_a_server(n_bytes, stack, hops, access):
    net = load_hw("dgx1-v100", [f"network.stack={stack}", f"network.switch_hops={hops}"]).network
    m = ReplayMessages(n_bytes, 24, 2 * n_bytes, 100.0, 200.0)
    near = access_breakdown(m, net, "in-network", access)
    far = access_breakdown(m, net, "server", access)
    for part in ("stack_us", "wire_us", "switch_us"):
        assert 0 <= near[part] <= far[part] + 1e-12
    assert far["queueing_us"] == near["queueing_us"] == 0


def test_queueing_is_what_the_simulator_adds():
    table = breakdown_table(bundled_messages(), {"rdma": net40("rdma")})
    first = table.iloc[0]
    sim = pd.DataFrame(
        [
            {
                **first[["access", "placement", "stack"]].to_dict(),
                "latency_us": first["total_us"] + 50,
            }
        ]
    )
    out = add_queueing(table, sim)
    assert out.loc[0, "queueing_us"] == pytest.approx(50)
    assert out.loc[0, "total_us"] == pytest.approx(first["total_us"] + 50)
    assert (out.loc[1:, "queueing_us"] == 0).all()


def test_simulated_breakdown_and_sweep_from_real_runs(tmp_path):
    """Two points of archsim simulate on the bundled trace (this machine's CPU, 2 actor nodes)."""
    points = []
    for placement in ("server", "in-network"):
        knobs = ["--hw", "local", "--inference", "local", "--actors", "2", "--nodes", "2"]
        knobs += ["--replay-placement", placement, "--sim-seconds", "0.5"]
        m = _simulate(TRACE, tmp_path / placement, knobs, ["network.nic_bw_gbs=5"])
        rows = simulated_rows(m, placement, "kernel_tcp")
        assert [r["access"] for r in rows] == ["insert", "sample"]
        # the simulator's components sum to the latency it reports
        assert rows[0]["total_us"] == pytest.approx(m["replay_insert_latency_us"], rel=1e-9)
        points.append({"stack": "kernel_tcp", "replay_placement": placement} | m)
    table = pd.DataFrame(points)
    fig = _draw_sweep(table, [("priority_sampling_latency_us", "us"), ("frames_per_s", "f/s")], "t")
    # one panel per metric x stack, one line per placement
    assert len(fig.axes) == 2
    assert all(len(ax.get_lines()) == 2 for ax in fig.axes)
    paths = sweep_chart(table, tmp_path, "test")
    png = tmp_path / "network_sweep.png"
    assert png in paths and png.read_bytes()[:8] == PNG_MAGIC and png.stat().st_size > 10_000


def test_in_network_path_by_hand():
    """A 410 B priority-update-sized request over 2 switch hops to the replay in the path: one switch
    and two cables; the far end a DPDK server (bypass's share) or, with a service time, hardware."""
    from archsim.perf.network import SIGNAL_SPEED_M_PER_S, message_breakdown

    sets = ["network.nic_bw_gbs=5", "network.switch_hops=2", "network.stack=kernel_tcp"]
    net = load_hw("dgx1-v100", sets).network
    bypass = load_hw("dgx1-v100", [*sets[:2], "network.stack=kernel_bypass"]).network
    m = ReplayMessages(410, 410, 410, 100.0, 100.0)
    got = access_breakdown(m, net, "in-network", "insert")
    tcp, dpdk = message_breakdown(410, net), message_breakdown(410, bypass)
    assert got["stack_us"] == pytest.approx((tcp.stack_send_s + dpdk.stack_recv_s) * 1e6)
    assert got["wire_us"] == pytest.approx(tcp.wire_s * 1e6)
    cables_s = 2 * net.link_length_m / SIGNAL_SPEED_M_PER_S
    assert got["switch_us"] == pytest.approx((tcp.switch_s / 2 + cables_s) * 1e6)
    assert got["server_us"] == 100.0  # a software replay does the same work as a server
    hardware = load_hw("dgx1-v100", [*sets, "network.in_network_service_us=0.5"]).network
    got = access_breakdown(m, hardware, "in-network", "insert")
    assert got["stack_us"] == pytest.approx(tcp.stack_send_s * 1e6)
    assert got["server_us"] == 0.5


@pytest.mark.parametrize("stack", ["kernel_tcp", "kernel_bypass"])
@pytest.mark.parametrize("placement", ["server", "in-network"])
def test_closed_form_network_parts_equal_the_simulators(placement, stack):
    """One actor's inserts: the simulator's stack, wire and switch parts of an insert are the closed
    form's (they differ only in server work and queueing, which the closed form leaves apart)."""
    from archsim.sim.config import SimConfig
    from archsim.sim.replay_traffic import traffic_from_messages
    from archsim.sim.run import simulate
    from archsim.trace.format import load

    hw = load_hw("local", ["network.nic_bw_gbs=5", f"network.stack={stack}"])
    config = SimConfig(
        actors=1,
        replay_placement=placement,
        inference="local",
        loop="distributed",
        sim_seconds=0.5,
    )
    sim = simulate(load(TRACE), hw, config).network["insert_latency_breakdown_us"]
    traffic = traffic_from_messages(TRACE / "messages.csv")
    m = ReplayMessages(traffic.insert_bytes(traffic.insert_items), 24, 32, 0.0, 0.0)
    closed = access_breakdown(m, hw.network, placement, "insert")
    for part in ("stack", "wire", "switch"):
        assert closed[f"{part}_us"] == pytest.approx(sim[part], rel=1e-6, abs=1e-9)
