"""A fifth set of other people's files (tests/data, provenance in tests/data/README.md), each of a
kind the first four sets lack: what a VeRL reinforcement-learning run leaves behind on Ascend NPUs
(torch_npu's trace_view.json) and under Nsight Systems (nsys export --type jsonlines), a Git LFS
pointer checked out in place of a trace, and Kineto's TensorBoard-plugin memory-view trace
([memory] instants among legacy-category events)."""

from __future__ import annotations

import gzip
import json
import math
import shutil
from pathlib import Path

import pytest

from archsim.cli import main
from archsim.trace.ingest import ingest
from tests.test_public_traces import _predict_json

DATA = Path(__file__).parent / "data"
ASCEND = DATA / "ascend_npu_trace_view_overlap.json.gz"
ASCEND_OPS = DATA / "ascend_npu_trace_view_cpu_ops.json.gz"
NSYS = DATA / "nsys_export_jsonlines_nvtx.jsonl.gz"
TB_MEMORY = DATA / "kineto_tb_plugin_memory_view.json.gz"
L20_EMPTY = DATA / "rlinsight_verl_l20_empty_window.json.gz"

# OrangeRedeng/profile, trace_view.json, commit 0907491680b40666a841af70cdf96e8f5405bfee: the
# whole file as a clone without git-lfs checks it out (134 bytes; git-lfs docs/spec.md's format).
LFS_POINTER = (
    "version https://git-lfs.github.com/spec/v1\n"
    "oid sha256:760b7f89de48e87cca2ef79508e042ac7408ca16d48eeddee11b7855177942b6\n"
    "size 870601265\n"
)


def _refusals(capsys, path: Path, tmp_path: Path) -> list[str]:
    """The one-line error of each command that reads a raw trace (all exit 2)."""
    commands = [
        ["ingest", str(path), "--out", str(tmp_path / "tr")],
        ["trace", "info", str(path)],
        ["breakdown", str(path), "--hw", "dgx-h100", "--out", str(tmp_path / "bd")],
        ["predict", str(path), "--hw", "dgx-h100", "--phase", "all", "--json", "--model-only"],
        ["simulate", str(path), "--hw", "local", "--out", str(tmp_path / "sim")],
    ]
    errors = []
    for argv in commands:
        capsys.readouterr()
        assert main(argv) == 2, argv
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and "Traceback" not in err, err
        errors.append(err)
    return errors


def test_ascend_trace_view_named(capsys, tmp_path: Path) -> None:
    """rl-insight's trace_view.json holds four 'X' rows with no 'cat' on a process labelled
    'NPU 0'. Before: every command said it looked like torch <= 1.7's autograd-profiler export
    (events without 'cat'), which it is not. Now the refusal names an Ascend NPU trace."""
    with gzip.open(ASCEND) as f:
        events = json.load(f)
    timed = [e for e in events if e["ph"] == "X"]  # worked by hand from the file
    assert len(events) == 15 and len(timed) == 4 and all("cat" not in e for e in timed)
    assert all(isinstance(e["ts"], str) for e in timed)  # "1773285904640626.314"
    for err in _refusals(capsys, ASCEND, tmp_path):
        assert "an Ascend NPU trace: a process labelled 'NPU 0'" in err, err
        assert "torch_npu" in err and "legacy" not in err, err


def test_ascend_string_times_named(capsys, tmp_path: Path) -> None:
    """rl-insight's NPU memory sample: 13 cpu ops whose 'ts' are decimal strings. The refusal of
    the first op's time (it was 'non-numeric' alone) now says who writes times as text."""
    with gzip.open(ASCEND_OPS) as f:
        events = json.load(f)
    assert len(events) == 13 and {e["cat"] for e in events} == {"cpu_op"}
    assert events[0]["ts"] == "1779785515694669.2" and events[-1]["name"] == "npu::_npu_dtype_cast"
    for err in _refusals(capsys, ASCEND_OPS, tmp_path):
        assert "event #0 (cpu_op 'aten::add') has a non-numeric 'ts'" in err, err
        assert "a number written as text, as torch_npu's profiler writes" in err, err
    bad = tmp_path / "words.json"  # a string that is no number gets no such note
    bad.write_text(json.dumps([dict(events[0], ts="yesterday")]))
    assert main(["ingest", str(bad), "--out", str(tmp_path / "w")]) == 2
    err = capsys.readouterr().err
    assert "non-numeric 'ts': 'yesterday'" in err and "torch_npu" not in err


def test_nsys_jsonlines_export_named(capsys, tmp_path: Path) -> None:
    """rl-insight's NVTX input is nsys export --type jsonlines: four JSON rows, one a line.
    Before: 'not JSON (Extra data)'. Now the refusal names the Nsight Systems export; the
    commands that take a raw .json read the same bytes under that name (the export's usual one)."""
    with gzip.open(NSYS, "rt") as f:
        rows = [json.loads(line) for line in f]
    assert [r["table"] for r in rows] == [
        "StringIds",
        "ANALYSIS_DETAILS",
        "NVTX_EVENTS",
        "META_DATA_CAPTURE",
    ]
    capsys.readouterr()
    assert main(["ingest", str(NSYS), "--out", str(tmp_path / "tr")]) == 2
    err = capsys.readouterr().err.strip()
    assert "an Nsight Systems export, nsys export --type jsonlines" in err, err
    assert "first of table 'StringIds'" in err and "Extra data" not in err, err
    as_json = tmp_path / "report.json"
    with gzip.open(NSYS) as src, open(as_json, "wb") as dst:
        shutil.copyfileobj(src, dst)
    for err in _refusals(capsys, as_json, tmp_path):
        assert "an Nsight Systems export" in err, err


def test_other_json_lines_and_concatenated_documents(capsys, tmp_path: Path) -> None:
    """One JSON object a line that is not an nsys row is called JSON Lines; a Kineto document
    followed by more text is still 'Extra data' (the trace itself was found)."""
    lines = tmp_path / "lines.json"
    lines.write_text('{"step": 1}\n{"step": 2}\n')
    capsys.readouterr()
    assert main(["ingest", str(lines), "--out", str(tmp_path / "a")]) == 2
    assert "JSON Lines: one JSON object per line" in capsys.readouterr().err
    doubled = tmp_path / "doubled.json"
    doubled.write_text('{"traceEvents": []}\n{"traceEvents": []}\n')
    assert main(["ingest", str(doubled), "--out", str(tmp_path / "b")]) == 2
    assert "not JSON (Extra data)" in capsys.readouterr().err


@pytest.mark.parametrize("gzipped", [False, True])
def test_git_lfs_pointer_named(capsys, tmp_path: Path, gzipped: bool) -> None:
    """A clone without git-lfs checks out a 134-byte pointer where the 870 MB trace_view.json
    should be. Before: 'not JSON (Expecting value)'. Now the refusal says it is an LFS pointer,
    with the size of the file it stands for."""
    path = tmp_path / ("trace.json.gz" if gzipped else "trace_view.json")
    data = LFS_POINTER.encode()
    path.write_bytes(gzip.compress(data, mtime=0) if gzipped else data)
    for err in _refusals(capsys, path, tmp_path):
        assert "a Git LFS pointer, not the trace" in err, err
        assert "870,601,265 bytes" in err and "git lfs pull" in err, err


@pytest.mark.parametrize("chunk", [1, 7, 100])
def test_git_lfs_pointer_read_in_small_chunks(tmp_path: Path, monkeypatch, chunk: int) -> None:
    """The pointer is recognised whatever the reader's chunk size (the stream refills to hold
    its ~130 characters before looking)."""
    from archsim.errors import ArchsimError
    from archsim.trace import stream
    from archsim.trace.kineto import read_kineto

    path = tmp_path / "trace.json"
    path.write_text(LFS_POINTER)
    monkeypatch.setattr(stream, "CHUNK_CHARS", chunk)
    with pytest.raises(ArchsimError, match="a Git LFS pointer, not the trace"):
        read_kineto(path)


def test_memory_instants_among_legacy_events(capsys, tmp_path: Path) -> None:
    """Kineto's memory-view test trace: 49 events, of which 29 [memory] instants (ignored: they
    are allocations, not work) and three GPU events, worked by hand from the file: Memcpy HtoD
    10 us, Memset 5 us, cunn_ClassNLLCriterion kernel 15 us, 30 us in all, on stream 7 of device
    0. Their launches run on thread "456", where no op is recorded, so no op owns them."""
    with gzip.open(TB_MEMORY) as f:
        events = json.load(f)
    memory = [e for e in events if e["name"] == "[memory]"]
    assert len(events) == 49 and len(memory) == 29 and {e["ph"] for e in memory} == {"i"}
    trace = ingest(TB_MEMORY)
    ops = trace.ops
    assert list(ops["kind"]) == ["memcpy", "memset", "kernel"]
    assert list(ops["dur_us"]) == [10.0, 5.0, 15.0]
    assert set(ops["stream"]) == {7} and set(ops["device"]) == {0}
    assert list(ops["launch_api"]) == ["cudaMemcpyAsync", "cudaMemsetAsync", "cudaLaunchKernel"]
    assert (ops["launch_op"] == "").all()
    meta = trace.meta["ingest"]
    assert meta["n_events"] == 49 and meta["unlinked_kernels"] == 0
    got = _predict_json(
        capsys, str(TB_MEMORY), "--hw", "dgx-h100", "--phase", "all", "--model-only"
    )
    assert got["measured_gpu_seconds"] == pytest.approx(30e-6)
    assert math.isfinite(got["gpu_seconds"]) and got["gpu_seconds"] > 0
    assert main(["ingest", str(TB_MEMORY), "--out", str(tmp_path / "tr")]) == 0
    assert main(["trace", "info", str(tmp_path / "tr")]) == 0


def test_window_with_only_a_runtime_call(capsys, tmp_path: Path) -> None:
    """rl-insight's example of a VeRL rollout trace on an L20: one complete event, a 10.08 s
    cudaMemGetInfo, and two instants. Before: 'none of its 4 events is a complete ('X') or
    'B'/'E' span', which is false. Now the refusal names what the window did record."""
    with gzip.open(L20_EMPTY) as f:
        doc = json.load(f)
    (complete,) = [e for e in doc["traceEvents"] if e["ph"] == "X"]
    assert (complete["name"], complete["dur"]) == ("cudaMemGetInfo", 10083720.552)
    assert doc["deviceProperties"][0]["name"] == "NVIDIA L20"
    for err in _refusals(capsys, L20_EMPTY, tmp_path):
        assert "its only complete events are 1 'cuda_runtime' (cudaMemGetInfo)" in err, err
        assert "recorded no op and no GPU activity" in err and "none of its" not in err, err
