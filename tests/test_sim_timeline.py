"""The Perfetto timeline of a simulated run (archsim.sim.timeline).

Perfetto's Python trace processor (`perfetto` on PyPI) ships no trace_processor binary: it downloads
one on first use, which a test must not do. So the file is checked against the Chrome trace-event
format that Perfetto's JSON importer reads (required keys per phase, flows paired and bound inside
slices, counters numeric) and on its content: one track per actor, args on events, request -> batch
-> reply flows, the counters, and a system small enough to work by hand.
"""

from __future__ import annotations

import json
import math
from collections import Counter, defaultdict

import pytest

from archsim.sim.config import SimConfig
from archsim.sim.run import simulate_system
from archsim.sim.timeline import (
    COUNTER_LIMIT,
    FLOW_LIMIT,
    Timeline,
    chrome_trace,
    write_chrome_trace,
)
from tests.test_sim_support import machine, service_times

NUMBER = (int, float)
REQUIRED = {  # Chrome trace-event format: keys each phase needs
    "X": ("name", "pid", "tid", "ts", "dur"),
    "M": ("name", "pid", "args"),
    "C": ("name", "pid", "ts", "args"),
    "s": ("name", "cat", "id", "pid", "tid", "ts"),
    "f": ("name", "cat", "id", "pid", "tid", "ts", "bp"),
}


def run_timeline(tmp_path, engine="fast", sched="pinned", actors=6, on_gpu=True, **cfg):
    times = service_times(
        actor_step_s=(231e-6, 262e-6, 305e-6),
        up_s=11e-6,
        down_s=9e-6,
        server_s=4e-6,
        inference_s=83e-6,
        inference_frac=0.4,
        learner_gpu_s=700e-6,
        learner_frac=0.5,
        learner_cpu_s=60e-6,
        launch_s=40e-6,
        on_gpu=on_gpu,
    )
    config = SimConfig(
        actors=actors, inference_batch=4, sim_seconds=0.02, engine=engine, cpu_sched=sched, **cfg
    )
    result = simulate_system(times, machine(8), config, 32, timeline=True, series_bins=20)
    path = write_chrome_trace(tmp_path / "timeline.json", result.timeline, result.power_series)
    return json.loads(path.read_text()), result


def check_format(trace: dict) -> list[dict]:
    """Assert the Chrome trace-event format; return the events."""
    assert set(trace) <= {"traceEvents", "displayTimeUnit"}
    events = trace["traceEvents"]
    for event in events:
        ph = event["ph"]
        assert ph in REQUIRED, event
        for key in REQUIRED[ph]:
            assert key in event, (key, event)
        for key in ("ts", "dur"):
            if key in event:
                assert isinstance(event[key], NUMBER) and math.isfinite(event[key]), event
        if ph == "X":
            assert event["dur"] >= 0 and event["ts"] >= 0
        if ph == "C":
            assert event["args"] and all(
                isinstance(v, NUMBER) and math.isfinite(v) for v in event["args"].values()
            )
        if ph == "f":
            assert event["bp"] == "e"
    return events


def tracks(events: list[dict]) -> dict[tuple[int, int], str]:
    return {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in events
        if e["ph"] == "M" and e["name"] == "thread_name"
    }


def enclosing(events: list[dict], point: dict) -> list[dict]:
    """Slices on the point's track that hold it strictly inside (Perfetto binds a flow there)."""
    return [
        e
        for e in events
        if e["ph"] == "X"
        and (e["pid"], e["tid"]) == (point["pid"], point["tid"])
        and e["ts"] < point["ts"] < e["ts"] + e["dur"]
    ]


def test_one_track_per_actor_with_args(tmp_path):
    trace, _ = run_timeline(tmp_path)
    events = check_format(trace)
    names = tracks(events)
    assert len(set(names.values())) == len(names)  # one track per name
    for actor in range(6):
        assert f"actor {actor}" in names.values()
    assert {"learner", "inference server", "inference stream", "learner stream"} <= set(
        names.values()
    )
    by_track = defaultdict(list)
    for e in events:
        if e["ph"] == "X":
            by_track[names[(e["pid"], e["tid"])]].append(e)
    for actor in range(6):
        steps = [e for e in by_track[f"actor {actor}"] if e["name"] == "env_step"]
        # every step of the actor on its own track, numbered 0, 1, 2, ... with its hardware thread
        assert [e["args"]["step"] for e in steps] == list(range(len(steps)))
        assert len(steps) > 10
        assert all(e["args"]["hw_thread"] >= 0 and e["args"]["queue_wait_us"] >= 0 for e in steps)
        waits = [e for e in by_track[f"actor {actor}"] if e["name"] == "await_actions"]
        assert waits and all(e["args"]["batch_size"] >= 1 for e in waits)
        # an actor's slices never overlap: it steps, waits for its actions, steps again
        spans = sorted((e["ts"], e["ts"] + e["dur"]) for e in by_track[f"actor {actor}"])
        assert all(a[1] <= b[0] + 1e-6 for a, b in zip(spans, spans[1:], strict=False))
    batches = by_track["inference stream"]
    assert batches and {e["name"] for e in batches} == {"inference_batch"}
    assert all(1 <= e["args"]["batch_size"] <= 4 and "queue_wait_us" in e["args"] for e in batches)
    train = by_track["learner stream"]
    assert train and {e["name"] for e in train} == {"train_step"}
    assert {"replay_sample", "kernel_launches"} <= {e["name"] for e in by_track["learner"]}
    # slice names are stable: no numbers baked into them
    assert not any(ch.isdigit() for e in events if e["ph"] == "X" for ch in e["name"])


def test_flows_go_from_request_to_batch_to_reply(tmp_path):
    trace, _ = run_timeline(tmp_path)
    events = check_format(trace)
    names = tracks(events)
    flows = defaultdict(dict)
    for e in events:
        if e["ph"] in "sf":
            assert e["ph"] not in flows[e["id"]], e  # one start and one finish per id
            flows[e["id"]][e["ph"]] = e
    assert flows
    kinds = Counter()
    replies_to = Counter()
    for pair in flows.values():
        start, finish = pair["s"], pair["f"]  # paired
        assert start["name"] == finish["name"] and start["ts"] <= finish["ts"]
        for point in (start, finish):  # bound: strictly inside one slice of its track
            assert len(enclosing(events, point)) == 1, point
        src, dst = names[(start["pid"], start["tid"])], names[(finish["pid"], finish["tid"])]
        kinds[start["name"]] += 1
        if start["name"] == "request":
            assert src.startswith("actor ") and dst == "inference server"
            assert enclosing(events, start)[0]["name"] == "await_actions"
            assert enclosing(events, finish)[0]["name"] == "inference_server"
        else:
            assert start["name"] == "reply"
            assert src == "inference stream" and dst.startswith("actor ")
            assert enclosing(events, start)[0]["name"] == "inference_batch"
            assert enclosing(events, finish)[0]["name"] == "await_actions"
            replies_to[dst] += 1
    assert kinds["request"] > 0 and abs(kinds["request"] - kinds["reply"]) <= 6
    assert set(replies_to) == {f"actor {a}" for a in range(6)}


def test_counters_queue_depths_sm_utilization_and_power_apart(tmp_path):
    # a replay ratio throttles both sides now and then, so the replay queues fill
    trace, result = run_timeline(tmp_path, replay_ratio=2.0, replay_slack_batches=1.0)
    events = check_format(trace)
    series = defaultdict(list)
    for e in events:
        if e["ph"] == "C":
            (value,) = e["args"].values()
            series[e["name"]].append((e["ts"], value))
    assert {
        "inference_queue_depth",
        "gpu_sm_util",
        "cpu_power_w",
        "gpu_power_w",
    } <= set(series)
    assert "replay_insert_queue_depth" in series or "replay_sample_queue_depth" in series
    for name, samples in series.items():
        assert [t for t, _ in samples] == sorted(t for t, _ in samples), name
    for name in ("inference_queue_depth", "replay_insert_queue_depth", "replay_sample_queue_depth"):
        values = [v for _, v in series.get(name, [])]
        assert all(v >= 0 and v == int(v) for v in values), name
    assert max(v for _, v in series["inference_queue_depth"]) <= 6  # never more than the actors
    assert all(0 <= v <= 1 for _, v in series["gpu_sm_util"])
    assert max(v for _, v in series["gpu_sm_util"]) > 0
    # the two power counters add up to the run's power series, bin by bin
    starts, total_w = result.power_series
    cpu = dict(series["cpu_power_w"])
    gpu = dict(series["gpu_power_w"])
    for t, watts in zip(starts, total_w, strict=True):
        assert cpu[t * 1e6] + gpu[t * 1e6] == pytest.approx(watts)
        assert cpu[t * 1e6] >= 40 and gpu[t * 1e6] >= 55  # at least idle (machine(): DGX-1)


def test_a_system_worked_by_hand(tmp_path):
    # One actor alone: step 100 us, request 10 us up, server 5 us, inference 20 us on the GPU,
    # 10 us down. Step 0 runs [0, 100]; its request arrives at 110, the server works [110, 115], the
    # GPU [115, 135], the actions land at 145, step 1 runs [145, 245].
    times = service_times(
        actor_step_s=(100e-6,),
        up_s=10e-6,
        down_s=10e-6,
        server_s=5e-6,
        inference_s=20e-6,
        inference_frac=0.5,
        learner_gpu_s=1.0,  # one long training step: it never gets in the way
        learner_frac=0.5,
    )
    config = SimConfig(actors=1, inference_batch=1, sim_seconds=300e-6, engine="simpy")
    result = simulate_system(times, machine(4), config, 32, timeline=True)
    events = check_format(chrome_trace(result.timeline))
    names = tracks(events)
    slices = {
        (names[(e["pid"], e["tid"])], e["name"], round(e["ts"], 6), round(e["dur"], 6)): e
        for e in events
        if e["ph"] == "X"
    }
    assert ("actor 0", "env_step", 0.0, 100.0) in slices
    assert ("actor 0", "await_actions", 100.0, 45.0) in slices
    assert ("inference server", "inference_server", 110.0, 5.0) in slices
    assert ("inference stream", "inference_batch", 115.0, 20.0) in slices
    assert ("actor 0", "env_step", 145.0, 100.0) in slices
    wait = slices[("actor 0", "await_actions", 100.0, 45.0)]["args"]
    assert wait == {"batch": 0, "batch_size": 1, "queue_wait_us": pytest.approx(0.0, abs=1e-6)}
    assert slices[("actor 0", "env_step", 145.0, 100.0)]["args"]["step"] == 1
    points = sorted(
        (e["name"], e["ph"], round(e["ts"], 3))
        for e in events
        if e["ph"] in "sf" and e["id"] <= 2  # the first request's two flows
    )
    inset = 0.01  # us: FLOW_INSET_S
    assert points == [
        ("reply", "f", round(145.0 - inset, 3)),
        ("reply", "s", round(135.0 - inset, 3)),
        ("request", "f", round(115.0 - inset, 3)),
        ("request", "s", round(100.0 + inset, 3)),
    ]


@pytest.mark.parametrize("engine, sched", [("simpy", "pinned"), ("fast", "shared")])
def test_other_engines_and_shared_cpu_give_the_same_layout(tmp_path, engine, sched):
    trace, _ = run_timeline(tmp_path, engine=engine, sched=sched)
    events = check_format(trace)
    names = set(tracks(events).values())
    assert {f"actor {a}" for a in range(6)} <= names and "inference server" in names
    flows = Counter(e["ph"] for e in events if e["ph"] in "sf")
    assert flows["s"] == flows["f"] > 0


def test_plain_and_fast_paths_draw_the_same_actor_tracks(tmp_path):
    fast, _ = run_timeline(tmp_path, engine="fast")
    plain, _ = run_timeline(tmp_path, engine="simpy")

    def steps(trace):
        names = tracks(trace["traceEvents"])
        return sorted(
            (names[(e["pid"], e["tid"])], e["args"]["step"], round(e["ts"], 3), round(e["dur"], 3))
            for e in trace["traceEvents"]
            if e["ph"] == "X" and e["name"] == "env_step"
        )

    assert steps(fast) == steps(plain)


def test_size_is_bounded():
    timeline = Timeline()
    for i in range(2 * FLOW_LIMIT + 10):
        timeline.flow("request", ("a", i, "after"), ("b", i, "before"))
    for i in range(COUNTER_LIMIT + 10):
        timeline.counter("gpu_sm_util", i, 0.5)
        timeline.delta("inference_queue_depth", i, +1)
        timeline.delta("inference_queue_depth", i, -1)
    assert len(timeline.flows) == 2 * FLOW_LIMIT
    assert len(timeline.counters["gpu_sm_util"]) == COUNTER_LIMIT
    assert len(timeline.deltas["inference_queue_depth"]) == 2 * COUNTER_LIMIT


def test_a_plain_slice_list_still_writes():
    # the sequential loop (archsim.sim.sequential) hands over (label, track, start, duration) tuples
    events = check_format(chrome_trace([("iteration", "cpu0", 0.0, 1e-3)], ([0.0], [150.0])))
    assert [e["name"] for e in events if e["ph"] == "X"] == ["iteration"]
    assert [e["name"] for e in events if e["ph"] == "C"] == ["power_w"]


def test_without_a_gpu_the_reply_leaves_the_server_thread(tmp_path):
    trace, _ = run_timeline(tmp_path, on_gpu=False)
    events = check_format(trace)
    names = tracks(events)
    replies = [e for e in events if e["ph"] == "s" and e["name"] == "reply"]
    assert replies
    for start in replies:
        assert names[(start["pid"], start["tid"])] == "inference server"
        assert enclosing(events, start)[0]["name"] == "inference_batch"
    assert not any(
        e["ph"] == "C" and e["name"] == "gpu_sm_util" and e["args"]["value"] > 0 for e in events
    )


def test_local_actors_show_the_rate_limiter_hold(tmp_path):
    # local inference under a replay ratio the learner cannot keep up with: actors wait to insert
    trace, _ = run_timeline(tmp_path, inference="local", replay_ratio=4.0, replay_slack_batches=1.0)
    events = check_format(trace)
    names = tracks(events)
    held = [e for e in events if e["ph"] == "X" and e["name"] == "await_replay"]
    assert held and all(names[(e["pid"], e["tid"])].startswith("actor ") for e in held)
    depth = [e["args"]["value"] for e in events if e["name"] == "replay_insert_queue_depth"]
    assert depth and max(depth) >= 1 and min(depth) >= 0
