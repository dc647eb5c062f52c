"""Issue 12's accuracy goals on the GPU fixtures that record shapes, model only (no measured duration
used): totals within 20%, per-kernel median |error| within 30%. Where a goal is not met the test is a
strict xfail carrying the figure measured by benchmarks/accuracy_table.py (docs/ACCURACY.md), so a
change that meets it, or moves the figure, shows up here."""

from __future__ import annotations

import functools

import numpy as np
import pytest

from archsim.perf.calibrate import measured_ops
from archsim.perf.kernel import body_seconds
from tests.conftest import kineto_fixture

TOTAL_GOAL, KERNEL_GOAL = 0.20, 0.30


@functools.cache
def _errors(name: str) -> tuple[float, float]:
    """(model-only total error, per-kernel median |error|) of a fixture on its own GPU."""
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest

    trace = ingest(kineto_fixture(name))
    ops = measured_ops(trace.ops)
    model = body_seconds(ops, source_hw_for_trace(trace))
    measured = ops["dur_us"].to_numpy(dtype=float) * 1e-6
    kernel = (ops["kind"].astype(str) == "kernel").to_numpy()
    ratio = model[kernel] / measured[kernel]
    return float(model.sum() / measured.sum() - 1), float(np.median(np.abs(ratio - 1)))


def _miss(reason: str):
    return pytest.mark.xfail(reason=f"goal not met: {reason}", raises=AssertionError, strict=True)


@pytest.mark.parametrize(
    "name",
    [
        "v100_resnet50_train_2021.json.gz",  # +5.5%
        pytest.param(
            "mi300x_normalization_bench.json.gz",
            marks=_miss(
                "total -28.3% (reductions' 5-7 us short of measured beyond their counted "
                "gfx940 issue, archsim.perf.reduce_issue_amd; MIOpen's MeanVariance/Final beyond "
                "their counted round trips, archsim.perf.miopen_bn; first launches 6.5% of its time over "
                "their repeats, -22.0% on repeat launches, benchmarks/accuracy_repeats.py)"
            ),
        ),
        # met: -16.2% (-20.03% before the instruction issue of the softmax passes, the legacy copies
        # and the cat kernels, archsim.perf.issue_rate, counted from SASS at published issue rates)
        "h100_timesformer_inference.json.gz",
        "mi300x_sd35_inference.json.gz",  # -12.8% (-14.7% before the Tensile K loop and issue)
        pytest.param(
            "mi250_mlp_train.json.gz",
            marks=_miss("total -54.8% (2-18 us kernels on an idle GPU, gaps under 10 ms)"),
        ),
    ],
)
def test_model_only_total_within_20_percent(name: str) -> None:
    total, _ = _errors(name)
    assert np.isfinite(total)
    assert abs(total) <= TOTAL_GOAL, f"{name}: model-only total {total:+.1%}"


@pytest.mark.parametrize(
    "name, measured",
    [
        ("v100_resnet50_train_2021.json.gz", None),  # met: 25%
        ("mi300x_normalization_bench.json.gz", "34%"),
        # met: 21% (34% before the softmax/layer-norm row walks, archsim.perf.passes, the reductions'
        # round trips in series with the kernel floor, archsim.perf.memory_parallelism, the
        # pipeline fill, archsim.perf.pipeline_fill, DRAM latency under load, and the cat kernels'
        # busy share, archsim.perf.in_flight)
        ("h100_timesformer_inference.json.gz", None),
        # met: 22% (29.6% at the last stop, 38% before it): the Tensile K loop's LDS reads in series
        # with its MFMAs (archsim.perf.tensile_loop) and the Triton kernels' counted gfx942 issue
        # (archsim.perf.triton_issue_amd); CDNA3's fixed cost still derives from the mi300x kernel
        # floor read off this very fixture (2.0 us, docs/ACCURACY.md "in sample")
        ("mi300x_sd35_inference.json.gz", None),
        ("mi250_mlp_train.json.gz", "46%"),
    ],
)
def test_per_kernel_median_error_within_30_percent(
    name: str, measured: str | None, request
) -> None:
    if measured is not None:  # None: the goal is met
        request.applymarker(_miss(f"per-kernel median |error| {measured}"))
    _, median = _errors(name)
    assert np.isfinite(median)
    assert median <= KERNEL_GOAL, f"{name}: per-kernel median |error| {median:.0%}"
