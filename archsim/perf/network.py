"""Host link and network message times (DESIGN.md "Host link and network"): pure functions.

A message costs latency + bytes / bandwidth, plus the per-message software stack cost (kernel TCP
versus kernel bypass, REFERENCE.md "Network") on the network; a host-to-device copy over PCIe/NVLink
costs latency + bytes / bandwidth.
"""

from __future__ import annotations

# ALE observation: 84x84 uint8 grayscale, 4-frame stack = 28,224 B (REFERENCE.md "RL workloads").
OBS_BYTES = 84 * 84 * 4
# An action and its bookkeeping sent back to an actor: one int64 action index (8 B).
ACTION_BYTES = 8


def stack_seconds_per_message(network) -> float:
    """Per-message software stack cost of ``network`` (a NetworkConfig) for its configured stack."""
    us = (
        network.kernel_bypass_us_per_msg
        if network.stack == "kernel_bypass"
        else network.kernel_tcp_us_per_msg
    )
    return us * 1e-6


def message_seconds(n_bytes: float, network) -> float:
    """One-way time of one message of ``n_bytes`` over ``network`` (latency + stack + serialization)."""
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
