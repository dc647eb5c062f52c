"""AlexNet workload: model shape and size worked out by hand, FLOPs in the ingested trace, the CLI."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from archsim.cli import main
from archsim.trace import load
from workloads.alexnet.model import build_alexnet, random_images
from workloads.alexnet.run import capture_dtype_for, cpu_flags, cpu_runs_dtype

# Parameters per layer (weights + biases), torchvision's AlexNet:
#   conv1  64 x 3 x 11 x 11   + 64   =     23,232 +    64 =     23,296
#   conv2 192 x 64 x 5 x 5    + 192  =    307,200 +   192 =    307,392
#   conv3 384 x 192 x 3 x 3   + 384  =    663,552 +   384 =    663,936
#   conv4 256 x 384 x 3 x 3   + 256  =    884,736 +   256 =    884,992
#   conv5 256 x 256 x 3 x 3   + 256  =    589,824 +   256 =    590,080
#   fc6   4096 x 9216         + 4096 = 37,748,736 + 4,096 = 37,752,832
#   fc7   4096 x 4096         + 4096 = 16,777,216 + 4,096 = 16,781,312
#   fc8   1000 x 4096         + 1000 =  4,096,000 + 1,000 =  4,097,000
#   total                                                   61,100,840  (torchvision: 61.1 M)
ALEXNET_PARAMS = (
    23_296 + 307_392 + 663_936 + 884_992 + 590_080 + 37_752_832 + 16_781_312 + 4_097_000
)

# Multiply-accumulates per image (output H x W x C_out x C_in x k x k; fc: in x out):
#   conv1 55x55 out ((224 + 2*2 - 11) // 4 + 1 = 55): 3025 x 64 x 3 x 121    =  70,276,800
#   conv2 27x27 (maxpool 3/2 of 55):                   729 x 192 x 64 x 25   = 223,948,800
#   conv3 13x13 (maxpool 3/2 of 27):                   169 x 384 x 192 x 9   = 112,140,288
#   conv4 13x13:                                       169 x 256 x 384 x 9   = 149,520,384
#   conv5 13x13:                                       169 x 256 x 256 x 9   =  99,680,256
#   fc6 9216 x 4096 = 37,748,736; fc7 4096 x 4096 = 16,777,216; fc8 4096 x 1000 = 4,096,000
#   total 714,188,480 MACs = 1.428 GFLOP per image (2 FLOPs per MAC)
CONV_MACS = 70_276_800 + 223_948_800 + 112_140_288 + 149_520_384 + 99_680_256
FC_MACS = 37_748_736 + 16_777_216 + 4_096_000
GEMM_FLOPS_PER_IMAGE = 2 * (CONV_MACS + FC_MACS)


def test_parameter_count_matches_the_hand_count() -> None:
    model = build_alexnet()
    assert ALEXNET_PARAMS == 61_100_840
    assert sum(p.numel() for p in model.parameters()) == ALEXNET_PARAMS


@pytest.mark.parametrize("batch_size", [1, 3])
def test_output_is_one_logit_row_per_image(batch_size: int) -> None:
    model = build_alexnet()
    with torch.inference_mode():
        out = model(random_images(batch_size))
    assert out.shape == (batch_size, 1000)
    assert torch.isfinite(out).all()


def test_eval_mode_makes_inference_deterministic() -> None:
    model = build_alexnet()
    images = random_images(2)
    with torch.inference_mode():
        assert torch.equal(model(images), model(images))


def test_fp16_capture_dtype_needs_a_cpu_that_runs_fp16_natively() -> None:
    runs = cpu_runs_dtype(torch.float16)
    native = frozenset({"avx512_fp16"})
    emulated = frozenset({"avx512f", "avx512_bf16"})
    fp16_if_runs = torch.float16 if runs else torch.float32
    assert capture_dtype_for(torch.float16, flags=native)[0] == fp16_if_runs
    assert capture_dtype_for(torch.float16, flags=emulated)[0] == torch.float32
    assert capture_dtype_for(torch.float16, mode="target", flags=emulated)[0] == fp16_if_runs
    assert capture_dtype_for(torch.float16, mode="fp32", flags=native)[0] == torch.float32
    assert capture_dtype_for(torch.float32, mode="target")[0] == torch.float32
    assert capture_dtype_for(torch.float16, device="cuda")[0] == torch.float16


def test_cpu_flags_read_x86_and_arm_cpuinfo() -> None:
    x86 = "processor\t: 0\nflags\t\t: fpu avx2 avx512_fp16\n\nprocessor\t: 1\nflags\t: fpu avx2\n"
    arm = "processor\t: 0\nFeatures\t: fp asimd asimdhp\n"
    assert {"avx512_fp16", "avx2", "fpu"} <= cpu_flags(x86)
    assert "asimdhp" in cpu_flags(arm)
    assert cpu_flags("") == frozenset()


# Bias adds: one per output element of every conv/fc layer, per image:
#   conv 55*55*64 + 27*27*192 + 13*13*384 + 13*13*256 + 13*13*256
#      = 193,600 + 139,968 + 64,896 + 43,264 + 43,264 = 484,992;  fc 4,096 + 4,096 + 1,000 = 9,192
# They are 494,184 / 1,428,376,960 = 0.035% of the MAC FLOPs; the FLOP formulas may or may not count them.
BIAS_ADDS_PER_IMAGE = 484_992 + 9_192


@pytest.fixture(scope="module")
def tiny_capture(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`archsim capture alexnet` at batch 1: one warm-up pass and two recorded passes."""
    out = tmp_path_factory.mktemp("alexnet") / "b1"
    argv = [
        "capture",
        "alexnet",
        "--batch",
        "1",
        "--warmup",
        "1",
        "--active",
        "2",
        "--out",
        str(out),
    ]
    assert main(argv) == 0
    return out


def test_cli_capture_writes_an_inference_trace(tiny_capture: Path) -> None:
    trace = load(tiny_capture)
    assert trace.meta["workload"]["name"] == "alexnet"
    assert trace.meta["workload"]["settings"]["batch_size"] == 1
    assert trace.meta["target_dtype"] == "float32"
    steps = trace.steps[trace.steps["role"] == "inference"]
    assert len(steps) == 2 and set(steps["batch_size"]) == {1}
    assert (steps["inference_batch_us"] > 0).all()
    in_steps = trace.ops[trace.ops["step_id"].isin(steps["step_id"])]
    assert set(in_steps["phase"]) == {"inference_batch"}


def test_conv_and_fc_flops_in_the_trace_match_the_hand_count(tiny_capture: Path) -> None:
    ops = load(tiny_capture).ops
    step_ops = ops[ops["step_id"] == ops.loc[ops["step_id"] >= 0, "step_id"].min()]
    gemm_like = step_ops[step_ops["op_class"].isin(["conv", "gemm"])]
    assert len(gemm_like) == 8  # five convs, three fully connected layers
    assert GEMM_FLOPS_PER_IMAGE == 1_428_376_960  # 2 x 714,188,480 MACs
    total = gemm_like["flops"].sum()
    assert GEMM_FLOPS_PER_IMAGE <= total <= GEMM_FLOPS_PER_IMAGE + BIAS_ADDS_PER_IMAGE
    conv_total = gemm_like.loc[gemm_like["op_class"] == "conv", "flops"].sum()
    assert conv_total == pytest.approx(2 * CONV_MACS, rel=1e-3)


def test_fp16_capture_records_the_target_dtype(tmp_path: Path) -> None:
    out = tmp_path / "fp16"
    argv = ["capture", "alexnet", "--batch", "1", "--dtype", "fp16", "--warmup", "1"]
    assert main([*argv, "--active", "1", "--out", str(out)]) == 0
    trace = load(out)
    settings = trace.meta["workload"]["settings"]
    assert trace.meta["target_dtype"] == "float16"
    assert settings["dtype"] == "fp16"
    captured = capture_dtype_for(torch.float16)[0]
    assert settings["capture_dtype"] == str(captured).removeprefix("torch.")
    conv_dtypes = set(trace.ops.loc[trace.ops["op_class"] == "conv", "dtype"])
    assert conv_dtypes == {settings["capture_dtype"]}


def test_capture_refuses_a_non_empty_output_and_leaves_it_alone(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "keep.txt").write_text("mine")
    assert main(["capture", "alexnet", "--batch", "1", "--out", str(tmp_path)]) == 2
    assert "not empty" in capsys.readouterr().err
    assert [p.name for p in tmp_path.iterdir()] == ["keep.txt"]
