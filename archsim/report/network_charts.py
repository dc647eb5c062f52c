"""Charts of the distributed replay (issue 14 item 6): where one replay access's time goes, by
component, per replay placement and network stack; and a sweep over nodes x placement x stack.

The breakdown's network parts come from ``archsim.perf.network.message_breakdown`` (the pure
per-message model); the server part from the replay's measured work per message (an Ape-X capture's
``messages.csv``, archsim.validate.apex.BaselineCosts) or, for a hardware replay in the network path,
the hwconfig's ``in_network_service_us``; queueing is what a simulator run adds on top of those (its latency less
this closed form), and 0 when no simulator figure is given.

Paths, per placement (docs/NETWORK.md "Charts"):

- ``server``: every message crosses the network between two hosts: both ends' stack, the wire, the
  switches and the cables (``message_breakdown`` as it is).
- ``learner``: inserts cross the network to the learner's node as above; a sample and its priority
  update stay in the learner's memory (server work only).
- ``in-network``: the replay sits in the network path, one hop closer to both sides (Furukawa and
  Matsutani, PDP 2022; archsim.sim.network_links): a message crosses ``switch_hops - 1`` switches and
  ``switch_hops`` cables, the wire once; its far end is a software replay with a poll-mode (DPDK)
  stack doing the same replay work as a server, or, when ``network.in_network_service_us`` is set, a
  hardware replay with that service time and no stack.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pandas as pd

from archsim.report.style import TOTAL_COLOR, from_zero, pyplot, save, value_axis

COMPONENTS = ("stack", "wakeup", "wire", "switch", "server", "queueing")
COLUMNS = tuple(f"{c}_us" for c in COMPONENTS)  # breakdown_table's columns, one per component
COMPONENT_COLORS = {
    "stack": "tab:blue",
    "wakeup": "tab:cyan",
    "wire": "tab:orange",
    "switch": "tab:green",
    "server": "tab:purple",
    "queueing": TOTAL_COLOR,
}
PLACEMENTS = ("learner", "server", "in-network")
STACKS = ("kernel_tcp", "kernel_bypass", "rdma")


@dataclasses.dataclass(frozen=True)
class ReplayMessages:
    """Sizes (bytes) and the replay's work (us) of the messages of one insert and one prioritized
    sample: request and reply (the sampled transitions)."""

    insert_bytes: float
    request_bytes: float
    reply_bytes: float
    insert_server_us: float
    sample_server_us: float


def _hop(n_bytes: float, network, placement: str, to_host: bool = False) -> dict[str, float]:
    """Components (us) of one message from a host to the replay or back (``to_host``: the replay
    sends, the host receives), per the placement."""
    from archsim.perf.network import SIGNAL_SPEED_M_PER_S, message_breakdown

    m = message_breakdown(n_bytes, network)
    if placement != "in-network":
        return {
            "stack": (m.stack_send_s + m.stack_recv_s) * 1e6,
            "wakeup": m.wakeup_s * 1e6,  # a kernel TCP receiver's; 0 where it polls
            "wire": m.wire_s * 1e6,
            "switch": (m.switch_s + m.propagation_s) * 1e6,
        }
    from archsim.sim.network_links import in_path_server_stack

    hops = max(network.switch_hops, 1)
    per_switch_s = m.switch_s / network.switch_hops if network.switch_hops else 0.0
    if network.in_network_service_us is not None:
        far = None  # a hardware replay: no host stack at its end
    elif in_path_server_stack(network) == network.stack:
        far = m
    else:  # a poll-mode (DPDK) server in the path: bypass's per-end share
        polled = network.model_copy(update={"stack": in_path_server_stack(network)})
        far = message_breakdown(n_bytes, polled)
    if to_host:  # the host receives, and is woken under kernel TCP
        far_end_s, wakeup_s, host_s = far.stack_send_s if far else 0.0, m.wakeup_s, m.stack_recv_s
    else:
        far_end_s, wakeup_s = (far.stack_recv_s, far.wakeup_s) if far else (0.0, 0.0)
        host_s = m.stack_send_s
    return {
        "stack": (host_s + far_end_s) * 1e6,
        "wakeup": wakeup_s * 1e6,
        "wire": m.wire_s * 1e6,
        # one switch and one cable fewer than between two hosts
        "switch": ((hops - 1) * per_switch_s + hops * network.link_length_m / SIGNAL_SPEED_M_PER_S)
        * 1e6,
    }


def access_breakdown(
    messages: ReplayMessages, network, placement: str, access: str
) -> dict[str, float]:
    """Microseconds by component of one ``access`` ("insert" or "sample": a prioritized sample, the
    request and the transitions back) at ``placement`` over ``network``, keyed ``<component>_us``; queueing is 0
    (closed form)."""
    parts = dict.fromkeys(COLUMNS, 0.0)
    service = network.in_network_service_us if placement == "in-network" else None
    if access == "insert":
        hops = [(messages.insert_bytes, "insert")]
        work = [service if service is not None else messages.insert_server_us]
        place = "server" if placement == "learner" else placement
    elif access == "sample":
        # the request and the sampled transitions; the priority update that follows the training
        # step is a third message (priority_sampling_latency_us counts it, this breakdown does not,
        # as the simulator's sample_latency_breakdown_us)
        hops = [(messages.request_bytes, "request"), (messages.reply_bytes, "reply")]
        work = [service if service is not None else messages.sample_server_us]
        place = placement
        if placement == "learner":  # in the learner's memory: no message at all
            hops = []
    else:
        raise ValueError(f"access {access!r}: expected insert or sample")
    for n_bytes, label in hops:
        for name, us in _hop(n_bytes, network, place, to_host=label == "reply").items():
            parts[f"{name}_us"] += us
    parts["server_us"] = float(sum(work))
    return parts


def breakdown_table(messages: ReplayMessages, networks: dict[str, object]) -> pd.DataFrame:
    """One row per (access, placement, stack): the components in us and their total; ``networks``
    maps a stack name to its NetworkConfig."""
    rows = []
    for access in ("insert", "sample"):
        for placement in PLACEMENTS:
            for stack, network in networks.items():
                parts = access_breakdown(messages, network, placement, access)
                rows.append(
                    {"access": access, "placement": placement, "stack": stack, **parts}
                    | {"total_us": sum(parts.values())}
                )
    return pd.DataFrame(rows)


def add_queueing(table: pd.DataFrame, simulated: pd.DataFrame) -> pd.DataFrame:
    """``queueing`` = a simulator's latency less the closed-form total, where the simulator (rows of
    access, placement, stack, latency_us) has the point; never below 0."""
    out = table.merge(simulated, on=["access", "placement", "stack"], how="left")
    extra = (out["latency_us"] - out["total_us"]).clip(lower=0).fillna(0.0)
    out["queueing_us"] = extra
    out["total_us"] = out[list(COLUMNS)].sum(axis=1)
    return out.drop(columns=["latency_us"])


def _draw_breakdown(table: pd.DataFrame, title: str):
    """The figure (one panel per access), one stacked bar per (placement, stack) row."""
    plt = pyplot()
    accesses = list(dict.fromkeys(table["access"]))
    fig, axes = plt.subplots(
        1, len(accesses), figsize=(6.5 * len(accesses), 4.5), layout="constrained", squeeze=False
    )
    for ax, access in zip(axes[0], accesses, strict=True):
        rows = table[table["access"] == access].reset_index(drop=True)
        x = list(range(len(rows)))
        bottom = [0.0] * len(rows)
        for name in COMPONENTS:
            heights = rows[f"{name}_us"].tolist()
            if not any(h > 0 for h in heights):
                continue
            ax.bar(x, heights, bottom=bottom, color=COMPONENT_COLORS[name], label=name)
            bottom = [b + h for b, h in zip(bottom, heights, strict=True)]
        ax.set_xticks(x, [f"{p}\n{s.replace('kernel_', '')}" for p, s in zip(rows["placement"], rows["stack"], strict=True)], fontsize=7)  # fmt: skip
        ax.set_ylabel("latency (us)")
        what = "one insert" if access == "insert" else "one prioritized sample (request + batch)"
        ax.set_title(what, fontsize=9)
        from_zero(ax)
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(title)
    return fig


def breakdown_chart(table: pd.DataFrame, out: Path, title: str) -> list[Path]:
    """``network_latency_breakdown``.png/.svg: stacked bars of ``breakdown_table`` rows."""
    return save(_draw_breakdown(table, title), out, "network_latency_breakdown")


def _draw_sweep(table: pd.DataFrame, metrics: list[tuple[str, str]], title: str):
    """One panel per (metric, stack); x = nodes, one line per placement."""
    plt = pyplot()
    stacks = list(dict.fromkeys(table["stack"]))
    fig, axes = plt.subplots(
        len(metrics),
        len(stacks),
        figsize=(4.2 * len(stacks), 3.3 * len(metrics)),
        layout="constrained",
        squeeze=False,
    )
    nodes = sorted(table["nodes"].unique())
    for row, (metric, label) in enumerate(metrics):
        for col, stack in enumerate(stacks):
            ax = axes[row][col]
            for k, placement in enumerate(dict.fromkeys(table["replay_placement"])):
                t = table[(table["stack"] == stack) & (table["replay_placement"] == placement)]
                t = t.sort_values("nodes")
                # markers and dashes differ so that lines lying on each other stay visible
                ax.plot(
                    t["nodes"],
                    t[metric],
                    marker="os^D"[k % 4],
                    linestyle=("-", "--", ":", "-.")[k % 4],
                    markersize=7 - 1.5 * (k % 4),
                    label=placement,
                )
            value_axis(ax, nodes)
            ax.set_xlabel("actor nodes")
            ax.set_ylabel(label)
            ax.set_title(stack, fontsize=9)
            from_zero(ax)
            ax.grid(alpha=0.3)
            ax.legend(fontsize=7, title="replay", title_fontsize=7)
    fig.suptitle(title)
    return fig


def sweep_chart(
    table: pd.DataFrame, out: Path, title: str, metrics: list[tuple[str, str]] | None = None
) -> list[Path]:
    """``network_sweep``.png/.svg from rows of nodes, replay_placement, stack and the metrics."""
    metrics = metrics or [
        ("priority_sampling_latency_us", "prioritized sample (us)"),
        ("frames_per_s", "frames/s"),
    ]
    return save(_draw_sweep(table, metrics, title), out, "network_sweep")


def simulated_rows(metrics: dict, placement: str, stack: str) -> list[dict]:
    """Breakdown rows (as ``breakdown_table``'s) from one ``archsim simulate`` metrics.json: its
    ``network.insert_latency_breakdown_us`` and ``sample_latency_breakdown_us`` (queueing included)."""
    network = metrics.get("network") or {}
    rows = []
    for access in ("insert", "sample"):
        parts = network.get(f"{access}_latency_breakdown_us")
        if not parts:
            continue
        row = {"access": access, "placement": placement, "stack": stack}
        row |= {f"{c}_us": float(parts.get(c, 0.0)) for c in COMPONENTS}
        row["total_us"] = sum(row[c] for c in COLUMNS)
        rows.append(row)
    return rows


def _simulate(trace: Path, out: Path, knobs: list[str], sets: list[str]) -> dict:
    """``archsim simulate`` (the CLI, as a user runs it); its metrics.json."""
    import json
    import subprocess
    import sys

    # this interpreter's archsim, whether or not its environment's bin directory is on PATH
    cmd = [sys.executable, "-m", "archsim", "simulate", str(trace), *knobs]
    cmd += ["--out", str(out), "--force"]
    for item in sets:
        cmd += ["--set", item]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.loads((out / "metrics.json").read_text())


# docs/NETWORK.md's cluster: the DGX-1 preset's node at 40GbE (5 GB/s line rate) with this machine's
# measured kernel TCP fixed cost (benchmarks/network_stack.py: 7.15-7.25 us), 2 actors a node.
CLUSTER_HW = "dgx1-v100"
CLUSTER_SET = ["network.nic_bw_gbs=5", "network.kernel_tcp_us_per_msg=7.2"]
ACTORS_PER_NODE = 2
SWEEP_NODES = (1, 2, 4, 8)
REPLAY_RATIO = 1.0


def make_figures(trace: Path, runs: Path, figures: Path, nodes: int = 4) -> list[Path]:
    """The two charts of docs/NETWORK.md "Charts" from simulator runs of ``trace`` (an Ape-X capture):
    the breakdown at ``nodes`` actor nodes per placement and stack, and the nodes x placement x stack
    sweep; PNGs copied into ``figures`` as network_*.png."""
    import shutil

    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.run import simulate
    from archsim.trace.format import load

    runs, figures = Path(runs), Path(figures)
    loaded = load(Path(trace))
    rows, sweep = [], []
    for stack in STACKS:
        hw = load_hw(CLUSTER_HW, [*CLUSTER_SET, f"network.stack={stack}"])
        for placement in PLACEMENTS:
            for n in SWEEP_NODES:
                config = SimConfig(
                    actors=ACTORS_PER_NODE * n,
                    nodes=n,
                    replay_placement=placement,
                    inference="local",
                    loop="distributed",
                    # paced as docs/NETWORK.md's table: one sample per inserted transition (the
                    # capture is unpaced)
                    replay_ratio=REPLAY_RATIO,
                )
                result = simulate(loaded, hw, config)
                m = dict(result.metrics, network=getattr(result, "network", None))
                sweep.append({"stack": stack, "replay_placement": placement, "nodes": n} | m)
                if n == nodes:
                    rows += simulated_rows(m, placement, stack)
    paths = breakdown_chart(
        pd.DataFrame(rows),
        runs,
        f"Replay latency by component: {nodes} actor nodes x {ACTORS_PER_NODE} actors, 40GbE",
    )
    table = pd.DataFrame(sweep).drop(columns=["network"])
    runs.mkdir(parents=True, exist_ok=True)
    table.to_csv(runs / "network_sweep.csv", index=False)
    pd.DataFrame(rows).to_csv(runs / "network_latency_breakdown.csv", index=False)
    paths += sweep_chart(
        table,
        runs,
        f"Ape-X on {CLUSTER_HW} nodes at 40GbE, {ACTORS_PER_NODE} actors a node",
        [
            ("replay_access_latency_us", "replay access (us)"),
            ("priority_sampling_latency_us", "prioritized sample (us)"),
            ("frames_per_s", "frames/s"),
        ],
    )
    figures.mkdir(parents=True, exist_ok=True)
    copied = []
    for path in paths:
        if path.suffix == ".png":
            target = figures / path.name
            shutil.copyfile(path, target)
            copied.append(target)
    return copied


if __name__ == "__main__":
    import sys

    if len(sys.argv) != 4:
        raise SystemExit(
            "usage: python -m archsim.report.network_charts TRACE RUNS_DIR FIGURES_DIR"
        )
    for written in make_figures(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])):
        print(written)
