"""How an op's FLOPs and bytes are split among the kernels it launched (archsim.trace.gpu_costs
.split_op): by the model (launch size, the auxiliary kernels' own grids, a reduction's partials),
never by measured durations, so a model-only prediction does not read the measured answer back
(issue 12, item 4)."""

from __future__ import annotations

import functools
import gzip
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.trace.flops import OpCost
from archsim.trace.gpu_costs import split_op
from tests.conftest import kineto_fixture

# Real kernel names: the main cuDNN engine and two auxiliary kernels of the same convolution
# (layout transform, Winograd data transform), as in the V100 fixtures.
CONV_MAIN = "volta_scudnn_128x64_relu_interior_nn_v1"
CONV_LAYOUT = "void cudnn::ops::nchwToNhwcKernel<float, float, float, false, true>"
CONV_WINOGRAD = "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>"


def test_conv_with_one_main_and_two_auxiliary_kernels_by_hand() -> None:
    cost = OpCost("conv", 1.0e9, 4.0e6, 2.0e6, True, "float32")
    flops, read, written, shares = split_op(
        cost,
        [CONV_LAYOUT, CONV_MAIN, CONV_WINOGRAD],
        np.array([10, 100, 20]),
        np.array([256, 256, 128]),
    )
    # The engine takes the whole op; it is the only main kernel.
    assert shares.tolist() == [False, True, False]
    assert flops.tolist() == [0.0, 1.0e9, 0.0]
    # Each auxiliary kernel moves its own grid's elements once each way: blocks x threads x 4
    # elements per thread x 4 B (fp32): 10 x 256 x 4 x 4 = 40,960 B; 20 x 128 x 4 x 4 = 40,960 B.
    assert read.tolist() == [40_960.0, 4.0e6, 40_960.0]
    assert written.tolist() == [40_960.0, 2.0e6, 40_960.0]


def test_gemm_main_kernels_share_by_launch_size_by_hand() -> None:
    # Two GEMM kernels of one op (e.g. two tile shapes): 30 x 128 and 10 x 256 threads -> 3840 and
    # 2560 of 6400 thread slots: shares 0.6 and 0.4, whatever they measured.
    cost = OpCost("gemm", 1.0e8, 1.0e6, 5.0e5, True, "float16")
    flops, read, written, shares = split_op(
        cost, ["volta_h884gemm_64x64_nn", "volta_h884gemm_128x128_nn"], np.array([30, 10]),
        np.array([128, 256]),
    )  # fmt: skip
    assert shares.all()
    np.testing.assert_allclose(flops, [6.0e7, 4.0e7])
    np.testing.assert_allclose(read, [6.0e5, 4.0e5])
    np.testing.assert_allclose(written, [3.0e5, 2.0e5])


def test_two_stage_reduction_by_hand() -> None:
    # A sum over 1M fp32 elements to 1024 outputs: stage one (64 blocks) reads the input; the
    # one-block final stage reads the 64 partials (64 x 4 B = 256 B), adds them (64 FLOPs) and
    # writes at most that much.
    cost = OpCost("reduction", 1.0e6, 4.0e6, 4096.0, True, "float32")
    names = ["void at::native::reduce_kernel<512, 1>", "void at::native::reduce_kernel<512, 1>"]
    flops, read, written, shares = split_op(cost, names, np.array([64, 1]), np.array([512, 512]))
    assert shares.tolist() == [True, False]
    assert flops.tolist() == [1.0e6, 64.0]
    assert read.tolist() == [4.0e6, 256.0]
    assert written.tolist() == [4096.0, 256.0]


def test_one_block_kernel_first_is_not_a_final_stage() -> None:
    """A one-block kernel launched before any multi-block one has no partials to read: it shares."""
    cost = OpCost("reduction", 0.0, 1000.0, 0.0, True, "float32")
    _, read, _, shares = split_op(cost, ["a", "b"], np.array([1, 3]), np.array([100, 100]))
    assert shares.all()
    np.testing.assert_allclose(read, [250.0, 750.0])


@settings(max_examples=60, deadline=None)
@given(
    klass=st.sampled_from(["gemm", "conv", "elementwise", "softmax", "optimizer"]),
    launches=st.lists(
        st.tuples(st.integers(1, 10_000), st.integers(1, 1024)), min_size=1, max_size=6
    ),
    flops=st.floats(0, 1e12),
    read=st.floats(0, 1e10),
    written=st.floats(0, 1e10),
)
def test_main_kernels_sum_to_the_op_total(klass, launches, flops, read, written) -> None:
    """Invariant: where all of an op's work is in its main kernels, the split sums to its total and
    no kernel gets a negative share."""
    names = ["volta_sgemm_128x64_nn" if klass in ("gemm", "conv") else "elementwise_kernel"] * len(
        launches
    )
    blocks, threads = (np.array(x, dtype=float) for x in zip(*launches, strict=True))
    cost = OpCost(klass, flops, read, written, True, "float32")
    f, r, w, shares = split_op(cost, names, blocks, threads)
    assert shares.all()
    for part, total in ((f, flops), (r, read), (w, written)):
        assert (part >= 0).all()
        assert part.sum() == pytest.approx(total, rel=1e-9, abs=1e-9)


def _scaled_copy(src, dst, factors_seed: int) -> int:
    """Write ``src`` with every kernel/memcpy/memset duration multiplied by a random factor in
    [0.1, 10]; returns how many durations were changed."""
    trace = json.loads(gzip.decompress(src.read_bytes()))
    rng = np.random.default_rng(factors_seed)
    changed = 0
    for event in trace["traceEvents"]:
        if event.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset") and event.get("dur"):
            event["dur"] = float(event["dur"]) * float(np.exp(rng.uniform(np.log(0.1), np.log(10))))
            changed += 1
    dst.write_bytes(gzip.compress(json.dumps(trace).encode()))
    return changed


# Fixtures with shapes, each with an op whose cost is split among several kernels (kernel names):
# group norm's moments, fused-parameter (one-workgroup final stage) and apply kernels on the MI300X;
# addmm's hipBLASLt GEMM and bias-broadcast copy on the MI250.
FIXTURES = [
    ("mi300x_normalization_bench.json.gz", "aten::native_group_norm", 3),
    ("mi250_mlp_train.json.gz", "aten::addmm", 2),
]


@functools.cache
def _baseline(name: str):
    from archsim.trace.ingest import ingest

    return ingest(kineto_fixture(name))


@pytest.mark.parametrize(("name", "split_op_name", "kernel_names"), FIXTURES)
@settings(
    max_examples=3, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(seed=st.integers(0, 2**32 - 1))
def test_model_only_prediction_ignores_measured_durations(
    name, split_op_name, kernel_names, tmp_path, seed
) -> None:
    """Issue 12 item 4: ``--model-only`` predicts from shapes, FLOPs, bytes and launch geometry; so
    scaling every measured duration by random factors changes no op's FLOPs or bytes, no op's model
    time, and not the model-only GPU seconds per step, while the measured seconds do change."""
    from archsim.analysis.predict import predict_phase
    from archsim.perf.calibrate import measured_ops
    from archsim.perf.kernel import body_seconds
    from archsim.perf.source import source_hw_for_trace
    from archsim.trace.ingest import ingest

    baseline = _baseline(name)
    scaled_path = tmp_path / f"scaled_{seed}.json.gz"
    assert _scaled_copy(kineto_fixture(name), scaled_path, seed) >= 10
    scaled = ingest(scaled_path)
    base_ops, new_ops = baseline.ops, scaled.ops
    # not vacuous: the fixture has an op whose cost is split among several kernels
    launched = base_ops[base_ops["launch_op"] == split_op_name]
    assert launched["name"].nunique() >= kernel_names
    assert not np.allclose(new_ops["dur_us"], base_ops["dur_us"])
    for column in ("flops", "bytes_read", "bytes_written"):
        np.testing.assert_array_equal(new_ops[column].to_numpy(), base_ops[column].to_numpy())
    hw = source_hw_for_trace(baseline)
    np.testing.assert_allclose(
        body_seconds(measured_ops(new_ops), hw),
        body_seconds(measured_ops(base_ops), hw),
        rtol=1e-12,
    )
    before = predict_phase(baseline, hw, "all", model_only=True)
    after = predict_phase(scaled, hw, "all", model_only=True)
    assert after["gpu_seconds"] == pytest.approx(before["gpu_seconds"], rel=1e-12)
    assert after["measured_gpu_seconds"] != pytest.approx(before["measured_gpu_seconds"], rel=1e-3)
