"""MIOpen's spatial batch-norm kernels on CDNA3 (archsim.perf.miopen_bn): a chain worked by hand
from the counted gfx940 code, the variants read off real launches, and invariants.

mi300x preset: 304 CUs, 2100 MHz, DRAM latency 434 ns, kernel floor 2.0 us; mt4g's LDS latency 52
cycles (archsim.perf.block_sync). The round trips run in series with the floor less its own round
trip: 2.0 - 0.434 = 1.566 us."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds
from archsim.perf.miopen_bn import bn_chain, miopen_bn_bytes_per_thread, miopen_bn_seconds
from archsim.trace.schema import OPS_COLUMNS, conform

MI300X = load_hw("mi300x")
FIXTURE = (
    Path(__file__).resolve().parents[2]
    / "shared/fixtures/kineto/mi300x_normalization_bench.json.gz"
)
NORM = "MIOpenBatchNormFwdTrainSpatialNorm"
MEAN_VARIANCE = "MIOpenBatchNormFwdTrainSpatialMeanVariance"
BWD = "MIOpenBatchNormBwdSpatial"
FWD_DIMS = "[[{n}, 16, 32, 32], [16], [16], [16], [16], [], [], []]"
BWD_DIMS = "[[{n}, 16, 32, 32], [{n}, 16, 32, 32], [16], [], [], [16], [16], []]"


def _op(name: str, dims: str, block: tuple[int, int], blocks: int = 16) -> pd.DataFrame:
    row = {
        "kind": "kernel", "name": name, "op_class": "reduction", "dtype": "float32",
        "bytes_read": 524352.0, "bytes_written": 524288.0, "flops": 131072.0,
        "grid_x": blocks, "grid_y": 1, "grid_z": 1, "block_x": block[0], "block_y": block[1],
        "block_z": 1, "input_dims": dims,
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


def _launch(ops: pd.DataFrame, resident: float = 8.0) -> tuple[np.ndarray, ...]:
    blocks = ops["grid_x"].to_numpy(dtype=float)
    threads = (ops["block_x"] * ops["block_y"]).to_numpy(dtype=float)
    return blocks, threads, np.full(len(ops), resident)


def test_norm_chain_worked_by_hand() -> None:
    # Norm of (8, 16, 32, 32): 16 workgroups of (1, 256): vec 4, N_el 8; one workgroup a CU, its 4
    # waves one a SIMD. Round trips: the parameter loads, then 4 unrolled iterations of 2 float4
    # loads: 5 x 434 ns = 2.170 us. LDS: 2 x 52 cycles. Issue: every wave (116, 0, 20, 44):
    # max(116 x 4, 20 x 4, 180 x 4) = 720 cycles; wave 0's extra (5, 0, 3, 9): 17 x 4 = 68.
    # (104 + 788) / 2100 MHz = 0.42476 us; with the 1.566 us fixed cost: 4.16076 us.
    ops = _op(NORM, FWD_DIMS.format(n=8), (1, 256))
    chain = bn_chain(NORM, FWD_DIMS.format(n=8), (1, 256, 1), (16, 1, 1))
    assert chain is not None and (chain.dram_trips, chain.lds_trips) == (5, 2)
    assert chain.bytes_per_thread == 32.0
    seconds = miopen_bn_seconds(ops, _launch(ops), MI300X.gpu, "cdna3", frozenset())
    assert seconds[0] == pytest.approx(1.566e-6 + 5 * 434e-9 + 892 / 2100e6, rel=1e-9)
    assert seconds[0] == pytest.approx(4.16076e-6, rel=1e-5)
    # through the kernel model: the chain binds (the flat 16 B of traffic had priced 8.5 us)
    assert body_seconds(ops, MI300X)[0] == pytest.approx(4.16076e-6, rel=1e-5)


def test_uncounted_configurations_get_no_term() -> None:
    dims = FWD_DIMS.format(n=8)
    assert bn_chain(NORM, dims, (1, 64, 1), (16, 1, 1)) is None  # vec 16: not compiled
    assert bn_chain(NORM, "[[8, 16, 64, 64]]", (1, 1024, 1), (16, 1, 1)) is None  # HW > 2500
    assert bn_chain(MEAN_VARIANCE, FWD_DIMS.format(n=16), (1, 256, 1), (16, 1, 1)) is None
    assert bn_chain(BWD, BWD_DIMS.format(n=32), (1024, 1, 1), (16, 1, 1)) is None  # N >= 32
    assert bn_chain(BWD, "[[8, 16]]", (1024, 1, 1), (16, 1, 1)) is None  # not NCHW
    unsaved = "[[8, 16, 32, 32], [8, 16, 32, 32], [16], [], [], [], [], []]"
    assert bn_chain(BWD, unsaved, (1024, 1, 1), (16, 1, 1)) is None  # recomputes its statistics
    assert bn_chain(BWD, BWD_DIMS.format(n=8), (1024, 1, 1), (16, 1, 1)) is not None
    assert (
        bn_chain("MIOpenBatchNormFwdTrainSpatial", FWD_DIMS.format(n=8), (1024, 1, 1), (16, 1, 1))
        is None
    )  # fmt: skip  (variant 3 with N > 1: not priced)
    ops = _op(NORM, FWD_DIMS.format(n=8), (1, 256))
    # other generations: no term, and Little's law keeps its default
    assert miopen_bn_seconds(ops, _launch(ops), MI300X.gpu, "cdna", frozenset())[0] == 0.0
    assert np.isnan(miopen_bn_bytes_per_thread(ops, "hopper")[0])
    # idealized latencies and memory system leave only the fixed cost and the issue
    ideal = frozenset({"dram_latency", "memory_system"})
    seconds = miopen_bn_seconds(ops, _launch(ops), MI300X.gpu, "cdna3", ideal)
    assert seconds[0] == pytest.approx((2.0e-6) + 788 / 2100e6, rel=1e-9)


@pytest.mark.skipif(not FIXTURE.exists(), reason="the kineto fixtures are not checked out here")
def test_variants_read_off_the_normalization_bench() -> None:
    # the bench's launches: forward (8, 16, 32, 32) runs variant 2 (16 workgroups of (1, 256)),
    # (1, 128, 32, 32) variant 3 (128 of 1,024); backward variant 3 for both shapes
    from archsim.perf.calibrate import measured_ops
    from archsim.trace.ingest import ingest

    ops = measured_ops(ingest(FIXTURE).ops).reset_index(drop=True)
    ops = ops[ops["name"].astype(str).str.startswith("MIOpenBatchNorm")].reset_index(drop=True)
    per_thread = dict(zip(ops["name"] + ops["grid_x"].astype(int).astype(str),
                          miopen_bn_bytes_per_thread(ops, "cdna3"), strict=True))  # fmt: skip
    assert per_thread == {
        MEAN_VARIANCE + "16": 128.0,  # 8 float4 loads in one round trip
        "MIOpenBatchNormFwdTrainSpatialFinalMeanVariance16": 8.0,
        NORM + "16": 32.0,  # 2 float4 loads an unrolled iteration
        "MIOpenBatchNormFwdTrainSpatial128": 4.0,
        BWD + "128": 8.0,  # x and dy, N = 1
        BWD + "16": 64.0,  # N = 8
    }
    assert (miopen_bn_seconds(ops, _launch(ops), MI300X.gpu, "cdna3", frozenset()) > 2e-6).all()
    # CDNA2 runs the same counted code (module docstring): an MI210 never prices them below the MI300X
    mi210 = body_seconds(ops, load_hw("mi210"))
    assert (body_seconds(ops, MI300X) <= mi210).all()


@settings(max_examples=40, deadline=None)
@given(n=st.integers(1, 30), more=st.integers(1, 30))
def test_more_elements_never_fewer_cycles(n: int, more: int) -> None:
    cases = [
        (NORM, FWD_DIMS, (1, 256), 64),
        (MEAN_VARIANCE, FWD_DIMS, (1, 256), 8),
        (BWD, BWD_DIMS, (1024, 1), 31),
    ]
    for name, dims, block, top in cases:
        small, large = min(n, top), min(n + more, top)
        ops = pd.concat([_op(name, dims.format(n=small), block),
                         _op(name, dims.format(n=large), block)], ignore_index=True)  # fmt: skip
        seconds = miopen_bn_seconds(ops, _launch(ops), MI300X.gpu, "cdna3", frozenset())
        assert seconds[0] > 0 and seconds[1] >= seconds[0]


@settings(max_examples=40, deadline=None)
@given(clock=st.floats(1.0, 3.0), cus=st.floats(1.0, 4.0), blocks=st.integers(1, 2000),
       n=st.integers(1, 8))  # fmt: skip
def test_faster_clock_and_more_cus_never_slower(
    clock: float, cus: float, blocks: int, n: int
) -> None:
    ops = pd.concat([_op(NORM, FWD_DIMS.format(n=n), (1, 256)),
                     _op(BWD, BWD_DIMS.format(n=n), (1024, 1))], ignore_index=True)  # fmt: skip
    # a channel a workgroup: the launch's C follows the grid
    for i, dims in enumerate((FWD_DIMS, BWD_DIMS)):
        ops.loc[i, "input_dims"] = dims.format(n=n).replace(", 16,", f", {blocks},")
        ops.loc[i, "grid_x"] = blocks
    gpu = MI300X.gpu
    base = miopen_bn_seconds(ops, _launch(ops, 2.0), gpu, "cdna3", frozenset())
    faster = gpu.model_copy(update={"clock_mhz": gpu.clock_mhz * clock})
    wider = gpu.model_copy(update={"sms": int(gpu.sms * cus)})
    assert (base > 0).all()
    assert (miopen_bn_seconds(ops, _launch(ops, 2.0), faster, "cdna3", frozenset()) <= base).all()
    assert (miopen_bn_seconds(ops, _launch(ops, 2.0), wider, "cdna3", frozenset()) <= base).all()
