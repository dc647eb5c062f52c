"""Inductor's looped layer norms reload their row (archsim.perf.inductor_loops, archsim.perf.passes):
which kernels, the first loop's bytes worked by hand on an SD3.5 kernel's recorded shapes, where the
reload comes from by the fit rule, and the invariant that the second loop never makes a kernel
faster."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.block_sync import TURNOVER_NS
from archsim.perf.inductor_loops import looped_norm_rows
from archsim.perf.kernel import body_seconds
from archsim.perf.passes import row_pass_work
from archsim.trace.gpu_costs import reduction_loop_steps
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
# MI300X SD3.5: x (in place), the adaLN vectors, the attention output, its bias, the output; then
# xnumel and r0_numel
LN_NAME = "triton_red_fused__unsafe_view_add_addmm_mul_native_layer_norm_split_unsqueeze_19"
LN_DIMS = "[[2,4096,2432],[2,14592],[14592],[8192,2432],[2432],[2,4096,2432],[],[]]"
LN_READ = 119_630_080.0  # every tensor counted once (archsim.trace.inductor_args)
# a split Welford that stores per-row partial statistics only (one loop)
STATS_NAME = (
    "triton_red_fused__unsafe_view_add_clone_convolution_native_layer_norm_slice_transpose_view_4"
)
STATS_DIMS = (
    "[[2,2432,64,64],[2432],[1,36864,2432],[2,4096,1,19],[2,4096,1,19],[2,4096,1,19],[],[],[]]"
)
ROW = 2 * 4096 * 2432  # 19,922,944 elements


def test_which_kernels_and_first_loop_bytes() -> None:
    names = pd.Series([LN_NAME, STATS_NAME, LN_NAME.replace("triton_red_", "triton_per_"),
                       "triton_red_fused_sum_3", LN_NAME])  # fmt: skip
    dims = pd.Series([LN_DIMS, STATS_DIMS, LN_DIMS, LN_DIMS, ""])
    dtypes = pd.Series(["bfloat16"] * 5)
    passes, first = looped_norm_rows(names, dims, np.full(5, LN_READ), dtypes)
    assert passes.tolist() == [2.0, 0.0, 0.0, 0.0, 0.0]
    # 119,630,080 B less the output [2, 4096, 2432] x 2 B = 79,784,192 B: x, the attention output
    # and the small vectors
    assert first[0] == pytest.approx(LN_READ - 2.0 * ROW)
    assert first[0] == pytest.approx(79_784_192.0)
    assert np.isnan(first[1:]).all()


def _launch(blocks: float, threads: float = 256.0) -> tuple[np.ndarray, ...]:
    one = np.ones(1)
    return (one * blocks, one * threads, one * 32.0, one * 0.0)


def test_reload_from_l2_or_dram_by_the_fit_rule() -> None:
    # 256 threads, 32 registers: 8 resident per CU, 2,432 rows at once; 79,784,192 / 8,192 = 9,739 B
    # per row, 23.7 MB in all: within the MI300X's 32 MB L2, so the reload (the first loop's bytes
    # again) is L2 traffic.
    names = pd.Series([LN_NAME])
    args = (names, np.array([LN_READ]), np.array([LN_READ]), _launch(8192.0))
    rows = row_pass_work(*args, MI300X.gpu, "cdna3", frozenset(), pd.Series(["bfloat16"]),
                         pd.Series([LN_DIMS]))  # fmt: skip
    assert rows is not None
    assert rows.extra_l2[0] == pytest.approx(79_784_192.0)
    assert rows.extra_dram[0] == 0.0
    assert rows.latency[0] > 0.0
    # the same rows against a 16 MB L2 do not fit: the reload comes from DRAM
    small = MI300X.gpu.model_copy(update={"l2_size_mb": 16.0})
    rows = row_pass_work(*args, small, "cdna3", frozenset(), pd.Series(["bfloat16"]),
                         pd.Series([LN_DIMS]))  # fmt: skip
    assert rows.extra_dram[0] == pytest.approx(79_784_192.0)
    assert rows.extra_l2[0] == 0.0


def test_loop_steps_from_the_recorded_launch() -> None:
    # SD3.5's recorded calls: kwargs XBLOCK=1,R0_BLOCK=2048 (1024) and Concrete Inputs ending
    # xnumel 8,192, r0_numel 2,432: ceil(2432 / 2048) = 2 (3) steps per loop
    concrete = [""] * 6 + ["8192", "2432"]
    args = {"kernel_kwargs": "XBLOCK=1,R0_BLOCK=2048", "Concrete Inputs": concrete}
    assert reduction_loop_steps(LN_NAME, args) == 2.0
    assert reduction_loop_steps(LN_NAME, dict(args, kernel_kwargs="XBLOCK=1,R0_BLOCK=1024")) == 3.0
    # three axes, R0 last: the _4 split Welford's r0_numel 128 at R0_BLOCK 16 is 8 steps
    tiled = {"kernel_kwargs": "XBLOCK=4,YBLOCK=32,R0_BLOCK=16",
             "Concrete Inputs": ["", "8192", "19", "128"]}  # fmt: skip
    assert reduction_loop_steps(STATS_NAME, tiled) == 8.0
    # a persistent reduction has no loop; no kwargs or no counts recorded: unknown
    assert np.isnan(reduction_loop_steps(LN_NAME.replace("triton_red_", "triton_per_"), args))
    assert np.isnan(reduction_loop_steps(LN_NAME, {"Concrete Inputs": concrete}))
    assert np.isnan(reduction_loop_steps(LN_NAME, {"kernel_kwargs": "XBLOCK=1,R0_BLOCK=2048"}))


def test_each_loop_step_is_a_round_trip() -> None:
    # 8,192 rows, 8 resident blocks on each of 304 CUs: 4 waves; per wave and loop step a DRAM
    # round trip (434 ns) for the first loop and an L2 one (101.4 ns) for the reload, plus the
    # block turnover (127.2 ns): 2 steps 4 x (2 x 535.4 + 127.2) = 4,792.1 ns, 1 step 2,650.5 ns
    names = pd.Series([LN_NAME])
    args = (names, np.array([LN_READ]), np.array([LN_READ]), _launch(8192.0), MI300X.gpu,
            "cdna3", frozenset(), pd.Series(["bfloat16"]), pd.Series([LN_DIMS]))  # fmt: skip
    turnover = TURNOVER_NS["cdna3"] * 1e-9
    for steps in (1.0, 2.0, 3.0):
        rows = row_pass_work(*args, loop_steps=np.array([steps]))
        assert rows.latency[0] == pytest.approx(4 * (steps * (434e-9 + 101.4e-9) + turnover))
    # unrecorded (NaN or no column): one round trip per loop
    unknown = row_pass_work(*args, loop_steps=np.array([np.nan]))
    assert unknown.latency[0] == pytest.approx(row_pass_work(*args).latency[0])
    assert unknown.latency[0] == pytest.approx(4 * (535.4e-9 + turnover))


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 20_000),
    columns=st.integers(64, 8192),
    preset=st.sampled_from(["mi300x", "dgx-h100", "dgx-a100", "mi210"]),
)
def test_second_loop_never_faster(rows, columns, preset) -> None:
    """A looped layer norm is never priced below the same kernel read once (persistent)."""
    hw = load_hw(preset)
    dims = f"[[{rows},{columns}],[{columns}],[{rows},{columns}],[],[]]"
    read = 2.0 * (2 * rows * columns + columns)
    base = {"kind": "kernel", "op_class": "reduction", "dtype": "bfloat16", "flops": 0.0,
            "bytes_read": read, "bytes_written": 0.0, "grid_x": float(rows), "grid_y": 1.0,
            "grid_z": 1.0, "block_x": 256.0, "block_y": 1.0, "block_z": 1.0,
            "registers_per_thread": 32.0, "shared_memory_bytes": 0.0, "input_dims": dims}  # fmt: skip
    name = f"triton_red_fused_native_layer_norm_{rows}"
    ops = conform(pd.DataFrame([{**base, "name": name},
                                {**base, "name": name.replace("triton_red_", "triton_per_")}]),
                  OPS_COLUMNS)  # fmt: skip
    looped, once = body_seconds(ops, hw)
    assert looped >= once * (1 - 1e-12)
