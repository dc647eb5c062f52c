"""K loop of Tensile (hipBLASLt) GEMM kernels decoded from their names (archsim.perf.tensile_loop):
golden values worked by hand, invariants, and the real MI300X fixture."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import body_seconds
from archsim.perf.tensile_loop import (
    lds_serial_factor,
    parse_tensile,
    step_factor,
    tile_bytes_in_flight_per_thread,
)
from tests.test_gemm_latency import gemm_op

# Kernel names from fixture mi300x_sd35_inference (shortened: the parameters the decoder reads kept)
_COMMON = "_SN_LDSB1_AFC1_CLR1_DTLA0_DTLB0_DTVA0_DTVB0_GSUAMBSK_ISA942_PGR2_PLR1_SK0_WS64"
MT16X32 = (
    f"Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT16x32x512_MI16x16x1{_COMMON}_MIWT1_2_WG16_4_4"
)
MT128X16 = (
    f"Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT128x16x128_MI16x16x1{_COMMON}_MIWT4_1_WG32_4_2"
)
MT64X96 = (
    f"Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT64x96x128_MI16x16x1{_COMMON}_MIWT4_3_WG16_8_2"
)
MT320 = (
    "Cijk_Alik_Bljk_BBS_BH_Bias_HA_S_SAV_UserArgs_MT320x224x64_MI16x16x1_SN_LDSB0_CLR1_DTVA1_DTVB0"
    "_PGR2_MIWT5_14_WS64_WG64_4_1"
)


def _factor(name: str, blocks: float, gpu, resident: float = 8.0, **kw) -> float:
    ops = pd.DataFrame({"name": [name], "dtype": ["bfloat16"]})
    rate = np.array([gpu.tensor_flops_per_clk_per_sm * gpu.clock_mhz * 1e6])
    got = lds_serial_factor(ops, np.array([blocks]), np.array([resident]), rate, np.array([True]),
                            gpu, True, **kw)  # fmt: skip
    return float(got[0])


def test_parse_names():
    """Wave tiles and LocalSplitU make the 256-thread workgroup: 16x32 (1 wave tile) x LSU 4;
    128x16 in 64x16 wave tiles (2) x LSU 2; 320x224 in 80x224 wave tiles (4), A direct to VGPRs."""
    small = parse_tensile(MT16X32)
    assert (small.mt0, small.mt1, small.depth_u, small.wave_m, small.wave_n) == (
        16,
        32,
        512,
        16,
        32,
    )
    assert (small.local_split_u, small.waves, small.one_lds_buffer) == (4, 4, True)
    gemv = parse_tensile(MT128X16)
    assert (gemv.wave_m, gemv.wave_n, gemv.local_split_u, gemv.waves) == (64, 16, 2, 4)
    big = parse_tensile(MT320)
    assert (big.waves, big.one_lds_buffer, big.direct_vgpr_a, big.direct_vgpr_b) == (
        4,
        False,
        True,
        False,
    )
    assert parse_tensile("volta_sgemm_128x64_nn") is None
    assert parse_tensile(MT16X32.replace("_WG16_4_4", "_WG16_8_4")) is None  # 8 waves, 4 used


def test_golden_mt16x32x512():
    """Worked by hand (bf16, 2 B): LDS writes (16 + 32) x 512 x 2 = 49,152 B = 384 cycles at 128 B
    per clock; reads 1 wave tile x (16 + 32) x 512 x 2 = 49,152 B = 384 cycles; MFMA 2 x 16 x 32 x
    512 / 2048 FLOP per clock = 256 cycles. One workgroup per CU (240 on 304 CUs): a step takes
    384 + max(256, 384) = 768 cycles, factor 768 / 256 = 3.0. In flight: 49,152 / 256 threads = 192
    B per thread."""
    gpu = load_hw("mi300x").gpu
    loop = parse_tensile(MT16X32)
    assert loop.lds_bytes(2.0) == (49152.0, 49152.0)
    assert _factor(MT16X32, 240, gpu) == pytest.approx(3.0, rel=1e-12)
    ops = pd.DataFrame({"name": [MT16X32], "dtype": ["bfloat16"], "grid_x": [240.0]})
    flight = tile_bytes_in_flight_per_thread(ops, np.array([256.0]), np.array([True]), True)
    assert flight[0] == pytest.approx(192.0)


def test_golden_mt128x16x128():
    """Worked by hand: writes (128 + 16) x 128 x 2 = 36,864 B = 288 cycles; reads 2 wave tiles x
    (64 + 16) x 128 x 2 = 40,960 B = 320 cycles; MFMA 2 x 128 x 16 x 128 / 2048 = 256 cycles. One
    workgroup per CU (228): 320 + max(256, 288) = 608 = the LDS pipe's 288 + 320, factor 608 / 256
    = 2.375; two at once on a CU (608 workgroups, 2 resident): max(2 x 256, 2 x 608, 608) / 512 =
    2.375 too (the LDS pipe binds); in flight 36,864 / 256 = 144 B per thread."""
    gpu = load_hw("mi300x").gpu
    assert _factor(MT128X16, 228, gpu) == pytest.approx(2.375, rel=1e-12)
    assert _factor(MT128X16, 608, gpu, resident=2.0) == pytest.approx(2.375, rel=1e-12)
    ops = pd.DataFrame({"name": [MT128X16], "dtype": ["bfloat16"], "grid_x": [228.0]})
    flight = tile_bytes_in_flight_per_thread(ops, np.array([256.0]), np.array([True]), True)
    assert flight[0] == pytest.approx(144.0)


def test_double_buffer_and_other_gpus():
    """MT320x224x64 (LDSB0, A direct to VGPRs): writes 224 x 64 x 2 = 28,672 B, reads 4 x 224 x 64
    x 2 = 114,688 B: 1,120 LDS cycles under 2 x 320 x 224 x 64 / 2048 = 4,480 MFMA cycles: factor
    1. Not a CDNA GPU, or not traced: 1 and no in-flight figure."""
    gpu = load_hw("mi300x").gpu
    assert _factor(MT320, 296, gpu) == 1.0
    # MT64x96x128 (module docstring): reads 2 x (64 + 48) x 128 x 2 = 57,344 B = 448 cycles,
    # MFMA 2 x 64 x 96 x 128 / 2048 = 768, writes 40,960 B = 320: (448 + 768) / 768
    assert _factor(MT64X96, 266, gpu) == pytest.approx(1216 / 768, rel=1e-12)
    ops = pd.DataFrame({"name": [MT16X32], "dtype": ["bfloat16"], "grid_x": [240.0]})
    one = np.array([1.0])
    assert (
        lds_serial_factor(ops, one * 240, one, one * 1e12, np.array([True]), gpu, False)[0] == 1.0
    )
    assert (
        lds_serial_factor(ops, one * 240, one, one * 1e12, np.array([False]), gpu, True)[0] == 1.0
    )
    assert np.isnan(tile_bytes_in_flight_per_thread(ops, one * 256, np.array([True]), False)[0])


@settings(max_examples=40, deadline=None)
@given(
    m=st.floats(1.0, 1e5),
    r_lds=st.floats(0.0, 1e5),
    w_lds=st.floats(0.0, 1e5),
    blocks=st.integers(1, 5000),
    cus=st.integers(1, 400),
    extra=st.integers(1, 400),
    resident=st.integers(1, 8),
    one=st.booleans(),
)
def test_step_factor_invariants(m, r_lds, w_lds, blocks, cus, extra, resident, one):
    """factor >= 1; the busiest CU's time, ceil(B / N) x m x factor(r = min(resident, ceil(B / N))),
    never grows with more CUs; and a faster MFMA (fewer cycles m) never makes it slower."""

    def busiest(n: int, mfma: float) -> float:
        per_sm = float(np.ceil(blocks / n))
        r = np.array([min(resident, per_sm)])
        f = step_factor(np.array([mfma]), np.array([r_lds]), np.array([w_lds]), r, np.array([one]))
        return per_sm * mfma * float(f[0])

    f = step_factor(np.array([m]), np.array([r_lds]), np.array([w_lds]), np.array([resident]),
                    np.array([one]))  # fmt: skip
    assert f[0] >= 1.0
    assert busiest(cus + extra, m) <= busiest(cus, m) * (1 + 1e-12)
    assert busiest(cus, m / 2.0) <= busiest(cus, m) * (1 + 1e-12)


@settings(max_examples=15, deadline=None)
@given(k=st.integers(1, 1 << 14), extra=st.integers(1, 1 << 14), cus=st.integers(16, 303),
       faster=st.floats(1.0, 4.0))  # fmt: skip
def test_kernel_time_invariants(k, extra, cus, faster):
    """Through the whole kernel model on the mi300x preset, a traced MT16x32x512 kernel: more K is
    never faster; more CUs never slower; a faster matrix rate never slower."""
    hw = load_hw("mi300x")

    def seconds(kk: int, sms: int, rate: float) -> float:
        gpu = hw.gpu.model_copy(update={"sms": sms, "tensor_flops_per_clk_per_sm": rate})
        ops = gemm_op(MT16X32, kk, 240, m=77, n=1280)
        return float(body_seconds(ops, hw.model_copy(update={"gpu": gpu}))[0])

    rate = hw.gpu.tensor_flops_per_clk_per_sm
    assert seconds(k + extra, cus, rate) >= seconds(k, cus, rate) * (1 - 1e-12)
    assert seconds(k, cus + 1, rate) <= seconds(k, cus, rate) * (1 + 1e-12)
    assert seconds(k, cus, rate * faster) <= seconds(k, cus, rate) * (1 + 1e-12)


def test_fixture_families_move_toward_measured():
    """On the real SD3.5 trace (nothing was set from it): the one-LDS-buffer MT64x96x128 GEMMs
    (608 kernels, -37% before the LDS term) are within 15% at the median, and the MT128x16x128
    GEMVs (300 kernels, +55% before the tiles in flight) are no longer over-predicted."""
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest
    from tests.conftest import kineto_fixture

    trace = ingest(kineto_fixture("mi300x_sd35_inference.json.gz"))
    ops = measured_ops(trace.ops).reset_index(drop=True)
    names = ops["name"].astype(str)
    pick = names.str.contains("_MT64x96x128_") | names.str.contains("_MT128x16x128_")
    ops = ops[pick].reset_index(drop=True)
    err = body_seconds(ops, source_hw_for_trace(trace)) / (ops["dur_us"].to_numpy() * 1e-6) - 1.0
    mid = ops["name"].str.contains("_MT64x96x128_").to_numpy()
    assert np.median(np.abs(err[mid])) < 0.15
    assert np.median(err[~mid]) < 0.0
