"""Capture an Ape-X run: every process profiles itself, the traces are merged (one clock, process
roles) and ingested; every message, paired across its two sides, goes to ``messages.csv`` beside the
trace and a per-kind summary to ``meta.capture.messages``.

messages.csv, one row per message (times in microseconds; stamps are CLOCK_REALTIME, shared by all
processes of this machine, network namespaces included):

- kind (insert, sample_request, sample, priority_update, param_request, params, hello), src, dst
  (``role-index``), seq (the sender's message counter), bytes (header + payload), items (transitions);
- serialize_us, send_us: the sender building the bytes and handing them to the kernel (sendall);
- recv_us: the receiver's read call to the last byte (for a reply, the requester waits in it);
  decode_us: bytes to arrays; server_us: the receiver's work on it (insert, sample, update, publish;
  a reply's serialize and send included), server_cpu_us: the thread CPU time of that work (on a
  loaded machine server_us also holds the time spent waiting for a core);
- latency_us: sender's serialize start to the receiver done with it (one way, work included);
- round_trip_us (replies): the requester's request start to the reply decoded;
- sent_unix_ns, profiled (sent while the sender's profiler was recording: the first half).
"""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pandas as pd

from archsim.atomic import atomic_output_file, check_output_dir
from archsim.errors import ArchsimError
from archsim.trace.format import RAW_FILE
from workloads.apex.runner import RECORDED_FRACTION, run_apex
from workloads.apex.settings import ApexSettings

MESSAGES_FILE = "messages.csv"
MESSAGE_COLUMNS = (
    "kind",
    "src",
    "dst",
    "seq",
    "bytes",
    "items",
    "serialize_us",
    "send_us",
    "recv_us",
    "decode_us",
    "server_us",
    "server_cpu_us",
    "latency_us",
    "round_trip_us",
    "sent_unix_ns",
    "profiled",
)


def _us(end: Any, start: Any) -> float:
    if end is None or start is None:
        return math.nan
    return (int(end) - int(start)) / 1000.0


def message_table(logs: dict[str, list[dict]], stopped_ns: dict[str, int]) -> pd.DataFrame:
    """Pair each sent record with its received record by (src, seq); ``stopped_ns``: per process,
    when its profiler stopped recording (absent: it recorded to the end)."""
    received = {
        (r["src"], r["seq"]): r for records in logs.values() for r in records if r["side"] == "recv"
    }
    rows = []
    for records in logs.values():
        for sent in records:
            if sent["side"] != "send":
                continue
            got = received.get((sent["src"], sent["seq"]), {})
            done = got.get("work_end_ns", got.get("decode_end_ns"))
            stop = stopped_ns.get(sent["src"])
            rows.append(
                {
                    "kind": sent["kind"],
                    "src": sent["src"],
                    "dst": sent["dst"],
                    "seq": sent["seq"],
                    "bytes": sent["bytes"],
                    "items": sent.get("items", 0),
                    "serialize_us": _us(sent["send_start_ns"], sent["serialize_start_ns"]),
                    "send_us": _us(sent["send_end_ns"], sent["send_start_ns"]),
                    "recv_us": _us(got.get("recv_end_ns"), got.get("recv_start_ns")),
                    "decode_us": _us(got.get("decode_end_ns"), got.get("recv_end_ns")),
                    "server_us": _us(got.get("work_end_ns"), got.get("decode_end_ns")),
                    "server_cpu_us": _us(
                        got.get("work_cpu_ns"), 0 if "work_cpu_ns" in got else None
                    ),
                    "latency_us": _us(done, sent["serialize_start_ns"]),
                    "round_trip_us": _us(got.get("decode_end_ns"), got.get("request_start_ns")),
                    "sent_unix_ns": sent["serialize_start_ns"],
                    "profiled": stop is None or sent["serialize_start_ns"] < stop,
                }
            )
    table = pd.DataFrame(rows, columns=list(MESSAGE_COLUMNS))
    table = table.sort_values("sent_unix_ns", kind="stable").reset_index(drop=True)
    # A requester waits for each reply before its next request, so the k-th sample request of a
    # learner is answered by the k-th sample it receives: give the request its reply's size.
    for learner in table.loc[table["kind"] == "sample_request", "src"].unique():
        requests = table.index[(table["kind"] == "sample_request") & (table["src"] == learner)]
        replies = table.index[(table["kind"] == "sample") & (table["dst"] == learner)]
        n = min(len(requests), len(replies))
        table.loc[requests[:n], "items"] = table.loc[replies[:n], "items"].to_numpy()
    return table


def message_summary(table: pd.DataFrame) -> dict[str, dict]:
    """Per kind: count, mean bytes and mean / median latency and round trip (us), plain floats.
    Sample requests answered with an empty batch (the learner's warm-up, while the replay holds
    less than one batch) are counted apart (``empty``) and left out of the figures."""
    summary = {}
    for kind, rows in table.groupby("kind", sort=True):
        empty = 0
        if kind in ("sample", "sample_request"):
            empty = int((rows["items"] == 0).sum())
            rows = rows[rows["items"] > 0]
        figures: dict[str, float | int] = {
            "count": len(rows),
            "empty": empty,
            "bytes_mean": round(float(rows["bytes"].mean()), 1),
        }
        for column in (
            "latency_us",
            "round_trip_us",
            "server_us",
            "server_cpu_us",
            "serialize_us",
            "send_us",
        ):
            values = rows[column].dropna()
            if len(values):
                figures[f"{column[:-3]}_mean_us"] = round(float(values.mean()), 1)
                figures[f"{column[:-3]}_p50_us"] = round(float(values.median()), 1)
        summary[str(kind)] = figures
    return summary


def capture_apex(
    settings: ApexSettings, out_dir: Path, *, force: bool = False, process_dir: Path | None = None
) -> tuple[Any, pd.DataFrame]:
    """Run the processes for ``settings.seconds``, save the merged trace and messages.csv."""
    import torch

    from archsim.capture.machine import source_description
    from archsim.capture.session import ingest_and_save
    from workloads.dqn.env import FRAME_SKIP
    from workloads.r2d2.capture import merge_processes, unprofiled_by_role

    out_dir = Path(out_dir)
    check_output_dir(out_dir, force)
    if settings.netns:
        from workloads.apex.netns import check_available

        check_available()  # one line before any process or namespace exists
    with tempfile.TemporaryDirectory(prefix="archsim-apex-") as tmp:
        tmp_dir = Path(tmp)
        result, logs = run_apex(settings, Path(process_dir) if process_dir else tmp_dir / "procs")
        raw_path = tmp_dir / RAW_FILE
        merged = merge_processes(result, raw_path)
        stopped = {
            f"{r.role}-{r.index}": int(r.sidecar["recording_stopped_time_ns"])
            for r in result.processes
            if r.sidecar and "recording_stopped_time_ns" in r.sidecar
        }
        table = message_table(logs, stopped)
        meta = {
            "workload": {
                "name": "apex",
                "settings": settings.as_dict(),
                "frames_per_env_step": FRAME_SKIP,
                "replay_placement": settings.replay_placement,
            },
            "source": source_description("cpu"),
            "torch_version": str(torch.__version__),
            "capture": {
                "schedule": None,
                "recorded_fraction": RECORDED_FRACTION,
                "record_shapes": settings.record_shapes,
                "multi_process": True,
                "netns": settings.netns,
                "complete": result.complete,
                "incomplete_reason": result.failure,
                "run_seconds": round(result.run_seconds, 3),
                "processes": merged["processes"],
                "messages_file": MESSAGES_FILE,
                "messages": message_summary(table),
                "messages_unprofiled": message_summary(table[~table["profiled"]]),
            },
        }
        unprofiled = unprofiled_by_role(merged["processes"])
        if unprofiled:
            meta["capture"]["unprofiled_cpu_us"] = unprofiled
        trace = ingest_and_save(raw_path, meta, out_dir, force)
        with atomic_output_file(out_dir / MESSAGES_FILE) as handle:
            table.to_csv(handle, index=False)
    if not result.complete:
        raise ArchsimError(
            f"{result.failure}; the partial trace is in {out_dir} (meta capture.complete: false)"
        )
    return trace, table
