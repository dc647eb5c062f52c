"""NIC links and message paths between nodes (issue 14 item 3): what the simulator adds to the pure
network model of ``archsim.perf.network``.

Each node's NIC is two FIFO servers, one per direction (full-duplex Ethernet): the uplink carries the
node's messages to the switch, the downlink the switch's messages to the node, so many senders to one
node queue on its downlink (incast at the switch's egress port). A message holds each for its wire
time (``message_breakdown``'s ``wire_s``: frames at the MTU, Ethernet framing, line rate); switch
forwarding and propagation are delays, not servers; the sender's and receiver's stack parts are the
ends of the message's latency. Uncontended, a message takes exactly ``message_breakdown(...).total_s``.

An in-network replay sits in the network path, one hop closer to both sides: a message to it crosses
``switch_hops - 1`` switches and ``switch_hops`` cables (a node-to-node message crosses
``switch_hops`` and ``switch_hops + 1``), and the switch port it leaves or enters by is the other
end's downlink or uplink. Its own end of a message is one of two kinds. A software replay server
in the path (``IN_PATH_SERVER``, the default; Furukawa and Matsutani, PDP 2022, run a DPDK-based
replay server between actor and learner nodes) runs a poll-mode user-space stack: kernel bypass's
per-end share where the hosts run kernel TCP (and bypass's per-message figure is no higher), else the
hosts' own stack. A hardware replay (``IN_PATH_HARDWARE``: a switch pipeline or FPGA, chosen by
setting ``network.in_network_service_us``) runs no host stack at all. Either way its end never costs
more than a host's, so with equal replay work an in-network replay is never slower than a server.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from archsim.perf.network import MessageTime, message_breakdown, stack_cpu_seconds


class Link:
    """One direction of a NIC port: FIFO at line rate (a Lindley recursion), busy time and bytes
    clipped to the measured window [0, end]."""

    __slots__ = ("name", "end", "free_at", "busy_s", "bytes", "messages")

    def __init__(self, name: str, end: float) -> None:
        self.name = name
        self.end = end
        self.free_at = 0.0
        self.busy_s = 0.0
        self.bytes = 0.0
        self.messages = 0

    def occupy(self, ready: float, wire_s: float, n_bytes: float) -> float:
        """A message ready at ``ready`` takes the link for ``wire_s``: returns when it starts."""
        start = ready if ready > self.free_at else self.free_at
        finish = start + wire_s
        self.free_at = finish
        end = self.end
        s, f = min(start, end), min(finish, end)
        if f > s:
            self.busy_s += f - s
            self.bytes += n_bytes * (f - s) / wire_s
        if start < end:
            self.messages += 1
        return start


# What runs at one end of a message: a host's stack (the configured ``network.stack``), a software
# replay server in the network path (poll-mode stack), or a hardware replay (no host stack).
HOST, IN_PATH_SERVER, IN_PATH_HARDWARE = "host", "in-path server", "in-path hardware"


@dataclass
class Endpoint:
    """A node's NIC (``end`` HOST) or an in-network replay (``end`` IN_PATH_SERVER or
    IN_PATH_HARDWARE; no links of its own: the other ends' are the switch ports)."""

    name: str
    end: str
    uplink: Link | None
    downlink: Link | None


@dataclass(frozen=True)
class PathParts:
    """One message's one-way parts on one path, seconds (``message_breakdown`` less absent ends)."""

    stack_send_s: float
    wire_s: float
    switch_s: float
    propagation_s: float
    stack_recv_s: float  # the receiver's end, its wake-up (kernel TCP host) included: a delay
    send_cpu_s: float  # the sender's whole stack work (>= stack_send_s: part overlaps the wire)
    recv_cpu_s: float
    wakeup_s: float = 0.0  # of stack_recv_s, the blocking receiver's wake-up (for breakdowns)

    @property
    def total_s(self) -> float:
        return (
            self.stack_send_s + self.wire_s + self.switch_s + self.propagation_s + self.stack_recv_s
        )


@dataclass
class Paths:
    """Message parts by (bytes, sender's end kind, receiver's end kind), cached."""

    network: object  # archsim.hw.schema.NetworkConfig
    _cache: dict = field(default_factory=dict)

    def parts(self, n_bytes: float, src_end: str, dst_end: str) -> PathParts:
        key = (n_bytes, src_end, dst_end)
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._parts(n_bytes, src_end, dst_end)
        return hit

    def _parts(self, n_bytes: float, src_end: str, dst_end: str) -> PathParts:
        net = self.network
        if src_end != HOST or dst_end != HOST:  # to or from the replay in the network path
            net = net.model_copy(update={"switch_hops": max(net.switch_hops - 1, 0)})
        m: MessageTime = message_breakdown(n_bytes, net)
        host_cpu_s = stack_cpu_seconds(n_bytes, net) / 2
        send_s, send_cpu_s = _end(src_end, m.stack_send_s, host_cpu_s, n_bytes, net)
        # a host receiver blocked in recv is woken (kernel TCP): a delay before its application has
        # the message, inside its measured stack CPU, so the work left after delivery shrinks by it
        recv_s, recv_cpu_s = _end(dst_end, m.stack_recv_s + m.wakeup_s, host_cpu_s, n_bytes, net)
        woken = dst_end == HOST or (
            dst_end == IN_PATH_SERVER and in_path_server_stack(net) == net.stack
        )
        return PathParts(
            stack_send_s=send_s,
            wire_s=m.wire_s,  # framed by the hosts' protocol, whatever the replay's end runs
            switch_s=m.switch_s,
            propagation_s=m.propagation_s,
            stack_recv_s=recv_s,
            send_cpu_s=send_cpu_s,
            recv_cpu_s=recv_cpu_s,
            wakeup_s=m.wakeup_s if woken else 0.0,
        )


def in_path_server_stack(network) -> str:
    """The stack a software replay server in the network path runs: kernel bypass (DPDK poll mode,
    as Furukawa and Matsutani's server) where the hosts run kernel TCP and bypass's per-message
    cost is no higher, else the hosts' stack (never a costlier end than a host's)."""
    if (
        network.stack == "kernel_tcp"
        and network.kernel_bypass_us_per_msg <= network.kernel_tcp_us_per_msg
    ):
        return "kernel_bypass"
    return network.stack


def _end(kind: str, host_s: float, host_cpu_s: float, n_bytes: float, net) -> tuple[float, float]:
    """(latency share, CPU work) of one end of a message, by what runs there."""
    if kind == HOST:
        return host_s, host_cpu_s
    if kind == IN_PATH_HARDWARE:
        return 0.0, 0.0
    stack = in_path_server_stack(net)
    if stack == net.stack:
        return host_s, host_cpu_s
    # a per-message stack (bypass): no streamed work, its share shows whole and equals its CPU
    polled = net.model_copy(update={"stack": stack})
    return message_breakdown(n_bytes, polled).stack_recv_s, stack_cpu_seconds(n_bytes, polled) / 2


def transfer(env, src: Endpoint, dst: Endpoint, parts: PathParts, n_bytes: float, tx_ready: float):
    """simpy generator: a message ready for ``src``'s uplink at ``tx_ready`` crosses the network;
    returns when ``dst``'s application has it (after its stack's share), and when it entered the
    wire (for the timeline)."""
    # ``tx_ready`` may lie a little in the past: a kernel stack streams a message's first segments
    # to the NIC while the sender's thread still does the rest of its stack work
    if tx_ready > env.now:
        yield env.timeout(tx_ready - env.now)
    start = tx_ready
    if src.uplink is not None:
        start = src.uplink.occupy(start, parts.wire_s, n_bytes)
    # the first byte reaches the far end's downlink after the switches and cables (a
    # store-and-forward switch's frame time is in switch_s)
    first = start + parts.switch_s + parts.propagation_s
    if first > env.now:
        yield env.timeout(first - env.now)
    if dst.downlink is not None:
        arrived = dst.downlink.occupy(first, parts.wire_s, n_bytes) + parts.wire_s
    else:
        arrived = first + parts.wire_s
    delivered = arrived + parts.stack_recv_s
    if delivered > env.now:
        yield env.timeout(delivered - env.now)
    return delivered, start
