"""Dependent load steps of scalar-loop reduction kernels (archsim.perf.memory_parallelism).

Worked by hand on the mi300x preset: 304 CUs, 2100 MHz, 2048 threads per CU, DRAM latency 434 ns,
kernel floor 2.0 us; L2 hit (its l2_latency_ns, 213 cycles at 2100 MHz) 101.4 ns. The round trips run
in series with the floor less its own round trip: 2.0 - 0.434 = 1.566 us."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds
from archsim.perf.memory_parallelism import (
    dependent_step_seconds,
    load_steps,
    serial_overhead_seconds,
    step_floor,
)
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
STATS = (
    "void at::native::batch_norm_collect_statistics_kernel<at::native::Var, float, float, float, "
    "int>(...)"
)
REDUCE_MEAN = (
    "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, "
    "float, float, float>, unsigned int, float, 4, 4> >(at::native::ReduceOp<float, "
    "at::native::MeanOps<float, float, float, float>, unsigned int, float, 4, 4>)"
)
OTHER = "void at::native::some_streaming_kernel<float>(...)"


def _kernel(name: str, grid: tuple[int, int], threads: int, read: float, written: float,
            input_dims: str = "") -> pd.DataFrame:  # fmt: skip
    row = {
        "kind": "kernel", "name": name, "op_class": "reduction", "dtype": "float32",
        "bytes_read": read, "bytes_written": written, "flops": read / 4,
        "grid_x": grid[0], "grid_y": grid[1], "grid_z": 1, "block_x": threads, "block_y": 1,
        "block_z": 1, "input_dims": input_dims,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def test_step_counts_from_kernel_names() -> None:
    # an older PyTorch's name (v100_cnn_ddp_train) carries vt0 only; a newer one vt0 and the vector size
    older = "void at::native::reduce_kernel<512, 1, at::native::ReduceOp<float, at::native::MeanOps<float, float, float, float>, unsigned int, float, 2> >(x)"  # noqa: E501
    wide = "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, f, unsigned int, float, 4, 8> >(x)"  # noqa: E501
    names = pd.Series([STATS, REDUCE_MEAN, OTHER, "layer_norm_grad_input_kernel<float, float>",
                       older, wide])  # fmt: skip
    per_step, first_input, reduce = load_steps(names)
    assert list(per_step) == [1, 4, 0, 4, 2, 8]
    assert list(first_input) == [True, False, False, True, False, False]
    assert list(reduce) == [False, True, False, False, True, True]


def test_small_grid_statistics_kernel_pays_its_dependent_steps() -> None:
    # batch_norm over [8, 16, 32, 32] fp32: 16 channels, one 1024-thread block each. The trace gives
    # the kernel a third of the op's bytes, but the kernel reads its whole input: 131,072 elements,
    # 8,192 per block, one scalar load per thread per step: 8 steps x 434 ns = 3.472 us (one wave),
    # after the 1.566 us of dispatch and completion: 5.038 us; in series with them the kernel's
    # instructions issue on its SIMDs, 11,424 cycles at 2100 MHz (archsim.perf.issue_rate_amd,
    # worked in test_issue_rate_amd): 10.478 us.
    ops = _kernel(STATS, (16, 1), 1024, 174805.0, 174763.0, "[[8,16,32,32],[],[],[16],[16]]")
    assert body_seconds(ops, MI300X)[0] == pytest.approx(1.566e-6 + 3.472e-6 + 11424 / 2.1e9)
    # The same kernel without recorded shapes: its bytes read, 174,805 B = 43,701 elements, 2,732
    # per block: 3 steps = 1.302 us, plus 1.566 us = 2.868 us, above the 2.0-us kernel floor.
    ops = _kernel(STATS, (16, 1), 1024, 174805.0, 174763.0)
    assert body_seconds(ops, MI300X)[0] == pytest.approx(2.868e-6)


def test_global_reduction_adds_l2_round_trips() -> None:
    # mean of [8, 16, 32, 32] fp32 to one value over 16 blocks of 512 threads (grid (1, 16)):
    # 524,292 B read = 131,073 elements / 16 = 8,192 per block (whole elements), 4 per thread per
    # step: 4 steps x 434 ns = 1.736 us; plus the global reduction's 3 L2 round trips of 101.4 ns:
    # 2.0402 us, after the floor's 1.566 us: 3.6062 us.
    ops = _kernel(REDUCE_MEAN, (1, 16), 512, 524292.0, 4.0, "[[8,16,32,32],[],[]]")
    floor = step_floor(ops, (np.array([16.0]), np.array([512.0]), np.array([4.0])),
                       np.array([524296.0]), MI300X.gpu, frozenset())  # fmt: skip
    assert floor is not None
    assert floor[0] == pytest.approx(1.566e-6 + 4 * 434e-9 + 3 * 101.4e-9)
    assert floor[0] == pytest.approx(3.6062e-6, rel=1e-4)
    # in series with its 2,568 SIMD cycles of issue on CDNA3 (archsim.perf.reduce_issue_amd,
    # worked in test_reduce_issue_amd): 4.8291 us
    assert body_seconds(ops, MI300X)[0] == pytest.approx(3.6062e-6 + 2568 / 2.1e9, rel=1e-4)
    # the idealized DRAM latency and memory system remove both
    ideal = step_floor(ops, (np.array([16.0]), np.array([512.0]), np.array([4.0])),
                       np.array([524296.0]), MI300X.gpu, frozenset({"dram_latency", "memory_system"}))  # fmt: skip
    assert ideal is not None and ideal[0] == 0.0


def test_large_kernel_unchanged() -> None:
    # 1024 blocks of 512 threads reducing 1 GiB: 2^28 elements / 1024 blocks / (512 x 4) = 128
    # steps x 0.5 us = 64 us of dependent steps,
    # below the 1 GiB / (5300 GB/s x 0.82) = 247 us of streaming: same time as an unnamed kernel.
    read = float(2**30)
    named = _kernel(REDUCE_MEAN, (1024, 1), 512, read, 4096.0)
    other = _kernel(OTHER, (1024, 1), 512, read, 4096.0)
    assert body_seconds(named, MI300X)[0] == body_seconds(other, MI300X)[0]
    assert body_seconds(named, MI300X)[0] > 200e-6


def test_kernels_without_names_get_no_floor() -> None:
    ops = _kernel(OTHER, (16, 1), 1024, 174805.0, 174763.0)
    floor = step_floor(ops, (np.array([16.0]), np.array([1024.0]), np.array([2.0])),
                       np.array([349568.0]), MI300X.gpu, frozenset())  # fmt: skip
    assert floor is None


GPU = MI300X.gpu


@settings(max_examples=200, deadline=None)
@given(
    rows=st.floats(1.0, 1e8),
    more=st.floats(1.0, 100.0),
    blocks=st.integers(1, 100_000),
    threads=st.sampled_from([64, 128, 256, 512, 1024]),
    per_step=st.sampled_from([1, 2, 4, 8]),
)
def test_more_bytes_never_faster(
    rows: float, more: float, blocks: int, threads: int, per_step: int
) -> None:
    def t(r: float) -> float:
        return float(dependent_step_seconds(np.array([per_step]), np.array([r]),
                                            np.array([blocks]), np.array([threads]),
                                            np.array([2.0]), np.array([0.0]), GPU)[0])  # fmt: skip

    assert t(rows * more) >= t(rows) > 0


@settings(max_examples=200, deadline=None)
@given(
    elements=st.floats(1.0, 1e9),
    blocks=st.integers(1, 600),
    extra=st.integers(0, 600),
    threads=st.sampled_from([64, 128, 256, 512, 1024]),
)
def test_more_blocks_never_slower_within_one_wave(
    elements: float, blocks: int, extra: int, threads: int
) -> None:
    """The same reduction split over more blocks, all resident at once (304 CUs x 2 blocks per CU
    = 608 blocks of up to 1024 threads): shorter rows, never more steps."""
    wider = min(blocks + extra, 608)

    def t(b: int) -> float:
        return float(dependent_step_seconds(np.array([1.0]), np.array([elements / b]),
                                            np.array([b]), np.array([threads]),
                                            np.array([2.0]), np.array([3.0]), GPU)[0])  # fmt: skip

    assert t(wider) <= t(blocks)


def test_serial_overhead_is_the_floor_less_its_own_round_trip() -> None:
    # mi300x: 2.0 us floor - 434 ns = 1.566 us; mi210: 3.7 us - 390 ns = 3.31 us
    assert serial_overhead_seconds(MI300X.gpu) == pytest.approx(1.566e-6)
    assert serial_overhead_seconds(load_hw("mi210").gpu) == pytest.approx(3.31e-6)
    # idealized DRAM latency: the whole floor stays; perfect SM utilization removes the floor
    assert serial_overhead_seconds(MI300X.gpu, frozenset({"dram_latency"})) == pytest.approx(2.0e-6)
    assert serial_overhead_seconds(MI300X.gpu, frozenset({"sm_utilization"})) == 0.0


@settings(max_examples=50, deadline=None)  # the suite's time budget
@given(
    elements=st.integers(1, 1024),
    blocks=st.integers(1, 608),
    threads=st.sampled_from([64, 128, 256, 512, 1024]),
)
def test_one_step_costs_the_floor_and_each_step_adds_a_round_trip(
    elements: int, blocks: int, threads: int
) -> None:
    """Rows that one load per thread covers (one step, one wave) cost the kernel floor and their
    bytes' transfer; twice the rows (two steps) one DRAM round trip over the floor. At most 16,384
    threads (64 KB a step): a larger step's transfer outlasts its round trip, and on CDNA3 it adds to
    the kernel's fixed cost (archsim.perf.dispatch_overhead) instead of hiding under the floor.

    One step: every load in flight at once, so its pipeline fill (archsim.perf.pipeline_fill) is
    L + max(L + T_bw, T_lat = L) = 2 L + T_bw (the loads back at L, the last byte T_bw = D / (5300
    GB/s x 0.754) after the first, the stores acknowledged one round trip later), above the chain's
    floor - L + L = 2 L; with the fixed cost 2.0 us - 2 L in series: 2.0 us + T_bw (at most 16 ps).
    Two steps: the chain, 2 L + L, over the fill, plus the fixed cost: 2.0 us + 434 ns."""
    assume(blocks * threads <= 16_384)
    elements = min(elements, threads)  # one step: rows <= threads x 1 element

    def t(rows: float) -> float:
        ops = _kernel(STATS, (blocks, 1), threads, rows * blocks * 4.0, 8.0 * blocks)
        return float(body_seconds(ops, MI300X)[0])

    t_bw = (elements * blocks * 4.0 + 8.0 * blocks) / (5300e9 * 0.754)
    assert t(elements) == pytest.approx(2.0e-6 + t_bw, rel=1e-9)
    assert t(elements + threads) == pytest.approx(2.0e-6 + 434e-9)
