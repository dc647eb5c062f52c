"""Sequential-idealization breakdown: shares sum to 100%, idealizations never add time, CSV columns,
valid PNG/SVG charts, SM curve, bad-input errors (exit 2)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.analysis.breakdown import (
    BREAKDOWN_COLUMNS,
    COMPONENTS,
    breakdown,
    parse_sm_counts,
    sequence_seconds,
    sm_curve,
)
from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.trace.format import Trace, save
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.conftest import kineto_fixture

V100 = load_hw("dgx1-v100")


def ops_table(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


SAMPLE = [
    {"kind": "cpu", "op_class": "gemm", "dtype": "float32", "phase": "train_forward",
     "flops": 2.0 * 512**3, "bytes_read": 2.0 * 512 * 512 * 4, "bytes_written": 512 * 512 * 4.0},
    {"kind": "cpu", "op_class": "elementwise", "dtype": "float32", "phase": "train_backward",
     "flops": 1e6, "bytes_read": 8e6, "bytes_written": 4e6},
    {"kind": "cpu", "op_class": "conv", "dtype": "float16", "phase": "act",
     "flops": 1e9, "bytes_read": 4e6, "bytes_written": 2e6},
]  # fmt: skip


def test_shares_sum_to_one_and_columns() -> None:
    table = breakdown(ops_table(SAMPLE), V100, "all")
    assert list(table.columns) == list(BREAKDOWN_COLUMNS)
    assert list(dict.fromkeys(table.phase)) == ["inference", "train", "all"]
    for _, rows in table.groupby("phase"):
        assert list(rows.component) == list(COMPONENTS)
        assert rows.share.sum() == pytest.approx(1.0, abs=1e-3)
        assert (rows.seconds >= 0).all()
    # the "all" bar is the sum of the per-phase bars (ops run serially)
    per_bar = table.groupby("phase").seconds.sum()
    assert per_bar["all"] == pytest.approx(per_bar["inference"] + per_bar["train"])


@settings(max_examples=25, deadline=None)  # 0.4 s an example: the suite's time budget
@given(
    flops=st.lists(st.floats(0, 1e11), min_size=1, max_size=6),
    nbytes=st.lists(st.floats(1, 1e9), min_size=1, max_size=6),
    preset=st.sampled_from(["dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1"]),
)
def test_each_idealization_never_adds_time_and_shares_sum(flops, nbytes, preset) -> None:
    rows = [
        {"kind": "cpu", "op_class": c, "dtype": "float32", "phase": "train_forward", "flops": f,
         "bytes_read": b, "bytes_written": b / 2}
        for f, b, c in zip(flops, nbytes, ["gemm", "elementwise", "conv", "reduction"] * 2, strict=False)
    ]  # fmt: skip
    ops = ops_table(rows)
    hw = load_hw(preset)
    totals = sequence_seconds(ops, hw)
    assert all(
        later <= earlier * (1 + 1e-12) for earlier, later in zip(totals, totals[1:], strict=False)
    )
    table = breakdown(ops, hw, "train")
    assert table.share.sum() == pytest.approx(1.0, abs=1e-3)
    assert table.seconds.sum() == pytest.approx(totals[0])


def test_no_ops_in_phase_is_an_error() -> None:
    with pytest.raises(ArchsimError, match="no ops in phase 'inference'"):
        breakdown(ops_table([SAMPLE[0]]), V100, "inference")


def test_sm_curve_is_monotonic() -> None:
    curve = sm_curve(ops_table(SAMPLE), V100, parse_sm_counts("2,4,...,80"))
    assert curve.sms.tolist() == list(range(2, 81, 2))
    assert np.all(np.diff(curve.seconds) <= 1e-15)
    assert curve.slowdown_vs_max_sms.iloc[-1] == 1.0
    with pytest.raises(ArchsimError, match="--sms"):
        parse_sm_counts("a,b")


def _valid_png_svg(stem) -> None:
    assert stem.with_suffix(".png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = stem.with_suffix(".svg").read_text()
    assert "<svg" in svg and svg.rstrip().endswith("</svg>")


def test_cli_on_saved_trace_writes_csv_and_charts(tmp_path, capsys) -> None:
    trace_dir = save(Trace(meta={"source": {"device": "cpu"}}, ops=ops_table(SAMPLE),
                           steps=pd.DataFrame()), tmp_path / "trace")  # fmt: skip
    out = tmp_path / "out"
    code = main(["breakdown", str(trace_dir), "--hw", "dgx-a100", "--set", "gpu.sms=54",
                 "--out", str(out), "--sms", "2,4,...,54"])  # fmt: skip
    assert code == 0
    table = pd.read_csv(out / "breakdown.csv")
    assert list(table.columns) == ["phase", "component", "seconds", "share", "steps"]
    assert set(table.component) == set(COMPONENTS)
    for _, rows in table.groupby("phase"):
        assert rows.share.sum() == pytest.approx(1.0, abs=1e-3)
    _valid_png_svg(out / "breakdown")
    _valid_png_svg(out / "sm_curve")
    curve = pd.read_csv(out / "sm_curve.csv")
    assert curve.sms.max() == 54 and set(curve.phase) == {"all"}
    # no ops in the chosen phase: exit 2, nothing written
    out2 = tmp_path / "out2"
    trace2 = save(Trace(meta={}, ops=ops_table([SAMPLE[0]]), steps=pd.DataFrame()), tmp_path / "t2")
    assert main(["breakdown", str(trace2), "--phase", "inference", "--out", str(out2)]) == 2
    assert not out2.exists()
    assert main(["breakdown", str(trace2), "--hw", "nope", "--out", str(out2)]) == 2
    assert main(["breakdown", str(tmp_path / "missing"), "--out", str(out2)]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_real_v100_trace_breakdown_anchors_measured_time(tmp_path) -> None:
    """On the V100 fixture with target = source, the baseline is the measured kernel time per step:
    each phase group's measured time over the ProfilerStep#s it ran in (the trace has no step
    markers)."""
    from archsim.analysis.breakdown import _phase_mask
    from archsim.trace.ingest import ingest

    trace = ingest(kineto_fixture("v100_cnn_ddp_train.json.gz"))
    table = breakdown(trace.ops, V100, "all", source=V100)
    device = trace.ops[trace.ops.kind.isin(["kernel", "memcpy", "memset"])]
    assert set(table.phase) == {"train", "other", "all"}
    per_step_s = 0.0
    for group in ("train", "other"):
        ops = device[_phase_mask(device, group)]
        steps = ops.profiler_step[ops.profiler_step >= 0].nunique()
        bar = table[table.phase == group]
        assert bar.steps.iloc[0] == steps > 0
        assert bar.seconds.sum() == pytest.approx(ops.dur_us.sum() * 1e-6 / steps, rel=1e-9)
        per_step_s += ops.dur_us.sum() * 1e-6 / steps
    assert table[table.phase == "all"].seconds.sum() == pytest.approx(per_step_s, rel=1e-9)
    for _, rows in table.groupby("phase"):
        assert rows.share.sum() == pytest.approx(1.0, abs=1e-3)
    out = tmp_path / "bd"
    fixture = str(kineto_fixture("v100_cnn_ddp_train.json.gz"))
    assert (
        main(["breakdown", fixture, "--hw", "dgx1-v100", "--phase", "train", "--out", str(out)])
        == 0
    )
    assert set(pd.read_csv(out / "breakdown.csv").phase) == {"train"}
