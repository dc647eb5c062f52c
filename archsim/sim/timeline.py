"""The simulated run as a Chrome trace-event JSON (opens in Perfetto, ui.perfetto.dev, and
chrome://tracing), laid out the way a user asks about an RL system rather than the way the
simulator's executors see it:

- process "node 0 CPU": one thread track per role: "learner", "inference server" (one per server
  thread), "actor 0", "actor 1", ... (an actor's own track, whichever hardware thread it ran on: the
  hardware thread goes into the slice's args);
- process "node 0 GPU 0": one track per stream ("inference stream", "learner stream");
- with ``--nodes`` / ``--replay-placement`` (archsim.sim.replay_server): processes "node K CPU" for the
  actors of other nodes and "replay server node" or "in-network replay server" for the replay's
  track, whose slices (``insert``, ``sample_request``, ``priority_update``, category "net") are the
  replay's work on each message, with flows from the sender's ``net_send`` slice to them and from
  each sample to the learner's ``sample_in_flight`` slice;
- slices with stable names (``env_step``, ``await_actions``, ``inference_server``,
  ``inference_batch``, ``replay_sample``, ``train_step``, ``kernel_launches``, ``param_publish``)
  and their numbers in args (step, batch size, queue wait, hardware thread);
- flows (``ph`` ``s``/``f``, paired by ``id``): each request from the actor's ``await_actions`` slice
  to the server burst that batched it, and the reply from the batch's last slice (GPU or server) back
  to the actor;
- counters: ``inference_queue_depth``, ``replay_insert_queue_depth``, ``replay_sample_queue_depth``,
  ``gpu_sm_util`` (fraction of SMs busy), ``cpu_power_w`` and ``gpu_power_w`` (separately).

Size is bounded: at most ``TIMELINE_LIMIT`` slices, ``FLOW_LIMIT`` requests' flows (two flows of
two events each) and ``COUNTER_LIMIT`` samples per counter are kept (the first ones of the window),
so a file holds at most about 200k + 4 x 25k + 5 x 20k + power-bin events (a few tens of MB).
"""

from __future__ import annotations

import bisect
import json
from pathlib import Path

from archsim.atomic import atomic_output_file

TIMELINE_LIMIT = 200_000  # slices kept (keeps the JSON openable in a browser)
FLOW_LIMIT = 25_000  # requests whose request and reply flows are kept
COUNTER_LIMIT = 20_000  # samples kept per counter
# A flow's end point sits this far inside the slice it binds to (Perfetto reads ts in us and keeps
# whole ns), never more than a quarter of the slice.
FLOW_INSET_S = 10e-9

NODE_PID, GPU_PID = 1, 2
# Slices of replay messages (archsim.sim.replay_server), category "net"
NET_SLICES = frozenset(("insert", "sample_request", "priority_update", "sample_in_flight"))
# Chrome-trace thread ids: learner and server first, actors after (tid = ACTOR_TID0 + actor).
LEARNER_TID, SERVER_TID0, ACTOR_TID0, OTHER_TID0 = 1, 10, 1000, 1_000_000
GPU_TRACKS = {"gpu_inference": (1, "inference stream"), "gpu_learner": (2, "learner stream")}


class Timeline(list):
    """Slices ``(label, track, start s, duration s, args or None)`` plus flows, counters and the
    run's CPU/GPU power, filled in by the simulation's components while a timeline is asked for."""

    def __init__(self) -> None:
        super().__init__()
        self.flows: list[tuple[str, tuple, tuple]] = []  # (name, from end point, to end point)
        self.counters: dict[str, list[tuple[float, float]]] = {}  # name -> (t s, value)
        self.deltas: dict[str, list[tuple[float, int]]] = {}  # name -> (t s, +1 or -1)
        self.sent: dict[int, float] = {}  # actor -> when its last request left it
        self.steps: dict[int, int] = {}  # actor -> env steps recorded so far
        self.thread_names: dict[int, str] = {}  # executor thread -> role track
        self.power: tuple | None = None  # (bin start s, CPU W, GPU W), set by metrics.power_series
        # track -> (pid, process name) for tracks outside node 0 (other actor nodes, the replay
        # server's node, an in-network replay; archsim.sim.replay_server)
        self.track_process: dict[str, tuple[int, str]] = {}

    def name_thread(self, thread: int, name: str) -> None:
        """The track for slices of executor ``thread`` that name no track (several roles: joined)."""
        old = self.thread_names.get(thread)
        if old is None:
            self.thread_names[thread] = name
        elif name not in old.split(" + "):
            self.thread_names[thread] = f"{old} + {name}"

    def track_of(self, thread: int) -> str:
        return self.thread_names.get(thread, f"cpu{thread}")

    def next_step(self, actor: int) -> int:
        step = self.steps.get(actor, 0)
        self.steps[actor] = step + 1
        return step

    def counter(self, name: str, t_s: float, value: float) -> None:
        samples = self.counters.setdefault(name, [])
        if len(samples) < COUNTER_LIMIT:
            samples.append((t_s, value))

    def delta(self, name: str, t_s: float, change: int) -> None:
        """One more (+1) or one fewer (-1) in the queue ``name`` at ``t_s``."""
        changes = self.deltas.setdefault(name, [])
        if len(changes) < 2 * COUNTER_LIMIT:
            changes.append((t_s, change))

    def flow(self, name: str, src: tuple[str, float, str], dst: tuple[str, float, str]) -> None:
        """A flow from ``src`` to ``dst``, each ``(track, t s, side)``: side "after" binds to the slice
        that starts at or before t and runs past it, "before" to the one that ends at or after t."""
        if len(self.flows) < 2 * FLOW_LIMIT:
            self.flows.append((name, src, dst))


def chrome_trace(timeline: list, power_series=None) -> dict:
    """Chrome trace-event JSON object of a run's slices (4- or 5-tuples), flows and counters."""
    events: list[dict] = [
        _meta("process_name", NODE_PID, None, "node 0 CPU"),
        _meta("process_sort_index", NODE_PID, None, 0, key="sort_index"),
        _meta("process_name", GPU_PID, None, "node 0 GPU 0"),
        _meta("process_sort_index", GPU_PID, None, 1, key="sort_index"),
    ]
    ids: dict[str, tuple[int, int]] = {}
    by_track: dict[str, list[tuple[float, float]]] = {}
    processes = getattr(timeline, "track_process", {})
    named = {NODE_PID, GPU_PID}
    for item in timeline:
        label, track, start, duration = item[:4]
        args = item[4] if len(item) > 4 else None
        if track not in ids:
            ids[track] = _track_id(track, len(ids))
            if track in processes:  # a track of another node: its own Perfetto process
                pid, process = processes[track]
                ids[track] = (pid, ids[track][1])
                if pid not in named:
                    named.add(pid)
                    events.append(_meta("process_name", pid, None, process))
                    events.append(_meta("process_sort_index", pid, None, pid, key="sort_index"))
            pid, tid = ids[track]
            events.append(_meta("thread_name", pid, tid, _display_name(track)))
            events.append(_meta("thread_sort_index", pid, tid, tid, key="sort_index"))
        pid, tid = ids[track]
        event = {
            "ph": "X",
            "cat": "gpu" if pid == GPU_PID else "net" if label in NET_SLICES else "cpu",
            "name": label,
            "pid": pid,
            "tid": tid,
            "ts": start * 1e6,
            "dur": duration * 1e6,
        }
        if args:
            event["args"] = args
        events.append(event)
        by_track.setdefault(track, []).append((start, start + duration))
    if isinstance(timeline, Timeline):
        events += _flow_events(timeline, ids, by_track)
        events += _counter_events(timeline)
        if timeline.power is not None:
            starts, cpu_w, gpu_w = timeline.power
            events += _series("cpu_power_w", NODE_PID, starts, cpu_w)
            events += _series("gpu_power_w", GPU_PID, starts, gpu_w)
            power_series = None
    if power_series is not None:  # a run without the split: the total, named as such
        events += _series("power_w", NODE_PID, *power_series)
    return {"traceEvents": events, "displayTimeUnit": "ms"}


def write_chrome_trace(path: Path, timeline: list, power_series=None) -> Path:
    with atomic_output_file(Path(path)) as handle:
        json.dump(chrome_trace(timeline, power_series), handle)
    return Path(path)


def _meta(name: str, pid: int, tid: int | None, value, key: str = "name") -> dict:
    event = {"ph": "M", "name": name, "pid": pid, "args": {key: value}}
    if tid is not None:
        event["tid"] = tid
    return event


def _track_id(track: str, n: int) -> tuple[int, int]:
    if track in GPU_TRACKS:
        return GPU_PID, GPU_TRACKS[track][0]
    if track.startswith("gpu"):
        return GPU_PID, 100 + n
    if track.startswith("actor ") and track[6:].isdigit():
        return NODE_PID, ACTOR_TID0 + int(track[6:])
    if track.startswith("learner"):
        return NODE_PID, LEARNER_TID
    if track.startswith("inference server"):
        rest = track[len("inference server") :].strip()
        return NODE_PID, SERVER_TID0 + (int(rest) if rest.isdigit() else 0)
    return NODE_PID, OTHER_TID0 + n


def _display_name(track: str) -> str:
    return GPU_TRACKS[track][1] if track in GPU_TRACKS else track


def _bind(spans: list[tuple[float, float]], starts: list[float], t: float, side: str):
    """The point inside the slice of ``spans`` (sorted by start) that ``t`` on ``side`` names."""
    if side == "after":
        i = bisect.bisect_right(starts, t) - 1
        ok = i >= 0 and spans[i][0] <= t < spans[i][1]
    else:
        i = bisect.bisect_left(starts, t) - 1
        ok = i >= 0 and spans[i][0] < t <= spans[i][1]
    if not ok:
        return None
    start, end = spans[i]
    inset = min(FLOW_INSET_S, (end - start) / 4)
    return min(max(t, start + inset), end - inset)


def _flow_events(timeline: Timeline, ids: dict, by_track: dict) -> list[dict]:
    spans = {track: sorted(v) for track, v in by_track.items()}
    starts = {track: [s for s, _ in v] for track, v in spans.items()}
    events: list[dict] = []
    for flow_id, (name, src, dst) in enumerate(timeline.flows, start=1):
        points = []
        for track, t, side in (src, dst):
            at = _bind(spans[track], starts[track], t, side) if track in spans else None
            points.append(at)
        if None in points:
            continue  # an end outside the kept slices (past the window or the slice limit)
        for (track, _, _), at, ph in zip((src, dst), points, ("s", "f"), strict=True):
            pid, tid = ids[track]
            event = {"ph": ph, "cat": "flow", "name": name, "id": flow_id, "pid": pid, "tid": tid}
            event["ts"] = at * 1e6
            if ph == "f":
                event["bp"] = "e"  # bind to the enclosing slice, not the next one
            events.append(event)
    return events


def _counter_events(timeline: Timeline) -> list[dict]:
    events: list[dict] = []
    for name, changes in timeline.deltas.items():
        samples, level = [], 0
        for t, change in sorted(changes, key=lambda c: (c[0], -c[1])):  # arrivals first
            level += change
            if samples and samples[-1][0] == t:
                samples[-1] = (t, level)
            else:
                samples.append((t, level))
        events += _series(name, NODE_PID, *zip(*samples, strict=True)) if samples else []
    for name, samples in timeline.counters.items():
        pid = GPU_PID if name.startswith("gpu") else NODE_PID
        kept = [s for i, s in enumerate(samples) if i == 0 or s[1] != samples[i - 1][1]]
        events += _series(name, pid, *zip(*kept, strict=True)) if kept else []
    return events


def _series(name: str, pid: int, starts, values) -> list[dict]:
    return [
        {"ph": "C", "name": name, "pid": pid, "ts": float(t) * 1e6, "args": {"value": float(v)}}
        for t, v in zip(starts, values, strict=True)
    ]
