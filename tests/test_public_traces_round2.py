"""More of other people's public torch.profiler traces (tests/data, provenance in tests/data/README.md),
each with a shape the first set (tests/test_public_traces.py) lacks: libkineto's own 2026 trace of an
8 x H100 node (CUDA 13) with ``cuda_sync`` events on the GPU timeline and sub-microsecond timestamps
after ``baseTimeNanoseconds``; TraceLens's flash-attention eval trace whose inputs are typed
``BFloat16`` (the ScalarType name, not Kineto's ``c10::BFloat16``) and whose cpu op carries no
External id; the Chrome format's begin/end ("B"/"E") duration events; element types as Clang, MSVC
and ROCm spell them."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import numpy as np
import pytest

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.source import source_hw_for_trace
from archsim.trace.concurrency import busy_us, concurrency_note
from archsim.trace.flops.args import parse_args
from archsim.trace.ingest import ingest
from tests.test_public_traces import HTA, _predict_json

DATA = Path(__file__).parent / "data"
KINETO_SYNC = DATA / "kineto_h100_cuda_sync_2026.json.gz"
TRACELENS_SDPA = DATA / "tracelens_sdpa_flash_bf16.json.gz"
TRACELENS_FA_MI300X = DATA / "tracelens_mi300x_flash_attn_fwd.json.gz"
# The TraceLens eval names no GPU (no deviceProperties, a kernel name without an architecture
# mark): commands that need the measuring GPU are told one, as a user would (--source-hw).
ROUND2 = [
    (KINETO_SYNC, []),
    (TRACELENS_SDPA, ["--source-hw", "mi300x"]),
    (TRACELENS_FA_MI300X, []),
]


@pytest.mark.parametrize(
    ("path", "source"), ROUND2, ids=["kineto_sync", "tracelens_sdpa", "fa_mi300x"]
)
def test_every_command_reads_it(path: Path, source: list[str], tmp_path: Path, capsys) -> None:
    """No traceback, no refusal, finite positive times from every command that reads a trace."""
    out = tmp_path / "tr"
    assert main(["ingest", str(path), "--out", str(out)]) == 0
    assert main(["trace", "info", str(out)]) == 0
    bd = ["breakdown", str(path), "--hw", "dgx-h100", "--out", str(tmp_path / "bd"), *source]
    assert main(bd) == 0
    assert main(["calibrate", str(path), "--out", str(tmp_path / "cal.yaml"), *source]) == 0
    assert main(["compare", str(out), str(out)]) == 0
    for extra in (["--model-only"], source):
        got = _predict_json(capsys, str(path), "--hw", "dgx-h100", "--phase", "all", *extra)
        for key in ("gpu_seconds", "seconds_per_batch", "measured_gpu_seconds"):
            assert math.isfinite(got[key]) and got[key] > 0, (key, got)


def test_cuda_sync_events_are_not_gpu_work(capsys) -> None:
    """libkineto's docs/traces/after_fix_trace.json: one 20 ns kernel on stream 1, then a
    'Stream Wait Event' (10 ns) and an 'Event Sync' (20 ns) filed as ``cuda_sync`` on the same GPU
    row with their own correlations (200, 300) and ac2g flows. The GPU work is the kernel alone
    (0.020 us, not 0.050), linked to op1 through cudaLaunchKernel 0.020 us before it; the 8 devices
    are H100s of 132 SMs; timestamps keep their nanosecond digits."""
    trace = ingest(KINETO_SYNC)
    (op,) = trace.ops.itertuples()
    assert (op.kind, op.name, op.launch_op, op.stream) == ("kernel", "Kernel", "op1", 1)
    assert op.dur_us == pytest.approx(0.020) and op.launch_dur_us == pytest.approx(0.010)
    assert op.start_us - op.launch_start_us == pytest.approx(0.020, abs=1e-4)  # float64 ulp
    source = trace.meta["source"]
    assert (source["gpu_name"], source["gpu_num_sms"], source["gpu_count"]) == (
        "NVIDIA H100",
        132,
        8,
    )
    assert source_hw_for_trace(trace).name == "dgx-h100"
    assert trace.meta["ingest"]["base_time_ns"] == 1775078550000000000
    got = _predict_json(capsys, str(KINETO_SYNC), "--hw", "dgx-h100", "--phase", "all")
    assert got["measured_gpu_seconds"] == pytest.approx(20e-9)
    assert got["launches"] == 1 and got["n_steps"] == 1


# 4 * B * H * L * S * E for Q K^T and P V at E = Ev = 128, plus 6 softmax/scale ops per score
# (archsim.trace.flops.attention): B = 1, H = 32, L = S = 32768, not causal
SDPA_FLOPS = 4 * 32 * 32768**2 * 128 + 6 * 32 * 32768**2  # 17,798,344,474,624


def test_scalar_type_names_price_the_attention(capsys) -> None:
    """TraceLens's attn_01 eval: aten::_scaled_dot_product_flash_attention over three
    [1, 32, 32768, 128] tensors typed "BFloat16" (c10's ScalarType name). Before: the type was
    unknown, so the op read as having no tensors: 0 FLOP, dtype float32, and the model-only time
    on an H100 was 0.148 ms for 18 ms measured. Now 17.8 TFLOP in bf16, so the model can never
    undercut the H100's dense bf16 peak. The op has no External id; its kernel still joins it
    through the launch inside it (External id 100)."""
    (op,) = ingest(TRACELENS_SDPA).ops.itertuples()
    assert op.launch_op == "aten::_scaled_dot_product_flash_attention"
    assert op.dtype == "bfloat16" and op.flops == SDPA_FLOPS
    got = _predict_json(
        capsys, str(TRACELENS_SDPA), "--hw", "dgx-h100", "--phase", "all", "--model-only"
    )
    assert got["dtype"] == "bfloat16" and got["measured_gpu_seconds"] == pytest.approx(0.018)
    assert got["gpu_seconds"] >= SDPA_FLOPS / load_hw("dgx-h100").gpu.tensor_peak_flops


def test_rocm7_flash_attention_heads_last(capsys) -> None:
    """A real MI300X trace (ROCm 7, rocprofiler-sdk, with_stack): SDPA reaches
    aten::_flash_attention_forward, whose inputs are the same tensors transposed to heads-last
    [1, 32768, 32, 128]; its hipModuleLaunchKernel and the Triton attn_fwd.kd kernel record grid
    [0, 0, 0]. The kernel joins the innermost op (External id 9) and is priced at the heads-first
    SDPA's FLOPs (same attention, other layout), reading q, k, v (3 x 256 MiB) and writing out
    (256 MiB). The 658 ms hipDeviceSynchronize is host time, not GPU work: measured GPU time is
    the kernel's 85.232 ms."""
    trace = ingest(TRACELENS_FA_MI300X)
    (op,) = trace.ops.itertuples()
    assert (op.launch_op, op.launch_api) == (
        "aten::_flash_attention_forward",
        "hipModuleLaunchKernel",
    )
    assert op.flops == SDPA_FLOPS and op.dtype == "bfloat16" and op.grid_x == 0
    assert (op.bytes_read, op.bytes_written) == (3 * 2**28, 2**28)
    assert trace.meta["source"]["device"] == "rocm"
    assert source_hw_for_trace(trace).name == "mi300x"
    got = _predict_json(capsys, str(TRACELENS_FA_MI300X), "--hw", "mi300x", "--phase", "all")
    assert got["measured_gpu_seconds"] == pytest.approx(0.085232206)
    model = _predict_json(
        capsys, str(TRACELENS_FA_MI300X), "--hw", "mi300x", "--phase", "all", "--model-only"
    )
    assert model["gpu_seconds"] >= SDPA_FLOPS / load_hw("mi300x").gpu.tensor_peak_flops


@pytest.mark.parametrize(
    ("spelling", "itemsize"),
    [
        ("long long", 8),  # Clang (macOS) for int64_t
        ("__int64", 8),  # MSVC
        ("unsigned int", 4),
        ("c10::Float8_e4m3fnuz", 1),  # ROCm fp8 (MI300)
        ("c10::Float8_e5m2fnuz", 1),
        ("BFloat16", 2),
        ("Half", 2),
    ],
)
def test_compiler_spellings_are_tensors(spelling: str, itemsize: int) -> None:
    """An input typed in another compiler's spelling is a tensor of its size, not a scalar: an
    nll_loss target typed "long long" (as a macOS trace records it) has 16 x 8 bytes."""
    args = parse_args([[16, 2048], [16]], ["float", spelling], ["", ""])
    assert args is not None
    target = args.tensor(1)
    assert target is not None and target.shape == (16,) and target.itemsize == itemsize


def _as_begin_end(events: list[dict]) -> list[dict]:
    """Each complete event as a "B" and a later "E" on its thread (the end names nothing), the
    ends in time order after all the begins of the same thread that precede them."""
    marks = []
    for e in events:
        if e.get("ph") != "X":
            marks.append((e.get("ts", 0), 1, e))
            continue
        begin = {k: v for k, v in e.items() if k != "dur"} | {"ph": "B"}
        end = {"ph": "E", "pid": e["pid"], "tid": e["tid"], "ts": e["ts"] + e["dur"]}
        marks += [(e["ts"], 2, begin), (e["ts"] + e["dur"], 0, end)]
    return [e for *_, e in sorted(marks, key=lambda m: (m[0], m[1]))]


def test_begin_end_pairs_read_like_complete_events(tmp_path: Path) -> None:
    """HTA's backward-thread trace rewritten as "B"/"E" pairs gives the same op, time and phase
    as the original. Before: 'no cpu_op, kernel, memcpy or memset events: nothing to ingest'. A
    begin never ended (the trace cut inside it) is dropped and counted, as is a stray end."""
    with gzip.open(HTA) as f:
        doc = json.load(f)
    complete = [e for e in doc["traceEvents"] if e.get("ph") == "X"]
    pairs = _as_begin_end(doc["traceEvents"])
    pairs.append({"ph": "E", "pid": 1, "tid": 1, "ts": 1.0})  # no open begin on that thread
    pairs.append(dict(complete[0], ph="B", ts=complete[-1]["ts"] + 1e6))  # never ended
    path = tmp_path / "pairs.json"
    path.write_text(json.dumps(doc | {"traceEvents": pairs}))
    got, want = ingest(path), ingest(HTA)
    cols = ["name", "launch_op", "phase", "start_us", "dur_us", "flops"]
    assert got.ops[cols].to_dict("records") == want.ops[cols].to_dict("records")
    assert got.meta["ingest"]["begin_end_pairs"] == len(complete)
    assert got.meta["ingest"]["unclosed_begin_events"] == 1


def test_busy_time_is_the_union_of_intervals() -> None:
    """[0, 10) and [5, 20) overlap into 20 us busy; [30, 31) adds 1; [40, 40) adds nothing."""
    start = np.array([30.0, 0.0, 5.0, 40.0])
    end = np.array([31.0, 10.0, 20.0, 40.0])
    assert busy_us(start, end) == pytest.approx(21.0)
    assert busy_us(np.array([]), np.array([])) == 0.0


def _two_gemms_per_step(tmp_path: Path, devices: tuple[int, int], streams: tuple[int, int]) -> Path:
    """Three ProfilerSteps, each launching two 50 us GEMMs that run at the same time (the shape of
    nn.DataParallel's replicas on two GPUs, or of two streams of one GPU), or one after the other
    where both are on one stream of one GPU."""
    serial = devices[0] == devices[1] and streams[0] == streams[1]
    props = [
        {"id": d, "name": "NVIDIA A100-SXM4-80GB", "computeMajor": 8, "computeMinor": 0,
         "numSms": 108, "warpSize": 32}
        for d in range(2)
    ]  # fmt: skip
    events = []
    for step in range(1, 4):
        t0 = 1000.0 * step
        events.append({"ph": "X", "cat": "user_annotation", "name": f"ProfilerStep#{step}",
                       "pid": 9, "tid": 9, "ts": t0, "dur": 900.0, "args": {}})  # fmt: skip
        for k in range(2):
            c = 10 * step + k
            events += [
                {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "pid": 9, "tid": 9,
                 "ts": t0 + 10 + 100 * k, "dur": 30.0,
                 "args": {"External id": c, "Input Dims": [[256, 256], [256, 256]],
                          "Input type": ["float", "float"]}},
                {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 9, "tid": 9,
                 "ts": t0 + 15 + 100 * k, "dur": 5.0, "args": {"External id": c, "correlation": c}},
                {"ph": "X", "cat": "kernel", "name": "ampere_sgemm_64x64_nn", "pid": devices[k],
                 "tid": streams[k], "ts": t0 + 200 + 50 * k * serial, "dur": 50.0,
                 "args": {"External id": c, "correlation": c, "stream": streams[k],
                          "device": devices[k], "grid": [16, 4, 1], "block": [128, 1, 1]}},
            ]  # fmt: skip
    path = tmp_path / "two.json"
    path.write_text(json.dumps({"deviceProperties": props, "traceEvents": events}))
    return path


@pytest.mark.parametrize(
    ("devices", "streams", "says"),
    [
        ((0, 1), (7, 7), "ran on 2 devices (0, 1): predict adds their 0.300 ms"),
        ((0, 0), (7, 20), "on 2 streams overlapped: the GPU was busy 0.150 ms but the work sums"),
        ((0, 0), (7, 7), None),  # one stream runs them in turn: no note
    ],
)
def test_concurrent_gpu_work_is_named(tmp_path: Path, capsys, devices, streams, says) -> None:
    """Per step two 50 us GEMMs side by side: predict sums 100 us of measured GPU time (as one GPU
    running them in turn). Before: nothing said the GPUs or streams were busy only 50 us a step;
    now one note does, with the trace's own summed (0.300 ms) and busy (0.150 ms) times."""
    path = _two_gemms_per_step(tmp_path, devices, streams)
    got = _predict_json(capsys, str(path), "--hw", "dgx-a100", "--phase", "all")
    assert got["measured_gpu_seconds"] == pytest.approx(100e-6) and got["n_steps"] == 3
    notes = [n for n in got["notes"] if "GPU work" in n]
    assert len(notes) == (0 if says is None else 1)
    assert says is None or says in notes[0]
    if says and devices == (0, 1):
        assert "the busiest device was busy 0.150 ms" in notes[0]
    capsys.readouterr()
    assert main(["trace", "info", str(path)]) == 0  # trace info says the same line
    assert (says is None) == ("GPU work" not in capsys.readouterr().out)
    for path in (KINETO_SYNC, TRACELENS_FA_MI300X, HTA):  # one kernel at a time: no note
        assert concurrency_note(ingest(path).ops) is None


@pytest.mark.parametrize("tail", ["", ",", ",\n  "])
def test_json_array_without_its_closing_bracket(tmp_path: Path, tail: str) -> None:
    """The Chrome format's JSON Array Format may end without its ']' (a tracer that crashed or
    was killed leaves it out), after the last event or after its ','. Before: 'not JSON (expected
    ',' or ']' in traceEvents, found end of file)' or 'not JSON (Expecting value)'. HTA's events
    written that way read like the whole file."""
    with gzip.open(HTA) as f:
        events = json.load(f)["traceEvents"]
    path = tmp_path / "open.json"
    path.write_text(json.dumps(events, indent=1)[:-1].rstrip() + tail)
    assert ingest(path).ops[["name", "dur_us"]].to_dict("records") == [
        {"name": ingest(HTA).ops["name"].iloc[0], "dur_us": 45.0}
    ]


def test_a_cut_trace_says_it_is_cut(tmp_path: Path) -> None:
    """An object-format trace cut short (a copy that stopped) is still refused, but in one line
    that says the file ends mid-value, not only 'Unterminated string starting at'."""
    with gzip.open(KINETO_SYNC, "rt") as f:
        text = f.read()
    for cut_at in (len(text) // 2, len(text) - 3):
        path = tmp_path / "cut.json"
        path.write_text(text[:cut_at])
        with pytest.raises(
            ArchsimError, match=r"not JSON \(.*the file ends mid-value: truncated\?\)"
        ):
            ingest(path)


@pytest.mark.parametrize(
    ("events", "says"),
    [
        ([], "(traceEvents is empty)"),
        (  # another tool's async spans (a ResNet serving benchmark's chrome_trace.json)
            [{"cat": "resnet50", "name": "1", "id": "1", "ph": ph, "ts": ts, "pid": 0}
             for ph, ts in (("b", 10.0), ("e", 60.0))],
            "(none of its 2 events is a complete ('X') or 'B'/'E' span)",
        ),
        (
            [{"ph": "X", "cat": "io", "name": "read", "ts": 1.0, "dur": 2.0, "pid": 0, "tid": 0}] * 2
            + [{"ph": "X", "cat": "infer", "name": "run", "ts": 5.0, "dur": 2.0, "pid": 0, "tid": 0}],
            "(its complete events are of categories 'io' (2), 'infer' (1))",
        ),
    ],
)  # fmt: skip
def test_nothing_to_ingest_says_what_is_there(tmp_path: Path, events: list, says: str) -> None:
    """A file with nothing archsim reads says, in its one line, what it holds instead."""
    path = tmp_path / "other.json"
    path.write_text(json.dumps({"traceEvents": events}))
    with pytest.raises(ArchsimError, match="nothing to ingest") as err:
        ingest(path)
    assert says in str(err.value) and "\n" not in str(err.value)


def test_model_only_says_when_ops_have_nothing_to_price(capsys) -> None:
    """libkineto's trace records no shapes: its one kernel has no FLOPs or bytes, so --model-only
    says its time rests on launch geometry alone; the measured path (which scales the measured
    20 ns) and a trace with shapes (the MI300X flash attention) say nothing of the kind."""
    args = ["--hw", "dgx-h100", "--phase", "all"]
    got = _predict_json(capsys, str(KINETO_SYNC), *args, "--model-only")
    assert [n for n in got["notes"] if "carry no FLOPs" in n] == [
        "1 of 1 GPU ops carry no FLOPs or bytes (the trace recorded no input shapes: "
        "record_shapes was off): their model-only time rests on launch geometry and kernel "
        "names alone"
    ]
    assert not any(
        "carry no FLOPs" in n for n in _predict_json(capsys, str(KINETO_SYNC), *args)["notes"]
    )
    shaped = _predict_json(capsys, str(TRACELENS_FA_MI300X), *args, "--model-only")
    assert not any("carry no FLOPs" in n for n in shaped["notes"])
