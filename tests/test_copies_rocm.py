"""Host<->device copies on ROCm: an SDMA copy after a published fixed cost (archsim.perf.copies).

Hand-worked on the AMD presets (host_link.latency_us 6 us, ROCm/hip issue 3809; mi300x PCIe 5.0 at
50.4 GB/s, mi210 PCIe 4.0 at 25.2 GB/s): a 2,560-B "Memcpy HtoD (Host -> Device)" takes
6 + 2560 / 50.4e3 = 6.0508 us on the mi300x and 6 + 2560 / 25.2e3 = 6.1016 us on the mi210.
ROCm names never say "Pageable", so the CUDA staging-rate branch never applies to them.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds, predict_op_seconds
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture

HTOD = "Memcpy HtoD (Host -> Device)"
DTOH = "Memcpy DtoH (Device -> Host)"


def copies(sizes: list[float], name: str = HTOD) -> pd.DataFrame:
    rows = [{"kind": "memcpy", "name": name, "bytes_read": n, "bytes_written": n} for n in sizes]
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def test_small_rocm_copies_golden() -> None:
    mi300x, mi210, mi250x = load_hw("mi300x"), load_hw("mi210"), load_hw("mi250x")
    for hw in (mi300x, mi210, mi250x):
        assert hw.host_link.latency_us == 6.0
    got = predict_op_seconds(copies([2560.0]), mi300x, include_launch=False)
    assert got[0] * 1e6 == pytest.approx(6.0 + 2560 / 50.4e3)  # 6.0508 us
    got = predict_op_seconds(copies([2560.0], DTOH), mi210, include_launch=False)
    assert got[0] * 1e6 == pytest.approx(6.0 + 2560 / 25.2e3)  # 6.1016 us
    # 6 MiB device-to-host (mi300x_sd35_inference's VAE output): 6 + 6,291,456 / 50.4e3 = 130.8 us
    got = predict_op_seconds(copies([6_291_456.0], DTOH), mi300x, include_launch=False)
    assert got[0] * 1e6 == pytest.approx(6.0 + 6_291_456 / 50.4e3)


def test_rocm_names_take_the_link_rate_beyond_one_staged_chunk() -> None:
    hw = load_hw("mi300x")
    sizes = [1e3, 2**20, 5e7]
    got = predict_op_seconds(copies(sizes), hw, include_launch=False)
    assert got == pytest.approx(6e-6 + np.array(sizes) / 50.4e9)
    assert np.all(np.diff(got) > 0)


def test_mi250_fixture_copies_use_the_cdna2_figure() -> None:
    """mi250_mlp_train (a trace-gfx90a config on the mi210's host figures): its two 2,560-B copies,
    measured 22.4 and 15.7 us on an idle GPU, are modelled at 6.10 us each (1.10 before)."""
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest

    trace = ingest(kineto_fixture("mi250_mlp_train.json.gz"))
    hw = source_hw_for_trace(trace)
    ops = measured_ops(trace.ops).reset_index(drop=True)
    copy = (ops["kind"] == "memcpy").to_numpy()
    assert copy.sum() == 2
    model = body_seconds(ops, hw)[copy]
    assert model * 1e6 == pytest.approx(np.full(2, 6.0 + 2560 / 25.2e3))
    assert ops["dur_us"].to_numpy(dtype=float)[copy] == pytest.approx([22.441, 15.72])
