"""Actor nodes (``--nodes N``, issue 14 item 3): which node each actor runs on, and the hardware
threads of N machines, each with the hardware config's CPU, as one thread layout for the engine.

The learner process runs on node 0 beside that node's share of the actors, so ``--nodes 1`` is the
single machine of every earlier release. Actors are split into contiguous blocks whose sizes differ
by at most one (actor i on node ``node_of_actor[i]``). Each node's threads are placed as on one
machine (``archsim.perf.cpu.place_threads``: node 0 reserves the learner's threads, the others none)
and then numbered into one layout whose cores are node by node, so the engine, the SMT model and the
power model (one set of sockets per node) work unchanged. Under kernel bypass each node gives one
core to DPDK's polling thread (Kalia et al., NSDI 2019: a DPDK port is served by a core polling at
100%); that core runs no simulated work and is counted busy the whole run.
"""

from __future__ import annotations

import numpy as np

from archsim.errors import ArchsimError
from archsim.perf.cpu import ThreadLayout, place_threads


def node_of_actors(actors: int, nodes: int) -> np.ndarray:
    """Node of every actor: contiguous blocks, sizes differing by at most one (larger first)."""
    if not 1 <= nodes <= actors:
        raise ArchsimError(f"--nodes: expected 1 .. {actors} (the actors), got {nodes}")
    sizes = np.full(nodes, actors // nodes)
    sizes[: actors % nodes] += 1
    return np.repeat(np.arange(nodes), sizes)


def place_node_threads(
    n_reserved: int,
    actors: int,
    nodes: int,
    hw_threads: int,
    cores: int,
    sockets: int,
    cores_per_socket: int,
    thread_speed_rel: float,
    smt_yield: float,
    polling_cores: int = 0,
) -> tuple[ThreadLayout, np.ndarray]:
    """(layout of all nodes' threads, the polling threads' indices in it).

    ``hw_threads`` etc. describe ONE node; ``polling_cores`` per node are kept from the simulated
    work. The layout numbers first threads of every core before SMT siblings (as ``place_threads``
    does), with node k's cores at ``k * cores .. (k + 1) * cores - 1``.
    """
    cores = min(cores, hw_threads)
    if hw_threads % cores:
        raise ArchsimError(
            f"--cpu-threads: with --nodes or a network replay placement, give a multiple of the "
            f"{cores} cores per node (every core with the same number of threads), got {hw_threads}"
        )
    threads_per_core = hw_threads // cores
    usable_cores = cores - polling_cores
    if usable_cores < 1:
        raise ArchsimError(
            f"network.stack: kernel bypass takes {polling_cores} core(s) per node for polling, "
            f"and a node has only {cores}"
        )
    usable_threads = usable_cores * threads_per_core
    node_of = node_of_actors(actors, nodes)
    total_cores = nodes * cores
    placement: list[np.ndarray] = []
    actor_parts: list[np.ndarray] = []
    speed = np.full(nodes * hw_threads, float(thread_speed_rel))
    shared = np.zeros(nodes * hw_threads, dtype=bool)
    for node in range(nodes):
        local = place_threads(
            n_reserved=n_reserved if node == 0 else 0,
            n_actors=int(np.sum(node_of == node)),
            hw_threads=usable_threads,
            cores=usable_cores,
            sockets=sockets,
            cores_per_socket=cores_per_socket,
            thread_speed_rel=thread_speed_rel,
            smt_yield=smt_yield,
        )
        local_ids = np.arange(local.hw_threads)
        # local thread j: core j % usable_cores, sibling j // usable_cores
        global_ids = (
            (local_ids // local.cores) * total_cores + node * cores + local_ids % local.cores
        )
        speed[global_ids] = local.speed
        shared[global_ids] = local.shared
        mapped = global_ids[local.placement]
        if node == 0:
            placement.append(mapped[:n_reserved])
            actor_parts.append(mapped[n_reserved:])
        else:
            actor_parts.append(mapped)
    polling = np.array(
        [node * cores + cores - 1 - c for node in range(nodes) for c in range(polling_cores)],
        dtype=int,
    )
    layout = ThreadLayout(
        hw_threads=nodes * hw_threads,
        cores=total_cores,
        sockets=nodes * sockets,
        cores_per_socket=cores_per_socket,
        speed=speed,
        placement=np.concatenate([*placement, *actor_parts]).astype(int),
        shared=shared,
    )
    return layout, polling


def node_of_thread(layout: ThreadLayout, cores_per_node: int) -> np.ndarray:
    """Node of every hardware thread of a layout made by ``place_node_threads``."""
    return (np.arange(layout.hw_threads) % layout.cores) // cores_per_node


def node_layout(config, machine, hw_threads: int, network, traffic) -> tuple[ThreadLayout, tuple]:
    """Thread layout of ``config.nodes`` nodes (``machine``: one node, archsim.sim.system.Machine)
    and what the replay network needs: (network, traffic, polling threads, cores per node)."""
    from archsim.sim.replay_server import check_network_knobs, polling_cores

    if network is None or traffic is None:
        raise ArchsimError(
            f"--nodes {config.nodes} --replay-placement {config.replay_placement}: the network "
            "config and the trace's replay traffic are needed (archsim.sim.replay_traffic)"
        )
    check_network_knobs(config, network)
    layout, polling = place_node_threads(
        n_reserved=config.learner_threads,
        actors=config.actors,
        nodes=config.nodes,
        hw_threads=hw_threads,
        cores=machine.cores,
        sockets=machine.sockets,
        cores_per_socket=machine.cores_per_socket,
        thread_speed_rel=machine.thread_speed_rel,
        smt_yield=machine.smt_yield,
        polling_cores=polling_cores(config, network),
    )
    cores_per_node = layout.cores // config.nodes
    return layout, (network, traffic, polling, cores_per_node)
