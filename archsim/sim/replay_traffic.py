"""Sizes and server work of the prioritized-replay messages (issue 14 item 3), from the trace.

An Ape-X capture (``archsim capture apex``) records every message in ``messages.csv`` (kind, bytes,
items, the server's CPU time per message): the replay traffic is sized from it, per kind, as mean
bytes per item (transitions in an insert or a sampled batch, priorities in an update) and mean server
CPU per message. A trace without that log but with the observation shape in its meta
(``workload.obs_shape``, uint8) sizes one transition as one observation (84x84x4 = 28,224 B) and
leaves the server work at zero (not recorded). A trace with neither cannot size the traffic of a
placement that sends replay traffic over the network: one line.
"""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

from archsim.errors import ArchsimError

# Fixed parts of the protocol's small messages when the trace does not record them: a sample request
# carries the batch size and a request id (two int64, 16 B) and a priority update one float32
# priority and one int64 index per item (12 B), the layout of workloads/apex/wire.py.
SAMPLE_REQUEST_BYTES = 16
PRIORITY_BYTES_PER_ITEM = 12
# A sampled transition carries its importance weight (float32) and index (int64) besides the data.
SAMPLE_EXTRA_BYTES_PER_ITEM = 12


@dataclass(frozen=True)
class ReplayTraffic:
    """Bytes and server CPU (seconds of one capture-machine thread) of each replay message kind."""

    insert_bytes_per_item: float
    insert_items: int  # transitions per insert message (Ape-X actors batch them)
    sample_request_bytes: float
    sample_bytes_per_item: float
    priority_bytes_per_item: float
    insert_server_s_per_item: float = 0.0
    sample_server_s: float = 0.0  # per sample request: the server draws indices and gathers
    priority_server_s: float = 0.0  # per priority update message
    source: str = "messages.csv"

    def insert_bytes(self, items: int) -> float:
        return self.insert_bytes_per_item * items

    def sample_bytes(self, items: int) -> float:
        return self.sample_bytes_per_item * items

    def priority_bytes(self, items: int) -> float:
        return self.priority_bytes_per_item * items


def messages_path(trace) -> Path | None:
    """The trace's message log, when it has one beside its raw trace."""
    name = (trace.meta.get("capture") or {}).get("messages_file")
    if not name or trace.raw_path is None:
        return None
    path = Path(trace.raw_path).parent / str(name)
    return path if path.exists() else None


def _mean(values: list[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def traffic_from_messages(path: Path) -> ReplayTraffic:
    """Per-kind means over the messages that carried items (empty samples are left out)."""
    per_item: dict[str, list[float]] = {}
    items_of: dict[str, list[float]] = {}
    bytes_of: dict[str, list[float]] = {}
    server_of: dict[str, list[float]] = {}
    try:
        with open(path, newline="") as handle:
            for row in csv.DictReader(handle):
                kind = row["kind"]
                n_bytes, items = float(row["bytes"]), float(row["items"] or 0)
                bytes_of.setdefault(kind, []).append(n_bytes)
                if items > 0:
                    per_item.setdefault(kind, []).append(n_bytes / items)
                    items_of.setdefault(kind, []).append(items)
                server = row.get("server_cpu_us") or ""
                if server and items > 0:  # an empty sample did no sampling work
                    server_of.setdefault(kind, []).append(float(server) * 1e-6)
    except (OSError, KeyError, ValueError) as exc:
        raise ArchsimError(
            f"{path}: not a readable message log ({exc.__class__.__name__}: {exc})"
        ) from None
    for kind in ("insert", "sample"):
        if not per_item.get(kind):
            raise ArchsimError(
                f"{path}: no {kind} message with items: the log cannot size replay traffic"
            )
    insert_items = max(1, round(_mean(items_of["insert"])))
    return ReplayTraffic(
        insert_bytes_per_item=_mean(per_item["insert"]),
        insert_items=insert_items,
        sample_request_bytes=_mean(bytes_of.get("sample_request", [])) or SAMPLE_REQUEST_BYTES,
        sample_bytes_per_item=_mean(per_item["sample"]),
        priority_bytes_per_item=_mean(per_item.get("priority_update", []))
        or PRIORITY_BYTES_PER_ITEM,
        insert_server_s_per_item=_mean(server_of.get("insert", [])) / insert_items,
        sample_server_s=_mean(server_of.get("sample_request", [])),
        priority_server_s=_mean(server_of.get("priority_update", [])),
        source=str(path.name),
    )


def traffic_from_obs_shape(shape: list[int], envs_per_actor: int) -> ReplayTraffic:
    """One transition = one uint8 observation of ``shape``; one insert per env step."""
    obs_bytes = float(math.prod(int(d) for d in shape))
    return ReplayTraffic(
        insert_bytes_per_item=obs_bytes,
        insert_items=envs_per_actor,
        sample_request_bytes=SAMPLE_REQUEST_BYTES,
        sample_bytes_per_item=obs_bytes + SAMPLE_EXTRA_BYTES_PER_ITEM,
        priority_bytes_per_item=PRIORITY_BYTES_PER_ITEM,
        source="workload.obs_shape",
    )


def trace_replay_traffic(trace, config) -> ReplayTraffic:
    """The replay traffic of ``trace`` under ``config``; one ArchsimError when it cannot be sized."""
    path = messages_path(trace)
    if path is not None:
        return traffic_from_messages(path)
    shape = (trace.meta.get("workload") or {}).get("obs_shape")
    if isinstance(shape, list | tuple) and shape and all(isinstance(d, int) for d in shape):
        return traffic_from_obs_shape(list(shape), config.envs_per_actor)
    raise ArchsimError(
        f"--replay-placement {config.replay_placement} --nodes {config.nodes}: the trace records "
        "no replay traffic (no messages.csv of an Ape-X capture) and no observation shape "
        "(meta workload.obs_shape) to size it; use --replay-placement learner --nodes 1 or an "
        "Ape-X trace (archsim capture apex)"
    )


def check_in_network_capacity(trace, config, network) -> None:
    """An in-network replay holds at most ``network.in_network_capacity_transitions``: a trace whose
    replay is larger (``workload.settings.replay_capacity``) cannot be placed there (one line)."""
    capacity = network.in_network_capacity_transitions
    if config.replay_placement != "in-network" or capacity is None:
        return
    settings = (trace.meta.get("workload") or {}).get("settings") or {}
    wanted = settings.get("replay_capacity")
    if isinstance(wanted, int) and wanted > capacity:
        raise ArchsimError(
            f"network.in_network_capacity_transitions: {capacity} transitions is less than the "
            f"trace's replay of {wanted} (workload.settings.replay_capacity); the in-network "
            "replay cannot hold it"
        )
