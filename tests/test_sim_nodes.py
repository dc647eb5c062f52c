"""Nodes, NIC queues and replay placements (issue 14 item 3): hand-worked latencies of one
uncontended insert and sample, the node split and polling cores, invariants with hypothesis, the
real Ape-X trace end to end, and bad input through the CLI (exit 2, one line)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.hw.presets import load_hw
from archsim.perf.network import message_breakdown
from archsim.sim.config import SimConfig
from archsim.sim.nodes import node_of_actors, place_node_threads
from archsim.sim.replay_traffic import ReplayTraffic, trace_replay_traffic
from archsim.sim.run import simulate_system
from tests.conftest import error_line
from tests.test_sim_support import machine, service_times

ROOT = Path(__file__).resolve().parents[1]
APEX = ROOT / "traces" / "apex-dqn-cpu"
DQN = ROOT / "traces" / "dqn-pong-cpu"
OBS = 84 * 84 * 4  # one ALE observation, 28,224 B
INSERT_SERVER_S = 10e-6
SAMPLE_SERVER_S = 20e-6
STACKS = ("kernel_tcp", "kernel_bypass", "rdma")


def network(stack: str = "kernel_tcp", *extra: str):
    """dgx1-v100's network section at 40GbE (5 GB/s) with ``stack``."""
    return load_hw("dgx1-v100", ["network.nic_bw_gbs=5", f"network.stack={stack}", *extra]).network


def traffic(**changes) -> ReplayTraffic:
    """One observation per insert and per sampled transition, small control messages."""
    base = dict(
        insert_bytes_per_item=OBS,
        insert_items=1,
        sample_request_bytes=16,
        sample_bytes_per_item=OBS,
        priority_bytes_per_item=12,
        insert_server_s_per_item=INSERT_SERVER_S,
        sample_server_s=SAMPLE_SERVER_S,
        priority_server_s=5e-6,
    )
    return ReplayTraffic(**{**base, **changes})


def run(net, placement="server", nodes=1, actors=1, threads=4, learner_gpu_s=1.0, **knobs):
    """One actor stepping every 250 us; the learner samples once at t=0 and then trains past the
    window (learner_gpu_s), so every insert after the first sample meets empty queues."""
    sized = knobs.pop("traffic", traffic())
    batch = knobs.pop("batch", 1)
    config = SimConfig(
        actors=actors,
        inference="local",
        nodes=nodes,
        replay_placement=placement,
        replay_ratio=None,
        sim_seconds=knobs.pop("sim_seconds", 0.05),
        **knobs,
    )
    times = service_times(actor_step_s=(250e-6,), learner_gpu_s=learner_gpu_s)
    return simulate_system(
        times,
        machine(threads=threads),
        config,
        learner_batch=batch,
        network=net,
        traffic=sized,
    )


@pytest.mark.parametrize("stack", STACKS)
def test_uncontended_insert_is_the_closed_form_plus_server_time(stack):
    net = network(stack)
    result = run(net)
    expected_s = message_breakdown(OBS, net).total_s + INSERT_SERVER_S
    assert result.metrics["replay_insert_latency_us"] == pytest.approx(expected_s * 1e6, rel=1e-9)
    # the sample: request there, server work, the batch of one observation back
    sample_s = (
        message_breakdown(16, net).total_s + SAMPLE_SERVER_S + message_breakdown(OBS, net).total_s
    )
    assert result.metrics["replay_sample_latency_us"] == pytest.approx(sample_s * 1e6, rel=1e-9)


def test_insert_by_hand_under_kernel_bypass_server_and_in_network():
    """28,224 B over 40GbE, UDP payload 1,472 B a frame: 20 frames, 19 x 1,538 + (256 + 28 + 38) =
    29,544 wire bytes = 5.9088 us; bypass stack 2 us (1 each end); one store-and-forward switch
    0.5 us + one 1,538 B frame (0.3076 us); two 3 m cables 30 ns. Server: + 10 us of work."""
    net = network("kernel_bypass")
    server = run(net, "server").metrics["replay_insert_latency_us"]
    assert server == pytest.approx(2 + 5.9088 + 0.8076 + 0.030 + 10, abs=1e-6)
    # a software server in the path: the same 10 us of work and its 1 us bypass end, but no switch
    # hop and one cable to it
    in_network = run(net, "in-network").metrics["replay_insert_latency_us"]
    assert in_network == pytest.approx(1 + 5.9088 + 0.015 + 1 + 10, abs=1e-6)
    # a hardware replay (switch pipeline) of 1 us a request: no stack at its end, its own service
    hardware = run(network("kernel_bypass", "network.in_network_service_us=1"), "in-network")
    assert hardware.metrics["replay_insert_latency_us"] == pytest.approx(
        1 + 5.9088 + 0.015 + 1, abs=1e-6
    )


def test_insert_by_hand_under_kernel_tcp_server_and_in_network():
    """28,224 B, TCP payload 1,460 B: 20 segments, 19 x 1,538 + (484 + 40 + 38) = 29,784 wire bytes
    = 5.9568 us. dgx1-v100's 10 us a message; streamed work 19 x 0.38 + 28,224 x 0.105e-3 =
    10.18352 us, of which one segment's (0.509176 us) shows and the rest hides behind the wire:
    each host end shows (10 + 0.509176) / 2 = 5.254588 us. The in-path server ends in DPDK poll
    mode (bypass, 2 / 2 = 1 us) and is one switch hop and one cable closer."""
    net = network("kernel_tcp")
    server = run(net, "server").metrics["replay_insert_latency_us"]
    assert server == pytest.approx(2 * 5.254588 + 5.9568 + 0.5 + 0.3076 + 0.030 + 10, abs=1e-6)
    in_network = run(net, "in-network").metrics["replay_insert_latency_us"]
    assert in_network == pytest.approx(5.254588 + 5.9568 + 0.015 + 1 + 10, abs=1e-6)


def test_each_end_of_a_message_to_the_replay_in_the_path():
    """One 24 B sample request on dgx1-v100 (TCP 10 us a message + 24 x 0.105 ns copy = 10.00252
    us, one segment, so all of it shows; bypass 2 us): a host end shows half its stack's work; an in-path server ends in bypass's 1 us where that is
    no costlier than TCP, else in the hosts' stack; a hardware replay ends in nothing."""
    from archsim.sim.network_links import HOST, IN_PATH_HARDWARE, IN_PATH_SERVER, Paths

    tcp = Paths(network("kernel_tcp"))
    assert tcp.parts(24, HOST, HOST).stack_recv_s == pytest.approx(5.00126e-6)
    to_server = tcp.parts(24, HOST, IN_PATH_SERVER)
    assert (to_server.stack_send_s, to_server.stack_recv_s) == pytest.approx((5.00126e-6, 1e-6))
    assert to_server.recv_cpu_s == pytest.approx(1e-6) and to_server.switch_s == 0.0
    assert tcp.parts(24, IN_PATH_HARDWARE, HOST).send_cpu_s == 0.0
    costly = Paths(network("kernel_tcp", "network.kernel_bypass_us_per_msg=12"))
    assert costly.parts(24, HOST, IN_PATH_SERVER).stack_recv_s == pytest.approx(5.00126e-6)


def test_learner_placement_on_one_node_has_no_network():
    result = run(network(), "learner")
    assert result.network is None
    for name in ("replay_access_latency_us", "network_bytes_per_s", "nic_util_max"):
        assert result.metrics[name] == 0.0


def test_learner_placement_across_nodes_sends_only_the_remote_actors_inserts():
    result = run(network(), "learner", nodes=2, actors=2)
    links = result.network["links"]
    assert links["node 1"]["tx_messages"] > 0  # actor 1's inserts to the learner's node
    assert links["node 0"]["tx_messages"] == 0  # the learner samples locally, actor 0 is local
    assert links["node 0"]["rx_messages"] == links["node 1"]["tx_messages"]


def test_actors_split_evenly_and_learner_on_node_zero():
    assert node_of_actors(7, 3).tolist() == [0, 0, 0, 1, 1, 2, 2]
    layout, polling = place_node_threads(1, 4, 2, 4, 4, 1, 4, 1.0, 1.0, polling_cores=1)
    # node 0: cores 0-3 (learner on 0, actors on 1 and 2, core 3 polls); node 1: cores 4-7
    assert layout.placement.tolist() == [0, 1, 2, 4, 5]
    assert polling.tolist() == [3, 7]
    with pytest.raises(ArchsimError, match="--nodes"):
        node_of_actors(2, 3)


def test_kernel_bypass_polling_core_is_busy_the_whole_window():
    tcp = run(network("kernel_tcp"), nodes=2, actors=2)
    bypass = run(network("kernel_bypass"), nodes=2, actors=2)
    threads = 2 * 4
    # two polling cores busy all the time on top of what the actors and learner do
    extra = bypass.metrics["cpu_util"] - tcp.metrics["cpu_util"]
    assert extra > 2 / threads - 0.01


def test_nic_utilization_is_wire_time_over_the_window():
    net = network("rdma")
    result = run(net, sim_seconds=0.1)
    node0 = result.network["links"]["node 0"]
    wire_s = message_breakdown(OBS, net).wire_s
    assert node0["tx_util"] == pytest.approx(node0["tx_messages"] * wire_s / 0.1, rel=0.02)
    assert 0 < result.metrics["nic_util_max"] <= 1


@settings(max_examples=12, deadline=None, derandomize=True)
@given(
    actors=st.integers(2, 5),
    steps_us=st.lists(st.floats(100, 800), min_size=1, max_size=4),
    stack=st.sampled_from(STACKS),
)
def test_more_nodes_never_lower_frames_per_s(actors, steps_us, stack):
    """At fixed actors, on 2-thread nodes, the network far from its limit (40GbE, replay server)."""
    config = dict(actors=actors, inference="local", replay_ratio=None, sim_seconds=0.05)
    times = service_times(actor_step_s=np.array(steps_us) * 1e-6, learner_gpu_s=1e-3)
    net = network(stack)
    frames = []
    for nodes in range(1, actors + 1):
        cfg = SimConfig(nodes=nodes, replay_placement="server", **config)
        result = simulate_system(
            times, machine(threads=3), cfg, 1, network=net, traffic=traffic(insert_items=4)
        )
        frames.append(result.metrics["frames_per_s"])
    assert all(b >= a for a, b in zip(frames, frames[1:], strict=False)), frames


@settings(max_examples=15, deadline=None, derandomize=True)
@given(
    cheap_us=st.floats(0.1, 20),
    extra_us=st.floats(0, 20),
    items=st.integers(1, 64),
    placement=st.sampled_from(["server", "in-network"]),
)
def test_a_faster_stack_never_raises_latency(cheap_us, extra_us, items, placement):
    latency = {}
    for name, per_msg in (("fast", cheap_us), ("slow", cheap_us + extra_us)):
        net = network("kernel_tcp", f"network.kernel_tcp_us_per_msg={per_msg}")
        result = run(net, placement, traffic=traffic(insert_items=items), sim_seconds=0.2)
        latency[name] = result.metrics
    for metric in ("replay_insert_latency_us", "replay_sample_latency_us"):
        assert latency["fast"][metric] <= latency["slow"][metric] + 1e-9


@settings(max_examples=20, deadline=None, derandomize=True)
@given(
    service_us=st.floats(0.1, 200),
    batch=st.integers(1, 64),
    hops=st.integers(1, 3),
    stack=st.sampled_from(STACKS),
    mode=st.sampled_from(["cut_through", "store_and_forward"]),
    bypass_us=st.floats(0.1, 30),
    hardware=st.booleans(),
)
def test_in_network_sampling_never_slower_than_a_server_with_equal_service(
    service_us, batch, hops, stack, mode, bypass_us, hardware
):
    """Equal work per request at both replays (the trace's work at a software server in the path,
    or a hardware replay given the same service time); the learner alone on the replay (the actor's
    insert comes after the window), sampling, training 1 ms and sending priorities in a loop. Any
    bypass cost, above kernel TCP's or below: the in-path server's end never costs more."""
    service_s = service_us * 1e-6
    equal = traffic(
        insert_items=10**6,
        sample_server_s=service_s,
        priority_server_s=service_s,
    )
    extra = [f"network.switch_hops={hops}", f"network.kernel_bypass_us_per_msg={bypass_us}"]
    if hardware:
        extra.append(f"network.in_network_service_us={service_us}")
    net = network(stack, *extra, f"network.switch_mode={mode}")
    metrics = {}
    for placement in ("server", "in-network"):
        result = run(net, placement, learner_gpu_s=1e-3, traffic=equal, batch=batch)
        metrics[placement] = result.metrics
    for metric in ("replay_sample_latency_us", "priority_sampling_latency_us"):
        assert metrics["in-network"][metric] <= metrics["server"][metric] + 1e-9


def test_apex_trace_traffic_is_sized_from_its_message_log():
    if not (APEX / "messages.csv").exists():
        pytest.skip("traces/apex-dqn-cpu has no messages.csv in this checkout")
    from archsim.trace import load

    sized = trace_replay_traffic(load(APEX), SimConfig(nodes=2, actors=2, inference="local"))
    # messages.csv: inserts of 16 transitions, 903,562 B; samples of 32, 1,807,312 B
    assert sized.insert_items == 16
    assert sized.insert_bytes_per_item == pytest.approx(903_562 / 16, rel=1e-3)
    assert sized.sample_bytes_per_item == pytest.approx(1_807_312 / 32, rel=1e-3)
    assert sized.sample_server_s > 0


def _cli(*args: str, out: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "archsim", "simulate", *args, "--out", str(out)],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )


def test_apex_trace_end_to_end_through_the_cli(tmp_path):
    out = tmp_path / "run"
    done = _cli(
        str(APEX),
        "--hw",
        "dgx1-v100",
        "--inference",
        "local",
        "--actors",
        "4",
        "--nodes",
        "2",
        "--replay-placement",
        "server",
        "--set",
        "network.stack=kernel_bypass",
        "--sim-seconds",
        "0.3",
        "--timeline",
        out=out,
    )
    assert done.returncode == 0, done.stderr
    record = json.loads((out / "metrics.json").read_text())
    assert record["nodes"] == 2 and record["replay_placement"] == "server"
    assert record["replay_access_latency_us"] > 0
    assert (
        record["priority_sampling_latency_us"]
        > record["network"]["sample_latency_breakdown_us"]["wire"]
    )
    assert set(record["network"]["links"]) == {"node 0", "node 1", "replay server"}
    events = json.loads((out / "timeline.json").read_text())["traceEvents"]
    flows = {e["name"] for e in events if e["ph"] == "s"}
    assert {"insert", "sample_request", "sample", "priority_update"} <= flows


def _refused(capsys, *args: str, out: Path) -> str:
    """The one stderr line of ``archsim simulate ARGS --out OUT`` run in this process (exit 2; the
    real CLI runs in test_apex_trace_end_to_end_through_the_cli)."""
    from archsim.cli import main

    try:
        code = main(["simulate", *args, "--out", str(out)])
    except SystemExit as exc:  # argparse's usage errors
        code = int(exc.code or 0)
    assert code == 2
    return error_line(capsys)


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["--nodes", "0"], "--nodes"),
        (["--nodes", "3", "--actors", "2"], "--nodes"),
        (["--replay-placement", "switch"], "--replay-placement"),
        (["--set", "network.stack=dpdk", "--nodes", "2", "--actors", "2"], "network.stack"),
        (["--replay-placement", "server", "--inference", "local"], "no replay traffic"),
    ],
)
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, flag):
    out = tmp_path / "run"
    line = _refused(capsys, str(DQN), "--hw", "dgx1-v100", *args, out=out)
    assert flag in line and "Traceback" not in line
    assert not out.exists()


def test_in_network_replay_smaller_than_the_traces_is_refused(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["--hw", "dgx1-v100", "--inference", "local", "--actors", "2"]
    args += ["--replay-placement", "in-network"]
    # the Ape-X trace's replay holds 4,096 transitions (workload.settings.replay_capacity)
    args += ["--set", "network.in_network_capacity_transitions=1000"]
    assert "4096" in _refused(capsys, str(APEX), *args, out=out)
    assert not out.exists()


@pytest.mark.parametrize("placement", ["learner", "server", "in-network"])
def test_fast_and_plain_engines_agree_with_a_network(placement):
    """4 actors on 2 nodes of 2 threads (actors share threads with the learner and each other)."""
    metrics = []
    for engine in ("fast", "simpy"):
        config = SimConfig(
            actors=4,
            inference="local",
            nodes=2,
            replay_placement=placement,
            replay_ratio=None,
            sim_seconds=0.05,
            engine=engine,
        )
        times = service_times(actor_step_s=(200e-6, 300e-6, 450e-6), learner_gpu_s=2e-3)
        result = simulate_system(
            times, machine(threads=2), config, 8, network=network(), traffic=traffic(insert_items=4)
        )
        metrics.append(result.metrics)
    fast, plain = metrics
    for name in ("frames_per_s", "replay_access_latency_us", "priority_sampling_latency_us"):
        assert fast[name] == pytest.approx(plain[name], rel=1e-12), name
    assert fast["replay_access_latency_us"] > 0


def test_every_node_draws_its_cpu_power():
    """machine(): one 40-135 W socket a node; two nodes idle at no less than twice one's idle."""
    one = run(network(), nodes=1, actors=2).metrics["cpu_power_w"]
    two = run(network(), nodes=2, actors=2).metrics["cpu_power_w"]
    assert one >= 40 and two >= 2 * 40
    assert two > one
