"""``archsim simulate`` and ``archsim capture dqn`` inputs that used to run for nothing: an infinite
``--sim-seconds`` (simulated forever) and a ``--steps`` too short for the profiler schedule (ran every
step, then failed). Both are refused up front: one line, exit 2, nothing written. And what a run
writes is strict JSON: a NaN metric is null, not a token other JSON parsers reject."""

from __future__ import annotations

import csv
import json

import numpy as np
import pytest

from archsim.cli import main
from archsim.sim.report import write_metrics
from tests.conftest import error_line


@pytest.mark.parametrize("seconds", ["inf", "Infinity"])
def test_infinite_simulated_time_is_refused(trace_dir, tmp_path, capsys, seconds):
    out = tmp_path / "run"
    argv = ["simulate", str(trace_dir), "--actors", "4", "--inference-batch", "4"]
    assert main([*argv, "--sim-seconds", seconds, "--out", str(out)]) == 2
    assert "--sim-seconds: expected a positive finite duration, got inf" in error_line(capsys)
    assert list(tmp_path.iterdir()) == []


def test_dqn_steps_too_few_for_the_schedule_is_refused_before_running(tmp_path, capsys):
    out = tmp_path / "dqn"
    assert main(["capture", "dqn", "--steps", "100", "--out", str(out)]) == 2
    line = error_line(capsys)
    assert "--steps 100" in line and "nothing would be recorded" in line
    assert "--skip-first" in line  # says how to fix it
    assert list(tmp_path.iterdir()) == []
    # the check follows the schedule flags: 0 + 0 + 3 steps before the first recorded one
    assert main(["capture", "dqn", "--steps", "3", "--skip-first", "0", "--wait", "0",
                 "--warmup", "3", "--out", str(out)]) == 2  # fmt: skip
    assert "records from step 4" in error_line(capsys)


def _strict_json(path) -> dict:
    """Parse as RFC 8259 JSON: NaN, Infinity and -Infinity are errors (Python accepts them)."""

    def refuse(token: str) -> None:
        raise AssertionError(f"{path} holds {token}, which is not JSON")

    return json.loads(path.read_text(), parse_constant=refuse)


def test_metrics_json_is_strict_json_with_null_for_non_finite_numbers(tmp_path):
    record = {
        "trace": "t",
        "frames_per_s": 1234.5,
        "inference_wait_mean_us": float("nan"),  # a mean over no arrivals
        "replay_insert_wait_mean_us": np.float64("nan"),
        "energy_per_mframes_j": float("inf"),
        "cpu_power_w": -np.inf,
        "events": np.int64(7),
        "replay_ratio": None,
    }
    write_metrics(tmp_path, record)
    got = _strict_json(tmp_path / "metrics.json")
    assert got == {
        "trace": "t",
        "frames_per_s": 1234.5,
        "inference_wait_mean_us": None,
        "replay_insert_wait_mean_us": None,
        "energy_per_mframes_j": None,
        "cpu_power_w": None,
        "events": 7,
        "replay_ratio": None,
    }
    with open(tmp_path / "metrics.csv", newline="") as handle:
        (row,) = list(csv.DictReader(handle))
    assert row["inference_wait_mean_us"] == "" and row["frames_per_s"] == "1234.5"
    assert list(row) == list(record)  # same columns, same order


def test_a_simulated_run_writes_strict_json(trace_dir, tmp_path):
    out = tmp_path / "run"
    argv = ["simulate", str(trace_dir), "--actors", "4", "--inference-batch", "4"]
    assert main([*argv, "--sim-seconds", "0.02", "--out", str(out)]) == 0
    record = _strict_json(out / "metrics.json")
    assert record["actors"] == 4 and record["frames_per_s"] > 0


def test_a_trace_without_a_whole_learner_step_is_refused_not_simulated_forever():
    """A NaN service time (here: the only learner step was cut by the end of recording, so it has no
    CPU time) used to make a shared-CPU burst that never finished: the run hung. It is one line now."""
    import dataclasses

    import numpy as np

    from archsim.errors import ArchsimError
    from archsim.hw import load_hw
    from archsim.sim.config import SimConfig
    from archsim.sim.workload import derive_service_times
    from tests.test_sim_support import tiny_trace

    config = SimConfig(actors=2, sim_seconds=0.1)
    times = derive_service_times(tiny_trace(), load_hw("dgx1-v100"), config, 32)
    broken = dataclasses.replace(times, learner_gpu_s=float("nan"))
    with pytest.raises(ArchsimError, match=r"learner_gpu_s is not a finite time .* learner step"):
        broken.check(config)
    with pytest.raises(ArchsimError, match="inference_gpu_s"):
        dataclasses.replace(times, inference_gpu_s=np.array([0.0, -1.0, 1e-5])).check(config)
