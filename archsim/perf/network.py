"""Host link and network message times (docs/NETWORK.md): pure
functions.

``message_breakdown`` is the network model of issue 14: a message of B bytes costs the sender's and
the receiver's stack work (kernel TCP, kernel bypass with a polling core, RDMA), is cut into frames at
the MTU, serialized at the NIC's line rate with Ethernet's framing overhead, forwarded by each switch
(cut-through or store-and-forward) and propagated down each cable; under kernel TCP a blocking
receiver is also woken for it (``wakeup_seconds``). The parts are returned apart so that charts can
stack them. ``message_seconds`` is the older lumped form (latency + stack + bytes /
bandwidth) that the simulator still calls; a host-to-device copy over PCIe/NVLink costs latency +
bytes / bandwidth.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

# ALE observation: 84x84 uint8 grayscale, 4-frame stack = 28,224 B (REFERENCE.md "RL workloads").
OBS_BYTES = 84 * 84 * 4
# An action and its bookkeeping sent back to an actor: one int64 action index (8 B).
ACTION_BYTES = 8

# Per-frame bytes Ethernet adds on the wire (IEEE 802.3): preamble + start delimiter 8, MAC header
# 14, FCS 4, inter-frame gap 12 = 38; a 1,500 B MTU frame takes 1,538 B of line time.
ETHERNET_OVERHEAD_BYTES = 38
# IEEE 802.3 minimum frame: 64 B from header to FCS, i.e. at least 46 B of payload (padded).
ETHERNET_MIN_PAYLOAD_BYTES = 46
# Protocol headers inside each frame's MTU: IPv4 20 + TCP 20 (RFC 791, 793) for kernel TCP; IPv4 20 +
# UDP 8 for kernel bypass (eRPC runs over UDP, Kalia et al., NSDI 2019); RoCEv2 RC send: IPv4 20 +
# UDP 8 + InfiniBand base transport header 12 + ICRC 4 (InfiniBand Architecture Spec., Annex A17).
HEADER_BYTES = {"kernel_tcp": 40, "kernel_bypass": 28, "rdma": 44}
# Signal speed in fibre and twinax: ~2e8 m/s (velocity factor ~0.67), 5 ns per metre.
SIGNAL_SPEED_M_PER_S = 2.0e8


@dataclass(frozen=True)
class MessageTime:
    """One message's one-way time by component, seconds; ``frames`` on the wire. ``wakeup_s``: the
    blocking receiver's wake-up (kernel TCP only), apart from its stack share ``stack_recv_s``."""

    stack_send_s: float
    stack_recv_s: float
    wire_s: float
    switch_s: float
    propagation_s: float
    frames: int
    wakeup_s: float = 0.0

    @property
    def total_s(self) -> float:
        return (
            self.stack_send_s
            + self.stack_recv_s
            + self.wakeup_s
            + self.wire_s
            + self.switch_s
            + self.propagation_s
        )


def payload_per_frame_bytes(network) -> int:
    """Message bytes one frame carries: the MTU less the stack's IP/transport headers."""
    return network.mtu_bytes - HEADER_BYTES[network.stack]


def frame_count(n_bytes: float, network) -> int:
    """Frames (TCP segments, UDP datagrams, RDMA packets) a message of ``n_bytes`` needs; at least 1."""
    return max(1, math.ceil(n_bytes / payload_per_frame_bytes(network)))


def _frame_wire_bytes(payload_bytes: float, network) -> float:
    ip_packet = max(payload_bytes + HEADER_BYTES[network.stack], ETHERNET_MIN_PAYLOAD_BYTES)
    return ip_packet + ETHERNET_OVERHEAD_BYTES


def wire_bytes(n_bytes: float, network) -> float:
    """Line bytes of a message: every frame's payload, headers, padding and Ethernet overhead."""
    frames = frame_count(n_bytes, network)
    per_frame = payload_per_frame_bytes(network)
    last = max(n_bytes, 0) - (frames - 1) * per_frame
    return (frames - 1) * _frame_wire_bytes(per_frame, network) + _frame_wire_bytes(last, network)


def stack_cpu_seconds(n_bytes: float, network) -> float:
    """Both ends' stack work for one message of ``n_bytes`` with the configured stack.

    Kernel TCP: a fixed cost, a cost per segment beyond the first and a per-byte copy cost (all
    measured here by benchmarks/network_stack.py). Kernel bypass and RDMA: a per-message cost; the
    payload is DMAed from registered memory without a copy (zero-copy, so no per-byte term).
    """
    fixed_s, streamed_s = _stack_parts_seconds(n_bytes, network)
    return fixed_s + streamed_s


def _stack_parts_seconds(n_bytes: float, network) -> tuple[float, float]:
    """(fixed, per-segment + per-byte) stack work of both ends; only kernel TCP has the second."""
    if network.stack == "kernel_tcp":
        segments = frame_count(n_bytes, network)
        streamed_s = (segments - 1) * network.kernel_tcp_us_per_segment * 1e-6
        streamed_s += max(n_bytes, 0) * network.kernel_tcp_ns_per_byte * 1e-9
        return network.kernel_tcp_us_per_msg * 1e-6, streamed_s
    if network.stack == "kernel_bypass":
        return network.kernel_bypass_us_per_msg * 1e-6, 0.0
    return network.rdma_us_per_msg * 1e-6, 0.0


def wakeup_seconds(network) -> float:
    """Latency of waking a receiver blocked in ``recv`` (softirq -> wake-up -> scheduler -> the thread
    runs), once per message under kernel TCP; 0 under kernel bypass and RDMA, whose receivers poll.

    It is a part of the receiver's half of ``kernel_tcp_us_per_msg``, never more: that figure is both
    ends' thread CPU with blocking sockets, and benchmarks/network_stack.py --wakeup measures a
    blocking 64 B one-way (6.2-7.0 us) no longer than that CPU (6.5-11.9 us) in each of 46 runs while
    a polling one is shorter by the wake-up, so the wake-up's switch work is already in the CPU figure and adding it
    on top would overstate the latency."""
    if network.stack != "kernel_tcp":
        return 0.0
    return min(network.kernel_tcp_wakeup_us, network.kernel_tcp_us_per_msg / 2) * 1e-6


def polling_cores_per_node(network) -> int:
    """Cores a node gives up whatever the load: a DPDK port is served by a core polling at 100%
    (Kalia et al., NSDI 2019); kernel TCP and RDMA are interrupt- or completion-driven."""
    return 1 if network.stack == "kernel_bypass" else 0


def message_breakdown(n_bytes: float, network) -> MessageTime:
    """One-way time of a message of ``n_bytes`` between two nodes over ``network`` (a NetworkConfig).

    Frames leave back to back at the line rate; a store-and-forward switch holds each frame until it
    has all of it, so the message ends one full-frame time later per hop (cut-through adds only the
    switch's port-to-port latency). The stack work is split evenly between the ends, and a kernel
    stack's per-segment work overlaps the wire (only what the wire does not hide is added). Under
    kernel TCP the receiver's wake-up (``wakeup_seconds``) is taken out of the receiver's share and
    shown as ``wakeup_s``: the total is unchanged, the wake-up is what a polling receiver saves.
    """
    rate_bytes_per_s = network.nic_bw_gbs * 1e9
    first_payload = min(max(n_bytes, 0), payload_per_frame_bytes(network))
    per_hop_s = network.switch_latency_ns * 1e-9
    if network.switch_mode == "store_and_forward":
        # The egress port sends frame k once it has all of it and has sent frame k-1; at equal port
        # rates the last byte leaves one largest-frame time (the first frame's) after it arrived.
        per_hop_s += _frame_wire_bytes(first_payload, network) / rate_bytes_per_s
    wire_s = wire_bytes(n_bytes, network) / rate_bytes_per_s
    # Segments stream through three stages (sender's stack, wire, receiver's stack) that overlap:
    # only the first segment's share at each end and the part of each end's streamed work that the
    # wire does not hide show; a one-segment message shows all of it.
    fixed_s, streamed_s = _stack_parts_seconds(n_bytes, network)
    frames = frame_count(n_bytes, network)
    unhidden_s = streamed_s / frames
    exposed_s = max(0.0, (streamed_s - unhidden_s) / 2 - wire_s)
    wakeup_s = wakeup_seconds(network)
    per_end_s = (fixed_s + unhidden_s) / 2 + exposed_s / 2
    return MessageTime(
        stack_send_s=per_end_s,
        stack_recv_s=per_end_s - wakeup_s,
        wire_s=wire_s,
        switch_s=network.switch_hops * per_hop_s,
        propagation_s=(network.switch_hops + 1) * network.link_length_m / SIGNAL_SPEED_M_PER_S,
        frames=frames,
        wakeup_s=wakeup_s,
    )


def stack_seconds_per_message(network) -> float:
    """Per-message software stack cost of ``network`` (a NetworkConfig) for its configured stack."""
    us = {
        "kernel_tcp": network.kernel_tcp_us_per_msg,
        "kernel_bypass": network.kernel_bypass_us_per_msg,
        "rdma": network.rdma_us_per_msg,
    }[network.stack]
    return us * 1e-6


def message_seconds(n_bytes: float, network) -> float:
    """One-way time of one message of ``n_bytes`` over ``network`` (latency + stack + serialization):
    the lumped form the simulator calls until it moves to ``message_breakdown`` (issue 14 item 3)."""
    return (
        network.latency_us * 1e-6
        + stack_seconds_per_message(network)
        + n_bytes / (network.nic_bw_gbs * 1e9)
    )


def host_copy_seconds(n_bytes: float, host_link) -> float:
    """Host-to-device (or back) copy of ``n_bytes`` over ``host_link`` (a HostLinkConfig)."""
    if n_bytes <= 0:
        return 0.0
    return host_link.latency_us * 1e-6 + n_bytes / (host_link.bw_gbs * 1e9)
