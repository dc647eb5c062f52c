"""FP32 operands on tensor cores at the TF32 rate (archsim.perf.tf32_operands): golden values worked by
hand from the A100 whitepaper's 156 TFLOP/s, invariants, and the A100 fixture's FP32 CUTLASS GEMMs."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.calibrate import measured_ops
from archsim.perf.math_units import math_units
from archsim.perf.terms import kernel_terms
from archsim.perf.tf32_operands import fp32_tensor_ops, tf32_rate
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

TF32_GEMM = "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm_128x256_32x3_tn_align1>(Params)"
F16_GEMM = (
    "void cutlass::Kernel<cutlass_80_tensorop_f16_s16816gemm_relu_f16_128x128_32x4_tn_align8>"
)
XMMA_TF32 = "sm80_xmma_fprop_implicit_gemm_indexed_tf32f32_tf32f32_f32_nhwckrsc_nchw"


def _ops(names: list[str], dtypes: list[str], op_class: str = "gemm") -> pd.DataFrame:
    return pd.DataFrame({"name": names, "dtype": dtypes, "op_class": [op_class] * len(names)})


def _rates(ops: pd.DataFrame, preset: str) -> np.ndarray:
    gpu = load_hw(preset).gpu
    rate, tensor = math_units(ops, gpu)
    return tf32_rate(
        rate, tensor, ops["name"], ops["dtype"], gpu.tensor_flops_per_clk_per_sm,
        gpu.clock_mhz, gpu.tf32,
    )  # fmt: skip


def test_a100_fp32_cutlass_gemm_runs_at_156_tflops():
    # By hand: dgx-a100 has 2,048 FP16 tensor FLOP/clk/SM at 1,410 MHz on 108 SMs = 311.9 TFLOP/s;
    # TF32 is half: 1,024 x 1.41e9 x 108 = 155.9 TFLOP/s (A100 whitepaper: 156).
    gpu = load_hw("dgx-a100").gpu
    ops = _ops([TF32_GEMM, F16_GEMM, TF32_GEMM, XMMA_TF32], ["float32", "", "float16", ""])
    total = _rates(ops, "dgx-a100") * gpu.sms
    assert abs(total[0] - 155.9e12) / 155.9e12 < 0.005
    assert abs(total[1] - 311.9e12) / 311.9e12 < 0.005  # f16 in the name: the FP16 rate
    assert abs(total[2] - 311.9e12) / 311.9e12 < 0.005  # fp16 tensors: the FP16 rate
    assert abs(total[3] - 155.9e12) / 155.9e12 < 0.005  # "tf32" in the name: halved once only


def test_no_tf32_gpu_is_left_alone():
    # V100 has no TF32 (dgx1-v100 tf32 false): nothing changes, whatever the name.
    ops = _ops([TF32_GEMM, "volta_s884gemm_fp16_128x128_ldg8_f2f_nn"], ["", ""])
    gpu = load_hw("dgx1-v100").gpu
    rate, tensor = math_units(ops, gpu)
    assert np.array_equal(_rates(ops, "dgx1-v100"), rate)


def test_names_with_a_narrower_type_are_not_fp32():
    names = pd.Series([TF32_GEMM, F16_GEMM, "ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8"])
    dtypes = pd.Series(["", "", "float32"])
    assert fp32_tensor_ops(names, dtypes).tolist() == [True, False, False]


@given(
    st.lists(
        st.tuples(
            st.sampled_from([TF32_GEMM, F16_GEMM, XMMA_TF32, "ampere_sgemm_128x64_nn"]),
            st.sampled_from(["float32", "float16", "bfloat16", ""]),
            st.sampled_from(["gemm", "conv", "elementwise"]),
        ),
        min_size=1,
        max_size=8,
    ),
    st.sampled_from(["dgx-a100", "dgx-h100", "dgx1-v100", "mi300x"]),
)
def test_tf32_never_faster_never_below_half_and_idempotent(rows, preset):
    ops = pd.DataFrame(rows, columns=["name", "dtype", "op_class"])
    gpu = load_hw(preset).gpu
    rate, tensor = math_units(ops, gpu)
    once = _rates(ops, preset)
    twice = tf32_rate(
        once, tensor, ops["name"], ops["dtype"], gpu.tensor_flops_per_clk_per_sm,
        gpu.clock_mhz, gpu.tf32,
    )  # fmt: skip
    assert np.all(once <= rate) and np.all(once >= 0.5 * rate)
    # A rate already halved is below the full tensor rate, so a second pass leaves it alone.
    assert np.array_equal(once, twice)


def test_a100_fixture_fp32_gemms_no_faster_than_tf32_peak():
    """Every float32 CUTLASS tensor-op GEMM of a100_train_shapes has a math term at least its FLOPs at
    the TF32 peak (155.9 TFLOP/s); at the FP16 rate the model had priced them at twice that."""
    trace = ingest(kineto_fixture("a100_train_shapes.json.gz"))
    ops = measured_ops(trace.ops).reset_index(drop=True)
    gpu = load_hw("dgx-a100").gpu
    tf32 = ops["name"].str.contains("tensorop_s1688gemm") & (ops["dtype"] == "float32")
    tf32 &= ops["flops"] > 0
    assert tf32.sum() > 1000  # 1,600 such kernels in the fixture
    terms = kernel_terms(ops[tf32].reset_index(drop=True), gpu, frozenset(), "dgx-a100")
    peak_s = ops.loc[tf32, "flops"].to_numpy() / (gpu.sms * 1024 * gpu.clock_mhz * 1e6)
    assert np.all(np.asarray(terms["comp"]) >= peak_s * (1 - 1e-9))
    # and the measured kernels agree: none ran faster than the TF32 peak
    assert np.all(ops.loc[tf32, "dur_us"].to_numpy() * 1e-6 >= peak_s)
