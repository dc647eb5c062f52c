"""Serial prologue and epilogue of traced tiled kernels (archsim.perf.gemm_latency:
prologue_seconds, epilogue_store_seconds): golden values worked by hand, invariants, and the real
MI300X fixture."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.gemm_latency import epilogue_store_seconds, prologue_seconds
from archsim.perf.kernel import body_seconds
from archsim.perf.terms import kernel_terms
from tests.test_gemm_latency import MT64, gemm_op


def _gemm_op(k: int, blocks: int, m: int = 666, n: int = 2432) -> pd.DataFrame:
    return gemm_op(MT64, k, blocks, m, n)


def test_golden_mi300x_rounds():
    """Worked by hand on the mi300x preset (T_min 2.0 us, L 434 ns, 304 CUs):
    266 workgroups, 1 resident: one round, (2.0 - 0.434) + 1 x 0.434 = 2.000 us;
    1406 workgroups (the fixture's MT256x224x64 grid), 1 resident: ceil(1406 / 304) = 5 rounds,
    1.566 + 5 x 0.434 = 3.736 us; 2 resident: ceil(5 / 2) = 3 rounds, 1.566 + 3 x 0.434 = 2.868 us;
    not a traced tiled kernel: 0."""
    gpu = load_hw("mi300x").gpu
    blocks = np.array([266.0, 1406.0, 1406.0, 1406.0])
    resident = np.array([1.0, 1.0, 2.0, 1.0])
    wanted = np.array([True, True, True, False])
    got = prologue_seconds(blocks, resident, wanted, gpu)
    assert got == pytest.approx([2.000e-6, 3.736e-6, 2.868e-6, 0.0], rel=1e-9)


def test_idealizations():
    """dram_latency: no round trips, the fixed cost is the whole floor (2.0 us); sm_utilization: no
    fixed cost, and one SM running all 1406 workgroups one at a time, divided by 304 CUs:
    1406 / 304 x 0.434 = 2.00724 us."""
    gpu = load_hw("mi300x").gpu
    one = (np.array([1406.0]), np.array([1.0]), np.array([True]), gpu)
    assert prologue_seconds(*one, frozenset({"dram_latency"}))[0] == pytest.approx(2.0e-6)
    assert prologue_seconds(*one, frozenset({"sm_utilization"}))[0] == pytest.approx(
        1406 / 304 * 434e-9, rel=1e-9
    )


def test_serial_term_adds_to_the_math():
    """The one-wave MT64x96x128 GEMM of fixture mi300x_sd35_inference ([666, 2432] x [2432, 2432],
    266 workgroups = 7 x 38 tiles, one round): prologue 2.0 us, and the whole C (666 x 2432 bf16 =
    3,239,424 B) stored after the math at 0.754 x 5300 GB/s: 0.8106 us; serial 2.8106 us."""
    hw = load_hw("mi300x")
    ops = _gemm_op(2432, 266)
    terms = kernel_terms(ops, hw.gpu, frozenset(), hw.name)
    assert terms["serial"][0] == pytest.approx(2.0e-6 + 3_239_424 / (0.754 * 5300e9), rel=1e-9)
    assert terms["serial"][0] == pytest.approx(2.8106e-6, rel=1e-4)
    assert terms["comp"][0] > max(terms["bw"][0], terms["lat"][0], terms["mem"][0])


def test_golden_epilogue_rounds():
    """S = 0.8106 us of stores, T_comp = 10 us. One round: all of S. Two rounds on 200 CUs (266
    workgroups, 66 in the last round): max(S x 66 / 266, S - 10 x (1 - 1/2)) = 0.20113 us. A grid
    that is not the tile count (a persistent kernel, 120 workgroups): 0."""
    gpu = load_hw("mi300x").gpu
    fewer = gpu.model_copy(update={"sms": 200})
    store_s = 3_239_424 / (0.754 * 5300e9)
    one = (_gemm_op(2432, 266), np.array([266.0]), np.array([1.0]), np.array([True]))
    comp = np.array([10e-6])
    assert epilogue_store_seconds(*one, comp, gpu, 0.754)[0] == pytest.approx(store_s, rel=1e-9)
    assert epilogue_store_seconds(*one, comp, fewer, 0.754)[0] == pytest.approx(
        store_s * 66 / 266, rel=1e-9
    )
    persistent = (_gemm_op(2432, 120), np.array([120.0]), np.array([1.0]), np.array([True]))
    assert epilogue_store_seconds(*persistent, comp, gpu, 0.754)[0] == 0.0
    for ideal in ("dram_bw", "sm_utilization"):
        assert epilogue_store_seconds(*one, comp, gpu, 0.754, frozenset({ideal}))[0] == 0.0


def test_grid_less_ops_get_no_serial_term():
    """A CPU capture's GEMM (no traced grid) keeps the tile search's terms unchanged."""
    hw = load_hw("mi300x")
    ops = _gemm_op(2432, 266).drop(columns=["grid_x", "grid_y", "grid_z"])
    assert kernel_terms(ops, hw.gpu, frozenset(), hw.name)["serial"][0] == 0.0


@settings(max_examples=60, deadline=None)
@given(blocks=st.integers(1, 100_000), resident=st.integers(1, 32), sms=st.integers(1, 303))
def test_more_cus_or_resident_never_more_rounds(blocks, resident, sms):
    hw = load_hw("mi300x")
    fewer = hw.gpu.model_copy(update={"sms": sms})
    more = hw.gpu.model_copy(update={"sms": sms + 1})
    args = (np.array([float(blocks)]), np.array([float(resident)]), np.array([True]))
    base = prologue_seconds(*args, fewer)[0]
    assert prologue_seconds(*args, more)[0] <= base
    assert prologue_seconds(args[0], args[1] + 1, args[2], fewer)[0] <= base
    assert prologue_seconds(args[0] + 1, args[1], args[2], fewer)[0] >= base


@settings(max_examples=40, deadline=None)
@given(k=st.integers(1, 1 << 15), extra=st.integers(1, 1 << 15), blocks=st.integers(1, 4096),
       cus=st.integers(1, 303))  # fmt: skip
def test_more_flops_never_faster_more_cus_never_slower(k, extra, blocks, cus):
    hw = load_hw("mi300x")
    ops = pd.concat([_gemm_op(k, blocks), _gemm_op(k + extra, blocks)], ignore_index=True)
    seconds = body_seconds(ops, hw)
    assert seconds[1] >= seconds[0]
    fewer = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": cus})})
    more = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": cus + 1})})
    assert body_seconds(ops, more)[0] <= body_seconds(ops, fewer)[0] * (1 + 1e-12)


def test_sd35_gemms_move_toward_measured():
    """Fixture mi300x_sd35_inference: every hipBLASLt GEMM kernel gets at least the fixed cost as
    its serial term, and the term takes the median |error| of those kernels down (it is not fitted
    to: its parts are the preset's measured floor and latency)."""
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest
    from tests.conftest import kineto_fixture

    trace = ingest(kineto_fixture("mi300x_sd35_inference.json.gz"))
    hw = source_hw_for_trace(trace)
    ops = measured_ops(trace.ops).reset_index(drop=True)
    terms = kernel_terms(ops, hw.gpu, frozenset(), hw.name)
    cijk = ops["name"].astype(str).str.startswith("Cijk_").to_numpy()
    assert cijk.sum() >= 1000
    assert (terms["serial"][cijk] >= hw.gpu.kernel_min_us * 1e-6 - 1e-12).all()
    rest = np.maximum.reduce([terms["bw"], terms["lat"], terms["mem"]])[cijk]
    measured = ops["dur_us"].to_numpy(dtype=float)[cijk] * 1e-6
    with_serial = np.maximum(terms["comp"][cijk] + terms["serial"][cijk], rest)
    without = np.maximum(terms["comp"][cijk], rest)
    assert np.median(np.abs(with_serial / measured - 1)) < np.median(np.abs(without / measured - 1))


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 4096), n=st.integers(1, 4096), k=st.integers(1, 1 << 14),
       slices=st.integers(1, 4), cus=st.integers(1, 303), extra=st.integers(1, 1 << 14))  # fmt: skip
def test_one_tile_per_workgroup_invariants(m, n, k, slices, cus, extra):
    """Grids that are the tile count (96 along M, 64 along N) times K-slices, so the epilogue applies:
    more SMs never slower, more K never faster."""
    import math

    hw = load_hw("mi300x")
    blocks = math.ceil(m / 96) * math.ceil(n / 64) * slices
    ops = pd.concat([_gemm_op(k, blocks, m, n), _gemm_op(k + extra, blocks, m, n)],
                    ignore_index=True)  # fmt: skip
    fewer = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": cus})})
    more = hw.model_copy(update={"gpu": hw.gpu.model_copy(update={"sms": cus + 1})})
    slow, fast = body_seconds(ops, fewer), body_seconds(ops, more)
    assert (fast <= slow * (1 + 1e-12)).all()
    assert slow[1] >= slow[0] and fast[1] >= fast[0]


def test_accumulator_registers_floor_residency():
    """ROCm traces record no registers: a tile's fp32 accumulators set a floor. 256 threads:
    MT256x224x64 holds 256 x 224 / 256 = 224 registers per thread, so 2 workgroups fit the mi300x
    preset's 131,072 per CU (512 per lane); MT320x224x64 280, so 1; MT64x96x128 24, so the
    2048-thread limit (8) binds. Recorded registers and names without a tile stay as they are."""
    from archsim.perf.occupancy import blocks_per_sm
    from archsim.perf.tile_padding import accumulator_registers

    gpu = load_hw("mi300x").gpu
    names = [
        MT64.replace("MT64x96x128", "MT256x224x64"),
        MT64.replace("MT64x96x128", "MT320x224x64"),
        MT64,
        MT64,
        "void at::native::vectorized_elementwise_kernel<4>",
    ]
    ops = pd.DataFrame({"name": names})
    threads = np.full(5, 256.0)
    recorded = np.array([np.nan, np.nan, np.nan, 128.0, np.nan])
    wanted = np.array([True, True, True, True, True])
    regs = accumulator_registers(ops, threads, recorded, wanted)
    assert regs[:4].tolist() == [224.0, 280.0, 24.0, 128.0]
    assert np.isnan(regs[4])
    resident = blocks_per_sm(threads, regs, np.full(5, np.nan), gpu)
    assert resident[:3].tolist() == [2.0, 1.0, 8.0]
    # not wanted (e.g. no traced grid): unchanged
    assert np.isnan(accumulator_registers(ops, threads, recorded, ~wanted)[0])
