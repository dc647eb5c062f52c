"""Every real trace in ../shared/fixtures/kineto (issue 13): what each must produce, with the counts
worked out from the raw file here (by category, independently of the ingester) or from the
fixtures README, and the FLOPs of the 2021 ResNet-50 checked against its published size."""

from __future__ import annotations

import gzip
import json
import math
from collections import Counter
from functools import cache

import numpy as np
import pytest

from archsim.errors import ArchsimError
from archsim.perf.blocks import AUXILIARY_KERNEL_PATTERN
from archsim.trace.flops import kernel_class
from archsim.trace.format import Trace
from archsim.trace.ingest import ingest
from tests.conftest import KINETO_FIXTURES, kineto_fixture

# Kineto category (any era) -> the op kind ingest makes of it.
GPU_KINDS = {
    "kernel": "kernel",
    "gpu_memcpy": "memcpy",
    "memcpy": "memcpy",
    "gpu_memset": "memset",
    "memset": "memset",
}
INGESTED = [
    "a100_80gb_train_prewindow",
    "a100_alexnet_forward",
    "a100_event_sync_multistream",
    "a100_train_shapes",
    "gp100_user_annotation",
    "h100_timesformer_inference",
    "mi210_gpu_only",
    "mi250_mlp_train",
    "mi300x_normalization_bench",
    "mi300x_sd35_inference",
    "nodevice_sampled_train",
    "rtx2080ti_mlp_train",
    "v100_cnn_ddp_train",
    "v100_resnet50_train_2021",
]
REFUSED = ["a100_cupti_range_no_kernels", "mtia_inference"]


def test_this_file_covers_every_fixture():
    if not KINETO_FIXTURES.is_dir():
        pytest.skip(f"{KINETO_FIXTURES} is absent (../shared/fixtures not beside the checkout)")
    present = {p.name.removesuffix(".json.gz") for p in KINETO_FIXTURES.glob("*.json.gz")}
    assert present <= set(INGESTED) | set(REFUSED)


@cache
def _raw(name: str) -> dict:
    return json.loads(gzip.decompress(kineto_fixture(f"{name}.json.gz").read_bytes()))


@cache
def _ingested(name: str) -> Trace:
    return ingest(kineto_fixture(f"{name}.json.gz"))


def _raw_gpu_counts(name: str) -> Counter:
    """GPU events by kind, counted straight from the file."""
    return Counter(
        GPU_KINDS[e["cat"].lower()]
        for e in _raw(name)["traceEvents"]
        if e.get("ph") == "X" and str(e.get("cat", "")).lower() in GPU_KINDS
    )


@pytest.mark.parametrize("name", INGESTED)
def test_gpu_ops_are_the_files_gpu_events(name):
    trace = _ingested(name)
    meta = trace.meta["ingest"]
    raw = _raw_gpu_counts(name)
    dropped = meta["prewindow_gpu_events_dropped"]
    made = Counter(trace.ops.loc[trace.ops["kind"] != "cpu", "kind"])
    assert sum(made.values()) + dropped == sum(raw.values())
    assert meta["duplicate_events_removed"] == 0 and meta["ts_rebased_by_us"] == 0
    if not dropped:
        assert made == raw
    ops = trace.ops
    assert (ops["dur_us"] >= 0).all() and (ops["flops"] >= 0).all()
    assert trace.meta["source"]["device"] in ("cuda", "rocm")


def test_prewindow_kernels_are_dropped_and_counted():
    # README: 872 of 7,747 GPU events were queued before the profiling window opened.
    name = "a100_80gb_train_prewindow"
    assert sum(_raw_gpu_counts(name).values()) == 7_747
    trace = _ingested(name)
    meta = trace.meta["ingest"]
    assert meta["prewindow_gpu_events_dropped"] == 872
    assert len(trace.ops) == 7_747 - 872
    assert meta["unlinked_kernels"] == 0  # every kept event has its launch in the file
    assert (trace.ops["launch_start_us"].notna()).all()


def test_gpu_only_trace_ingests_with_nothing_to_link():
    trace = _ingested("mi210_gpu_only")
    assert (trace.ops["kind"] == "kernel").all() and len(trace.ops) == 562
    meta = trace.meta["ingest"]
    assert meta["kernels_linked_fraction"] == 0.0 and meta["gpu_events_without_cpu_op"] == 562
    assert trace.meta["source"]["device"] == "rocm"


def test_trace_without_device_properties_ingests():
    trace = _ingested("nodevice_sampled_train")
    assert "deviceProperties" not in _raw("nodevice_sampled_train")
    source = trace.meta["source"]
    assert source["gpu_name"] is None and source["device"] == "cuda"
    assert source["gpu_count"] == len(source["devices_used"]) >= 1
    assert (trace.ops["kind"] == "kernel").sum() == 1_154


def test_mtia_device_events_are_refused_in_one_line():
    raw = Counter(e["cat"] for e in _raw("mtia_inference")["traceEvents"] if e.get("ph") == "X")
    with pytest.raises(ArchsimError) as info:
        _ingested("mtia_inference")
    message = str(info.value)
    assert "\n" not in message and "ARTEMIS" in message
    for cat in ("mtia_ccp_events", "mtia_runtime"):
        assert f"{raw[cat]} {cat}" in message


def test_launches_without_kernels_are_said_to_be_that():
    events = _raw("a100_cupti_range_no_kernels")["traceEvents"]
    launches = sum(
        1
        for e in events
        if e.get("cat") == "cuda_runtime"
        and any(w in e.get("name", "") for w in ("Launch", "Memcpy", "Memset"))
    )
    ranges = sum(1 for e in events if e.get("cat") == "cuda_profiler_range")
    with pytest.raises(ArchsimError) as info:
        _ingested("a100_cupti_range_no_kernels")
    message = str(info.value)
    assert f"{launches} kernel launches" in message and f"{ranges} cuda_profiler_range" in message
    assert "no kernel" in message and "\n" not in message


# Published size of ResNet-50 at 224x224: 4.09 G multiply-adds per image (torchvision model docs,
# ResNet50_Weights.IMAGENET1K_V1, "GFLOPS 4.09", counted as multiply-adds), almost all of it in
# convolutions (the fc layer adds 2.05 M). A training step costs each conv's MACs three times
# (forward, grad_input, grad_weight) at 2 FLOPs per MAC, less the first conv's grad_input (its input
# needs no gradient): 3 x 64 x 3 x 7 x 7 x 112 x 112 = 118.0 M MACs of the 4.09 G.
RESNET50_MACS_PER_IMAGE = 4.09e9
RESNET50_FIRST_CONV_MACS = 64 * 3 * 7 * 7 * 112 * 112


def test_2021_resnet50_convolutions_get_their_flops():
    trace = _ingested("v100_resnet50_train_2021")
    kernels = trace.ops[trace.ops["kind"] == "kernel"]
    conv = kernels[kernels["launch_op"].str.contains("convolution", regex=False)]
    # the engines, not the transforms around them (Winograd, offsets: archsim.perf.blocks
    # AUXILIARY_KERNEL_PATTERN), which get the bytes of their own grid and no FLOPs
    auxiliary = conv["name"].str.lower().str.contains(AUXILIARY_KERNEL_PATTERN, regex=True)
    math_kernels = conv[conv["name"].map(kernel_class).isin(["conv", "gemm"]) & ~auxiliary]
    assert len(math_kernels) > 900  # 954 engine launches in the file's six steps
    assert (math_kernels["flops"] > 0).all()  # every kernel that does a conv's math
    steps = sorted(set(kernels["profiler_step"]) - {-1})
    assert len(steps) == 6
    batch = 32  # the trace's conv1 input is [32, 3, 224, 224]
    per_image = conv["flops"].sum() / len(steps) / batch
    expected = 2 * (3 * RESNET50_MACS_PER_IMAGE - RESNET50_FIRST_CONV_MACS)
    assert per_image == pytest.approx(expected, rel=0.03)


def test_sd35_flash_attention_golden():
    # aten::_flash_attention_forward with q, k, v [2, 4429, 38, 64] ([B, L, H, E]), not causal:
    # P = 4429^2 pairs per head; 2 P (64 + 64) for the two GEMMs + 6 P (scale, softmax) = 262 P.
    trace = _ingested("mi300x_sd35_inference")
    ops = trace.ops
    calls = ops[ops["input_dims"].str.startswith("[[2,4429,38,64],[2,4429,38,64]")]
    calls = calls[calls["launch_op"] == "aten::_flash_attention_forward"]
    n_calls = 152  # counted in the file: 152 of its 241 _flash_attention_forward calls
    per_call = 2 * 38 * 262 * 4429**2
    assert calls["flops"].sum() == pytest.approx(n_calls * per_call, rel=1e-9)
    assert (calls["op_class"] == "attention").all()


def test_normalization_bench_every_norm_kernel_has_a_formula():
    trace = _ingested("mi300x_normalization_bench")
    kernels = trace.ops[trace.ops["kind"] == "kernel"]
    norms = kernels[kernels["launch_op"].str.contains(r"_norm(?:_backward)?$", regex=True)]
    assert set(norms["launch_op"]) >= {"aten::_fused_rms_norm", "aten::native_layer_norm"}
    assert norms["has_formula"].all() and (norms["flops"] > 0).all()


@pytest.mark.parametrize(
    ("name", "share"),
    # Kernel time whose launching op has shapes and a formula: the shares measured on each file.
    [("h100_timesformer_inference", 0.99), ("v100_resnet50_train_2021", 0.98)],
)
def test_kernel_time_with_shapes_mostly_has_formulas(name, share):
    kernels = _ingested(name).ops
    kernels = kernels[(kernels["kind"] == "kernel") & (kernels["input_dims"] != "")]
    covered = kernels.loc[kernels["has_formula"], "dur_us"].sum() / kernels["dur_us"].sum()
    assert covered >= share


def test_gp100_trace_names_its_gpu():
    trace = _ingested("gp100_user_annotation")
    assert trace.meta["source"]["gpu_name"] == "Quadro GP100"
    assert math.isclose(trace.meta["ingest"]["kernels_linked_fraction"], 1.0)
    assert np.isfinite(trace.ops["start_us"]).all()


def test_trace_info_states_the_prewindow_drop(capsys):
    from archsim.cli import main

    path = kineto_fixture("a100_80gb_train_prewindow.json.gz")
    assert main(["trace", "info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "ingest repairs: 872 GPU events queued before the profiling window dropped" in out
