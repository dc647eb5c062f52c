"""Instruction issue on CDNA3 SIMDs (archsim.perf.issue_rate_amd): cycles worked by hand from the
gfx940 counts and the published issue rates, the term through the kernel model, and invariants.

mi300x preset: 304 CUs, 2100 MHz, DRAM latency 434 ns, kernel floor 2.0 us."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.issue_rate_amd import (
    BN_BACKWARD_COUNT,
    BN_STATS_COUNT,
    ROWWISE_MOMENTS_COUNT,
    VECTORIZED_LAYER_NORM_COUNT,
    VECTORIZED_RMS_NORM_COUNT,
    WaveCount,
    cdna_issue_seconds,
    kernel_index,
    loop_trips,
    simd_cycles,
)
from archsim.perf.memory_parallelism import step_floor
from archsim.perf.terms import kernel_terms
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
STATS = (
    "void at::native::batch_norm_collect_statistics_kernel<at::native::InvStd, float, float, "
    "float, int>(at::GenericPackedTensorAccessor<float const, 3ul, at::RestrictPtrTraits, int>, ...)"
)
BACKWARD = (
    "void at::native::batch_norm_backward_kernel<float, float, float, int>(at::GenericPackedTensor"
    "Accessor<float const, 3ul, at::DefaultPtrTraits, int>, ...)"
)


GROUP_MOMENTS = (
    "void at::native::(anonymous namespace)::RowwiseMomentsCUDAKernel<float>(long, float, float "
    "const*, float*, float*)"
)
LAYER_NORM = (
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<float, float, false>(int,"
    " float, float const*, float const*, float const*, float*, float*, float*)"
)
RMS_NORM = LAYER_NORM.replace("float, float, false>", "float, float, true>")


def _kernel(name: str, blocks: int, threads: int, dims: str, block_y: int = 1) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": name, "op_class": "reduction", "dtype": "float32",
        "bytes_read": 524288.0, "bytes_written": 128.0, "flops": 131072.0,
        "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": threads // block_y,
        "block_y": block_y, "block_z": 1, "input_dims": dims,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _launch(blocks: float, threads: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return np.array([blocks]), np.array([threads]), np.array([2.0])


def test_simd_cycles_worked_by_hand() -> None:
    # 4 waves of 10 full-rate and 2 quarter-rate VALU: 4 x (40 + 32) = 288 cycles of VALU
    assert simd_cycles(WaveCount(10, 2, 3, 5), 4) == 288.0
    # scalar-bound: 4 waves x 30 SALU x 4 cycles = 480 against 4 x 16 VALU cycles
    assert simd_cycles(WaveCount(4, 0, 30, 0), 4) == 480.0
    # one wave alone is bound by its own issue turns: 20 instructions x 4 cycles
    assert simd_cycles(WaveCount(2, 0, 2, 16), 1) == 80.0
    assert simd_cycles(WaveCount(2, 0, 2, 16), 0) == 0.0


def test_statistics_kernel_of_the_bench_worked_by_hand() -> None:
    # batch_norm over [8, 16, 32, 32] fp32 (mi300x_normalization_bench): 16 blocks of 1024 threads,
    # one per CU, 16 waves: 4 a SIMD. Each thread walks 8 batch rows of one 1024-wide step. A wave:
    # VALU 291 + 8 x 6 + 8 x 18 = 483 full-rate, 35 + 8 x 2 = 51 quarter-rate: 483 x 4 + 51 x 16 =
    # 2,748 cycles, x 4 waves = 10,992 (SALU 4 x 80 x 4 = 1,280; one wave's 752 turns 3,008).
    # Wave 0 alone adds 108 instructions, bound by its issue turns: 432. 11,424 cycles / 2100 MHz.
    count = BN_STATS_COUNT.per_wave(8, 1)
    assert (count.valu, count.quarter, count.salu, count.instructions) == (483, 51, 80, 752)
    assert simd_cycles(count, 4) == 10992.0
    assert simd_cycles(BN_STATS_COUNT.first_wave, 1) == 432.0
    ops = _kernel(STATS, 16, 1024, "[[8,16,32,32],[],[],[16],[16]]")
    issue = cdna_issue_seconds(ops, _launch(16, 1024), MI300X.gpu, "cdna3", frozenset())
    assert issue[0] == pytest.approx(11424 / 2.1e9)
    # [1, 128, 32, 32]: 128 blocks, one step each: (291 + 6 + 18) x 4 + (35 + 2) x 16 = 1,852 a
    # wave, x 4 = 7,408, plus wave 0's 432: 7,840 cycles
    ops = _kernel(STATS, 128, 1024, "[[1,128,32,32],[],[],[],[]]")
    issue = cdna_issue_seconds(ops, _launch(128, 1024), MI300X.gpu, "cdna3", frozenset())
    assert issue[0] == pytest.approx(7840 / 2.1e9)


def test_row_kernels_of_the_bench_worked_by_hand() -> None:
    # group norm of [8, 16, 32, 32] in 4 groups: 32 rows of 4,096 over 512 threads, 8 steps; one
    # block a CU, 8 waves: 2 a SIMD. A wave: VALU 197 + 8 x 19 = 349 full-rate, 6 + 8 x 2 = 22
    # quarter-rate: 1,748 cycles, x 2 = 3,496 (SALU (65 + 8 x 14) x 4 x 2 = 1,416; 692 turns 2,768);
    # wave 0's extra 261 instructions: 1,044 turns. 4,540 cycles.
    ops = _kernel(GROUP_MOMENTS, 32, 512, "[[8,16,32,32],[],[],[],[]]")
    issue = cdna_issue_seconds(ops, _launch(32, 512), MI300X.gpu, "cdna3", frozenset())
    assert ROWWISE_MOMENTS_COUNT.per_wave(1, 8).instructions == 692
    assert issue[0] == pytest.approx(4540 / 2.1e9)
    # layer norm over [16, 32, 32] of 8 rows: blocks of (64, 4), 16,384 elements a row, 4 per load:
    # 16 steps. One wave a SIMD, so its own issue turns bind: 2,202 instructions x 4 = 8,808 cycles
    # (VALU 1,525 x 4 + 77 x 16 = 7,332), plus wave 0's 13 turns: 8,860 cycles.
    ops = _kernel(LAYER_NORM, 8, 256, "[[8,16,32,32],[],[16,32,32],[16,32,32],[]]", block_y=4)
    count = VECTORIZED_LAYER_NORM_COUNT.per_wave(1, 16)
    assert (count.valu, count.quarter, count.instructions) == (1525, 77, 2202)
    issue = cdna_issue_seconds(ops, _launch(8, 256), MI300X.gpu, "cdna3", frozenset())
    assert issue[0] == pytest.approx(8860 / 2.1e9)
    # the rms_norm instantiation over [32, 32] of 128 rows: 1,024 elements a row, one step. One
    # wave a SIMD: VALU 67 + 17 = 84 full-rate, 1 quarter (v_rsq_f32): 352 cycles; SALU 72: 288;
    # 225 instructions: 900 turns bind; wave 0's 20 more (an IEEE division by N): VALU 12 x 4 +
    # 2 x 16 = 80 cycles. 980 cycles, 0.467 us.
    ops = _kernel(RMS_NORM, 128, 256, "[[8,16,32,32],[],[32,32],[]]", block_y=4)
    count = VECTORIZED_RMS_NORM_COUNT.per_wave(1, 1)
    assert (count.valu, count.quarter, count.salu, count.instructions) == (84, 1, 72, 225)
    issue = cdna_issue_seconds(ops, _launch(128, 256), MI300X.gpu, "cdna3", frozenset())
    assert issue[0] == pytest.approx(980 / 2.1e9)
    assert list(kernel_index(pd.Series([LAYER_NORM, RMS_NORM]))) == [3, 4]


def test_issue_runs_in_series_with_the_dependent_loads() -> None:
    ops = _kernel(STATS, 16, 1024, "[[8,16,32,32],[],[],[16],[16]]")
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), "mi300x")
    resident = np.array([2.0])
    chain = step_floor(ops, (np.array([16.0]), np.array([1024.0]), resident), np.array([524416.0]),
                       MI300X.gpu, frozenset())  # fmt: skip
    assert chain is not None
    assert terms["lat"][0] == pytest.approx(chain[0] + 11424 / 2.1e9)
    assert terms["comp"][0] >= 11424 / 2.1e9 * (1 - 1e-9)


def test_backward_kernel_counts_both_loops() -> None:
    # 8 rows of one step: fixed 104 + 2 quarter; rows 8 x 19; steps 8 x 20 full-rate VALU
    count = BN_BACKWARD_COUNT.per_wave(8, 1)
    assert (count.valu, count.quarter) == (104 + 8 * 19 + 8 * 20, 4)
    assert list(kernel_index(pd.Series([STATS, BACKWARD, "void other_kernel<float>()"]))) == [
        0,
        1,
        -1,
    ]


def test_no_term_outside_cdna3_or_without_dims() -> None:
    ops = _kernel(STATS, 16, 1024, "[[8,16,32,32],[],[],[16],[16]]")
    for gen in ("hopper", "ampere"):  # CDNA2: issue_rate_amd.CDNA2_COUNTED, tests/test_newer_gpu.py
        assert cdna_issue_seconds(ops, _launch(16, 1024), MI300X.gpu, gen, frozenset())[0] == 0.0
    bare = _kernel(STATS, 16, 1024, "")
    assert cdna_issue_seconds(bare, _launch(16, 1024), MI300X.gpu, "cdna3", frozenset())[0] == 0.0
    assert np.isnan(loop_trips(pd.Series(['[["a"]]']), np.array([64.0]), np.array([1.0]))).all()


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 64),
    hw=st.integers(1, 8192),
    more=st.integers(1, 4096),
    blocks=st.integers(1, 2048),
    threads=st.sampled_from([64, 256, 512, 1024]),
    kernel=st.sampled_from([STATS, BACKWARD, GROUP_MOMENTS, LAYER_NORM, RMS_NORM]),
)
def test_more_elements_never_fewer_cycles(
    n: int, hw: int, more: int, blocks: int, threads: int, kernel: str
) -> None:
    name = kernel
    small = _kernel(name, blocks, threads, f"[[{n},{blocks},{hw}]]")
    large = _kernel(name, blocks, threads, f"[[{n},{blocks},{hw + more}]]")
    launch = _launch(blocks, threads)
    a = cdna_issue_seconds(small, launch, MI300X.gpu, "cdna3", frozenset())[0]
    b = cdna_issue_seconds(large, launch, MI300X.gpu, "cdna3", frozenset())[0]
    assert a > 0 and b >= a
    ideal = cdna_issue_seconds(small, launch, MI300X.gpu, "cdna3", frozenset({"sm_utilization"}))
    assert 0 < ideal[0] <= a * (1 + 1e-12)


@settings(max_examples=25, deadline=None)
@given(clock=st.floats(500.0, 2000.0), faster=st.floats(1.0, 3.0), blocks=st.integers(1, 1024))
def test_faster_clock_never_slower(clock: float, faster: float, blocks: int) -> None:
    ops = _kernel(STATS, blocks, 1024, "[[8,64,56,56]]")
    slow = MI300X.gpu.model_copy(update={"clock_mhz": clock})
    fast = MI300X.gpu.model_copy(update={"clock_mhz": clock * faster})
    launch = _launch(blocks, 1024)
    t_slow = cdna_issue_seconds(ops, launch, slow, "cdna3", frozenset())[0]
    t_fast = cdna_issue_seconds(ops, launch, fast, "cdna3", frozenset())[0]
    assert t_fast <= t_slow * (1 + 1e-12)
