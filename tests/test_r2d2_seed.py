"""SEED-style R2D2 runtime: central inference state, wire format, multi-process capture (merging its
traces: test_r2d2_capture_merge.py), and the failure paths (dead actor, port in use, a learner that
never starts)."""

from __future__ import annotations

import dataclasses
import json
import os
import select
import signal
import socket
import threading
import time
from pathlib import Path

import numpy as np
import pytest
import torch

from archsim.errors import ArchsimError
from archsim.trace.format import load
from workloads.r2d2.config import R2D2Config
from workloads.r2d2.model import R2D2Net
from workloads.r2d2.seed import protocol
from workloads.r2d2.seed.inference import EnvStates, apex_epsilons
from workloads.r2d2.seed.probe import PROBE_REPEATS, PROBE_SIZES, probe_inference, probe_sizes
from workloads.r2d2.seed.profiling import stepped_path
from workloads.r2d2.seed.runner import PROCESSES_FILE, run_seed
from workloads.r2d2.seed.settings import SeedSettings

# Short sequences so a few seconds of Pong fill replay: 20 steps, 10 burn-in, overlap 10.
SMALL_R2D2 = dataclasses.replace(
    R2D2Config(),
    sequence_length=20,
    burn_in=10,
    sequence_overlap=10,
    batch_size=2,
    replay_capacity_sequences=32,
)


def small_settings(**changes) -> SeedSettings:
    base = SeedSettings(
        actors=2,
        envs_per_actor=2,
        seconds=4.0,
        inference_batch=4,
        replay_ratio=1.0,
        record_shapes=False,
        r2d2=SMALL_R2D2,
    )
    return dataclasses.replace(base, **changes)


def _dead(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    # a zombie still answers kill(0); its /proc state says Z
    status = Path(f"/proc/{pid}/status")
    return status.exists() and "zombie" in status.read_text()


# ---------------------------------------------------------------- pieces that run in this process


def test_apex_epsilons():
    # eps_i = 0.4 ** (1 + 7 i / (N - 1)): N = 3 -> 0.4, 0.4 ** 4.5, 0.4 ** 8
    assert apex_epsilons(3) == pytest.approx([0.4, 0.4**4.5, 0.4**8])


def test_protocol_round_trip():
    frames = np.arange(2 * 84 * 84, dtype=np.int64).reshape(2, 84, 84).astype(np.uint8)
    payload = protocol.encode_request(frames, np.array([1.0, -1.0]), np.array([False, True]))
    # 2 frames x 7,056 B + 2 float32 rewards + 2 done bytes = 14,112 + 8 + 2 = 14,122 B
    assert len(payload) == 14_122
    f, r, d = protocol.decode_request(payload, 2)
    assert (f == frames).all() and r.tolist() == [1.0, -1.0] and d.tolist() == [False, True]
    # a reply: 4 B per action and the stop-recording flag byte
    for flag in (False, True):
        reply = protocol.encode_reply(np.array([3, 5]), flag)
        assert len(reply) == 9
        actions, stop_recording = protocol.decode_reply(reply)
        assert actions.tolist() == [3, 5] and stop_recording is flag


def test_sequence_message_round_trip():
    # local-inference actors ship whole sequences: every field must survive the wire unchanged
    from workloads.r2d2.sequences import SequenceBuilder

    builder = SequenceBuilder(4, 2, (4, 84, 84), lstm_size=3)
    rng = np.random.default_rng(1)
    out = []
    for t in range(4):
        obs = rng.integers(0, 255, (4, 84, 84), dtype=np.uint8)
        h = np.full(3, t, dtype=np.float32)
        out += builder.add(obs, t, 0.5 * t, t == 3, t - 1, 0.5 * (t - 1), h, -h)
    seq = out[0]
    payload = protocol.encode_sequence(seq)
    # 1 kind byte + 8 start + 7 frames x 7,056 + T=4 x (8 + 4 + 4 + 1 + 8 + 4) + 2 x 3 x 4 = 49,541 B
    assert len(payload) == 1 + 8 + 7 * 7056 + 4 * 29 + 24
    back = protocol.decode_sequence(payload, 4, 4, 3)
    for field in dataclasses.fields(seq):
        assert np.array_equal(getattr(back, field.name), getattr(seq, field.name)), field.name


def test_env_states_builds_sequences_from_observations():
    # One env, sequences of 4 overlapping by 2. The actor reports (frame_t, r_{t-1}, done_{t-1}).
    cfg = dataclasses.replace(SMALL_R2D2, sequence_length=4, burn_in=2, sequence_overlap=2)
    states = EnvStates(1, cfg, (84, 84), seed=0)
    torch.manual_seed(0)
    model = R2D2Net(3)
    env = np.array([0])
    acted, sequences = [], []
    for t in range(5):
        frame = np.full((1, 84, 84), t, dtype=np.uint8)
        reward = np.array([10.0 * t], dtype=np.float32)  # reward of step t-1
        sequences += states.observe(env, frame, reward, np.array([False]))
        acted.append(int(states.act(model, env)[0]))
    # 5 observations complete steps 0..3 -> one full window [0, 4)
    assert len(sequences) == 1
    seq = sequences[0]
    assert seq.actions.tolist() == acted[:4]
    assert seq.rewards.tolist() == [10.0, 20.0, 30.0, 40.0]  # r_t arrives with frame t+1
    assert seq.prev_actions.tolist() == [0, *acted[:3]]
    assert seq.prev_rewards.tolist() == [0.0, 10.0, 20.0, 30.0]
    assert seq.h0.tolist() == [0.0] * cfg.lstm_size  # stored state of step 0: start of the episode
    # frames: first stack is frame 0 repeated, then one new frame per step
    assert seq.frames[:, 0, 0].tolist() == [0, 0, 0, 0, 1, 2, 3]


def _wait_until(condition, what: str, timeout_s: float = 60.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.001)


def test_learner_stops_recording_after_every_actor_had_its_last_recorded_reply():
    # A real inference server and two actors on real sockets; the stop callbacks stand where the
    # learner's ProcessProfiler goes. Actor A is quick and B slow: A's request after its flagged
    # reply must wait until B has had its own flagged reply and the recording has stopped, so the
    # recorded batches answer exactly the requests of the actors' recorded steps (2 each).
    from workloads.r2d2.seed.learner_process import InferenceServer, Trainer, bind_listener

    settings = small_settings()
    listener = bind_listener(settings.host, 0)
    lock = threading.Lock()
    torch.manual_seed(0)
    server = InferenceServer(listener, settings, R2D2Net(6, 4, settings.r2d2.lstm_size), lock)
    asked, done = threading.Event(), threading.Event()
    answered_at_stop: list[int] = []

    def stop_recording() -> None:
        answered_at_stop.append(server.stats.inference_requests)

    # 3 steps per env complete no sequence (length 20): the trainer and replay are never touched
    trainer = Trainer(None, None, lock, settings)
    serving = threading.Thread(
        target=server.serve, args=(done, trainer, None, asked.is_set, stop_recording)
    )
    serving.start()
    port = listener.getsockname()[1]
    actors = []
    for index in (0, 1):
        sock = socket.create_connection((settings.host, port), timeout=60)
        protocol.send_message(sock, protocol.encode_hello(index, 2))
        actors.append(sock)
    a, b = actors
    frames = np.zeros((2, 84, 84), dtype=np.uint8)
    request = protocol.encode_request(frames, np.zeros(2), np.zeros(2, dtype=bool))

    def ask(sock: socket.socket) -> None:
        protocol.send_message(sock, request)

    def reply(sock: socket.socket) -> bool:
        actions, last_recorded = protocol.decode_reply(protocol.recv_message(sock))
        assert len(actions) == 2
        return last_recorded

    try:
        ask(a), ask(b)
        assert (reply(a), reply(b)) == (False, False)  # recording, no stop asked
        asked.set()
        _wait_until(lambda: server.stopping_recording, "the server to see the stop request")
        ask(a)
        assert reply(a) is True  # A's last recorded step
        ask(a)  # A's first unrecorded step: held while B has not had its last recorded reply
        ready, _, _ = select.select([a], [], [], 0.5)
        assert ready == [] and answered_at_stop == []
        ask(b)
        assert reply(b) is True  # B's last recorded step; then the recording stops
        assert reply(a) is False  # and A's held request is answered, unrecorded
        ask(b)
        assert reply(b) is False
        # stopped once, after the 4 requests of the recorded steps (A and B, 2 steps each)
        assert answered_at_stop == [4]
    finally:
        done.set()
        serving.join(timeout=60)
        server.close()
        for sock in actors:
            sock.close()
    assert not serving.is_alive()


def test_probe_times_every_size_with_its_forward_step_inside():
    settings = small_settings()
    model = R2D2Net(6, settings.r2d2.frame_stack, settings.r2d2.lstm_size)
    with torch.no_grad():
        probe = probe_inference(model, settings, threading.Lock(), [1, 3])
    assert [p["batch_size"] for p in probe] == [1, 3]
    assert all(p["repeats"] == PROBE_REPEATS and 0 < p["act_cpu_us"] <= p["cpu_us"] for p in probe)
    assert probe_sizes(6) == [1, 2, 4, 6, 8, 16, 32] and probe_sizes(4) == list(PROBE_SIZES)


# ---------------------------------------------------------------- real processes


@pytest.mark.slow
def test_multi_process_capture(tmp_path):
    from workloads.r2d2.capture import capture_r2d2

    # 8 s, recording the first 4: the recorded half must hold a whole learner step, which waits for
    # 20 steps of every env and then trains. Measured: the first learner step began 0.54 s after
    # the first actor step on an idle 2-core box and 0.80-0.83 s beside two busy loops, and one of
    # three runs beside two busy loops and other jobs recorded none in a 2-s half (seconds=4).
    settings = small_settings(seconds=8.0)
    out = tmp_path / "trace"
    trace = capture_r2d2(settings, out)
    loaded = load(out)
    steps = loaded.steps
    actor_rows = steps[steps.role == "actor"]
    # steps from every actor, each with env and wait phases and its K envs as batch size
    assert sorted(actor_rows.actor.unique()) == [0, 1]
    assert (actor_rows.batch_size == 2).all()
    assert actor_rows.inference_wait_us.notna().all()
    # the stop can cut an actor's last step while it waits for its action: no env_step in that one
    last = actor_rows.groupby("actor").step_id.transform("max") == actor_rows.step_id
    assert actor_rows[~last].env_step_us.notna().all()
    # batched central inference: batches above 1 observation, never above --inference-batch
    inference = steps[steps.role == "inference"]
    assert (inference.batch_size > 1).any() and (inference.batch_size <= 4).all()
    assert inference.inference_batch_us.notna().all()
    # every observation sent was answered by exactly one batch: 2 envs per actor step. The learner
    # leads the mid-run stop of recording (seed/learner_process.py), so the recorded batches answer
    # exactly the recorded actor steps, however late any process sees the runner's request
    assert inference.batch_size.sum() == 2 * len(actor_rows)
    # the learner trained
    learner = steps[steps.role == "learner"]
    # (the end of recording, halfway, can cut its last step: no CPU figure, phases missing)
    whole = learner[learner.cpu_us.notna()]
    assert len(whole) >= 1 and whole.train_backward_us.notna().all()
    assert len(learner) - len(whole) <= 1
    # one process per role, distinct pids; actor steps come from the actor processes
    procs = loaded.meta["capture"]["processes"]
    assert loaded.meta["capture"]["complete"] is True
    assert [(p["role"], p["index"]) for p in procs] == [("learner", 0), ("actor", 0), ("actor", 1)]
    pid_of = {(p["role"], p["index"]): p["pid"] for p in procs}
    for a in (0, 1):
        assert set(actor_rows[actor_rows.actor == a].pid) == {pid_of[("actor", a)]}
    assert set(inference.pid) == {pid_of[("learner", 0)]}
    assert all(p["clock_shift_us"] == 0.0 for p in procs)  # one host, one clock
    assert trace.steps.equals(steps)
    # the second half of the run timed without the profiler (actors' and server's steps at least;
    # the learner's if it finished one then), all recorded steps from the first half
    unprofiled = loaded.meta["capture"]["unprofiled_cpu_us"]
    assert unprofiled["actor"]["step"]["steps"] > 0 and unprofiled["inference"]["step"]["steps"] > 0
    assert 0 < unprofiled["actor"]["env_step"]["mean_us"] < unprofiled["actor"]["step"]["mean_us"]
    assert all(p["recording_stopped_time_ns"] > 0 for p in procs)  # every process stopped mid-run
    # after the run: the batch sizes probed (the standard ones and the run's own), each at least as
    # costly as its forward step
    probe = procs[0]["inference_probe"]
    assert [p["batch_size"] for p in probe] == probe_sizes(settings.inference_batch)
    assert all(0 < p["act_cpu_us"] <= p["cpu_us"] for p in probe)
    # an inference step's thread CPU since the server's previous batch: its loop's own work
    later_gaps = inference.sort_values("start_us").gap_cpu_us.iloc[1:]
    assert later_gaps.notna().all() and (later_gaps >= 0).all()


@pytest.mark.slow
def test_dead_actor_stops_the_local_inference_run_and_keeps_a_marked_partial_trace(tmp_path):
    from workloads.r2d2.capture import capture_r2d2

    process_dir = tmp_path / "processes"
    out = tmp_path / "trace"
    # local inference (Ape-X/R2D2 layout) here, so this run also covers actors that act themselves
    settings = small_settings(seconds=60.0, inference="local", param_update_interval=50)
    errors: list[BaseException] = []

    def run() -> None:
        try:
            capture_r2d2(settings, out, process_dir=process_dir)
        except BaseException as exc:
            errors.append(exc)

    thread = threading.Thread(target=run)
    thread.start()
    deadline = time.monotonic() + 120
    procs = None
    while time.monotonic() < deadline and procs is None:
        time.sleep(0.2)
        path = process_dir / PROCESSES_FILE
        if path.exists():
            listed = json.loads(path.read_text())
            if listed and listed[0].get("run_started"):
                procs = listed
    assert procs is not None, "the run never started"
    # actor 0 has recorded a whole step (its stepped file), so the partial trace holds its steps;
    # the deadline only catches a hang
    deadline = time.monotonic() + 120
    while not stepped_path(process_dir, "actor", 0).exists():
        assert time.monotonic() < deadline, "actor 0 never recorded a step"
        time.sleep(0.05)
    victim = next(p for p in procs if p["role"] == "actor" and p["index"] == 1)
    os.kill(victim["pid"], signal.SIGKILL)
    thread.join(timeout=180)
    assert not thread.is_alive()
    assert len(errors) == 1 and isinstance(errors[0], ArchsimError)
    message = str(errors[0])
    assert f"actor 1 process (pid {victim['pid']})" in message and "partial trace" in message
    # no process outlives the run
    assert all(_dead(p["pid"]) for p in procs)
    # the partial trace is kept, marked incomplete, with what the survivors recorded
    trace = load(out)
    capture = trace.meta["capture"]
    assert capture["complete"] is False and "actor 1" in capture["incomplete_reason"]
    traced = {(p["role"], p["index"]): p["traced"] for p in capture["processes"]}
    assert traced == {("learner", 0): True, ("actor", 0): True, ("actor", 1): False}
    actor_rows = trace.steps[trace.steps.role == "actor"]
    assert set(actor_rows.actor) == {0}
    assert actor_rows.act_us.notna().all() and actor_rows.inference_wait_us.isna().all()


def test_port_in_use_is_a_clear_error(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        with pytest.raises(ArchsimError, match=f"port 127.0.0.1:{port} is already in use"):
            run_seed(small_settings(port=port), tmp_path)


def test_learner_that_never_starts_times_out_and_is_cleaned_up(tmp_path):
    # 0.05 s is far less than spawning a Python process that imports torch takes.
    with pytest.raises(ArchsimError, match="did not become ready within 0.05 s") as info:
        run_seed(small_settings(learner_start_timeout_s=0.05), tmp_path)
    pid = int(str(info.value).split("pid ")[1].split(")")[0])
    assert _dead(pid)
