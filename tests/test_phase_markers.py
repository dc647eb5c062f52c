"""archsim.phase / archsim.step markers: names agreed with ingest, no-ops without a profiler, and a
user's own PyTorch loop captured through the public API."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import torch

import archsim
from archsim.capture.markers import step_label
from archsim.trace import load
from tests.conftest import PROJECT_ROOT


def test_step_label_format():
    assert step_label("actor", actor=3, batch_size=1) == "archsim::actor_step#actor=3,batch_size=1"
    assert step_label("inference", batch_size=8) == "archsim::inference_step#batch_size=8"
    assert step_label("learner") == "archsim::learner_step"


def test_markers_are_shared_no_ops_without_a_profiler():
    assert archsim.phase("act") is archsim.phase("env_step")
    assert archsim.step("actor", actor=0) is archsim.phase("act")


def test_markers_are_recorded_under_a_profiler():
    # items of one `with` are entered left to right, so the markers see the profiler running
    with (
        torch.profiler.profile() as prof,
        archsim.step("learner", batch_size=4),
        archsim.phase("train_forward"),
    ):
        torch.ones(4, 4).matmul(torch.ones(4, 4))
    names = {event.name for event in prof.events()}
    assert {"archsim::learner_step#batch_size=4", "archsim::train_forward"} <= names


def test_a_users_own_loop_is_captured(tmp_path):
    """The public API on a small hand-written actor/learner loop (no schedule: record it all)."""
    model = torch.nn.Linear(8, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    with archsim.capture(
        tmp_path / "t", {"name": "toy", "settings": {"steps": 3}}, schedule=None
    ) as cap:
        for _ in range(3):
            with archsim.step("actor", actor=0), archsim.phase("act"):
                model(torch.ones(1, 8)).argmax()
            with archsim.step("learner", batch_size=16):
                with archsim.phase("train_forward"):
                    loss = model(torch.ones(16, 8)).pow(2).mean()
                with archsim.phase("train_backward"):
                    optimizer.zero_grad()
                    loss.backward()
                with archsim.phase("optimizer_step"):
                    optimizer.step()
            cap.step()
    trace = load(tmp_path / "t")
    assert cap.trace is not None and cap.out_dir == tmp_path / "t"
    assert list(trace.steps.role) == ["actor", "learner"] * 3
    assert (trace.steps[trace.steps.role == "learner"].batch_size == 16).all()
    assert {"act", "train_forward", "train_backward", "optimizer_step"} <= set(trace.ops.phase)
    assert trace.meta["workload"] == {"name": "toy", "settings": {"steps": 3}}
    assert trace.meta["capture"]["schedule"] is None


def test_import_archsim_and_cli_do_not_import_torch():
    code = (
        "import sys, archsim, archsim.cli; archsim.cli.build_parser(); "
        "print('torch' in sys.modules)"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=PROJECT_ROOT, check=True
    )
    assert result.stdout.strip() == "False"


def test_markers_on_another_thread_are_recorded_under_an_all_threads_profiler():
    """torch's enabled-check is per thread; all_threads_recording keeps markers on worker threads."""
    import threading

    from torch._C._profiler import _ExperimentalConfig

    from archsim.capture.markers import all_threads_recording

    def worker() -> None:
        with archsim.phase("train_forward"):
            torch.ones(4).sum()

    config = _ExperimentalConfig(profile_all_threads=True)
    with all_threads_recording(), torch.profiler.profile(experimental_config=config) as prof:
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
    names = {event.name for event in prof.events()}
    assert "archsim::train_forward" in names
    assert archsim.phase("act") is archsim.phase("env_step")  # shortcut is back once it ends


def test_markers_record_thread_cpu_time_apart_from_wall_time(tmp_path):
    # A phase that sleeps (a lock or socket wait) is long in wall time and nearly free in CPU time;
    # one that computes has CPU time close to its wall time. Ingest keeps both.
    import time

    from archsim.trace.ingest import ingest

    with torch.profiler.profile() as prof, archsim.step("actor", actor=0, batch_size=1):
        with archsim.phase("inference_wait"):
            time.sleep(0.02)
        with archsim.phase("env_step"):
            torch.ones(8).sum()  # a cpu op, so the trace has something to ingest
            deadline = time.thread_time() + 0.01
            while time.thread_time() < deadline:
                pass
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    row = ingest(path).steps.iloc[0]
    assert row["inference_wait_us"] >= 20_000 and row["inference_wait_cpu_us"] < 5_000
    assert row["env_step_cpu_us"] >= 10_000
    assert row["env_step_cpu_us"] <= row["env_step_us"] + 1.0  # CPU never exceeds wall (1 us slack)
    assert row["env_step_cpu_us"] + row["inference_wait_cpu_us"] <= row["cpu_us"] + 1.0
    assert row["cpu_us"] <= row["dur_us"] + 1.0


def test_steps_record_their_threads_cpu_between_them(tmp_path):
    # 10 ms of CPU between two steps of one thread: the second step's gap_cpu_us holds it (the
    # first has no earlier step). A step the profiler does not record (inside a capture's timing)
    # breaks the chain: the next recorded step has no figure.
    import time

    from archsim.capture.unprofiled import timing_unprofiled_steps
    from archsim.trace.ingest import ingest

    def spin(seconds: float) -> None:
        deadline = time.thread_time() + seconds
        while time.thread_time() < deadline:
            pass

    with archsim.step("inference", batch_size=2):
        pass  # unrecorded: earlier recordings on this thread are no gap's start
    with torch.profiler.profile() as prof:
        for _ in range(2):
            with archsim.step("inference", batch_size=2):
                torch.ones(8).sum()
            spin(0.01)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    gaps = ingest(path).steps.sort_values("start_us")["gap_cpu_us"].tolist()
    assert np.isnan(gaps[0])
    assert 10_000 <= gaps[1] < 50_000

    with timing_unprofiled_steps(), archsim.step("inference", batch_size=2):
        pass  # unprofiled: the gap to the next recorded step would span it
    with torch.profiler.profile() as prof, archsim.step("inference", batch_size=2):
        torch.ones(8).sum()
    prof.export_chrome_trace(str(path))
    assert ingest(path).steps["gap_cpu_us"].isna().all()
