"""Zero-padded channels of tensor-core convolutions (archsim.perf.conv_channels) and the Hopper L2
bandwidth (hwconfigs/dgx-h100.yaml), worked by hand on the patch embedding of fixture
h100_timesformer_inference: cudnn_convolution of [128, 3, 224, 224] by [768, 3, 16, 16], stride 16,
bf16, on cuDNN's ``..._nhwc_align8`` kernel."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.conv_channels import channel_padding, padded_channels
from archsim.perf.terms import kernel_terms
from tests.conftest import kineto_fixture

CONV_KERNEL = (
    "void cutlass__5x_cudnn::Kernel<cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_"
    "nhwc_align8>(cutlass_tensorop_bf16_s16816fprop_optimized_bf16_256x64_32x4_nhwc_align8::Params)"
)
PATCH_DIMS = "[[128,3,224,224],[768,3,16,16],[],[],[],[],[],[],[]]"
# 2 x N x C_out x 14 x 14 x C x 16 x 16 with C = 3
PATCH_FLOPS = 2.0 * 128 * 768 * 14 * 14 * 3 * 16 * 16
INPUT_ELEMENTS = 128 * 3 * 224 * 224  # 19,267,584
FILTER_ELEMENTS = 768 * 3 * 16 * 16  # 589,824


def _conv(name: str = CONV_KERNEL, dims: str = PATCH_DIMS, launch: str = "aten::cudnn_convolution"):
    """The patch-embedding conv as one traced kernel (grid and block as in the fixture)."""
    return pd.DataFrame(
        {
            "kind": ["kernel"],
            "name": [name],
            "launch_op": [launch],
            "op_class": ["conv"],
            "dtype": ["bfloat16"],
            "flops": [PATCH_FLOPS],
            "bytes_read": [2.0 * (INPUT_ELEMENTS + FILTER_ELEMENTS)],
            "bytes_written": [2.0 * 128 * 768 * 14 * 14],
            "input_dims": [dims],
            "grid_x": [392],
            "grid_y": [3],
            "grid_z": [1],
            "block_x": [128],
            "block_y": [1],
            "block_z": [1],
            "registers_per_thread": [246.0],
            "shared_memory_bytes": [81920.0],
        }
    )


def test_padded_channels_by_hand() -> None:
    assert padded_channels(3, 8) == 8
    assert padded_channels(3, 4) == 4
    assert padded_channels(9, 8) == 16
    assert padded_channels(64, 8) == 64


def test_patch_embedding_pads_three_channels_to_eight() -> None:
    factor, extra = channel_padding(_conv(), np.array([True]))
    assert factor[0] == pytest.approx(8 / 3)
    # (8/3 - 1) x (19,267,584 + 589,824) elements x 2 B = 66,191,360 B
    assert extra[0] == pytest.approx(66_191_360.0)


@pytest.mark.parametrize(
    ("name", "dims", "launch", "tensor"),
    [
        (CONV_KERNEL.replace("_align8", ""), PATCH_DIMS, "aten::cudnn_convolution", True),
        (CONV_KERNEL, "[[128,8,224,224],[768,8,16,16]]", "aten::cudnn_convolution", True),
        (CONV_KERNEL, "[[128,6,224,224],[768,3,16,16]]", "aten::cudnn_convolution", True),
        (CONV_KERNEL, PATCH_DIMS, "aten::convolution_backward", True),
        (CONV_KERNEL, PATCH_DIMS, "aten::cudnn_convolution", False),
        (CONV_KERNEL, "", "aten::cudnn_convolution", True),
    ],
    ids=["no-align-in-name", "aligned", "grouped", "backward", "vector-pipes", "no-shapes"],
)
def test_no_padding_without_evidence(name: str, dims: str, launch: str, tensor: bool) -> None:
    factor, extra = channel_padding(_conv(name, dims, launch), np.array([tensor]))
    assert factor[0] == 1.0 and extra[0] == 0.0


@given(channels=st.integers(1, 256), align=st.sampled_from([2, 4, 8, 16]))
def test_padding_only_adds_work(channels: int, align: int) -> None:
    dims = f"[[32,{channels},56,56],[64,{channels},3,3]]"
    factor, extra = channel_padding(
        _conv(CONV_KERNEL.replace("_align8", f"_align{align}"), dims), np.ones(1)
    )
    assert factor[0] >= 1.0 and extra[0] >= 0.0
    assert (factor[0] == 1.0) == (channels % align == 0)
    assert factor[0] * channels == pytest.approx(padded_channels(channels, align))


def test_model_prices_the_padded_work_on_dgx_h100() -> None:
    gpu = load_hw("dgx-h100").gpu
    padded = kernel_terms(_conv(), gpu, config_name="dgx-h100")
    plain = kernel_terms(_conv(CONV_KERNEL.replace("_align8", "")), gpu, config_name="dgx-h100")
    # math at peak: 78.9 GFLOP / (132 x 3784 x 1980e6 FLOP/s) = 79.8 us, 8/3 of 29.9 us
    assert padded["math"][0] == pytest.approx(PATCH_FLOPS * 8 / 3 / (132 * 3784 * 1980e6))
    assert padded["math"][0] / plain["math"][0] == pytest.approx(8 / 3)
    # L2: a 256 x 64 tile re-reads (256 + 64) x k elements of 2 B per 2 x 256 x 64 x k FLOPs:
    # 51.2 FLOP/B, so 78.92e9 / 51.2 = 1.541 GB at 9780 GB/s = 157.6 us
    assert padded["mem"][0] == pytest.approx(PATCH_FLOPS * 8 / 3 / 51.2 / 9780e9)
    assert padded["mem"][0] * 1e6 == pytest.approx(157.6, abs=0.1)
    # DRAM: the op's 78.25 MB plus the padded channels' 66.19 MB
    dram = 2.0 * (INPUT_ELEMENTS + FILTER_ELEMENTS + 128 * 768 * 14 * 14) + 66_191_360.0
    assert padded["bw"][0] == pytest.approx(dram / (3350e9 * 0.82))
    for key in ("math", "comp", "bw", "mem"):
        assert padded[key][0] >= plain[key][0]


def test_hopper_l2_bandwidth_is_the_measured_figure() -> None:
    # te42kyfo/gpu-benches gpu-l2-cache/h200.txt (GH100, 132 SMs, 1980 MHz): median 9780 GB/s over
    # 8-40 MB data sets; 37.4 B per SM per clock
    for preset in ("dgx-h100", "dgx-h200"):
        gpu = load_hw(preset).gpu
        assert gpu.l2_bw_gbs == 9780
        assert gpu.l2_bw_gbs * 1e9 / (gpu.sms * gpu.clock_mhz * 1e6) == pytest.approx(
            37.4, abs=0.05
        )


def test_fixture_layout_transform_writes_eight_channels() -> None:
    """The trace itself shows the padding: cuDNN's nchwToNhwcKernel before the conv kernel runs
    1,568 blocks of 256 threads per image (grid z = 128 images) = 224 x 224 x 8 elements."""
    with gzip.open(kineto_fixture("h100_timesformer_inference.json.gz"), "rt") as f:
        events = json.load(f)["traceEvents"]
    kernels = [e for e in events if e.get("cat") == "kernel"]
    conv = [e for e in kernels if "fprop" in e["name"]]
    transform = [e for e in kernels if "nchwToNhwcKernel" in e["name"]]
    assert len(conv) == 1 and conv[0]["name"] == CONV_KERNEL
    grid, block = transform[0]["args"]["grid"], transform[0]["args"]["block"]
    assert grid[2] == 128 and grid[0] * grid[1] * block[0] == 224 * 224 * 8
