"""A third set of other people's public traces (tests/data, provenance in tests/data/README.md),
each with a shape the first two sets lack: TraceLens's MI300X convolution evals, whose "Input Dims"
list only the two tensors while "Concrete Inputs" list all nine arguments, tuples written "(2,2)";
pytorch's own Inductor analysis test profile (an H100), whose kernels sit on the CPU process's
pid with no device, no correlation and no launch, naming their op only by External id; the Chrome
trace TensorFlow's and JAX's profiler writes, which archsim refuses in one line that says so. And
the class of TorchInductor's Triton kernels by their category prefix."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.hw import load_hw
from archsim.perf.source import source_hw_for_trace
from archsim.trace.flops import kernel_class
from archsim.trace.flops.args import parse_args
from archsim.trace.flops.registry import op_class
from archsim.trace.ingest import ingest
from tests.test_public_traces import _predict_json

DATA = Path(__file__).parent / "data"
CONV_TRANSPOSED = DATA / "tracelens_conv_07_transposed.json.gz"
CONV_DEPTHWISE = DATA / "tracelens_conv_04_depthwise.json.gz"
CONV_DILATED = DATA / "tracelens_conv_06_large_dilation.json.gz"
INDUCTOR_H100 = DATA / "pytorch_inductor_example_h100.json.gz"
TSL = DATA / "tf_tsl_trace_events_to_json.json.gz"
# The conv evals name no GPU (no deviceProperties); their MIOpen igemm kernels ran on an MI300X.
ROUND3 = [
    (CONV_TRANSPOSED, ["--source-hw", "mi300x"]),
    (CONV_DEPTHWISE, ["--source-hw", "mi300x"]),
    (CONV_DILATED, ["--source-hw", "mi300x"]),
    (INDUCTOR_H100, []),
]


@pytest.mark.parametrize(
    ("path", "source"), ROUND3, ids=["conv_transposed", "conv_depthwise", "conv_dilated", "h100"]
)
def test_every_command_reads_it(path: Path, source: list[str], tmp_path: Path, capsys) -> None:
    """No traceback, no refusal, finite positive times from ingest, trace info, breakdown and
    predict (model-only and measured, every phase)."""
    out = tmp_path / "tr"
    assert main(["ingest", str(path), "--out", str(out)]) == 0
    assert main(["trace", "info", str(out)]) == 0
    bd = ["breakdown", str(path), "--hw", "dgx-h100", "--out", str(tmp_path / "bd"), *source]
    assert main(bd) == 0
    for extra in (["--model-only"], source):
        got = _predict_json(capsys, str(path), "--hw", "dgx-h100", "--phase", "all", *extra)
        for key in ("gpu_seconds", "seconds_per_batch", "measured_gpu_seconds"):
            assert math.isfinite(got[key]) and got[key] > 0, (key, got)


# Worked by hand from each file (fp32, 4 bytes an element; 2 FLOPs per multiply-add).
# Transposed: x [4, 512, 8, 8], w [512, 256, 4, 4] (C_in, C_out, kh, kw), stride 2, padding 1:
# every input element scatters into C_out x 16 outputs, 2 * 4*512*64 * 256*16 FLOPs; the output
# is (8 - 1)*2 - 2*1 + (4 - 1) + 1 = 16 wide: [4, 256, 16, 16]. Depthwise: x [8, 1024, 32, 32],
# w [1024, 1, 3, 3], groups 1024, padding 1: 32 x 32 out, 2 * 8*1024*32*32 * 1*9. Dilated:
# x [2, 256, 128, 128], w [256, 256, 3, 3], padding 16, dilation 16: (128 + 32 - 32 - 1) + 1 =
# 128 wide, 2 * 2*256*128*128 * 256*9.
CONV_GOLDEN = [
    (CONV_TRANSPOSED, 2 * 4 * 512 * 64 * 256 * 16, 4 * 256 * 16 * 16 * 4, 900.0),
    (CONV_DEPTHWISE, 2 * 8 * 1024 * 32 * 32 * 9, 8 * 1024 * 32 * 32 * 4, 350.0),
    (CONV_DILATED, 2 * 2 * 256 * 128 * 128 * 256 * 9, 2 * 256 * 128 * 128 * 4, 2200.0),
]


@pytest.mark.parametrize(("path", "flops", "written", "dur_us"), CONV_GOLDEN)
def test_tuple_concrete_inputs_price_the_convolution(
    path: Path, flops: int, written: int, dur_us: float
) -> None:
    """Before: "Input Dims" had 2 entries and the stride, padding, dilation, transposed flag and
    groups at positions 3-8 of "Concrete Inputs" were never read (and "(2,2)" was a tuple, not a
    list): 0 FLOPs, no formula. Now the convolution's FLOPs and output bytes, by hand."""
    (op,) = ingest(path).ops.itertuples()
    assert (op.launch_op, op.op_class, op.dtype) == ("aten::convolution", "conv", "float32")
    assert op.has_formula and op.flops == flops and op.bytes_written == written
    assert op.dur_us == dur_us and op.launch_api == "cudaLaunchKernel"


def test_concrete_inputs_past_the_dims_are_read() -> None:
    """A tool that lists only the tensors in "Input Dims" still gives every argument's value;
    "(1,1)" reads as [1, 1], nested tuples as lists."""
    args = parse_args(
        [[8, 16, 32, 32], [16, 16, 3, 3]],
        ["Float", "Float"],
        ["", "", "", "(1,1)", "((2,2),(3,3))", "True"],
    )
    assert args is not None and len(args.values) == 6
    assert args.value(3) == [1, 1] and args.value(4) == [[2, 2], [3, 3]] and args.value(5) is True


def test_kernels_named_only_by_external_id(capsys) -> None:
    """pytorch's test/inductor/test_analysis.py H100 profile: two kernels on the CPU process's
    pid and tid (1147039) with no device, correlation or launch, each with its op's External id.
    Before: both kernels unlinked (0 FLOPs) and the device read as 1147039. Now 'void
    convolution_kernel' is ResNet-50's first convolution (External id 1342: x [1, 3, 224, 224],
    w [64, 3, 7, 7], stride 2, padding 3: 112 x 112 out, 2 * 64*112*112 * 3*49 FLOPs; the test's
    own expected 223,552,896 is 109 x 109, padding left out) and 'void cutlass_addmm' the
    classifier's addmm (1619: 2 * 1*2048*1000 + a 1,000-element bias); both on device 0, the
    trace's one H100; no launch time is made up."""
    trace = ingest(INDUCTOR_H100)
    ops = trace.ops.set_index("name")
    assert ops.loc["void convolution_kernel", "launch_op"] == "aten::convolution"
    assert ops.loc["void convolution_kernel", "flops"] == 2 * 64 * 112 * 112 * 3 * 49
    assert ops.loc["void cutlass_addmm", "launch_op"] == "aten::addmm"
    assert ops.loc["void cutlass_addmm", "flops"] == 2 * 2048 * 1000 + 1000
    assert (ops["device"] == 0).all() and ops["launch_start_us"].isna().all()
    counts = trace.meta["ingest"]
    assert counts["linked_to_op_by_external_id"] == 2 and counts["devices_from_cpu_pid"] == 2
    assert trace.meta["source"]["devices_used"] == [0]
    assert source_hw_for_trace(trace).name == "dgx-h100"
    got = _predict_json(capsys, str(INDUCTOR_H100), "--hw", "dgx-h100", "--phase", "all")
    assert got["measured_gpu_seconds"] == pytest.approx((251.130 + 200.130) * 1e-6)
    model = _predict_json(
        capsys, str(INDUCTOR_H100), "--hw", "dgx-h100", "--phase", "all", "--model-only"
    )
    peak = load_hw("dgx-h100").gpu.tensor_peak_flops
    assert model["gpu_seconds"] >= (2 * 64 * 112 * 112 * 3 * 49 + 2 * 2048 * 1000) / peak


def test_tensorflow_jax_trace_is_refused_in_one_line(tmp_path: Path, capsys) -> None:
    """TensorFlow's tsl trace_events_to_json output (the expected JSON of its own test): 'X'
    events with no 'cat', a trailing {} and "metadata": {"highres-ticks": true}. Before: 'this
    looks like the legacy pre-Kineto torch.autograd.profiler format'. Now one line naming a
    TensorFlow/JAX profiler trace, exit 2."""
    assert main(["ingest", str(TSL), "--out", str(tmp_path / "tr")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "TensorFlow/JAX profiler trace" in err and "torch.profiler (Kineto)" in err
    assert "legacy" not in err


@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("triton_poi_fused_add_mul_0", "elementwise"),
        ("triton_poi_fused_convolution_0", "elementwise"),  # a conv's epilogue, not a conv
        ("triton_red_fused_add_mean_mul_pow_rsqrt_0", "reduction"),  # RMSNorm
        ("triton_per_fused__softmax_0", "reduction"),
        ("triton_per_fused_nll_loss_forward_0", "reduction"),
        ("triton_tem_fused_addmm_relu_0", "gemm"),  # Inductor's mm template
        ("triton_tem_fused_mm_1", "gemm"),
        ("triton_tem_fused_bmm_0", "gemm"),
        ("triton_tem_fused_convolution_0", "conv"),
        ("triton_tem_fused_flex_attention_0", "attention"),
        ("triton_poi_fused_add_0.kd", "elementwise"),  # ROCm's code-object suffix
    ],
)
def test_inductor_kernels_are_classed_by_category(name: str, klass: str) -> None:
    """The kernel's name (unlinked kernels) and its record_function (linked ones) class the same
    way: by Inductor's category prefix, not the fused ops' names. Before: the kernel name rule
    gave 'conv' for a pointwise kernel fused after a convolution, 'other' for a looped reduction
    and every mm template, and 'softmax' where the op said 'reduction'."""
    assert kernel_class(name) == klass
    assert op_class(name) == klass


def test_profiler_events_dump_is_refused_saying_what_it_is(tmp_path: Path, capsys) -> None:
    """pytorch's test/profiler/profiler_utils_mock_events.json (commit 7ba6bd01) is a JSON array
    of two arrays, profiler events as {'_name', '_start_us', '_duration_us', ...} and Python
    tracer frames: not the Chrome trace format. Before: 'expected a JSON object with
    traceEvents', though a JSON array of events is read too. Now it says what it found."""
    path = tmp_path / "profiler_utils_mock_events.json"
    path.write_text(  # the first entry of each of its two arrays, as stored
        '[[{"_name": "aten::matmul", "_start_us": 1656454173440014, "_duration_us": 2254, '
        '"_linked_correlation_id": 0, "_device_type": 0}], [{"_name": "profiler/test_profiler.py'
        '(1435): <module>", "id": 94242239505696, "start_time_ns": 1656454173436288169, '
        '"duration_time_ns": 7566917863418487639, "correlation_id": 0, "children": '
        '[94242238082288], "parent": null}]]'
    )
    assert main(["ingest", str(path), "--out", str(tmp_path / "tr")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "or a JSON array of event objects; found an array of arrays" in err


@pytest.mark.parametrize("path", [CONV_TRANSPOSED, CONV_DEPTHWISE, CONV_DILATED])
def test_fp32_convolution_on_mi300x_is_not_faster_than_fp32(path: Path, capsys) -> None:
    """PyTorch's MIOpen convolutions run strict FP32 on ROCm (TF32 is opt-in there; the kernels
    say fp32: igemm_fwd_gtcx_nhwc_fp32). Before: priced at MI300X's xf32 rate as on NVIDIA, the
    dilated conv's 38.65 GFLOP took 139.6 us model-only, 277 TFLOP/s, over the 163.4 TFLOP/s
    FP32 peak. Now no fp32 conv is modelled faster than the FP32 peak allows."""
    (op,) = ingest(path).ops.itertuples()
    got = _predict_json(capsys, str(path), "--hw", "mi300x", "--phase", "all", "--model-only")
    assert got["gpu_seconds"] >= op.flops / load_hw("mi300x").gpu.fp32_peak_flops
