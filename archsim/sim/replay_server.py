"""The prioritized replay across nodes (issue 14 item 3): where it lives (``--replay-placement``),
the messages of its protocol, and the latencies a requester sees.

Placements: ``learner`` (the replay is a thread of the learner process on node 0: actors of other
nodes send their inserts over the network, the learner samples locally), ``server`` (its own node:
inserts, sample requests, sampled transitions and priority updates all cross the network) and
``in-network`` (a replay server in the network path between actor and learner nodes, one hop closer
to both sides, doing the same replay work as a server with a poll-mode stack at its end: Furukawa and
Matsutani, PDP 2022, a DPDK-based replay server; archsim.sim.network_links). Setting
``network.in_network_service_us`` makes it a hardware replay (switch pipeline / FPGA) with that
service time per request and no host stack.

The protocol, as the Ape-X runtime (workloads/apex) runs it: an actor sends an insert of
``insert_items`` transitions (fire and forget); the learner sends a sample request, the replay draws
a prioritized batch and sends back indices, importance weights and transitions, the learner trains
and sends the batch's new priorities. The replay is one FIFO server (its lock): each request holds it
for its work (the trace's recorded server CPU scaled to the target CPU, at every placement, or a
hardware replay's ``in_network_service_us``) plus the receive stack work beyond what the wire hides
and the reply's send stack work (none on a hardware replay). A sender's stack work
runs on its own hardware thread (``archsim.perf.network.stack_cpu_seconds``, half per end).

Latencies, each counted for requests that start inside the window and whose end the run reaches (a
request still in flight when the run stops is not counted, so a mean over a saturated replay leans
low): an insert's from its send to the replay having
applied it; a sample's from the request's send to the learner having the batch;
``priority_sampling_latency_us`` is a sample's plus its priority update's (send to applied), the
learner's training between them left out.
"""

from __future__ import annotations

import numpy as np

from archsim.errors import ArchsimError
from archsim.perf.network import polling_cores_per_node
from archsim.sim.network_links import (
    HOST,
    IN_PATH_HARDWARE,
    IN_PATH_SERVER,
    Endpoint,
    Link,
    Paths,
    transfer,
)
from archsim.sim.nodes import node_of_thread
from archsim.sim.replay_traffic import ReplayTraffic

# Perfetto process ids of the timeline's other nodes (node 0 is archsim.sim.timeline.NODE_PID)
NODE_PID0, REPLAY_PID = 100, 90


def network_in_use(config) -> bool:
    """True when replay traffic crosses a network: more than one node or a remote replay."""
    return config.nodes > 1 or config.replay_placement != "learner"


def check_network_knobs(config, hw_network) -> None:
    """What the node/network model does not cover, refused in one line before any work."""
    if not network_in_use(config):
        return
    flags = f"--nodes {config.nodes} --replay-placement {config.replay_placement}"
    if config.inference != "local":
        raise ArchsimError(
            f"{flags}: modelled for Ape-X-style local inference (actors insert into the replay); "
            "use --inference local (central inference's requests are not routed through NICs)"
        )
    if config.cpu_sched == "shared":
        raise ArchsimError(f"{flags}: --cpu-sched shared is not modelled across nodes; use pinned")
    if config.replay_placement == "in-network" and hw_network.switch_hops < 1:
        raise ArchsimError(
            "--replay-placement in-network: network.switch_hops is 0 (nodes cabled directly), "
            "there is no switch to hold the replay"
        )


def polling_cores(config, hw_network) -> int:
    """Cores each node gives to a polling stack (kernel bypass), when the network is in use."""
    return polling_cores_per_node(hw_network) if network_in_use(config) else 0


class _Stat:
    """Sum, count and per-component sums of one kind of latency."""

    __slots__ = ("n", "total", "parts")

    def __init__(self) -> None:
        self.n = 0
        self.total = 0.0
        self.parts: dict[str, float] = {}

    def add(self, total_s: float, **parts: float) -> None:
        self.n += 1
        self.total += total_s
        for name, value in parts.items():
            self.parts[name] = self.parts.get(name, 0.0) + value

    def mean_us(self) -> float:
        return 1e6 * self.total / self.n if self.n else 0.0

    def breakdown_us(self) -> dict[str, float]:
        if not self.n:
            return {}
        out = {name: 1e6 * value / self.n for name, value in self.parts.items()}
        out["queueing"] = max(0.0, self.mean_us() - sum(out.values()))
        return out


class ReplayNetwork:
    """Nodes' NICs, the replay's place and server, and the protocol's messages for one run."""

    def __init__(self, env, config, hw_network, traffic: ReplayTraffic, cpu_speed_rel: float, end):
        self.env = env
        self.config = config
        self.traffic = traffic
        self.placement = config.replay_placement
        self.paths = Paths(hw_network)
        self.end = end
        self.speed_rel = cpu_speed_rel  # the hardware config's thread speed (stack work is target)
        self.timeline = None
        self.service_us = None  # a hardware in-network replay's service time per request
        self.nodes = [
            Endpoint(f"node {k}", HOST, Link(f"node {k} up", end), Link(f"node {k} down", end))
            for k in range(config.nodes)
        ]
        if self.placement == "server":
            self.replay = Endpoint(
                "replay server", HOST, Link("replay up", end), Link("replay down", end)
            )
        elif self.placement == "in-network":
            # None: a software server in the path doing the trace's replay work; a figure: hardware
            self.service_us = hw_network.in_network_service_us
            kind = IN_PATH_SERVER if self.service_us is None else IN_PATH_HARDWARE
            self.replay = Endpoint("in-network replay", kind, None, None)
        else:
            self.replay = self.nodes[0]
        # the timeline track of the replay's work (learner placement: a thread of the learner)
        self.replay_track = {"learner": "replay (learner process)"}.get(
            self.placement, self.replay.name
        )
        self.service_start = 0.0  # when the replay began its latest request (timeline)
        self.replay_free_at = 0.0
        self.replay_busy_s = 0.0
        self.inserts, self.samples, self.priority = _Stat(), _Stat(), _Stat()
        self.sample_rtt_s = 0.0  # the learner's last sample, for its priority update
        self.pending_items = np.zeros(config.actors, dtype=int)

    # --- the replay's FIFO server ------------------------------------------------------------

    def _work_s(self, capture_s: float) -> float:
        """A request's work at the replay: the recorded CPU on the target's thread, or a hardware
        in-network replay's service time."""
        if self.service_us is not None:
            return self.service_us * 1e-6
        return capture_s / self.speed_rel

    def _serve(self, delivered: float, pre_s: float, work_s: float, post_s: float = 0.0) -> float:
        """The replay takes a request delivered at ``delivered``: its receive work ``pre_s`` ran while
        the bytes arrived (it ends at ``delivered``), then ``work_s``, then a reply's send work
        ``post_s`` (busy after the returned time). Returns when the work is done."""
        start = max(delivered - pre_s, self.replay_free_at)
        self.service_start = start
        done = start + pre_s + work_s
        self.replay_free_at = done + post_s
        s, f = min(start, self.end), min(self.replay_free_at, self.end)
        if f > s:
            self.replay_busy_s += f - s
        return done

    def _local(self, node: int) -> bool:
        return self.placement == "learner" and node == 0

    # --- actors ------------------------------------------------------------------------------

    def actor_step(self, system, actor: int, node: int, thread: int, track: str, items: int):
        """simpy generator, after an actor's env step: every ``insert_items`` transitions it sends
        them to the replay (its thread does the send stack work; the message goes on alone)."""
        self.pending_items[actor] += items
        if self.pending_items[actor] < self.traffic.insert_items:
            return
        n_items = int(self.pending_items[actor])
        self.pending_items[actor] = 0
        work_s = self._work_s(self.traffic.insert_server_s_per_item * n_items)
        now = self.env.now
        if self._local(node):
            done = self._serve(now, 0.0, work_s)
            if now < self.end:
                self.inserts.add(done - now, server=work_s)
            return
        n_bytes = self.traffic.insert_bytes(n_items)
        parts = self.paths.parts(n_bytes, HOST, self.replay.end)
        if parts.send_cpu_s > 0:
            work = parts.send_cpu_s * self.speed_rel
            yield from system.threads.execute(thread, work, "net_send", track)
        t0 = self.env.now - parts.send_cpu_s
        self.env.process(self._insert(self.nodes[node], n_bytes, parts, t0, work_s, track))

    def _insert(self, src: Endpoint, n_bytes, parts, t0: float, work_s: float, track: str):
        delivered, on_wire = yield from transfer(
            self.env, src, self.replay, parts, n_bytes, t0 + parts.stack_send_s
        )
        done = self._serve(delivered, parts.recv_cpu_s - parts.stack_recv_s, work_s)
        if t0 < self.end:
            self.inserts.add(done - t0, server=work_s, **_path_components(parts))
        self._flow("insert", track, t0, on_wire, delivered, done, n_bytes)

    # --- the learner -------------------------------------------------------------------------

    def sample(self, system, thread: int, batch: int):
        """simpy generator: the learner's prioritized sample; returns when it has the batch."""
        env, traffic = self.env, self.traffic
        work_s = self._work_s(traffic.sample_server_s)
        t0 = env.now
        if self.placement == "learner":
            done = self._serve(t0, 0.0, work_s)
            if done > env.now:
                yield env.timeout(done - env.now)
            self.sample_rtt_s = done - t0
            if t0 < self.end:
                self.samples.add(done - t0, server=work_s)
            return
        learner = self.nodes[0]
        req = self.paths.parts(traffic.sample_request_bytes, HOST, self.replay.end)
        if req.send_cpu_s > 0:
            yield from system.threads.execute(
                thread, req.send_cpu_s * self.speed_rel, "net_send", "learner"
            )
        t0 = env.now - req.send_cpu_s
        delivered, on_wire = yield from transfer(
            env, learner, self.replay, req, traffic.sample_request_bytes, t0 + req.stack_send_s
        )
        resp_bytes = traffic.sample_bytes(batch)
        resp = self.paths.parts(resp_bytes, self.replay.end, HOST)
        done = self._serve(delivered, req.recv_cpu_s - req.stack_recv_s, work_s, resp.send_cpu_s)
        self._flow(
            "sample_request", "learner", t0, on_wire, delivered, done, traffic.sample_request_bytes
        )
        got, back_on_wire = yield from transfer(
            env, self.replay, learner, resp, resp_bytes, done + resp.stack_send_s
        )
        self.sample_rtt_s = got - t0
        # the learner's receive stack work ran on its thread while it waited for the batch (the
        # part past its latency share overlaps the wire): CPU busy time, no extra delay
        received = max(got - resp.recv_cpu_s, t0 + req.send_cpu_s)
        system.rec.cpu_busy(thread, received, got)
        if t0 < self.end:
            parts = _path_components(req)
            for name, value in _path_components(resp).items():
                parts[name] += value
            self.samples.add(got - t0, server=work_s, **parts)
        self._flow_back("sample", done, back_on_wire, got, resp_bytes)

    def priority_update(self, system, thread: int, batch: int):
        """simpy generator, after a learner step: send the batch's new priorities (fire and
        forget); the sample's latency plus this one's is one prioritized sample end to end."""
        env, traffic = self.env, self.traffic
        work_s = self._work_s(traffic.priority_server_s)
        rtt = self.sample_rtt_s
        if self.placement == "learner":
            t0 = env.now
            done = self._serve(t0, 0.0, work_s)
            if t0 < self.end:
                self.priority.add(rtt + done - t0)
            return
        n_bytes = traffic.priority_bytes(batch)
        parts = self.paths.parts(n_bytes, HOST, self.replay.end)
        if parts.send_cpu_s > 0:
            yield from system.threads.execute(
                thread, parts.send_cpu_s * self.speed_rel, "net_send", "learner"
            )
        t0 = env.now - parts.send_cpu_s
        env.process(self._priority(n_bytes, parts, t0, work_s, rtt))

    def _priority(self, n_bytes, parts, t0: float, work_s: float, rtt: float):
        delivered, on_wire = yield from transfer(
            self.env, self.nodes[0], self.replay, parts, n_bytes, t0 + parts.stack_send_s
        )
        done = self._serve(delivered, parts.recv_cpu_s - parts.stack_recv_s, work_s)
        if t0 < self.end:
            self.priority.add(rtt + done - t0)
        self._flow("priority_update", "learner", t0, on_wire, delivered, done, n_bytes)

    # --- timeline ----------------------------------------------------------------------------

    def _flow(self, kind, track, t0, on_wire, delivered, done, n_bytes) -> None:
        """The message as a slice on the replay's track and a flow from the sender's track."""
        timeline = self.timeline
        if timeline is None or t0 >= self.end:
            return
        replay_track = self.replay_track
        start = self.service_start  # the replay's own work on it (FIFO: slices never overlap)
        args = {"bytes": n_bytes, "on_wire_us": 1e6 * on_wire, "delivered_us": 1e6 * delivered}
        timeline.append((kind, replay_track, start, max(done - start, 1e-9), args))
        timeline.flow(kind, (track, t0, "after"), (replay_track, start, "after"))

    def _flow_back(self, kind, done, on_wire, got, n_bytes) -> None:
        timeline = self.timeline
        if timeline is None or done >= self.end:
            return
        timeline.append(
            ("sample_in_flight", "sampled batches in flight", done, max(got - done, 1e-9), None)
        )
        timeline.flow(
            kind, (self.replay_track, done, "before"), ("sampled batches in flight", got, "before")
        )

    def name_tracks(self, actor_nodes: list[int]) -> None:
        """Perfetto processes for the tracks outside node 0: other nodes' actors, the replay."""
        timeline = self.timeline
        if timeline is None:
            return
        for actor, node in enumerate(actor_nodes):
            if node > 0:
                timeline.track_process[f"actor {actor}"] = (NODE_PID0 + node, f"node {node} CPU")
        if self.placement == "server":
            timeline.track_process[self.replay_track] = (REPLAY_PID, "replay server node")
        elif self.placement == "in-network":
            timeline.track_process[self.replay_track] = (REPLAY_PID, "in-network replay server")

    # --- metrics -----------------------------------------------------------------------------

    def summary(self) -> tuple[dict[str, float], dict]:
        """(flat metrics for metrics.json and sweep CSVs, nested per-node detail)."""
        end = self.end
        links = [ep for ep in (*self.nodes, self.replay) if ep.uplink is not None]
        links = list({id(ep): ep for ep in links}.values())
        total_bytes = sum(ep.uplink.bytes for ep in links)
        if self.placement == "in-network":  # the switch sends to the learner on its downlink
            total_bytes += self.nodes[0].downlink.bytes
        utils = [link.busy_s / end for ep in links for link in (ep.uplink, ep.downlink)]
        accesses = self.inserts.n + self.samples.n
        access_us = 1e6 * (self.inserts.total + self.samples.total) / accesses if accesses else 0.0
        flat = {
            "replay_access_latency_us": access_us,
            "replay_insert_latency_us": self.inserts.mean_us(),
            "replay_sample_latency_us": self.samples.mean_us(),
            "priority_sampling_latency_us": self.priority.mean_us(),
            "network_bytes_per_s": total_bytes / end,
            "nic_util_max": max(utils) if utils else 0.0,
            "replay_server_util": self.replay_busy_s / end,
        }
        detail = {
            "placement": self.placement,
            "stack": self.paths.network.stack,
            "traffic_source": self.traffic.source,
            "links": {
                ep.name: {
                    "tx_bytes_per_s": ep.uplink.bytes / end,
                    "rx_bytes_per_s": ep.downlink.bytes / end,
                    "tx_util": ep.uplink.busy_s / end,
                    "rx_util": ep.downlink.busy_s / end,
                    "tx_messages": ep.uplink.messages,
                    "rx_messages": ep.downlink.messages,
                }
                for ep in links
            },
            "insert_latency_breakdown_us": self.inserts.breakdown_us(),
            "sample_latency_breakdown_us": self.samples.breakdown_us(),
            "inserts": self.inserts.n,
            "samples": self.samples.n,
            "priority_updates": self.priority.n,
        }
        return flat, detail


def attach_network(system, cpu_speed_rel: float, net_setup: tuple) -> None:
    """The replay network of a multi-node or remote-replay run (archsim.sim.replay_server): its
    NICs and replay, each actor's node, and the polling cores (busy the whole window)."""
    network, traffic, polling, cores_per_node = net_setup
    rec = system.rec
    net = ReplayNetwork(system.env, system.config, network, traffic, cpu_speed_rel, rec.end)
    net.timeline = rec.timeline
    node_of = node_of_thread(system.layout, cores_per_node)
    net.actor_nodes = [int(node_of[t]) for t in system.actor_threads]
    net.name_tracks(net.actor_nodes)
    for thread in polling:
        rec.cpu_busy(int(thread), 0.0, rec.end)
    system.net = net  # read by the actor and learner hooks (getattr, None without a network)
    rec.replay_network = net


def _path_components(parts) -> dict[str, float]:
    return {
        "stack": parts.stack_send_s + parts.stack_recv_s - parts.wakeup_s,
        "wakeup": parts.wakeup_s,  # the kernel TCP receiver's wake-up (archsim.perf.network)
        "wire": parts.wire_s,
        "switch": parts.switch_s + parts.propagation_s,
    }


def no_network_metrics() -> dict[str, float]:
    """The network metrics of a run without a network (one node, replay in the learner): zero."""
    return {
        "replay_access_latency_us": 0.0,
        "replay_insert_latency_us": 0.0,
        "replay_sample_latency_us": 0.0,
        "priority_sampling_latency_us": 0.0,
        "network_bytes_per_s": 0.0,
        "nic_util_max": 0.0,
        "replay_server_util": 0.0,
    }
