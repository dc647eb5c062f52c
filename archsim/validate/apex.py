"""Measured replay figures of a real Ape-X capture (``archsim capture apex``), and their closed-form
prediction from one baseline capture (issue 14 item 5).

From the capture's ``messages.csv`` (workloads/apex/capture.py; stamps from one CLOCK_REALTIME, so a
sender's and a receiver's times subtract) and ``steps.parquet``:

- **replay access latency**: the mean over every replay access, insert or sample, as the requesting
  side sees it. An insert: the actor's serialize start to the replay done adding it (``latency_us``:
  serialize, send, receive, decode, server work). A sample from a replay server: the learner's
  request start to the transitions decoded (``round_trip_us`` of the ``sample`` reply); from the
  replay in the learner's own memory (placement ``learner``): the learner step's ``replay_sample``
  phase. Empty replies (the warm-up, while the replay holds less than a batch) are left out.
- **prioritized sampling latency**: one prioritized sample end to end, its priority round trip
  included: the sample as above plus the priority update that the learner sends after training on it
  (``latency_us``: serialize start to the replay done updating); in the learner's memory, the step's
  ``replay_sample`` plus ``priority_update`` phases.
- **frames/s**: what the actors put into the replay over the unprofiled half of the run (the second
  half, timed without the profiler): per actor, the transitions of its unprofiled inserts after the
  first over the time from the first to the last, times the ALE frameskip, summed over actors.

The closed form (``predict``) charges each message its serialize and decode work and the replay's work
at the baseline's per-transition (or per-message) medians, and its network time from
``archsim.perf.network.message_breakdown`` over the given network section; it has no queueing (an
insert waiting for the learner's training step, a message waiting for a core), so it is a floor, not
a forecast of the wall-clock means.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from archsim.errors import ArchsimError

MESSAGES_FILE = "messages.csv"
FRAMESKIP = 4  # ALE v5 frameskip (REFERENCE.md "RL workloads"): one env step = 4 frames
NEEDED_COLUMNS = (
    "kind",
    "src",
    "dst",
    "bytes",
    "items",
    "serialize_us",
    "decode_us",
    "server_cpu_us",
    "latency_us",
    "round_trip_us",
    "sent_unix_ns",
    "profiled",
)


def load_messages(trace_dir: Path) -> pd.DataFrame:
    """messages.csv of an Ape-X capture; a missing file or column is one ArchsimError."""
    path = Path(trace_dir) / MESSAGES_FILE
    if not path.is_file():
        raise ArchsimError(
            f"{path}: not found (expected an `archsim capture apex` trace directory)"
        )
    try:
        table = pd.read_csv(path)
    except (OSError, ValueError) as exc:
        raise ArchsimError(f"{path}: not a readable CSV ({exc})") from None
    missing = [c for c in NEEDED_COLUMNS if c not in table.columns]
    if missing:
        raise ArchsimError(f"{path}: missing column(s) {', '.join(missing)}")
    table["profiled"] = table["profiled"].astype(str).str.lower() == "true"
    return table.sort_values("sent_unix_ns", kind="stable").reset_index(drop=True)


def insert_latencies_us(table: pd.DataFrame) -> pd.Series:
    """One-way time of each insert that reached the replay (serialize start to server done)."""
    return table.loc[table["kind"] == "insert", "latency_us"].dropna()


def sample_round_trips_us(table: pd.DataFrame) -> pd.Series:
    """Request-to-transitions time of each non-empty sample served by a replay server."""
    rows = table[(table["kind"] == "sample") & (table["items"] > 0)]
    return rows["round_trip_us"].dropna()


def sampling_latencies_us(table: pd.DataFrame) -> pd.Series:
    """Per priority update: the round trip of the non-empty sample the learner trained on (the last
    one it received before sending the update) plus the update's one-way time."""
    samples = table[(table["kind"] == "sample") & (table["items"] > 0)]
    updates = table[(table["kind"] == "priority_update")].dropna(subset=["latency_us"])
    values = []
    for _, update in updates.iterrows():
        before = samples[
            (samples["dst"] == update["src"]) & (samples["sent_unix_ns"] < update["sent_unix_ns"])
        ]
        if len(before) and not math.isnan(before["round_trip_us"].iloc[-1]):
            values.append(before["round_trip_us"].iloc[-1] + update["latency_us"])
    return pd.Series(values, dtype=float)


def _unprofiled_inserts(table: pd.DataFrame) -> dict[str, pd.DataFrame] | None:
    """Each actor's unprofiled inserts in send order; None when an actor that inserted at all has
    fewer than two there (its rate cannot be read)."""
    inserts = table[table["kind"] == "insert"]
    out = {}
    for actor, rows in inserts.groupby("src"):
        rows = rows[~rows["profiled"]].sort_values("sent_unix_ns", kind="stable")
        if len(rows) < 2 or rows["sent_unix_ns"].iloc[-1] <= rows["sent_unix_ns"].iloc[0]:
            return None
        out[str(actor)] = rows
    return out or None


def unprofiled_frames_per_s(table: pd.DataFrame, frameskip: int = FRAMESKIP) -> float:
    """Actors' frames/s over the unprofiled half: per actor, the transitions of its unprofiled
    inserts after its first over the time from its first to its last, summed over the actors, times
    ``frameskip``. Per actor because each process stops profiling at its own time. NaN when an
    actor has fewer than two unprofiled inserts (a run too short for its insert size)."""
    per_actor = _unprofiled_inserts(table)
    if per_actor is None:
        return math.nan
    rate = 0.0
    for rows in per_actor.values():
        span_s = (rows["sent_unix_ns"].iloc[-1] - rows["sent_unix_ns"].iloc[0]) * 1e-9
        rate += rows["items"].iloc[1:].sum() / span_s
    return rate * frameskip


def unprofiled_window_ns(table: pd.DataFrame) -> tuple[int, int] | None:
    """The time every actor was inserting unprofiled: the latest actor's first unprofiled insert to
    the earliest actor's last; None when there is no such time."""
    per_actor = _unprofiled_inserts(table)
    if per_actor is None:
        return None
    start = max(int(rows["sent_unix_ns"].iloc[0]) for rows in per_actor.values())
    end = min(int(rows["sent_unix_ns"].iloc[-1]) for rows in per_actor.values())
    return (start, end) if end > start else None


def cpus_over(samples: list[list[float]], start_ns: int, end_ns: int) -> tuple[float, float]:
    """(the run's CPUs busy, every process's CPUs busy) on average from ``start_ns`` to ``end_ns``,
    linearly interpolated between ``samples`` of [time_ns, machine busy s, run's CPU s]."""
    if len(samples) < 2 or end_ns <= start_ns:
        return math.nan, math.nan
    t = np.array([row[0] for row in samples], dtype=float)
    if start_ns < t[0] or end_ns > t[-1]:
        return math.nan, math.nan
    busy = np.interp([start_ns, end_ns], t, [row[1] for row in samples])
    own = np.interp([start_ns, end_ns], t, [row[2] for row in samples])
    wall_s = (end_ns - start_ns) * 1e-9
    return float(own[1] - own[0]) / wall_s, float(busy[1] - busy[0]) / wall_s


def transfer_medians(table: pd.DataFrame) -> pd.DataFrame:
    """Per message kind (replay traffic only, non-empty): count, median bytes and the median
    transfer time in us, the sender's send start to the receiver having the bytes: ``latency_us``
    less the serialize, decode and server work (what ``message_breakdown`` models, plus the waits
    for the receiving process to be scheduled and read)."""
    kinds = ("insert", "sample_request", "sample", "priority_update")
    rows = table[table["kind"].isin(kinds)]
    rows = rows[(rows["kind"] != "sample") | (rows["items"] > 0)].copy()
    work = rows["serialize_us"] + rows["decode_us"] + rows["server_us"].fillna(0.0)
    rows["transfer_us"] = rows["latency_us"] - work
    rows = rows.dropna(subset=["transfer_us"])
    out = rows.groupby("kind", sort=False).agg(
        count=("transfer_us", "size"),
        bytes=("bytes", "median"),
        transfer_us=("transfer_us", "median"),
    )
    return out.reindex([k for k in kinds if k in out.index])


@dataclasses.dataclass(frozen=True)
class ApexMeasurement:
    """What one capture measured (means in microseconds) and the counts behind them."""

    name: str
    actors: int
    placement: str
    send_every: int
    netns: bool
    inserts: int
    samples: int
    insert_latency_us: float
    sample_latency_us: float
    replay_access_latency_us: float
    priority_sampling_latency_us: float
    frames_per_s: float
    # over the same window, from a capture's CPU samples (benchmarks/apex_validation.py): frames
    # per CPU-second of the run's own processes, and the CPUs every other process kept busy
    frames_per_cpu_s: float = math.nan
    window_other_busy_cpus: float = math.nan

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _local_phase_us(trace_dir: Path, phases: tuple[str, ...]) -> pd.Series:
    """Per learner step, the sum of ``phases`` (wall us) from steps.parquet."""
    steps = pd.read_parquet(Path(trace_dir) / "steps.parquet")
    learner = steps[steps["role"] == "learner"]
    return learner[[f"{p}_us" for p in phases]].sum(axis=1, min_count=len(phases)).dropna()


def _mean(values: pd.Series) -> float:
    return float(values.mean()) if len(values) else math.nan


def read_meta(trace_dir: Path) -> dict:
    """A capture's meta.yaml as a mapping, or one line naming the file."""
    import yaml

    try:
        return yaml.safe_load((Path(trace_dir) / "meta.yaml").read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ArchsimError(
            f"{Path(trace_dir) / 'meta.yaml'}: not a readable trace meta ({exc})"
        ) from None


def measure_capture(
    trace_dir: Path, name: str | None = None, cpu_samples: list[list[float]] | None = None
) -> ApexMeasurement:
    """The measured figures of one Ape-X capture directory (meta.yaml, messages.csv, steps);
    with ``cpu_samples`` (see ``cpus_over``) also per CPU-second."""
    trace_dir = Path(trace_dir)
    meta = read_meta(trace_dir)
    settings = (meta.get("workload") or {}).get("settings") or {}
    if (meta.get("workload") or {}).get("name") != "apex":
        raise ArchsimError(f"{trace_dir}: not an Ape-X capture (meta.workload.name is not apex)")
    table = load_messages(trace_dir)
    inserts = insert_latencies_us(table)
    placement = settings.get("replay_placement", "server")
    if placement == "learner":
        samples = _local_phase_us(trace_dir, ("replay_sample",))
        sampling = _local_phase_us(trace_dir, ("replay_sample", "priority_update"))
    else:
        samples = sample_round_trips_us(table)
        sampling = sampling_latencies_us(table)
    accesses = pd.concat([inserts, samples], ignore_index=True)
    frames_per_s = unprofiled_frames_per_s(table)
    own_cpus = all_cpus = math.nan
    window = unprofiled_window_ns(table)
    if cpu_samples and window:
        own_cpus, all_cpus = cpus_over(cpu_samples, *window)
    return ApexMeasurement(
        name=name or trace_dir.name,
        actors=int(settings.get("actors", 0)),
        placement=placement,
        send_every=int(settings.get("send_every", 0)),
        netns=bool(settings.get("netns", False)),
        inserts=len(inserts),
        samples=len(samples),
        insert_latency_us=_mean(inserts),
        sample_latency_us=_mean(samples),
        replay_access_latency_us=_mean(accesses),
        priority_sampling_latency_us=_mean(sampling),
        frames_per_s=frames_per_s,
        frames_per_cpu_s=frames_per_s / own_cpus if own_cpus > 0 else math.nan,
        window_other_busy_cpus=max(0.0, all_cpus - own_cpus) if own_cpus > 0 else math.nan,
    )


@dataclasses.dataclass(frozen=True)
class BaselineCosts:
    """Per-message and per-transition work read off one baseline capture with a replay server
    (medians: robust to the occasional message that waited for a core). Serialize and decode are
    per kind: a sampled batch is gathered from the replay as it is encoded, an insert is not."""

    insert_bytes_per_item: float
    insert_ends_us_per_item: float  # the actor's serialize + the replay's decode
    insert_cpu_us_per_item: float  # the replay's CPU adding one transition
    reply_bytes_per_item: float
    # the replay's CPU answering a sample request, per transition: sampling, gathering, encoding
    # and handing the reply to the kernel
    sample_cpu_us_per_item: float
    # the replay's wall time answering, less the reply's serialize and send: a sample from the
    # replay in the learner's own memory
    local_sample_us_per_item: float
    reply_decode_us_per_item: float
    request_bytes: float
    request_ends_us: float
    update_bytes: float
    update_ends_us: float
    update_cpu_us: float  # the replay's CPU applying one priority update


def _paired_samples(table: pd.DataFrame) -> pd.DataFrame:
    """Non-empty sample requests beside their replies (a learner's k-th request is answered by the
    k-th sample it receives; workloads/apex/capture.py)."""
    pairs = []
    for learner in table.loc[table["kind"] == "sample_request", "src"].unique():
        req = table[(table["kind"] == "sample_request") & (table["src"] == learner)]
        rep = table[(table["kind"] == "sample") & (table["dst"] == learner)]
        n = min(len(req), len(rep))
        reply = rep.iloc[:n].reset_index(drop=True).add_suffix("_reply")
        both = pd.concat([req.iloc[:n].reset_index(drop=True), reply], axis=1)
        pairs.append(both[both["items_reply"] > 0])
    return pd.concat(pairs, ignore_index=True) if pairs else pd.DataFrame()


def baseline_costs(trace_dir: Path) -> BaselineCosts:
    """Costs of one baseline capture with a replay server (it must have samples and updates)."""
    table = load_messages(trace_dir)
    ins = table[(table["kind"] == "insert") & (table["items"] > 0)]
    pairs = _paired_samples(table)
    upd = table[table["kind"] == "priority_update"]
    if ins.empty or pairs.empty or upd.empty:
        raise ArchsimError(
            f"{trace_dir}: a baseline needs inserts, samples and priority updates "
            "(capture it with --replay-placement server)"
        )
    items = pairs["items_reply"]
    # the reply's serialize and send are timed on the wall clock only, so the local part is too
    local = pairs["server_us"] - pairs["serialize_us_reply"] - pairs["send_us_reply"]
    return BaselineCosts(
        insert_bytes_per_item=float((ins["bytes"] / ins["items"]).median()),
        insert_ends_us_per_item=float(
            ((ins["serialize_us"] + ins["decode_us"]) / ins["items"]).median()
        ),
        insert_cpu_us_per_item=float((ins["server_cpu_us"] / ins["items"]).median()),
        reply_bytes_per_item=float((pairs["bytes_reply"] / items).median()),
        sample_cpu_us_per_item=float((pairs["server_cpu_us"] / items).median()),
        local_sample_us_per_item=float((local.clip(lower=0) / items).median()),
        reply_decode_us_per_item=float((pairs["decode_us_reply"] / items).median()),
        request_bytes=float(pairs["bytes"].median()),
        request_ends_us=float((pairs["serialize_us"] + pairs["decode_us"]).median()),
        update_bytes=float(upd["bytes"].median()),
        update_ends_us=float((upd["serialize_us"] + upd["decode_us"]).median()),
        update_cpu_us=float(upd["server_cpu_us"].median()),
    )


def _network_us(n_bytes: float, network) -> float:
    from archsim.perf.network import message_breakdown

    return message_breakdown(n_bytes, network).total_s * 1e6


def predict(
    costs: BaselineCosts,
    network,
    *,
    placement: str,
    send_every: int,
    batch_size: int,
    inserts: int,
    samples: int,
) -> dict[str, float]:
    """Closed-form insert, sample, access (weighted by ``inserts`` : ``samples``, the run's mix)
    and prioritized sampling latencies (us) of one configuration over ``network``: each message's
    ends (serialize, decode) and the replay's work from the baseline, its network time from
    ``message_breakdown``; no queueing."""
    insert_us = send_every * (costs.insert_ends_us_per_item + costs.insert_cpu_us_per_item)
    insert_us += _network_us(send_every * costs.insert_bytes_per_item, network)
    if placement == "learner":
        sample_us = batch_size * costs.local_sample_us_per_item
        sampling_us = sample_us + costs.update_cpu_us
    else:
        sample_us = costs.request_ends_us + _network_us(costs.request_bytes, network)
        sample_us += batch_size * (costs.sample_cpu_us_per_item + costs.reply_decode_us_per_item)
        sample_us += _network_us(batch_size * costs.reply_bytes_per_item, network)
        sampling_us = sample_us + costs.update_ends_us + costs.update_cpu_us
        sampling_us += _network_us(costs.update_bytes, network)
    total = inserts + samples
    access_us = (inserts * insert_us + samples * sample_us) / total if total else math.nan
    return {
        "insert_latency_us": insert_us,
        "sample_latency_us": sample_us,
        "replay_access_latency_us": access_us,
        "priority_sampling_latency_us": sampling_us,
    }


def signed_error(predicted: float, measured: float) -> float:
    """(predicted - measured) / measured; NaN when either is missing or measured is 0."""
    if not (np.isfinite(predicted) and np.isfinite(measured)) or measured == 0:
        return math.nan
    return (predicted - measured) / measured
