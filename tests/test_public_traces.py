"""Other people's real torch.profiler traces from public repositories (tests/data, provenance in
tests/data/README.md) through every command that reads a trace: ingest, trace info, breakdown,
predict (model-only and measured), calibrate, compare. Each file has a shape the Kineto fixtures
lack: a 2021 trace naming its GPUs in ``computeProperties``, a ROCm trace whose launches and kernels
share only an ``External id`` (no ``correlation``), a backward pass on autograd's own thread. The
kernel model on these files: tests/test_public_traces_model.py."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archsim.cli import main
from archsim.hw import load_hw
from archsim.hw.arch_table import arch_from_kernel_names
from archsim.perf.source import source_hw_for_trace
from archsim.trace.ingest import ingest
from archsim.trace.link import correlation_from_external_ids
from tests.conftest import kineto_fixture

DATA = Path(__file__).parent / "data"
HTA = DATA / "hta_backward_thread.json.gz"
KINETO_2021 = DATA / "kineto_v100_2021_compute_properties.json.gz"
TRACELENS_GEMM = DATA / "tracelens_mi300x_gemm_no_correlation.json.gz"
TRACELENS_ADD = DATA / "tracelens_mi300x_add_rocprofiler_sdk.json.gz"
PUBLIC = [HTA, KINETO_2021, TRACELENS_GEMM, TRACELENS_ADD]


def _predict_json(capsys, *args: str) -> dict:
    capsys.readouterr()
    assert main(["predict", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


@pytest.mark.parametrize("path", PUBLIC, ids=lambda p: p.name.split(".")[0])
def test_every_command_reads_it(path: Path, tmp_path: Path, capsys) -> None:
    """No traceback, no refusal, finite non-negative times from every command on each file."""
    out = tmp_path / "tr"
    assert main(["ingest", str(path), "--out", str(out)]) == 0
    assert main(["trace", "info", str(out)]) == 0
    assert main(["breakdown", str(path), "--hw", "dgx-a100", "--out", str(tmp_path / "bd")]) == 0
    assert main(["calibrate", str(path), "--out", str(tmp_path / "cal.yaml")]) == 0
    assert main(["compare", str(out), str(out)]) == 0
    for extra in (["--model-only"], []):
        got = _predict_json(capsys, str(path), "--hw", "dgx-a100", "--phase", "all", *extra)
        for key in ("gpu_seconds", "seconds_per_batch", "measured_gpu_seconds"):
            assert math.isfinite(got[key]) and got[key] > 0, (key, got)
        kernels = ingest(path).ops.query("kind == 'kernel'")
        assert got["measured_gpu_seconds"] <= kernels["dur_us"].sum() * 1e-6 * (1 + 1e-9)


def test_compute_properties_name_the_gpu() -> None:
    """Kineto of spring 2021 (torch 1.8.1) wrote its devices as ``computeProperties`` with
    cudaDeviceProp's own names (major, minor, multiProcessorCount): the GPU is the V100 the file
    names, not 'names no GPU (no deviceProperties)'."""
    trace = ingest(KINETO_2021)
    source = trace.meta["source"]
    assert source["gpu_name"] == "Tesla V100-DGXS-32GB"
    assert source["gpu_num_sms"] == 80 and source["gpu_count"] == 4
    assert source["device_properties"][0]["computeMajor"] == 7
    assert source_hw_for_trace(trace).name == "dgx1-v100"
    # kernels on the legacy string tid "stream 7" keep their stream; all 12 launches are linked,
    # four of them from autograd's thread 24610
    kernels = trace.ops[trace.ops["kind"] == "kernel"]
    assert len(kernels) == 12 and (kernels["launch_start_us"].notna()).all()


def test_torch18_backward_nodes_are_train_backward(capsys) -> None:
    """torch 1.8 recorded autograd nodes bare (``MseLossBackward``, ``AddBackward1``,
    ``torch::autograd::AccumulateGrad`` on thread 24610, 'Fwd thread id' 1) with no
    ``autograd::engine::evaluate_function`` around them. Before: every kernel 'other', no learner
    step, ``--phase train`` refused. The four kernels autograd's thread launched (fill 1 us,
    mse_backward 2 us, sum 4 us, AccumulateGrad's add 1 us) are the backward of one learner step."""
    trace = ingest(KINETO_2021)
    ops = trace.ops
    backward = ops[ops["phase"] == "train_backward"]
    assert sorted(backward["dur_us"]) == [1.0, 1.0, 2.0, 4.0]
    assert (ops.loc[ops["phase"] != "train_backward", "launch_start_us"] < 1621401187228516).all()
    assert (trace.steps["role"] == "learner").sum() == 1
    got = _predict_json(capsys, str(KINETO_2021), "--hw", "dgx1-v100", "--phase", "train")
    assert got["measured_gpu_seconds"] == pytest.approx(8e-6)


def test_resnet50_2021_fixture_has_forward_and_backward() -> None:
    """The same fix on fixture v100_resnet50_train_2021 (June 2021): its 6 learner steps held only
    optimizer_step and 'other' GPU time; the backward nodes now give train_backward and pair the
    training forward by sequence number (train_forward)."""
    trace = ingest(kineto_fixture("v100_resnet50_train_2021.json.gz"))
    by_phase = trace.ops.groupby("phase")["dur_us"].sum()
    assert by_phase["train_backward"] > by_phase["train_forward"] > by_phase["optimizer_step"]
    assert by_phase.get("other", 0.0) < 0.01 * by_phase.sum()
    assert (trace.steps["role"] == "learner").sum() == 6


def test_external_id_only_rocm_trace_links_every_kernel() -> None:
    """TraceLens's MI300X GEMM eval trace: hipExtModuleLaunchKernel calls and their kernels carry
    only a shared External id (58, 60, ..., 76). Before: '10 of 10 GPU events have no launching
    runtime call'. Each kernel now joins its own launch and through it the aten::mm around it,
    whose bf16 [1025, 8192] x [8192, 1025] shapes give 2*1025*8192*1025 FLOPs each."""
    trace = ingest(TRACELENS_GEMM)
    ops = trace.ops
    assert len(ops) == 10 and (ops["kind"] == "kernel").all()
    assert trace.meta["ingest"]["linked_by_external_id"] == 10
    launch_us = ops.sort_values("start_us")["launch_start_us"].to_numpy() - 1771536568924000
    np.testing.assert_allclose(launch_us, [209, 220, 228, 235, 242, 249, 256, 263, 270, 277])
    assert ops["flops"].to_numpy() == pytest.approx(np.full(10, 2 * 1025 * 8192 * 1025))
    assert ops["dur_us"].sum() == pytest.approx(1071.0)
    # no deviceProperties: the Tensile name's ISA942 says gfx942 (an MI300X)
    assert source_hw_for_trace(trace).name == "trace-gfx942"


def test_external_id_kernels_take_the_launch_grid_in_workgroups() -> None:
    """The TraceLens GEMM's kernels record no grid; their hipExtModuleLaunchKernel says
    ``grid dim`` [2304, 17, 1], ``block dim`` [256, 1, 1] in work-items (HIP's global work size).
    Before: grid 0, so the model priced a grid-less GEMM (28.7 us); read as blocks it would be
    39,168 workgroups. In workgroups it is 2304 / 256 = 9 x 17 = 153: the MT128x64 tile in the
    kernel's name over the 1025 x 1025 output, ceil(1025 / 128) x ceil(1025 / 64) = 9 x 17."""
    trace = ingest(TRACELENS_GEMM)
    ops = trace.ops
    geometry = ops[["grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"]].to_numpy()
    assert (geometry == [9, 17, 1, 256, 1, 1]).all()
    assert trace.meta["ingest"]["grids_from_launch"] == 10
    assert trace.meta["ingest"]["grids_converted_from_work_items"] == 10
    assert math.ceil(1025 / 128) * math.ceil(1025 / 64) == 9 * 17 == 153


@pytest.mark.parametrize(
    ("api", "bare", "own"), [("hipExtModuleLaunchKernel", 4, 8), ("hipLaunchKernel", 1024, 512)]
)
def test_launch_grid_fills_a_kernel_without_one(
    tmp_path: Path, api: str, bare: int, own: int
) -> None:
    """A kernel that records no grid takes its launch's (``grid``/``block`` or roctracer's
    ``grid dim``/``block dim``), in the launch API's units: a work-item API's 1024 work-items of
    256 are 4 workgroups, hipLaunchKernel's grid is already in blocks. A kernel that records its
    own grid (512 of 64) keeps it, in the same units."""

    def events(kernel_args: dict) -> list[dict]:
        return [
            {"ph": "X", "cat": "cpu_op", "name": "aten::relu", "pid": 9, "tid": 9, "ts": 100.0,
             "dur": 50.0, "args": {"External id": 5}},
            {"ph": "X", "cat": "cuda_runtime", "name": api, "pid": 9, "tid": 9, "ts": 110.0,
             "dur": 6.0, "args": {"External id": 5, "correlation": 41, "grid dim": [1024, 1, 1],
                                  "block dim": [256, 1, 1]}},
            {"ph": "X", "cat": "kernel", "name": "relu_kernel", "pid": 0, "tid": 0, "ts": 150.0,
             "dur": 9.0, "args": {"External id": 5, "correlation": 41, **kernel_args}},
        ]  # fmt: skip

    for name, kernel_args, want in (
        ("bare", {}, bare),
        ("own", {"grid": [512, 1, 1], "block": [64, 1, 1]}, own),
    ):
        path = tmp_path / f"{name}.json"
        path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events(kernel_args)}))
        (op,) = ingest(path).ops.itertuples()
        assert op.grid_x == want and op.grid_y == 1


def test_tensile_isa_marks() -> None:
    """Tensile (rocBLAS/hipBLASLt) kernel names carry their target as _ISA942_ / _ISA90a_."""
    assert arch_from_kernel_names(["Cijk_Ailk_Bljk_BBS_BH_MT128x64x64_ISA942_IU1"]).key == "gfx942"
    assert arch_from_kernel_names(["Cijk_Alik_Bljk_SB_MT64x64x8_ISA90a_IU1"]).key == "gfx90a"
    assert arch_from_kernel_names(["some_kernel_ISA9420"]) is None  # a mark, not any digits


def test_external_id_pairs_kth_kernel_with_kth_launch() -> None:
    """Where every launch of one cpu op shares its External id (the Kineto convention) and no
    correlation is recorded, the k-th kernel of the id pairs with the k-th launch, not all with the
    first; a non-launch call of the same id (a sync) is never a launch."""
    runtime = pd.DataFrame(
        {
            "name": ["cudaLaunchKernel", "cudaStreamSynchronize", "cudaLaunchKernel"],
            "ts": [10.0, 12.0, 14.0],
            "correlation": [-1, -1, -1],
            "external_id": [7, 7, 7],
        }
    )
    gpu = pd.DataFrame({"ts": [30.0, 20.0], "correlation": [-1, -1], "external_id": [7, 7]})
    gpu2, rt2, n = correlation_from_external_ids(gpu, runtime)
    assert n == 2 and rt2["correlation"].iloc[1] == -1
    # the later kernel (row 0, ts 30) goes with the later launch (row 2, ts 14)
    assert gpu2["correlation"].iloc[0] == rt2["correlation"].iloc[2]
    assert gpu2["correlation"].iloc[1] == rt2["correlation"].iloc[0]
    # a trace that records correlations is left alone
    with_corr = runtime.assign(correlation=[1, -1, 2])
    assert correlation_from_external_ids(gpu, with_corr)[2] == 0


def test_backward_thread_trace(capsys) -> None:
    """HTA's backward-thread excerpt: the one cutlass GEMM is launched from autograd's thread
    inside ``autograd::engine::evaluate_function: AddmmBackward0`` (train_backward), priced from
    aten::mm's [2048, 2048] x [2048, 256] fp32 shapes on an sm_80 GPU named only by the kernel."""
    trace = ingest(HTA)
    (op,) = trace.ops.itertuples()
    assert op.phase == "train_backward"
    assert op.flops == 2 * 2048 * 2048 * 256
    assert source_hw_for_trace(trace).name == "trace-sm_80"
    got = _predict_json(capsys, str(HTA), "--hw", "dgx-a100", "--phase", "train", "--model-only")
    assert got["measured_gpu_seconds"] == pytest.approx(45e-6)


def test_intel_xpu_launches_link_and_say_xpu(tmp_path: Path, capsys) -> None:
    """Kineto's Intel XPU plugin (pytorch/kineto libkineto/src/plugin/xpupti) files launches as
    ``xpu_runtime`` (urEnqueueKernelLaunch) with the kernel's correlation. Before: the kernel was
    left unlinked (0% linked) in a trace whose meta said ``device: cuda``. Hand-made in that shape
    (the public XPU trace seen was not under a licence that allows a copy here)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": "aten::addmm", "pid": 9, "tid": 9, "ts": 100.0,
         "dur": 50.0, "args": {"External id": 5, "Sequence number": 1}},
        {"ph": "X", "cat": "xpu_runtime", "name": "urEnqueueKernelLaunch", "pid": 9, "tid": 9,
         "ts": 140.0, "dur": 6.0, "args": {"External id": 5, "correlation": 4131}},
        {"ph": "X", "cat": "kernel", "name": "gemm_kernel", "pid": 0, "tid": 0, "ts": 150.0,
         "dur": 9.0, "args": {"External id": 5, "correlation": 4131, "device": 0,
                              "sycl queue": 64, "l0 queue": "0x000055d08b8fc138"}},
    ]  # fmt: skip
    path = tmp_path / "xpu.json"
    path.write_text(json.dumps({"schemaVersion": 1, "traceEvents": events}))
    trace = ingest(path)
    assert trace.meta["source"]["device"] == "xpu"
    (op,) = trace.ops.itertuples()
    assert op.launch_op == "aten::addmm" and op.launch_start_us == 140.0
    # no preset describes an XPU: predicting from its measured times asks for --source-hw
    capsys.readouterr()
    assert main(["predict", str(path), "--hw", "dgx-a100", "--phase", "all"]) == 2
    err = capsys.readouterr().err.strip()
    assert "Intel XPU" in err and "--source-hw" in err and "\n" not in err
    assert main(["predict", str(path), "--hw", "dgx-a100", "--phase", "all", "--model-only"]) == 0


def test_graph_launch_is_one_host_call(tmp_path: Path, capsys) -> None:
    """A cudaGraphLaunch issues every kernel of its graph in one host call (its traced duration is
    the whole host cost), so a step of one 3-kernel graph and one memset costs 2 launches, not 4.
    Before: each graph kernel was charged a cudaLaunchKernel's CPU time."""
    props = {"id": 0, "name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0,
             "numSms": 132, "warpSize": 32}  # fmt: skip
    events = []
    for step in range(3):
        t0 = 1000.0 + 1000 * step
        events += [
            {"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step + 1}", "pid": 1,
             "tid": 1, "ts": t0, "dur": 900.0, "args": {}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1,
             "ts": t0 + 10, "dur": 8.0, "args": {"correlation": 100 + step}},
            {"ph": "X", "cat": "cuda_runtime", "name": "cudaMemsetAsync", "pid": 1, "tid": 1,
             "ts": t0 + 190, "dur": 3.0, "args": {"correlation": 200 + step}},
            {"ph": "X", "cat": "gpu_memset", "name": "Memset (Device)", "pid": 0, "tid": 7,
             "ts": t0 + 200, "dur": 2.0, "args": {"correlation": 200 + step, "bytes": 4096}},
        ] + [
            {"ph": "X", "cat": "kernel", "name": "triton_poi_fused_add_0", "pid": 0, "tid": 7,
             "ts": t0 + 30 + 20 * k, "dur": 15.0,
             "args": {"correlation": 100 + step, "grid": [1024, 1, 1], "block": [128, 1, 1],
                      "graph id": 1, "graph node id": k + 1}}
            for k in range(3)
        ]  # fmt: skip
    path = tmp_path / "graph.json"
    path.write_text(json.dumps({"deviceProperties": [props], "traceEvents": events}))
    got = _predict_json(capsys, str(path), "--hw", "dgx-h100", "--phase", "all")
    assert got["launches"] == 2 and got["n_steps"] == 3
    assert got["launch_overhead_seconds"] == pytest.approx(
        2 * load_hw("dgx-h100").gpu.launch_overhead_us * 1e-6
    )


def test_simulated_learner_launches_count_graph_calls() -> None:
    """The simulator charges the learner thread one launch per host call: fixture
    a100_80gb_train_prewindow's training steps replay 345 GPU events from 70 cudaGraphLaunch
    calls, so its learner launch time is that of 4630 - (345 - 70) calls over 5 steps, not 4630."""
    from archsim.sim.gpu_jobs import representative_ops
    from archsim.sim.learner_work import PHASE_GROUPS, derive_learner_work, trace_learner_batch

    trace = ingest(kineto_fixture("a100_80gb_train_prewindow.json.gz"))
    hw = load_hw("dgx-a100")
    work = derive_learner_work(trace, hw, trace_learner_batch(trace), source_hw_for_trace(trace))
    ops, steps, _ = representative_ops(trace, PHASE_GROUPS["train"], "learner")
    graph = ops[ops["launch_api"] == "cudaGraphLaunch"]
    calls = len(ops) - len(graph) + len(graph.groupby(["correlation", "launch_start_us"]))
    assert calls < len(ops)
    per_call_s = hw.gpu.launch_overhead_us * 1e-6 * hw.cpu.thread_speed_rel
    assert work.launch_cpu_s == pytest.approx(calls / steps * per_call_s)


@pytest.mark.parametrize("chunk", [1, 7, 1 << 22])
def test_json_array_format_reads_like_the_object(tmp_path: Path, monkeypatch, chunk: int) -> None:
    """The Chrome trace format's JSON Array Format (the events alone, no ``traceEvents`` wrapper)
    gives the same events as the object form, at any read-chunk size. Before: 'not a Kineto trace
    (expected a JSON object with 'traceEvents')'. An array of non-objects is still refused."""
    from archsim.trace import stream
    from archsim.trace.kineto import read_kineto

    with gzip.open(HTA) as f:
        doc = json.load(f)
    array = tmp_path / "array.json"
    array.write_text(json.dumps(doc["traceEvents"], indent=chunk % 3))
    monkeypatch.setattr(stream, "CHUNK_CHARS", chunk)
    monkeypatch.setattr(stream, "_LOOKAHEAD", min(chunk, 64))
    got, want = read_kineto(array).events, read_kineto(HTA).events
    pd.testing.assert_frame_equal(got.drop(columns="args"), want.drop(columns="args"))
    assert len(ingest(array).ops) == 1


def test_data_readme_names_every_file() -> None:
    """Every checked-in trace has its provenance (repository, path, commit, licence) written down."""
    readme = (DATA / "README.md").read_text()
    for path in DATA.glob("*.json.gz"):
        assert path.name in readme, path.name
        with gzip.open(path) as f:
            json.load(f)
        assert path.stat().st_size < 100_000
