"""CPU/GPU ratio against the figures worked out from REFERENCE.md's systems table."""

from __future__ import annotations

import json

import pytest

from archsim.analysis.ratio import cpu_gpu_ratio
from archsim.cli import main
from archsim.hw import load_hw


def test_dgx1_matches_the_published_core_based_figure():
    r = cpu_gpu_ratio(load_hw("dgx1-v100"), gpus_in_use=1)
    # 40 cores / (8 x 80 SMs) = 0.0625 (the published DGX-1 figure); 80 threads / 640 = 0.125.
    assert r.cores_per_sm_box == pytest.approx(40 / 640)
    assert r.threads_per_sm_box == pytest.approx(80 / 640)
    # One V100 in use: 80 threads / 80 SMs = 1.0, 40 cores / 80 = 0.5.
    assert r.threads_per_sm_in_use == pytest.approx(1.0)
    assert r.cores_per_sm_in_use == pytest.approx(0.5)


def test_dgx_a100_matches_the_published_thread_based_figure():
    r = cpu_gpu_ratio(load_hw("dgx-a100"), gpus_in_use=2)
    assert r.threads_per_sm_box == pytest.approx(256 / 864)  # 0.296
    assert r.threads_per_sm_in_use == pytest.approx(256 / 216)  # two A100s: 216 SMs


def test_ratio_command_prints_both_definitions(capsys):
    assert main(["ratio", "--hw", "dgx-h100"]) == 0
    out = capsys.readouterr().out
    assert "threads/SM" in out and "cores/SM" in out
    assert f"{224 / 1056:.4g}" in out and f"{112 / 132:.4g}" in out  # box threads, one-GPU cores
    assert main(["ratio", "--hw", "dgx1-v100", "--set", "gpu.sms=40", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["threads_per_sm_in_use"] == pytest.approx(2.0)


@pytest.mark.parametrize("gpus", ["0", "9", "two"])
def test_bad_gpu_count_exits_2(capsys, gpus):
    assert main(["ratio", "--hw", "dgx1-v100", "--gpus", gpus]) == 2
    assert "--gpus" in capsys.readouterr().err
