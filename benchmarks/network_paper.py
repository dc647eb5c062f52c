"""The simulator's network savings beside Furukawa and Matsutani's published ones (issue 14).

Furukawa and Matsutani, "Accelerating Distributed Deep Reinforcement Learning by In-Network Experience
Sampling", PDP 2022 (arXiv:2110.13506), abstract: on 40GbE, kernel bypass (DPDK) cuts the network
access latency to a shared memory server by 32.7% to 58.9%; their in-network replay server (a
DPDK-based replay memory between actor and learner nodes) cuts the experience-replay access latency
by 11.7% to 28.1% and the prioritized sampling latency by 21.9% to 29.1%.

This script simulates a system shaped like theirs: the Ape-X DQN trace's message sizes
(traces/apex-dqn-cpu), 4 actor nodes, 40GbE (``network.nic_bw_gbs=5``), the kernel TCP cost measured
by benchmarks/network_stack.py (7.2 us a message), under kernel TCP and kernel bypass, the replay on a
server node or in the network path, and prints the reductions beside the published ranges. Nothing is
fitted: every figure is the simulator's as it stands. The replay's work per request is taken two ways:

- ``recorded``: the capture's Python replay server (``server_cpu_us`` of messages.csv: the thread
  CPU of its work on a request once received and decoded, a sample's including serializing and
  sending the reply over loopback, captured under the profiler);
- ``compiled``: the replay's own operations measured here on workloads/apex's prioritized replay
  (TransitionReplay: an insert of the trace's transitions per message, a prioritized draw of the
  learner's batch with its gather into preallocated buffers as a server fills packet buffers, a
  priority update), minimum over ``--reps`` calls (timeit's convention: the least disturbed run on a
  shared machine). Those are C loops behind numpy calls, so this is an upper bound on a compiled
  server's work, with no decode, serialization or socket work. It is measured on this machine, the
  capture's (the simulator scales it to the target CPU as it does the recorded work).

Run: ``python benchmarks/network_paper.py [--trace traces/apex-dqn-cpu] [--actors 8] [--nodes 4]
[--reps 300]``. Deterministic for the simulation; the compiled work varies with the machine's load.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

# Furukawa and Matsutani, PDP 2022 (arXiv:2110.13506), abstract: reductions in percent.
PUBLISHED = {
    "bypass_network_access": (32.7, 58.9),
    "in_network_access": (11.7, 28.1),
    "in_network_sampling": (21.9, 29.1),
}
OBS_SHAPE = (4, 84, 84)  # an ALE frame stack, uint8 (the Ape-X runtime's observation)
# 40GbE (5 GB/s) and the kernel TCP cost per message measured by benchmarks/network_stack.py
NETWORK_SETS = ("network.nic_bw_gbs=5", "network.kernel_tcp_us_per_msg=7.2")
STACKS = ("kernel_tcp", "kernel_bypass")
PLACEMENTS = ("server", "in-network")


def _min_us(call, reps: int) -> float:
    best = float("inf")
    for _ in range(reps):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1e6


def compiled_work_us(insert_items: int, batch: int, capacity: int, reps: int) -> dict[str, float]:
    """Microseconds of the replay's own work per message kind, measured on TransitionReplay."""
    from workloads.apex.prioritized import TransitionReplay

    rng = np.random.default_rng(0)
    replay = TransitionReplay(capacity, OBS_SHAPE)
    n = insert_items
    insert = (
        rng.integers(0, 256, (n, *OBS_SHAPE), dtype=np.uint8),
        rng.integers(0, 6, n),
        rng.random(n, dtype=np.float32),
        rng.random(n, dtype=np.float32),
        rng.integers(0, 256, (n, *OBS_SHAPE), dtype=np.uint8),
        rng.random(n) + 0.1,
    )
    while replay.inserted < capacity:  # a full replay, as in steady state
        replay.add(*insert)
    columns = (replay.obs, replay.actions, replay.returns, replay.discounts, replay.next_obs)
    buffers = [np.empty((batch, *c.shape[1:]), dtype=c.dtype) for c in columns]

    def sample() -> None:
        indices, _ = replay.sample(batch)
        for column, out in zip(columns, buffers, strict=True):
            np.take(column, indices, axis=0, out=out)

    indices = np.arange(batch)
    priorities = rng.random(batch) + 0.1
    return {
        "insert": _min_us(lambda: replay.add(*insert), reps),
        "sample_request": _min_us(sample, reps),
        "priority_update": _min_us(lambda: replay.update_priorities(indices, priorities), reps),
    }


def run_point(trace, hw, config, work_us: dict[str, float] | None):
    """One simulation; ``work_us`` replaces the trace's recorded replay work per message kind."""
    from archsim.sim.pacing import resolve_pacing
    from archsim.sim.replay_traffic import trace_replay_traffic
    from archsim.sim.run import simulate, simulate_system
    from archsim.sim.workload import derive_machine, derive_service_times, trace_learner_batch

    if work_us is None:
        return simulate(trace, hw, config)
    # simulate()'s own steps for the distributed loop, with the replay traffic's work replaced
    learner_batch = config.learner_batch or trace_learner_batch(trace)
    config = config.replace(learner_batch=learner_batch)
    config, _ = resolve_pacing(trace, config)
    traffic = trace_replay_traffic(trace, config)
    traffic = dataclasses.replace(
        traffic,
        insert_server_s_per_item=work_us["insert"] * 1e-6 / traffic.insert_items,
        sample_server_s=work_us["sample_request"] * 1e-6,
        priority_server_s=work_us["priority_update"] * 1e-6,
    )
    machine = derive_machine(hw, config)
    times = derive_service_times(trace, hw, config, learner_batch)
    return simulate_system(
        times, machine, config, learner_batch, network=hw.network, traffic=traffic
    )


def network_part_us(result) -> float:
    """Mean stack + receive wake-up + wire + switch time of one replay access (no server work, no
    queueing): the network's part, which kernel bypass acts on."""
    detail = result.network
    total, count = 0.0, 0
    for kind, key in (("inserts", "insert"), ("samples", "sample")):
        parts = detail[f"{key}_latency_breakdown_us"]
        n = detail[kind]
        total += n * sum(parts.get(name, 0.0) for name in ("stack", "wakeup", "wire", "switch"))
        count += n
    return total / count if count else 0.0


def cut(before: float, after: float) -> float:
    return 100.0 * (before - after) / before if before else 0.0


def per_message_rows(hw_name: str, sets: list[str], traffic, batch: int) -> None:
    """One uncontended message of each kind, one way, closed form (archsim.sim.network_links): what
    bypass saves against kernel TCP between two hosts, and what the in-path server saves against a
    server node under each stack (no replay work, no queueing)."""
    from archsim.hw import load_hw
    from archsim.sim.network_links import HOST, IN_PATH_SERVER, Paths

    kinds = (
        ("sample_request", traffic.sample_request_bytes),
        ("priority_update", traffic.priority_bytes(batch)),
        ("one observation", float(np.prod(OBS_SHAPE))),
        ("insert", traffic.insert_bytes(traffic.insert_items)),
        ("sample", traffic.sample_bytes(batch)),
    )
    paths = {s: Paths(load_hw(hw_name, [*sets, f"network.stack={s}"]).network) for s in STACKS}
    print("\none message, one way, closed form (us):")
    print(
        "message          bytes        TCP  bypass  bypass cut %  in-path TCP  cut %  in-path byp  cut %"
    )
    for name, n_bytes in kinds:
        tcp = paths["kernel_tcp"].parts(n_bytes, HOST, HOST).total_s * 1e6
        byp = paths["kernel_bypass"].parts(n_bytes, HOST, HOST).total_s * 1e6
        near_tcp = paths["kernel_tcp"].parts(n_bytes, HOST, IN_PATH_SERVER).total_s * 1e6
        near_byp = paths["kernel_bypass"].parts(n_bytes, HOST, IN_PATH_SERVER).total_s * 1e6
        print(
            f"{name:15s} {n_bytes:10,.0f} {tcp:8.2f} {byp:7.2f} {cut(tcp, byp):13.1f} "
            f"{near_tcp:12.2f} {cut(tcp, near_tcp):6.1f} {near_byp:12.2f} {cut(byp, near_byp):6.1f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trace", default=str(ROOT / "traces" / "apex-dqn-cpu"))
    parser.add_argument("--hw", default="dgx1-v100")
    parser.add_argument("--actors", type=int, default=8)
    parser.add_argument("--nodes", type=int, default=4)
    parser.add_argument("--sim-seconds", type=float, default=2.0)
    parser.add_argument("--reps", type=int, default=300)
    args = parser.parse_args(argv)

    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.replay_traffic import trace_replay_traffic
    from archsim.sim.run import simulate
    from archsim.sim.workload import trace_learner_batch
    from archsim.trace import load

    trace = load(args.trace)
    base = SimConfig(
        actors=args.actors,
        inference="local",
        nodes=args.nodes,
        replay_placement="server",
        replay_ratio=1.0,
        sim_seconds=args.sim_seconds,
    )
    batch = trace_learner_batch(trace)
    recorded = trace_replay_traffic(trace, base)
    settings = (trace.meta.get("workload") or {}).get("settings") or {}
    capacity = int(settings.get("replay_capacity", 4096))
    works = {
        "recorded": {
            "insert": recorded.insert_server_s_per_item * recorded.insert_items * 1e6,
            "sample_request": recorded.sample_server_s * 1e6,
            "priority_update": recorded.priority_server_s * 1e6,
        },
        "compiled": compiled_work_us(recorded.insert_items, batch, capacity, args.reps),
    }
    print(f"replay work per message on the capture machine, us (insert of {recorded.insert_items}")
    print(f"transitions, sample of {batch}, priority update of {batch}):")
    for name, work in works.items():
        print(f"  {name:9s} " + ", ".join(f"{k} {v:,.1f}" for k, v in work.items()))

    results = {}
    for work_name in works:
        for stack in STACKS:
            hw = load_hw(args.hw, [*NETWORK_SETS, f"network.stack={stack}"])
            for placement in PLACEMENTS:
                config = base.replace(replay_placement=placement)
                override = None if work_name == "recorded" else works[work_name]
                results[work_name, stack, placement] = run_point(trace, hw, config, override)
    # the replaced-work path is simulate()'s own: with the recorded work it gives its figures
    check_hw = load_hw(args.hw, [*NETWORK_SETS, "network.stack=kernel_tcp"])
    same = run_point(trace, check_hw, base, works["recorded"]).metrics
    plain = simulate(trace, check_hw, base).metrics
    for name in ("replay_access_latency_us", "priority_sampling_latency_us", "frames_per_s"):
        if not np.isclose(same[name], plain[name], rtol=1e-6):
            raise SystemExit(f"work override path disagrees with simulate() on {name}")

    print(f"\n{args.actors} actors on {args.nodes} nodes, {args.hw} at 40GbE, replay ratio 1:")
    print("work      stack          placement   access us  sampling us  network part us")
    for (work_name, stack, placement), result in results.items():
        m = result.metrics
        print(
            f"{work_name:9s} {stack:14s} {placement:10s} {m['replay_access_latency_us']:10,.1f} "
            f"{m['priority_sampling_latency_us']:12,.1f} {network_part_us(result):16,.1f}"
        )

    per_message_rows(args.hw, list(NETWORK_SETS), recorded, batch)
    rows = []
    for work_name in works:
        r = {k[1:]: v for k, v in results.items() if k[0] == work_name}
        tcp, byp = r["kernel_tcp", "server"], r["kernel_bypass", "server"]
        rows.append(
            (
                work_name,
                "bypass vs kernel TCP, server: network part of an access",
                cut(network_part_us(tcp), network_part_us(byp)),
                "bypass_network_access",
            )
        )
        rows.append(
            (
                work_name,
                "bypass vs kernel TCP, server: replay access latency",
                cut(
                    tcp.metrics["replay_access_latency_us"], byp.metrics["replay_access_latency_us"]
                ),
                "bypass_network_access",
            )
        )
        for stack in STACKS:
            server, near = r[stack, "server"].metrics, r[stack, "in-network"].metrics
            for metric, key in (
                ("replay_access_latency_us", "in_network_access"),
                ("priority_sampling_latency_us", "in_network_sampling"),
            ):
                label = f"in-network vs server, {stack}: {metric}"
                rows.append((work_name, label, cut(server[metric], near[metric]), key))
    print("\nreduction, %                                                   simulated  published")
    for work_name, label, value, key in rows:
        low, high = PUBLISHED[key]
        flag = "" if low <= value <= high else "  (outside)"
        print(f"{work_name:9s} {label:58s} {value:6.1f}   {low}-{high}{flag}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
