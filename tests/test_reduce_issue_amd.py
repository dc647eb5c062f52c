"""Instruction issue of ATen's reduce_kernel on CDNA3 (archsim.perf.reduce_issue_amd): the bench's
two reduce kernels worked by hand from the gfx940 counts, the term in series with the load steps,
where it does not apply, invariants, and the real MI300X fixture.

mi300x preset: 304 CUs, 2100 MHz."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.memory_parallelism import step_floor
from archsim.perf.reduce_issue_amd import (
    INPUT_VECTORIZED_COUNT,
    OUTPUT_VECTORIZED_COUNT,
    output_vectorized_steps_seconds,
    reduce_issue_seconds,
    reduce_path,
)
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "kineto"
_MEAN_OP = (
    "at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, "
    "float, 4, 4>"
)
MEAN = f"void at::native::reduce_kernel<512, 1, {_MEAN_OP} >({_MEAN_OP})"
_SUM_OP = (
    "at::native::ReduceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, "
    "float, float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, "
    "float, 4, 4>"
)
SUM = f"void at::native::reduce_kernel<128, 4, {_SUM_OP} >({_SUM_OP})"
# the MI250 trace's PyTorch names ReduceOp without input_vec_size: another version, not counted
OLDER_MEAN = MEAN.replace("float, 4, 4>", "float, 4>")


def _kernel(
    name: str,
    grid: tuple[int, int],
    block: tuple[int, int],
    dims: str,
    written: float,
    read: float = 524292.0,
) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": name, "op_class": "reduction", "dtype": "float32",
        "bytes_read": read, "bytes_written": written, "flops": 131072.0,
        "grid_x": grid[0], "grid_y": grid[1], "grid_z": 1, "block_x": block[0],
        "block_y": block[1], "block_z": 1, "input_dims": dims,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _mean(n: int = 8, grid_y: int = 16) -> pd.DataFrame:
    return _kernel(MEAN, (1, grid_y), (512, 1), f"[[{n},16,32,32],[],[],[],[]]", 4.0)


def _sum(rows: int = 8) -> pd.DataFrame:
    return _kernel(SUM, (1, 1), (4, 8), f"[[{rows},16],[],[],[]]", 64.0, rows * 64.0)


def _launch(blocks: float, threads: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array([blocks]), np.array([threads]), np.array([4.0])


def test_mean_kernel_of_the_bench_worked_by_hand() -> None:
    # 16 blocks on 304 CUs: one a CU, 8 waves, 2 a SIMD. 131072 / (4 x 512 x 16) = 4 loop steps:
    # a wave 289 + 4 x 11 = 333 instructions (124 VALU, 100 SALU): max(2 x 124 x 4, 2 x 100 x 4,
    # 333 x 4) = 1,332 cycles; wave 0's 44 more: 176; the last block's second pass, 201 a wave:
    # max(2 x 80 x 4, 2 x 60 x 4, 804) = 804, and its wave 0's 64: 256. 2,568 cycles at 2.1 GHz.
    per_wave = INPUT_VECTORIZED_COUNT.fixed + INPUT_VECTORIZED_COUNT.step.times(4)
    assert (per_wave.valu, per_wave.salu, per_wave.instructions) == (124, 100, 333)
    issue = reduce_issue_seconds(_mean(), _launch(16, 512), MI300X.gpu, "cdna3", frozenset())
    assert issue[0] == pytest.approx((1332 + 176 + 804 + 256) / 2.1e9)


def test_sum_kernel_of_the_bench_worked_by_hand() -> None:
    # one wave of 32 threads; 8 rows / 4 = 2 steps: 326 + 2 x 51 = 428 instructions, 1,712 cycles
    per_wave = OUTPUT_VECTORIZED_COUNT.fixed + OUTPUT_VECTORIZED_COUNT.step.times(2)
    assert per_wave.instructions == 428
    issue = reduce_issue_seconds(_sum(), _launch(1, 32), MI300X.gpu, "cdna3", frozenset())
    assert issue[0] == pytest.approx(1712 / 2.1e9)
    assert list(reduce_path(pd.Series([MEAN, SUM, OLDER_MEAN, "void other<float>()"]))) == [
        1,
        2,
        0,
        0,
    ]


def test_issue_runs_in_series_with_the_load_steps() -> None:
    ops = _mean()
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), "mi300x")
    chain = step_floor(ops, _launch(16, 512), np.array([524296.0]), MI300X.gpu, frozenset())
    assert chain is not None and chain[0] > 0
    issue = 2568 / 2.1e9
    assert terms["lat"][0] >= (chain[0] + issue) * (1 - 1e-9)
    assert terms["comp"][0] >= issue * (1 - 1e-9)


def test_sum_kernel_waits_for_two_load_steps() -> None:
    # 4 of the 32 threads own the 16 outputs, 16 elements a step: 128 / 64 = 2 round trips of
    # 434 ns after the floor's 1.566 us, then its 1,712 issue cycles: 3.2492 us
    ops = _sum()
    steps = output_vectorized_steps_seconds(ops, _launch(1, 32), MI300X.gpu, "cdna3", frozenset())
    assert steps[0] == pytest.approx(1.566e-6 + 2 * 434e-9)
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), "mi300x")
    assert terms["lat"][0] == pytest.approx(1.566e-6 + 2 * 434e-9 + 1712 / 2.1e9)
    mean = output_vectorized_steps_seconds(
        _mean(), _launch(16, 512), MI300X.gpu, "cdna3", frozenset()
    )
    assert mean[0] == 0.0
    ideal = frozenset({"dram_latency", "sm_utilization"})
    assert output_vectorized_steps_seconds(ops, _launch(1, 32), MI300X.gpu, "cdna3", ideal)[0] == 0


def test_no_term_outside_the_counted_launches() -> None:
    launch = _launch(16, 512)
    for gen in ("cdna2", "hopper"):  # gfx90a paths not traced (module docstring)
        assert reduce_issue_seconds(_mean(), launch, MI300X.gpu, gen, frozenset())[0] == 0.0
    older = _kernel(OLDER_MEAN, (1, 16), (512, 1), "[[8,16,32,32]]", 4.0)
    narrow = _kernel(MEAN, (1, 16), (256, 1), "[[8,16,32,32]]", 4.0)  # another tree depth
    no_split = _mean(grid_y=1)  # no global reduce: another path
    bare = _kernel(MEAN, (1, 16), (512, 1), "", 4.0)
    for ops in (older, narrow, no_split, bare):
        assert reduce_issue_seconds(ops, launch, MI300X.gpu, "cdna3", frozenset())[0] == 0.0
    three_d = _kernel(SUM, (1, 1), (4, 8), "[[8,4,16]]", 256.0)
    assert reduce_issue_seconds(three_d, _launch(1, 32), MI300X.gpu, "cdna3", frozenset())[0] == 0


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 64), more=st.integers(1, 64), rows=st.integers(1, 512))
def test_more_elements_never_fewer_cycles(n: int, more: int, rows: int) -> None:
    gpu, none = MI300X.gpu, frozenset()
    small = reduce_issue_seconds(_mean(n), _launch(16, 512), gpu, "cdna3", none)[0]
    large = reduce_issue_seconds(_mean(n + more), _launch(16, 512), gpu, "cdna3", none)[0]
    assert small > 0 and large >= small
    short = reduce_issue_seconds(_sum(rows), _launch(1, 32), gpu, "cdna3", none)[0]
    long = reduce_issue_seconds(_sum(rows + more), _launch(1, 32), gpu, "cdna3", none)[0]
    assert short > 0 and long >= short


@settings(max_examples=25, deadline=None)
@given(clock=st.floats(500.0, 2500.0), faster=st.floats(1.0, 3.0), blocks=st.integers(1, 4096))
def test_faster_clock_never_slower(clock: float, faster: float, blocks: int) -> None:
    slow = MI300X.gpu.model_copy(update={"clock_mhz": clock})
    fast = MI300X.gpu.model_copy(update={"clock_mhz": clock * faster})
    launch = _launch(blocks, 512)
    t_slow = reduce_issue_seconds(_mean(), launch, slow, "cdna3", frozenset())[0]
    t_fast = reduce_issue_seconds(_mean(), launch, fast, "cdna3", frozenset())[0]
    assert 0 < t_fast <= t_slow * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(cus=st.integers(1, 512), more=st.integers(0, 512), blocks=st.integers(1, 4096))
def test_more_cus_never_slower(cus: int, more: int, blocks: int) -> None:
    few = MI300X.gpu.model_copy(update={"sms": cus})
    many = MI300X.gpu.model_copy(update={"sms": cus + more})
    launch = _launch(blocks, 512)
    for ideal in (frozenset(), frozenset({"sm_utilization"})):
        t_few = reduce_issue_seconds(_mean(), launch, few, "cdna3", ideal)[0]
        t_many = reduce_issue_seconds(_mean(), launch, many, "cdna3", ideal)[0]
        assert 0 < t_many <= t_few * (1 + 1e-12)


@pytest.mark.skipif(
    not (FIXTURES / "mi300x_normalization_bench.json.gz").exists(),
    reason="the shared kineto fixtures are not checked out beside the repository",
)
def test_bench_reduce_kernels_get_the_terms() -> None:
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.kernel import body_seconds
    from archsim.trace.ingest import ingest

    trace = ingest(FIXTURES / "mi300x_normalization_bench.json.gz")
    ops = measured_ops(trace.ops).reset_index(drop=True)
    reduce = ops["name"].astype(str).str.contains("reduce_kernel<").to_numpy()
    assert reduce.sum() == 9  # 3 means, 6 sums
    model = body_seconds(ops, MI300X) * 1e6
    measured = ops["dur_us"].to_numpy(dtype=float)
    mean = ops["name"].astype(str).str.contains("reduce_kernel<512, 1").to_numpy()
    # the chains worked above: 4.829 us a mean (9.1-11.6 measured), 3.249 us a sum (3.2-6.0)
    assert model[mean] == pytest.approx(np.full(3, 3.6062 + 2568 / 2100), rel=1e-3)
    assert model[reduce & ~mean] == pytest.approx(np.full(6, 1.566 + 0.868 + 1712 / 2100), rel=1e-3)
    for kind in (mean, reduce & ~mean):  # below the kind's median measured time
        assert (model[kind] < np.median(measured[kind])).all()
