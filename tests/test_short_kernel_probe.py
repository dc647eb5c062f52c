"""benchmarks/short_kernel_probe.py, the measurement issue 12 needs from a real MI300X/MI250: here,
where no GPU exists, its CPU path checks that the table, the labels and the exported trace are right."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from archsim.trace.ingest import ingest

_PATH = Path(__file__).resolve().parents[1] / "benchmarks" / "short_kernel_probe.py"
_spec = importlib.util.spec_from_file_location("short_kernel_probe", _PATH)
probe = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(probe)


def test_cpu_run_prints_a_cell_per_workgroups_and_gap_and_writes_a_trace_archsim_reads(
    tmp_path, capsys
):
    out = tmp_path / "probe.json.gz"
    rc = probe.main(
        [
            "--device",
            "cpu",
            "--reps",
            "3",
            "--workgroups",
            "1,2",
            "--gaps-us",
            "0,20",
            "--out",
            str(out),
        ]
    )
    assert rc == 0
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines if line.split() and line.split()[0].isdigit()}
    assert set(rows) == {"1", "2"}
    for row in rows.values():
        assert row.count("(") == 2  # both cells measured: a median and its range each, no "-"
    ops = ingest(out).ops
    adds = ops[ops["name"] == "aten::add"]
    # workgroup counts x gaps x reps; warm-up adds ran before profiling
    assert len(adds) == 2 * 2 * 3


def test_labels_round_trip():
    assert probe._parse_label(probe._label(304, 1000)) == (304, 1000)
    assert probe._parse_label("aten::add") is None


def test_gpu_asked_without_one_is_one_line_and_exit_2(tmp_path, capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the refusal is for machines without one")
    rc = probe.main(["--device", "cuda", "--out", str(tmp_path / "x.json.gz")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "no GPU" in err[0]
    assert not (tmp_path / "x.json.gz").exists()


@pytest.mark.parametrize("bad", [["--workgroups", "1,x"], ["--workgroups", "0"], ["--reps", "0"]])
def test_bad_arguments_exit_2(bad, tmp_path):
    with pytest.raises(SystemExit) as exc:
        probe.main(["--device", "cpu", *bad, "--out", str(tmp_path / "x.json.gz")])
    assert exc.value.code == 2
