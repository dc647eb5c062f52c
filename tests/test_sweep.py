"""``archsim sweep``: knob products, CSV columns, resume after an interruption, settings checks,
process-pool and Dask backends."""

from __future__ import annotations

import csv
import json

import pandas as pd
import pytest

from archsim.analysis.sweep import SweepSpec, run_sweep
from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.trace import save
from tests.test_sim_support import tiny_trace

REQUIRED = (
    "frames_per_s",
    "learner_updates_per_s",
    "gpu_util",
    "cpu_util",
    "gpu_power_w",
    "frames_per_joule",
)


@pytest.fixture(scope="module")
def trace_dir(tmp_path_factory):
    return save(tiny_trace(), tmp_path_factory.mktemp("trace") / "tiny")


def _spec(trace_dir, **knobs):
    base = {"sim_seconds": [0.02], "inference_batch": [4]}
    return SweepSpec(trace=trace_dir, hw="dgx1-v100", knobs={**base, **knobs})


def test_cli_sweep_runs_the_product_in_a_process_pool(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    args = ["sweep", str(trace_dir), "--hw", "dgx1-v100", "--actors", "4,8", "--sms", "8,80"]
    args += ["--inference-batch", "4", "--sim-seconds", "0.02", "--jobs", "2", "--out", str(out)]
    assert main([*args, "--no-progress"]) == 0
    table = pd.read_csv(out / "sweep.csv")
    assert len(table) == 4
    assert {"actors", "sms", *REQUIRED} <= set(table.columns)
    assert set(zip(table["actors"], table["sms"], strict=True)) == {
        (4, 8),
        (4, 80),
        (8, 8),
        (8, 80),
    }
    # Fewer SMs never speed the GPU up: the learner (GPU-bound here) is slower on 8 SMs.
    for actors in (4, 8):
        rows = table[table["actors"] == actors].set_index("sms")
        assert rows.loc[8, "learner_updates_per_s"] <= rows.loc[80, "learner_updates_per_s"]
    assert (out / "sweep.parquet").exists() and (out / "sweep.png").exists()
    assert json.loads((out / "sweep.json").read_text())["fixed"]["sim_seconds"] == "0.02"


def test_interrupted_sweep_keeps_finished_points_and_resumes(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    spec = _spec(trace_dir, actors=[4, 6, 8])
    seen = []

    def interrupt_after_first(row):
        seen.append(row)
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        run_sweep(spec, out, progress=False, on_row=interrupt_after_first)
    first = pd.read_csv(out / "sweep.csv")
    assert len(first) == 1  # the finished point is on disk
    # A crash in the middle of writing the next row leaves a torn last line: it is dropped.
    with open(out / "sweep.csv", "a") as handle:
        handle.write("6,0.02,4,12")
    ran = []
    table = run_sweep(spec, out, progress=False, on_row=ran.append)
    assert sorted(int(r["actors"]) for r in ran) == sorted({4, 6, 8} - {int(first["actors"][0])})
    assert sorted(table["actors"]) == [4, 6, 8]
    kept = table[table["actors"] == first["actors"][0]].iloc[0]
    assert kept["frames_per_s"] == first["frames_per_s"][0]  # the old row is untouched
    # Everything done: a third run simulates nothing.
    again = []
    run_sweep(spec, out, progress=False, on_row=again.append)
    assert again == []


def test_resume_with_different_settings_is_refused(trace_dir, tmp_path, capsys):
    out = tmp_path / "sweep"
    run_sweep(_spec(trace_dir, actors=[4, 8]), out, progress=False)
    before = (out / "sweep.csv").read_text()
    args = ["sweep", str(trace_dir), "--actors", "4,8", "--inference-batch", "4"]
    args += ["--sim-seconds", "0.02", "--seed", "5", "--out", str(out), "--no-progress"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "sweep.csv" in err and "fixed" in err and "seed" in err
    assert (out / "sweep.csv").read_text() == before
    with pytest.raises(ArchsimError, match="hw"):
        other = _spec(trace_dir, actors=[4, 8])
        other.hw = "dgx-a100"
        run_sweep(other, out, progress=False)


@pytest.mark.parametrize(
    "flags, message",
    [
        (["--actors", "4,,8"], "--actors"),
        (["--actors", "4,x"], "--actors"),
        (["--actors", "0,4"], "--actors"),
        (["--sms", "8,eighty"], "--sms"),
        (["--actors", "2,4", "--inference-batch", "4"], "--inference-batch"),
        (["--actors", "4"], "comma list"),
    ],
)
def test_bad_sweep_lists_exit_2(trace_dir, tmp_path, capsys, flags, message):
    out = tmp_path / "sweep"
    assert main(["sweep", str(trace_dir), *flags, "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (out / "sweep.csv").exists()


def test_dask_backend_on_a_local_cluster_and_on_a_running_scheduler(trace_dir, tmp_path):
    out = tmp_path / "sweep"
    # No --scheduler: archsim starts its own LocalCluster on 127.0.0.1.
    table = run_sweep(_spec(trace_dir, actors=[4, 8]), out, jobs=2, backend="dask", progress=False)
    assert sorted(table["actors"]) == [4, 8]
    # A running cluster (here one on 127.0.0.1), named by its address, as on a real cluster; the
    # sweep is extended with two more actor counts and only those run.
    from distributed import LocalCluster

    with LocalCluster(
        host="127.0.0.1", n_workers=1, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        args = ["sweep", str(trace_dir), "--actors", "4,8,12,16", "--inference-batch", "4"]
        args += [
            "--sim-seconds",
            "0.02",
            "--backend",
            "dask",
            "--scheduler",
            cluster.scheduler_address,
        ]
        assert main([*args, "--out", str(out), "--no-progress"]) == 0
    with open(out / "sweep.csv") as handle:
        rows = list(csv.DictReader(handle))
    assert sorted(int(r["actors"]) for r in rows) == [4, 8, 12, 16]
    assert all(float(r["frames_per_s"]) > 0 for r in rows)


def test_scheduler_needs_the_dask_backend_and_an_address(trace_dir, tmp_path, capsys):
    args = ["sweep", str(trace_dir), "--actors", "4,8", "--out", str(tmp_path / "s")]
    assert main([*args, "--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert main([*args, "--backend", "dask", "--scheduler", "127.0.0.1:8786"]) == 2
    assert "--scheduler" in capsys.readouterr().err
