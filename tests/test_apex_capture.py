"""Ape-X runtime end to end: a short multi-process capture on real ALE Pong per replay placement, with
assertions on the merged trace and the message log (messages from every actor, prioritized samples,
priority updates), and the network-namespace path (root only) including its cleanup on a normal end,
a killed child and an interrupt."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pandas as pd
import pytest

from archsim.errors import ArchsimError
from archsim.trace.format import load
from workloads.apex import netns
from workloads.apex.capture import MESSAGES_FILE, capture_apex
from workloads.apex.settings import ApexSettings

ROOT = os.geteuid() == 0
NEEDS_ROOT = pytest.mark.skipif(not ROOT, reason="network namespaces need root")


def small(**changes) -> ApexSettings:
    # 2 actors, 16 transitions per insert, batch 16: a few seconds give dozens of every message
    base = dict(actors=2, seconds=3.0, send_every=16, batch_size=16, replay_capacity=1024)
    return ApexSettings(**{**base, **changes})


def _dead(pid: int, wait_s: float = 10.0) -> bool:
    """Gone or a zombie (an orphan waiting for init to reap it runs no more), within ``wait_s``."""
    deadline = time.monotonic() + wait_s
    while True:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            return True
        if state == "Z":
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(0.2)


def check_run(out: Path, placement: str) -> pd.DataFrame:
    trace = load(out)
    capture = trace.meta["capture"]
    assert capture["complete"] is True
    roles = [(p["role"], p["index"]) for p in capture["processes"]]
    servers = [("replay", 0)] if placement == "server" else []
    assert roles == servers + [("learner", 0), ("actor", 0), ("actor", 1)]
    steps = trace.steps
    actors = steps[steps.role == "actor"]
    assert sorted(actors.actor.unique()) == [0, 1]
    assert actors.act_us.notna().all() and actors.replay_insert_us.notna().any()
    learner = steps[steps.role == "learner"]
    assert len(learner) >= 1 and (learner.batch_size == 16).all()
    whole = learner[learner.cpu_us.notna()]
    assert whole.replay_sample_us.notna().all() and whole.priority_update_us.notna().all()
    assert whole.train_backward_us.notna().all()
    table = pd.read_csv(out / MESSAGES_FILE)
    inserts = table[table.kind == "insert"]
    # inserts from every actor, each of 16 transitions (56,448 B each as two 4x84x84 stacks),
    # received and applied where the replay lives
    replay = "replay-0" if placement == "server" else "learner-0"
    assert set(inserts.src) == {"actor-0", "actor-1"} and set(inserts.dst) == {replay}
    assert (inserts["items"] == 16).all() and (inserts.bytes > 16 * 56_448).all()
    applied = inserts[inserts.server_us.notna()]
    # The stop may cut the inserts still in flight (how many depends on how busy the machine is:
    # with the replay in the learner they queue behind training steps), but only the last ones:
    # per actor, every insert sent before an applied one was applied too.
    assert len(applied) >= len(inserts) / 2
    for src, sent in inserts.groupby("src"):
        unapplied = sent[sent.server_us.isna()]
        if len(unapplied):
            assert sent[sent.server_us.notna()].seq.max() < unapplied.seq.min(), src
    assert (applied.latency_us >= applied.server_us).all()
    # CPU time of the work never exceeds its wall time (the CPU window is stamped a few us wider)
    served = table[table.server_us.notna()]
    assert (served.server_cpu_us >= 0).all() and (
        served.server_cpu_us <= served.server_us + 100
    ).all()
    # parameters fetched by every actor: 6.7 MB of Nature DQN, a measured round trip
    params = table[table.kind == "params"]
    assert set(params.dst) == {"actor-0", "actor-1"} and (params.bytes > 6_700_000).all()
    assert (params.round_trip_us.dropna() > 0).all()
    summary = capture["messages"]
    assert summary["insert"]["count"] == len(inserts)
    if placement == "server":
        # prioritized samples answered over the network, each followed by a priority update
        samples = table[(table.kind == "sample") & (table["items"] > 0)]
        updates = table[table.kind == "priority_update"]
        assert (samples["items"] == 16).all() and len(samples) >= len(learner)
        assert (samples.round_trip_us > 0).all() and (updates["items"] == 16).all()
        assert len(updates) >= len(learner) - 1 and set(updates.dst) == {"replay-0"}
        assert summary["sample"]["count"] == len(samples)
    else:
        assert not table.kind.isin(["sample", "sample_request", "priority_update"]).any()
    return table


def test_capture_with_a_replay_server(tmp_path):
    out = tmp_path / "trace"
    capture_apex(small(replay_placement="server"), out)
    check_run(out, "server")


@pytest.mark.slow
@pytest.mark.skipif(
    ROOT,
    reason="as root the namespace test below captures this placement (replay in the learner), "
    "over 1-Gbit/s links, and checks it with the same check_run (the suite's time budget)",
)
def test_capture_with_the_replay_in_the_learner(tmp_path):
    out = tmp_path / "trace"
    capture_apex(small(replay_placement="learner"), out)
    check_run(out, "learner")


@NEEDS_ROOT
def test_capture_in_network_namespaces_leaves_nothing_behind(tmp_path):
    out = tmp_path / "trace"
    capture_apex(small(replay_placement="learner", netns=True, link_rate_mbit=1000), out)
    table = check_run(out, "learner")
    # tbf holds every node's egress to 1 Gbit/s past its 64 KiB bucket: 6.75 MB of parameters
    # cannot arrive sooner than (bytes - 64 KiB) x 8 / 1e9 s (53.5 ms) after the request
    params = table[table.kind == "params"]
    assert (params.round_trip_us >= (params.bytes - 65_536) * 8 / 1e9 * 1e6).all()
    assert netns.leftovers() == []
    assert load(out).meta["capture"]["netns"] is True


@NEEDS_ROOT
def test_namespaces_are_removed_when_setup_fails_halfway(tmp_path):
    topo = netns.Topology(["learner-0", "actor-0"])
    topo.nodes.append("actor-0")  # a duplicate node: its namespace exists already, ip refuses
    with pytest.raises(ArchsimError, match="ip netns add .* failed"), topo:
        pass
    assert netns.leftovers() == []


def _wait_for_namespaces(pid: int, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not netns.leftovers(pid):
        assert time.monotonic() < deadline, "the run never made its namespaces"
        time.sleep(0.2)


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def _last_started_node(children: list[int]) -> int:
    """The node process started last (an actor). Not the largest PID: PIDs wrap (pid_max 32768
    here), and after a wrap the largest one can be multiprocessing's resource tracker, started
    before the nodes, whose death the run rightly ignores (it then runs its full length)."""

    def start_ticks(pid: int) -> int:
        return int((Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split())[19])

    nodes = [pid for pid in children if b"spawn_main" in Path(f"/proc/{pid}/cmdline").read_bytes()]
    return max(nodes, key=start_ticks)


@NEEDS_ROOT
@pytest.mark.slow
@pytest.mark.parametrize("how", ["interrupt", "killed child"])
def test_namespaces_and_processes_are_cleaned_up_on_interrupt_and_killed_child(tmp_path, how):
    cmd = [sys.executable, "-m", "archsim", "capture", "apex", "--netns", "--seconds", "60"]
    cmd += ["--out", str(tmp_path / "trace")]
    run = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_namespaces(run.pid, 120)
        deadline = time.monotonic() + 120
        while len(_children(run.pid)) < 4 and time.monotonic() < deadline:
            time.sleep(0.2)  # replay server, learner, 2 actors (+ the resource tracker)
        time.sleep(2.0)
        children = _children(run.pid)
        if how == "interrupt":
            run.send_signal(signal.SIGINT)
        else:
            os.kill(_last_started_node(children), signal.SIGKILL)
        _, err = run.communicate(timeout=180)
    finally:
        if run.poll() is None:
            run.kill()
    assert run.returncode in (1, 2, 130) and err.strip().count("\n") == 0, err
    assert netns.leftovers(run.pid) == []
    alive = [pid for pid in children if not _dead(pid)]
    assert alive == [], [Path(f"/proc/{pid}/cmdline").read_bytes() for pid in alive]


def test_netns_refused_in_one_line_when_not_root(tmp_path):
    if not ROOT:
        with pytest.raises(ArchsimError, match="needs root"):
            capture_apex(small(netns=True), tmp_path / "trace")
        return
    # as root: run the CLI as an unprivileged user when the system has one
    probe = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "true"])
    if probe.returncode != 0:
        pytest.skip("cannot drop privileges here (setpriv)")
    shared = Path(tempfile.mkdtemp(prefix="archsim-apex-nobody-"))  # pytest's tmp is root-only
    shared.chmod(0o777)
    out = shared / "trace"
    try:
        done = subprocess.run(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
            + [sys.executable, "-m", "archsim", "capture", "apex", "--netns", "--out", str(out)],
            capture_output=True,
            text=True,
            env={**os.environ, "HOME": str(shared)},
        )
    finally:
        shutil.rmtree(shared)
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        "archsim: error: --netns: creating network namespaces needs root (run without --netns)"
    )
    assert not out.exists()


def test_example_trace_has_messages_from_every_actor_and_stays_small():
    from tests.conftest import PROJECT_ROOT

    example = PROJECT_ROOT / "traces" / "apex-dqn-cpu"
    trace = load(example)
    assert trace.meta["workload"]["name"] == "apex"
    table = pd.read_csv(example / MESSAGES_FILE)
    assert set(table[table.kind == "insert"].src) == {"actor-0", "actor-1"}
    assert (table[table.kind == "sample"]["items"] > 0).any()
    assert (table.kind == "priority_update").any()
    # the per-kind summary in meta is that of the file
    summary = trace.meta["capture"]["messages"]
    assert summary["insert"]["count"] == int((table.kind == "insert").sum())
    assert all(p.stat().st_size < 1_000_000 for p in example.iterdir())
