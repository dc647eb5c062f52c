"""Instruction issue of Inductor's Triton kernels on CDNA3 (archsim.perf.triton_issue_amd): cycles
worked by hand from the Triton 3.9 gfx942 counts and the published issue rates, the real SD3.5
fixture, and invariants.

mi300x preset: 304 CUs, 2100 MHz."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.issue_rate_amd import WaveCount
from archsim.perf.triton_issue_amd import (
    gelu_wave_count,
    norm_wave_count,
    triton_issue_seconds,
)
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
FIXTURE = (
    Path(__file__).resolve().parents[2] / "shared/fixtures/kineto/mi300x_sd35_inference.json.gz"
)
GELU = "triton_poi_fused_addmm_gelu_view_15"
NORM = "triton_red_fused_add_addmm_mul_native_layer_norm_split_unsqueeze_view_16"
NORM_DIMS = (
    "[[2,4096,2432],[2,14592],[14592],[8192,2432],[2432],[2,14592],[14592],[2,4096,2432],[],[]]"
)


def _op(name: str, blocks: int, threads: int, dims: str, steps: float = np.nan,
        dtype: str = "bfloat16", bytes_read: float = 1.0e8) -> pd.DataFrame:  # fmt: skip
    row = {
        "kind": "kernel", "name": name, "op_class": "elementwise", "dtype": dtype,
        "bytes_read": bytes_read, "bytes_written": 0.0, "flops": 0.0, "grid_x": blocks,
        "grid_y": 1, "grid_z": 1, "block_x": threads, "block_y": 1, "block_z": 1,
        "input_dims": dims, "reduction_loop_steps": steps,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _seconds(ops: pd.DataFrame, gpu=MI300X.gpu, gen: str = "cdna3", idealize=frozenset()) -> float:
    blocks = ops["grid_x"].to_numpy(dtype=float)
    threads = ops["block_x"].to_numpy(dtype=float)
    return float(triton_issue_seconds(ops, blocks, threads, gpu, gen, idealize)[0])


def test_gelu_worked_by_hand() -> None:
    # SD3.5's bias + tanh-GELU: 2 x 4096 x 9728 bf16 in 19,456 workgroups of 256 threads (XBLOCK
    # 4,096): 16 elements a lane, 606 VALU + 48 quarter-rate a wave = 606 x 4 + 48 x 16 = 3,192
    # cycles; 19,456 / 304 = 64 workgroups a CU, 4 waves each over 4 SIMDs: 64 waves a SIMD.
    # 64 x 3,192 = 204,288 cycles at 2,100 MHz = 97.28 us.
    ops = _op(GELU, 19456, 256, "[[2,4096,9728],[9728],[]]")
    assert _seconds(ops) == pytest.approx(64 * 3192 / 2100e6, rel=1e-12)
    assert _seconds(ops) == pytest.approx(97.28e-6, rel=1e-3)


def test_layer_norm_worked_by_hand() -> None:
    # 8,192 rows of 2,432 columns, R0_BLOCK 2,048 (2 steps), 256 threads: the last step's 384
    # columns at 8 a lane are 48 lanes of wave 0 only, so 3 of 4 waves skip it. Mean wave:
    # 155 + 2 x 373 - 3/4 x 166 = 776.5 VALU, 5 + 2 x 8 = 21 quarter-rate: 776.5 x 4 + 21 x 16 =
    # 3,442 cycles; ceil(8,192 / 304) = 27 workgroups a CU = 27 waves a SIMD: 92,934 cycles,
    # 44.25 us at 2,100 MHz.
    count = norm_wave_count(2048, 2432, 256)
    assert count == WaveCount(776.5, 21, 60, 74.25)
    ops = _op(NORM, 8192, 256, NORM_DIMS, steps=2.0, bytes_read=1.1963e8)
    assert _seconds(ops) == pytest.approx(27 * 3442 / 2100e6, rel=1e-12)
    # R0_BLOCK 1,024 (3 steps): 2 of 4 waves have lanes in the last 384 columns (4 a lane)
    assert norm_wave_count(1024, 2432, 256) == WaveCount(711, 20, 78.5, 117)
    ops3 = _op(NORM, 8192, 256, NORM_DIMS, steps=3.0, bytes_read=1.1963e8)
    assert _seconds(ops3) == pytest.approx(27 * (711 * 4 + 20 * 16) / 2100e6, rel=1e-12)


def test_uncounted_kernels_get_no_floor() -> None:
    # other generations, other dtypes, other names, uncounted launch shapes: 0
    gelu = _op(GELU, 19456, 256, "[[2,4096,9728],[9728],[]]")
    assert _seconds(gelu, gen="cdna2") == 0.0
    assert _seconds(gelu, gen="hopper") == 0.0
    assert _seconds(_op(GELU, 19456, 256, "[[2,4096,9728],[9728],[]]", dtype="float32")) == 0.0
    assert _seconds(_op("triton_poi_fused_add_3", 19456, 256, "[[2,4096,9728],[]]")) == 0.0
    assert _seconds(_op(NORM, 8192, 512, NORM_DIMS, steps=2.0)) == 0.0  # 8 waves: not counted
    assert _seconds(_op(NORM, 8192, 256, NORM_DIMS)) == 0.0  # loop steps not recorded
    assert _seconds(_op(NORM, 4096, 256, NORM_DIMS, steps=2.0)) == 0.0  # rows != workgroups
    assert _seconds(_op(NORM, 8192, 256, "[[2,4096,2432],[1]]", steps=2.0)) == 0.0  # stats only
    assert norm_wave_count(512, 2432, 256) is None
    # backward kernels fused with the same ops compute other math: not counted
    back_gelu = "triton_poi_fused_addmm_gelu_gelu_backward_view_7"
    assert _seconds(_op(back_gelu, 19456, 256, "[[2,4096,9728],[9728],[]]")) == 0.0
    back_norm = NORM.replace("native_layer_norm", "native_layer_norm_native_layer_norm_backward")
    assert _seconds(_op(back_norm, 8192, 256, NORM_DIMS, steps=2.0, bytes_read=1.1963e8)) == 0.0


def test_gelu_counts_interpolate_between_counted_points() -> None:
    assert gelu_wave_count(16) == WaveCount(606, 48, 149, 82)
    assert gelu_wave_count(12) == WaveCount(454.5, 36, 113, 63.5)
    # beyond 16 along the 8 -> 16 slope
    assert gelu_wave_count(32).valu == pytest.approx(606 + 2 * (606 - 303))


@settings(max_examples=40, deadline=None)
@given(
    r0_block=st.sampled_from([1024, 2048]),
    r0_numel=st.integers(1, 20000),
    extra=st.integers(1, 5000),
)
def test_more_columns_never_fewer_instructions(r0_block: int, r0_numel: int, extra: int) -> None:
    a = norm_wave_count(r0_block, r0_numel, 256)
    b = norm_wave_count(r0_block, r0_numel + extra, 256)
    assert a is not None and b is not None
    for field in ("valu", "quarter", "salu", "other"):
        assert getattr(b, field) >= getattr(a, field) - 1e-9
        assert getattr(a, field) > 0


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 100000),
    more=st.integers(1, 100000),
    steps=st.sampled_from([2.0, 3.0]),
    clock=st.floats(500, 3000),
    faster=st.floats(1.0, 3.0),
)
def test_more_rows_never_faster_and_faster_clock_never_slower(
    rows: int, more: int, steps: float, clock: float, faster: float
) -> None:
    def norm(n: int) -> pd.DataFrame:
        return _op(NORM, n, 256, NORM_DIMS.replace("8192", str(n)).replace("2,4096", f"1,{n}"),
                   steps=steps, bytes_read=n * 9728.0 * 2)  # fmt: skip

    gpu = MI300X.gpu.model_copy(update={"clock_mhz": clock})
    fast = MI300X.gpu.model_copy(update={"clock_mhz": clock * faster})
    base = _seconds(norm(rows), gpu)
    assert base > 0
    assert _seconds(norm(rows + more), gpu) >= base
    assert _seconds(norm(rows), fast) <= base
    # the sm_utilization idealization (B / N workgroups a CU) never adds time
    assert _seconds(norm(rows), gpu, idealize=frozenset({"sm_utilization"})) <= base


@settings(max_examples=30, deadline=None)
@given(
    blocks=st.integers(1, 50000),
    more=st.integers(1, 50000),
    xblock=st.sampled_from([256, 1024, 4096]),
)
def test_gelu_more_elements_never_faster(blocks: int, more: int, xblock: int) -> None:
    def gelu(b: int) -> pd.DataFrame:
        return _op(GELU, b, 256, f"[[{b * xblock}],[9728],[]]")

    assert _seconds(gelu(blocks + more)) >= _seconds(gelu(blocks)) > 0


@pytest.mark.skipif(not FIXTURE.exists(), reason="fixture mi300x_sd35_inference is not present")
def test_real_fixture_floor_below_every_measured_duration() -> None:
    # A lower bound: on the real MI300X SD3.5 trace every counted kernel's issue time is below its
    # measured duration, and the GELU and 8,192-row layer-norm launches get the floors above.
    from archsim.perf.calibrate import measured_ops
    from archsim.trace.ingest import ingest

    ops = measured_ops(ingest(FIXTURE).ops).reset_index(drop=True)
    ops = ops[ops["kind"].astype(str) == "kernel"].reset_index(drop=True)
    blocks = ops["grid_x"].to_numpy(dtype=float)
    threads = ops["block_x"].to_numpy(dtype=float)
    issue = triton_issue_seconds(ops, blocks, threads, MI300X.gpu, "cdna3", frozenset())
    counted = issue > 0
    names = ops["name"].astype(str)
    assert counted[names == GELU].all() and (names == GELU).sum() > 100
    assert np.allclose(issue[names == GELU], 64 * 3192 / 2100e6)
    norm16 = (names == NORM) & (ops["grid_x"] == 8192)
    assert norm16.sum() > 100 and np.allclose(issue[norm16], 27 * 3442 / 2100e6)
    measured = ops["dur_us"].to_numpy(dtype=float) * 1e-6
    assert (issue[counted] < measured[counted]).all()
