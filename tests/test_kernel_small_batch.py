"""Small-batch GEMM/linear ops captured on a CPU: the split-K launch (archsim.perf.blocks.SPLIT_K_TILE)
lets a batch-1 fully connected layer stream its weights on every SM, so predicted time per batch grows
with the batch and batch-1 layers land near the DRAM bound of their weight bytes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.kernel import kernel_terms, predict_op_seconds, scale_ops_to_batch
from archsim.trace import load
from archsim.trace.schema import OPS_COLUMNS, conform

TRACES = Path(__file__).resolve().parents[1] / "traces"
PRESETS = ("dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1", "rtx2080ti")
HW = {preset: load_hw(preset) for preset in PRESETS}
V100 = HW["dgx1-v100"]


def linear_op(batch: int, in_features: int, out_features: int, dtype: str = "float32") -> dict:
    """aten::linear y[B, N] = x[B, K] @ W[N, K]^T + b[N] as a CPU capture records it (no grid)."""
    size = 2 if dtype == "float16" else 4
    return {
        "kind": "cpu",
        "name": "aten::linear",
        "op_class": "gemm",
        "dtype": dtype,
        "phase": "inference_batch",
        "input_dims": f"[[{batch},{in_features}],[{out_features},{in_features}],[{out_features}]]",
        "flops": 2.0 * batch * in_features * out_features,
        "bytes_read": size * (batch * in_features + out_features * in_features + out_features),
        "bytes_written": size * batch * out_features,
    }


def make_ops(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def last_step(path: Path, phase: str | None = None) -> pd.DataFrame:
    ops = load(path).ops
    if phase is not None:
        ops = ops[ops["phase"] == phase]
    return ops[ops["step_id"] == ops["step_id"].max()].reset_index(drop=True)


def test_golden_batch1_gemv_on_v100() -> None:
    # AlexNet fc6 at batch 1: x[1, 9216] @ W[4096, 9216]^T, fp32.
    # F = 2 * 9216 * 4096 = 75,497,472 FLOPs; D = 4 * (9216 + 37,748,736 + 4096) read + 4 * 4096
    #   written = 151,064,576 B; 4096 outputs, so reduction depth K = F / (2 * 4096) = 9216.
    # Every tile (128x128, 64x64, 32x32, 64x32) has 1-4 output tiles; unsplit they keep <= 8 KB in
    # flight (>= 8 ms). Splits: e.g. the 128x128 tile (256 threads, 128 regs, 32 KB; V100 occupancy
    # min(8, 65536/(4096*8) = 2, 98304/32768 = 3) = 2, a wave of 160 blocks), 1 output tile, usable
    # while 1 * s/2 < min(wave 160, D / (256 * 16 B) = 36,881, F / 2 / 256 = 147,456):
    #   s = 64:  64 blocks x 256 thr x 16 B = 262,144 B in flight / 317 ns = 827 GB/s: latency-bound
    #            at peak, 151,064,576 / 826.95e9 = 182.7 us.
    #   s = 128: 128 blocks -> 524,288 B / 317 ns = 1,654 GB/s > 900 GB/s: bandwidth-bound,
    #            151,064,576 B / 900e9 = 167.850 us   <- fastest at peak (later candidates only tie)
    #   T_comp = 75,497,472 / (80 * 128 * 1.53e9) * 80 * ceil(128/80) / 128 = 6.02 us.
    # Achieved (archsim.perf.efficiency, Volta): DRAM at 0.83 of 900 GB/s = 747 GB/s, below the
    # 827 GB/s that s = 64 keeps in flight, so from s = 64 on every candidate is bound by
    # 151,064,576 B / 747e9 = 202.228 us (the latency term, 182.7 us at s = 64, is hidden) and
    # T_comp = 6.02 us / 0.85. The pipeline fill (archsim.perf.pipeline_fill) adds two 317-ns DRAM
    # round trips to the transfer: 202.862 us. Predicted: 202.862 us + 0.75 us launch.
    ops = make_ops([linear_op(1, 9216, 4096)])
    terms = kernel_terms(ops, V100.gpu)
    transfer = 151_064_576 / (900e9 * 0.83)
    assert terms["bw"][0] == pytest.approx(transfer, rel=1e-9)
    assert terms["lat"][0] == pytest.approx(2 * 317e-9 + transfer, rel=1e-9)
    assert terms["comp"][0] == pytest.approx(75_497_472 / (80 * 128 * 1.53e9) * 80 * 2 / 128 / 0.85)
    assert predict_op_seconds(ops, V100)[0] == pytest.approx(2 * 317e-9 + transfer + 0.75e-6)


def test_batch1_fc_layers_are_bounded_by_their_weight_bytes() -> None:
    # DRAM lower bound of a batch-1 fc layer: every weight byte is read once.
    #   fc6 4096 x 9216 x 4 B = 150,994,944 B -> V100 (900 GB/s) 167.8 us, A100 (1555) 97.1 us,
    #       H100 (3350) 45.1 us; fc7 4096 x 4096 x 4 B = 67,108,864 B -> 74.6 us on V100;
    #   fc8 1000 x 4096 x 4 B = 16,384,000 B -> 18.2 us on V100.
    # The model must not beat the bound, and (a full wave streaming) stays within 2x of it where the
    # GPU can keep enough bytes in flight (V100, A100). The H100 needs 3350 GB/s x 343 ns = 1.15 MB in
    # flight and 132 SMs x 512 threads x 16 B hold 1.08 MB: 3.15 TB/s reachable, above the 0.82 x
    # 3350 = 2.75 TB/s its DRAM achieves, so it too is bandwidth-bound (1/0.82 = 1.22x the bound).
    ops = make_ops([linear_op(1, 9216, 4096), linear_op(1, 4096, 4096), linear_op(1, 4096, 1000)])
    weight_bytes = np.array([4096 * 9216, 4096 * 4096, 1000 * 4096]) * 4.0
    for preset in PRESETS:
        hw = HW[preset]
        body = predict_op_seconds(ops, hw, include_launch=False)
        bound = weight_bytes / (hw.gpu.dram_bw_gbs * 1e9)
        assert np.all(body >= bound), preset
        if preset in ("dgx1-v100", "dgx-a100"):
            assert np.all(body <= 2.0 * bound), preset


def test_alexnet_batch1_on_v100_is_near_the_weight_streaming_bound() -> None:
    # AlexNet has 61,100,840 parameters (5 convs + 3 fc layers; summed from the trace's Input Dims
    # below), 244,403,360 B in fp32: at 900 GB/s, batch 1 cannot take less than 271.6 us of GPU time.
    # 21 ops x 0.75 us GPU launch latency = 15.75 us on top; the model should land within 3x.
    ops = last_step(TRACES / "alexnet-b1-fp32")
    import json
    import math

    params = sum(
        math.prod(shape)
        for name, dims in zip(ops["name"], ops["input_dims"], strict=True)
        if name in ("aten::conv2d", "aten::linear")
        for shape in json.loads(dims)[1:3]
    )
    assert params == 61_100_840
    bound_s = params * 4 / 900e9  # 2.7156e-4 s
    total_s = predict_op_seconds(ops, V100).sum()
    assert bound_s <= total_s <= 3 * bound_s + len(ops) * 0.75e-6


@settings(max_examples=60, deadline=None)
@given(
    in_features=st.integers(1, 16384),
    out_features=st.integers(1, 16384),
    batches=st.lists(st.integers(1, 1024), min_size=2, max_size=2, unique=True),
    dtype=st.sampled_from(["float32", "float16"]),
    preset=st.sampled_from(PRESETS),
)
def test_linear_time_per_batch_never_falls_with_batch(
    in_features, out_features, batches, dtype, preset
):
    # Exact: ragged tiles are padded (T_comp runs whole tiles) and every split that fills a wave is
    # a candidate, so more rows never buy more parallelism than they cost.
    small, large = sorted(batches)
    ops = make_ops([linear_op(b, in_features, out_features, dtype) for b in (small, large)])
    seconds = predict_op_seconds(ops, HW[preset])
    assert seconds[1] >= seconds[0] * (1 - 1e-12)


@settings(max_examples=25, deadline=None)
@given(
    batches=st.lists(st.integers(1, 512), min_size=2, max_size=2, unique=True),
    preset=st.sampled_from(PRESETS),
    workload=st.sampled_from([("alexnet-b1-fp32", None), ("dqn-pong-cpu", "act")]),
)
def test_bundled_traces_time_per_batch_never_falls_with_batch(batches, preset, workload):
    name, phase = workload
    path = TRACES / name
    if not (path / "meta.yaml").exists():
        pytest.skip(f"{path} is not bundled")
    ops = last_step(path, phase)
    hw = HW[preset]
    small, large = sorted(batches)
    t_small = predict_op_seconds(scale_ops_to_batch(ops, 1, small), hw).sum()
    t_large = predict_op_seconds(scale_ops_to_batch(ops, 1, large), hw).sum()
    assert t_large >= t_small * (1 - 1e-12)


@pytest.mark.parametrize("preset", PRESETS)
def test_alexnet_time_per_image_falls_with_batch(preset: str) -> None:
    ops = last_step(TRACES / "alexnet-b1-fp32")
    hw = HW[preset]
    per_image = [
        predict_op_seconds(scale_ops_to_batch(ops, 1, b), hw).sum() / b for b in (1, 2, 8, 32, 128)
    ]
    assert all(a > b for a, b in zip(per_image, per_image[1:], strict=False)), per_image
