"""Power of the replay's host when replay traffic crosses a network (``--replay-placement``): a
part of the system that the nodes' sockets do not hold.

The replay's work runs on no simulated hardware thread (archsim.sim.replay_server), so the nodes'
power left it out: a run with the replay on a server node of its own drew the power of its actor
nodes only, below the idle of the machines it runs on (dgx1-v100, apex-dqn-cpu, 16 actors, replay
ratio 8, ``--nodes 1 --replay-placement server``: 87.9 W of CPU for two machines whose sockets
idle at 160 W; the same run with the replay in the learner drew 107.4 W). Counted here, from what
the run measured:

- ``server``: one more machine of the hardware config: its sockets at idle, plus one core busy the
  replay's measured fraction of the window, plus the polling core a kernel-bypass stack keeps busy
  (archsim.perf.network.polling_cores_per_node).
- ``in-network`` with a software server in the path (the default): the same host, whose end of each
  message runs a poll-mode stack (archsim.sim.network_links): one polling core always.
- ``in-network`` with ``network.in_network_service_us`` (a switch pipeline or FPGA): nothing, as no
  published figure gives such a replay's power; the docs say so.
- ``learner``: the replay is a thread of the learner process on node 0, whose sockets already draw
  their idle: one core busy the replay's fraction.
"""

from __future__ import annotations

from archsim.perf.network import polling_cores_per_node
from archsim.perf.power import cpu_per_core_w, cpu_socket_power_w
from archsim.sim.metrics import PowerModel


def replay_host_sockets(power: PowerModel, config, hw_network) -> int:
    """Sockets of the replay's own host (0 where it runs on node 0 or in switch hardware)."""
    if config.replay_placement == "learner":
        return 0
    if config.replay_placement == "in-network" and hw_network.in_network_service_us is not None:
        return 0
    return power.sockets


def replay_host_power_w(power: PowerModel, config, hw_network, replay_util: float) -> float:
    """Mean watts the replay adds beyond the nodes' sockets over the window (``power`` is one
    node's: ``sockets``, idle and TDP per socket, cores and threads per core). The caller keeps the
    total within every socket's TDP (node 0's may already be near it)."""
    busy = min(max(replay_util, 0.0), 1.0)
    if config.replay_placement == "learner":
        per_core = cpu_per_core_w(
            power.cpu_idle_w,
            power.cpu_max_w,
            power.cores_per_socket,
            power.threads_per_core,
            power.cpu_clock_rel,
        )
        return per_core * busy
    if config.replay_placement == "in-network":
        if hw_network.in_network_service_us is not None:
            return 0.0
        polling = 1
    else:
        polling = polling_cores_per_node(hw_network)
    first = cpu_socket_power_w(
        busy + polling,
        0.0,
        power.cpu_idle_w,
        power.cpu_max_w,
        power.cores_per_socket,
        power.threads_per_core,
        power.cpu_clock_rel,
    )
    return float(first) + (power.sockets - 1) * power.cpu_idle_w
