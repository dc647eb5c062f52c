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
  their idle: one more core busy the replay's fraction on the learner's socket, counted in that
  socket's power as any busy core is (learner_replay_cores), so it is held within that socket's TDP
  and the power cap (archsim.sim.power_cap) sees it. Before, its watts were added after the sockets
  and clipped against every node's TDP together, so a socket already at TDP gave it nothing or
  another node's headroom let node 0 pass its TDP (dgx1-v100, apex-dqn-cpu, 64 actors,
  ``--nodes 2``, ``--set cpu.boost_clock_mhz=5000``: the cap left node 0's learner socket at TDP
  with the replay's 0.98 core on top).
"""

from __future__ import annotations

import numpy as np

from archsim.perf.network import polling_cores_per_node
from archsim.perf.power import cpu_socket_power_w
from archsim.sim.metrics import PowerModel, socket_busy


def replay_host_sockets(power: PowerModel, config, hw_network) -> int:
    """Sockets of the replay's own host (0 where it runs on node 0 or in switch hardware)."""
    if config.replay_placement == "learner":
        return 0
    if config.replay_placement == "in-network" and hw_network.in_network_service_us is not None:
        return 0
    return power.sockets


def learner_replay_cores(
    power: PowerModel, config, learner_socket: int, replay_util: float
) -> np.ndarray | None:
    """Busy cores (window mean) per socket that a replay in the learner process adds: its busy
    fraction on the learner's socket, a core's first thread (it runs on no simulated hardware
    thread, archsim.sim.replay_server). None for the other placements (their host is not a node's)."""
    if config.replay_placement != "learner":
        return None
    cores = np.zeros(power.sockets)
    cores[learner_socket] = min(max(replay_util, 0.0), 1.0)
    return cores


def sockets_power_added_w(
    power: PowerModel,
    busy: np.ndarray,
    socket_of_thread: np.ndarray,
    smt_sibling: np.ndarray | None,
    extra_cores: np.ndarray,
) -> float:
    """Watts that ``extra_cores`` busy cores per socket add to the sockets whose hardware threads
    are busy ``busy`` (fractions of the window), each socket within its TDP as in
    archsim.sim.metrics.summarize: a busy core on a socket at TDP adds nothing, as the part holds
    its limit (archsim.sim.power_cap lowers a what-if clock for it first)."""
    first, sibling, cores = socket_busy(power, np.atleast_2d(busy), socket_of_thread, smt_sibling)
    added = 0.0
    for s in range(power.sockets):
        if extra_cores[s] <= 0:
            continue
        split = (power.cpu_idle_w, power.cpu_max_w, cores[s], power.threads_per_core)
        rest = (power.cpu_clock_rel, True, power.cpu_budget_w)
        with_extra = cpu_socket_power_w(first[0, s] + extra_cores[s], sibling[0, s], *split, *rest)
        without = cpu_socket_power_w(first[0, s], sibling[0, s], *split, *rest)
        added += float(with_extra - without)
    return added


def replay_host_power_w(power: PowerModel, config, hw_network, replay_util: float) -> float:
    """Mean watts the replay adds beyond the nodes' sockets over the window (``power`` is one
    node's: ``sockets``, idle and TDP per socket, cores and threads per core), for the placements
    whose host is not a node (``learner``: 0, see learner_replay_cores)."""
    busy = min(max(replay_util, 0.0), 1.0)
    if config.replay_placement == "learner":
        return 0.0
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
        budget_w=power.cpu_budget_w,
    )
    return float(first) + (power.sockets - 1) * power.cpu_idle_w
