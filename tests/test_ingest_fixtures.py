"""Ingest every real Kineto fixture in ../shared/fixtures/kineto and check facts about each."""

from __future__ import annotations

import gzip
import json
from functools import cache

import numpy as np
import pytest

from archsim.trace import load, save
from archsim.trace.format import Trace
from archsim.trace.ingest import ingest
from archsim.trace.schema import OPS_COLUMNS, PHASES, UNKNOWN_PHASE
from tests.conftest import KINETO_FIXTURES, kineto_fixture

FIXTURES = [
    "a100_alexnet_forward.json.gz",
    "a100_event_sync_multistream.json.gz",
    "v100_cnn_ddp_train.json.gz",
    "rtx2080ti_mlp_train.json.gz",
    "mi250_mlp_train.json.gz",
]


@cache
def _ingested(name: str) -> Trace:
    return ingest(KINETO_FIXTURES / name)


def trace_of(name: str) -> Trace:
    kineto_fixture(name)  # skips when ../shared/fixtures is absent
    return _ingested(name)


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_ingests_with_linked_gpu_work(name):
    trace = trace_of(name)
    ops = trace.ops
    assert list(ops.columns) == list(OPS_COLUMNS)
    assert len(ops) == trace.meta["ingest"]["n_ops"] > 0
    assert set(ops["kind"]) <= {"kernel", "memcpy", "memset"}
    assert ops["op_id"].tolist() == list(range(len(ops)))
    assert ops["start_us"].is_monotonic_increasing
    kernels = ops[ops["kind"] == "kernel"]
    # At least 99% of kernels link to a cpu op (all of them do in these five files).
    assert (kernels["launch_op"] != "").mean() >= 0.99
    assert trace.meta["ingest"]["kernels_linked_fraction"] >= 0.99
    assert trace.meta["ingest"]["unlinked_kernels"] == 0
    # Causality: a GPU op never starts before the runtime call that launched it began.
    assert (ops["start_us"] >= ops["launch_start_us"]).all()
    assert (ops["dur_us"] >= 0).all() and (ops["launch_dur_us"] >= 0).all()
    assert set(ops["phase"]) <= {*PHASES, UNKNOWN_PHASE}
    assert (ops["flops"] >= 0).all() and (ops["bytes_read"] >= 0).all()
    assert trace.meta["ingest"]["ops_without_formula"] == int((~ops["has_formula"]).sum())


@pytest.mark.parametrize("name", FIXTURES)
def test_every_fixture_round_trips_through_the_format(name, tmp_path):
    trace = trace_of(name)
    out = save(
        Trace(meta=dict(trace.meta), ops=trace.ops, steps=trace.steps, raw_path=trace.raw_path),
        tmp_path / "t",
    )
    again = load(out)
    assert again.ops.equals(trace.ops)
    assert again.steps.equals(trace.steps)
    assert again == load(out)
    with gzip.open(out / "raw_trace.json.gz") as handle:  # the raw trace is kept, unchanged
        assert len(json.load(handle)["traceEvents"]) == trace.meta["ingest"]["n_events"]


def test_v100_ddp_training_facts():
    trace = trace_of("v100_cnn_ddp_train.json.gz")
    ops, meta = trace.ops, trace.meta
    kernels = ops[ops["kind"] == "kernel"]
    assert len(kernels) == 4_350 and set(kernels["device"]) == {0}
    assert (ops["kind"] == "memcpy").sum() == 1_600
    assert (ops["kind"] == "memset").sum() == 145
    assert meta["source"]["gpu_name"] == "Tesla V100-SXM2-32GB"
    assert meta["source"]["gpu_num_sms"] == 80 and meta["source"]["gpu_count"] == 8
    assert meta["source"]["device"] == "cuda"
    # CUDA kernels carry their launch geometry and occupancy.
    assert (kernels["grid_x"] > 0).all() and (kernels["block_x"] > 0).all()
    assert kernels["registers_per_thread"].notna().all()
    # Every GPU op lies inside one of the ProfilerStep#101..#105 windows of its launching thread.
    assert set(ops["profiler_step"]) == {101, 102, 103, 104, 105}
    # cuDNN convolutions (forward and backward) are classed as conv.
    conv_launchers = set(kernels.loc[kernels["op_class"] == "conv", "launch_op"])
    assert {"aten::cudnn_convolution", "aten::convolution_backward"} <= conv_launchers
    # Backward kernels are launched from autograd's thread -> train_backward (foreign-trace rule);
    # the SGD update inside Optimizer.step#SGD.step -> optimizer_step.
    assert (ops["phase"] == "train_backward").sum() > 1_000
    assert set(ops.loc[ops["phase"] == "optimizer_step", "launch_op"]) <= {
        "aten::_foreach_add_",
        "aten::_foreach_mul_",
        "aten::_foreach_add",
    }
    # The file was captured without record_shapes: no FLOPs can be derived, and meta says so.
    assert meta["ingest"]["shapes_recorded"] is False
    assert kernels["flops"].sum() == 0 and not kernels["has_formula"].any()
    # Memcpy bytes are measured: every copy has its byte count and an HtoD/DtoD name.
    copies = ops[ops["kind"] == "memcpy"]
    assert (copies["bytes_written"] > 0).all() and copies["has_formula"].all()


def test_rtx2080ti_links_by_correlation_not_external_id():
    trace = trace_of("rtx2080ti_mlp_train.json.gz")
    ops = trace.ops
    assert (ops["kind"] == "kernel").sum() == 8_716
    assert (ops["kind"] == "memset").sum() == 1_640
    assert trace.meta["source"]["gpu_num_sms"] == 68
    # 40 SGD steps of a 2-layer MLP: each step's _foreach_add_ kernel sits in Optimizer.step#SGD.step.
    optimizer = ops[ops["phase"] == "optimizer_step"]
    assert len(optimizer) == 80 and set(optimizer["launch_op"]) == {"aten::_foreach_add_"}
    gemm = ops[ops["op_class"] == "gemm"]
    assert set(gemm["launch_op"]) == {"aten::addmm", "aten::mm"}
    assert gemm["name"].str.contains("gemm").mean() > 0.99


def test_a100_traces_streams_and_memsets():
    alexnet = trace_of("a100_alexnet_forward.json.gz").ops
    assert (alexnet["kind"] == "kernel").sum() == 79
    assert (alexnet["kind"] == "memcpy").sum() == 16 and (alexnet["kind"] == "memset").sum() == 3
    assert (alexnet["op_class"] == "conv").sum() >= 20  # AlexNet's five conv layers, repeated
    multistream = trace_of("a100_event_sync_multistream.json.gz")
    kernels = multistream.ops[multistream.ops["kind"] == "kernel"]
    assert sorted(kernels["stream"]) == [20, 24, 28]  # GEMMs on three streams
    assert set(kernels["launch_op"]) == {"aten::mm"} and set(kernels["op_class"]) == {"gemm"}
    assert multistream.meta["source"]["gpu_num_sms"] == 108


def test_mi250_rocm_trace_without_registers_gets_gemm_flops():
    trace = trace_of("mi250_mlp_train.json.gz")
    ops, meta = trace.ops, trace.meta
    assert meta["source"]["device"] == "rocm"
    assert meta["source"]["devices_used"] == [2] and set(ops["device"]) == {2}
    assert meta["ingest"]["base_time_ns"] == 1_735_632_360_000_000_000
    assert ops["registers_per_thread"].isna().all()  # ROCm traces carry no register/occupancy args
    assert meta["ingest"]["shapes_recorded"] is True
    gemm = ops[ops["op_class"] == "gemm"].set_index("launch_op")
    # Forward: addmm(bias[128], x[5,128], w[128,128]) = 2*5*128*128 + 5*128 = 163,840 + 640 = 164,480
    # FLOPs, all on the hipBLASLt (Cijk_) kernel; the bias-broadcast copy kernel gets none.
    assert gemm.loc["aten::addmm", "flops"] == 164_480
    assert gemm.loc["aten::addmm", "name"].startswith("Cijk_")
    # Backward weight grad: mm([128,5], [5,128]) = 2 * 128 * 5 * 128 = 163,840 FLOPs.
    assert gemm.loc["aten::mm", "flops"] == 163_840
    helper = ops[(ops["launch_op"] == "aten::addmm") & ~ops["name"].str.startswith("Cijk_")]
    # The helper gets no FLOPs, and the bytes its grid moves (archsim.trace.gpu_costs): its kernel
    # event records no grid, its hipLaunchKernel does (grid [3, 1, 1] blocks of 128 threads), so
    # 3 x 128 threads x 4 elements (ELEMENTS_PER_THREAD) x 4 B (fp32) = 6,144 B each way.
    assert len(helper) == 1 and helper["flops"].iloc[0] == 0
    assert helper["grid_x"].iloc[0] == 3 and helper["bytes_read"].iloc[0] == 3 * 128 * 4 * 4
    # hipMemcpyWithStream copies: bytes from the runtime call's size (5 x 128 fp32 = 2,560 B).
    copies = ops[ops["kind"] == "memcpy"]
    assert copies["bytes_written"].tolist() == [2_560.0, 2_560.0]
    assert set(ops["profiler_step"]) == {1}
    assert (ops.loc[ops["launch_op"] == "aten::_foreach_add_", "phase"] == "optimizer_step").all()


def test_legacy_2021_event_names_give_the_same_ops(tmp_path):
    """Rewrite a real trace with PyTorch 1.8-1.10 Kineto names (Operator, Runtime, Kernel, Memcpy,
    Memset, tid "stream N", lower-case "external id") and check ingest sees the same ops."""
    source = kineto_fixture("a100_alexnet_forward.json.gz")
    doc = json.loads(gzip.decompress(source.read_bytes()))
    legacy_cat = {
        "cpu_op": "Operator",
        "cuda_runtime": "Runtime",
        "kernel": "Kernel",
        "gpu_memcpy": "Memcpy",
        "gpu_memset": "Memset",
    }
    for event in doc["traceEvents"]:
        cat = event.get("cat")
        if cat in legacy_cat:
            event["cat"] = legacy_cat[cat]
            args = event.get("args", {})
            if "External id" in args:
                args["external id"] = args.pop("External id")
            if cat in ("kernel", "gpu_memcpy", "gpu_memset"):
                event["tid"] = f"stream {event['tid']}"
    legacy = tmp_path / "legacy_trace.json"
    legacy.write_text(json.dumps(doc))
    old, new = ingest(legacy).ops, trace_of("a100_alexnet_forward.json.gz").ops
    assert old.drop(columns=["tid"]).equals(new.drop(columns=["tid"]))
    assert (old["tid"] == new["tid"]).all()  # "stream 7" parsed back to 7
    np.testing.assert_array_equal(old["stream"], new["stream"])


def test_kernel_of_an_op_without_formula_gets_input_bytes_and_is_counted(tmp_path):
    # Rename the MI250 trace's aten::relu and the aten::clamp_min inside it (input [5, 128] fp32)
    # to ops archsim has no formula for: the kernel keeps bytes_read = 5 * 128 * 4 = 2,560 B but
    # gets 0 FLOPs. (With only clamp_min renamed, the enclosing aten::relu's formula would apply.)
    doc = json.loads(gzip.decompress(kineto_fixture("mi250_mlp_train.json.gz").read_bytes()))
    renames = {"aten::clamp_min": "mylib::fused_relu", "aten::relu": "mylib::relu_wrapper"}
    for event in doc["traceEvents"]:
        if event.get("name") in renames:
            event["name"] = renames[event["name"]]
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(doc))
    trace = ingest(path)
    custom = trace.ops[trace.ops["launch_op"] == "mylib::fused_relu"]
    assert len(custom) == 1
    assert custom["flops"].iloc[0] == 0 and not custom["has_formula"].iloc[0]
    assert custom["bytes_read"].iloc[0] == 2_560
    before = trace_of("mi250_mlp_train.json.gz").meta["ingest"]["ops_without_formula"]
    assert trace.meta["ingest"]["ops_without_formula"] == before + 1


def test_enclosing_op_formula_stands_in_for_an_unknown_launching_op(tmp_path):
    # Only aten::clamp_min renamed: the kernel's nearest costed op is the enclosing aten::relu over
    # [5, 128], 1 FLOP per element = 640 FLOPs.
    doc = json.loads(gzip.decompress(kineto_fixture("mi250_mlp_train.json.gz").read_bytes()))
    for event in doc["traceEvents"]:
        if event.get("name") == "aten::clamp_min":
            event["name"] = "mylib::fused_relu"
    path = tmp_path / "renamed.json"
    path.write_text(json.dumps(doc))
    kernel = ingest(path).ops.query("launch_op == 'mylib::fused_relu'")
    assert kernel["flops"].tolist() == [640.0] and kernel["op_class"].tolist() == ["elementwise"]
