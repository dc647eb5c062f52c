"""AlexNet workload: model shape and size worked out by hand, FLOPs in the ingested trace, the CLI."""

from __future__ import annotations

import pytest
import torch

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
