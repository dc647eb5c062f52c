"""CDNA3 kernels carry their fixed cost in series with their work (archsim.perf.dispatch_overhead).

Golden values worked by hand on the MI300X preset (floor 2.0 us, pointer chase 434 ns: T_fixed =
2.0 - 2 x 0.434 = 1.132 us, the floor less the model's own one-workgroup body); invariants:
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
    fixed_cost_seconds,
    serial_fixed_cost,
    terms_floor_us,
    with_fixed_cost,
)
from archsim.perf.efficiency import generation
from archsim.perf.kernel import body_seconds, kernel_terms
from archsim.perf.pipeline_fill import minimal_kernel_seconds
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
    # the model's one-workgroup body (archsim.perf.pipeline_fill): its loads return one round trip
    # after dispatch, its stores are acknowledged one later: 2 x 434 ns, not the 3 L of a fill that
    # counted the first round trip twice
    assert minimal_kernel_seconds(434e-9) == pytest.approx(868e-9)
    # MI300X: floor 2.0 us less 2 x 434 ns = 1.132 us; the terms see a floor of 0.868 us
    assert fixed_cost_seconds(2.0e-6, 434e-9) == pytest.approx(1.132e-6)
    assert terms_floor_us(2.0, 434.0) == pytest.approx(0.868)
    # a floor under two round trips leaves no fixed cost, and the terms keep that floor
    assert fixed_cost_seconds(0.8e-6, 434e-9) == 0.0
    assert terms_floor_us(0.8, 434.0) == 0.8
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
    # B. T_bw = D / (5300 GB/s x 0.754) = 3.1487 us; bandwidth-bound (the Little's-law term is D /
    # 5300 GB/s = 2.374 us: 640 x 256 threads x 64 B = 10.5 MB in flight), so the fill adds both
    # round trips, first load and last store: 0.434 + max(0.434 + 3.1487, 2.374) = 4.0167 us of body;
    # in series with the fixed cost 2.0 - 2 x 0.434 = 1.132 us: 5.1487 us (with the double-counted
    # fill's 3 L body_min it was 0.698 + 4.0167 = 4.7147). Overlapped, the body alone: 4.0167.
    ops = _add(2**21, 640)
    assert body_seconds(ops, MI300X)[0] * 1e6 == pytest.approx(5.1487, rel=1e-4)
    assert _overlapped(ops, MI300X)[0] * 1e6 == pytest.approx(4.0167, rel=1e-4)


def test_one_workgroup_kernel_stays_at_the_floor() -> None:
    # 256 bf16 elements in one workgroup: 1,024 B loaded, 512 B stored, every load in flight at
    # once. Its loads return at L = 434 ns (the Little's-law term: one round, T_lat = L at nearly no
    # load), its stores are acknowledged at 2 L = 868 ns; the bandwidth bound puts the last byte
    # T_bw = 1,536 B / (5300 GB/s x 0.754) = 0.384 ns after the first: body L + max(L + T_bw,
    # T_lat) = 868.4 ns, plus the fixed cost 1.132 us: the 2.0-us floor the preset measured on such
    # kernels, and 0.384 ns (T_bw) over it
    ops = _add(256, 1)
    terms = kernel_terms(ops, MI300X.gpu, frozenset(), MI300X.name)
    t_bw = 1536 / (5300e9 * 0.754)
    assert terms["bw"][0] == pytest.approx(t_bw, rel=1e-9)
    assert terms["lat"][0] == pytest.approx(2 * 434e-9 + t_bw, rel=1e-6)
    assert body_seconds(ops, MI300X)[0] == pytest.approx(2.0e-6 + t_bw, rel=1e-6)


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
