"""CDNA3 kernels carry their fixed cost in series with their work (archsim.perf.dispatch_overhead).

Golden values worked by hand on the MI300X preset (floor 2.0 us, pointer chase 434 ns); invariants:
never below the floor, never faster than the overlapped form, more bytes never faster, more DRAM
bandwidth never slower; one-L2 GPUs (CDNA2, NVIDIA) keep max(floor, body); the ``sm_utilization``
idealization removes the fixed cost with the floor.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import archsim.perf.kernel as kernel_module
from archsim.hw import load_hw
from archsim.perf.dispatch_overhead import (
    MINIMAL_KERNEL_ROUND_TRIPS,
    fixed_cost_seconds,
    serial_fixed_cost,
    terms_floor_us,
    with_fixed_cost,
)
from archsim.perf.efficiency import generation
from archsim.perf.kernel import body_seconds
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
ADD = (
    "void at::native::vectorized_elementwise_kernel<8, at::native::CUDAFunctor_add<c10::BFloat16>>"
)


def _add(n: int, blocks: int, threads: int = 256) -> pd.DataFrame:
    """A traced bf16 a + b over n elements: reads 4n B, writes 2n B."""
    row = {"kind": "kernel", "name": ADD, "op_class": "elementwise", "dtype": "bfloat16",
           "flops": float(n), "bytes_read": 4.0 * n, "bytes_written": 2.0 * n,
           "grid_x": float(blocks), "grid_y": 1.0, "grid_z": 1.0, "block_x": float(threads),
           "block_y": 1.0, "block_z": 1.0}  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _overlapped(ops: pd.DataFrame, hw) -> np.ndarray:
    """The model with the fixed cost overlapping the work, max(floor, body), as on one-L2 GPUs."""
    saved = kernel_module.serial_fixed_cost
    kernel_module.serial_fixed_cost = lambda gen: False
    try:
        return body_seconds(ops, hw)
    finally:
        kernel_module.serial_fixed_cost = saved


def test_functions_by_hand() -> None:
    assert MINIMAL_KERNEL_ROUND_TRIPS == 3
    # MI300X: floor 2.0 us less 3 x 434 ns = 0.698 us; the terms see a floor of 1.302 us
    assert fixed_cost_seconds(2.0e-6, 434e-9) == pytest.approx(0.698e-6)
    assert terms_floor_us(2.0, 434.0) == pytest.approx(1.302)
    # a floor under three round trips leaves no fixed cost, and the terms keep that floor
    assert fixed_cost_seconds(1.0e-6, 434e-9) == 0.0
    assert terms_floor_us(1.0, 434.0) == 1.0
    assert with_fixed_cost(np.array([0.5, 3.0]), np.array([2.0, 2.0]), np.array([0.7, 0.7])) == (
        pytest.approx([2.0, 3.7])
    )
    with pytest.raises(ValueError):
        fixed_cost_seconds(-1.0, 434e-9)


def test_only_multi_l2_generations() -> None:
    assert serial_fixed_cost(generation(MI300X.gpu, MI300X.name))
    for preset in ("mi210", "mi250x", "dgx-h100", "dgx-a100", "dgx1-v100"):
        hw = load_hw(preset)
        assert not serial_fixed_cost(generation(hw.gpu, hw.name)), preset


def test_golden_mid_size_bf16_add_on_mi300x() -> None:
    # 2^21 bf16 elements a + b (SD3.5's 640-workgroup adds move 10.5 MB): D = 6 x 2^21 = 12,582,912
    # B. T_bw = D / (5300 GB/s x 0.754) = 3.1487 us; with the fill's 2 x 434 ns, 4.0167 us of body
    # (the Little's-law term is below T_bw: 640 x 256 threads x 64 B = 10.5 MB in flight); in series
    # with the fixed cost 2.0 - 3 x 0.434 = 0.698 us: 4.7147 us. Overlapped, the body alone: 4.0167.
    ops = _add(2**21, 640)
    assert body_seconds(ops, MI300X)[0] * 1e6 == pytest.approx(4.7147, rel=1e-4)
    assert _overlapped(ops, MI300X)[0] * 1e6 == pytest.approx(4.0167, rel=1e-4)


def test_one_workgroup_kernel_stays_at_the_floor() -> None:
    # 256 bf16 elements in one workgroup: every byte in flight at once, body 3 x 434 ns = 1.302 us,
    # plus 0.698 us: exactly the 2.0-us floor the preset measured on such kernels
    assert body_seconds(_add(256, 1), MI300X)[0] == pytest.approx(2.0e-6)


def test_one_l2_gpus_unchanged() -> None:
    ops = pd.concat([_add(256, 1), _add(2**21, 640), _add(2**26, 65_536)], ignore_index=True)
    for preset in ("mi210", "dgx-h100"):
        hw = load_hw(preset)
        assert body_seconds(ops, hw) == pytest.approx(_overlapped(ops, hw), rel=1e-12)


def test_sm_utilization_removes_the_fixed_cost() -> None:
    ops = pd.concat([_add(256, 1), _add(2**21, 640)], ignore_index=True)
    ideal = frozenset({"sm_utilization"})
    saved = kernel_module.serial_fixed_cost
    kernel_module.serial_fixed_cost = lambda gen: False
    try:
        overlapped = body_seconds(ops, MI300X, ideal)
    finally:
        kernel_module.serial_fixed_cost = saved
    assert body_seconds(ops, MI300X, ideal) == pytest.approx(overlapped, rel=1e-12)
    assert (body_seconds(ops, MI300X, ideal) < body_seconds(ops, MI300X)).all()


@settings(max_examples=40, deadline=None)
@given(
    n=st.integers(1, 2**26),
    more=st.floats(1.0, 8.0),
    blocks=st.integers(1, 70_000),
    threads=st.sampled_from([64, 128, 256, 512, 1024]),
)
def test_invariants_on_mi300x(n: int, more: float, blocks: int, threads: int) -> None:
    small, large = _add(n, blocks, threads), _add(int(n * more), blocks, threads)
    t_small, t_large = body_seconds(small, MI300X)[0], body_seconds(large, MI300X)[0]
    # never below the floor, never faster than with the fixed cost overlapped
    assert t_small >= 2.0e-6 * (1 - 1e-12)
    assert t_small >= _overlapped(small, MI300X)[0] * (1 - 1e-12)
    # more bytes never faster
    assert t_large >= t_small * (1 - 1e-9)
    # more DRAM bandwidth never slower
    faster = MI300X.model_copy(deep=True)
    faster.gpu.dram_bw_gbs = MI300X.gpu.dram_bw_gbs * more
    assert body_seconds(small, faster)[0] <= t_small * (1 + 1e-9)
