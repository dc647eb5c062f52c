"""Hostile and odd input to ingest (issue 13, "Bad input"): each case ends in one line and exit 2, or
in a trace with a stated repair (counted in meta), never a traceback or a silently wrong number.
Inputs are real fixtures damaged in one specific way."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.trace import load, save
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture

GPU_SMALL = "mi250_mlp_train.json.gz"  # 14 kernels, 2 memcpys, shapes, hip runtime
CUDA_SMALL = "a100_event_sync_multistream.json.gz"  # 3 kernels, 3 memsets on 3 streams
# The repository's CPU-only AlexNet capture, with archsim step, phase and CPU-time markers.
MARKED = Path(__file__).resolve().parents[1] / "traces" / "alexnet-b1-fp32" / "raw_trace.json.gz"


def _doc(name: str = GPU_SMALL) -> dict:
    return json.loads(gzip.decompress(kineto_fixture(name).read_bytes()))


def _write_text(tmp_path: Path, text: str, name: str = "trace.json.gz") -> Path:
    path = tmp_path / name
    path.write_bytes(gzip.compress(text.encode("utf-8", "surrogatepass")))
    return path


def _write(tmp_path: Path, doc: object, name: str = "trace.json.gz") -> Path:
    return _write_text(tmp_path, json.dumps(doc), name)


def _events(doc: dict, cat: str) -> list[dict]:
    return [e for e in doc["traceEvents"] if e.get("cat") == cat and e.get("ph") == "X"]


def _one_line_error(capsys, tmp_path: Path, trace: Path, *needles: str) -> str:
    out = tmp_path / "out"
    code = main(["ingest", str(trace), "--out", str(out)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert len(err) == 1, err  # one line, no traceback
    assert err[0].startswith("archsim: error: ") and str(trace) in err[0]
    for needle in needles:
        assert needle in err[0], err[0]
    assert not out.exists()
    return err[0]


# ---------------------------------------------------------------- ids no int64 holds ---------------
@pytest.mark.parametrize("key", ["pid", "tid"])
@pytest.mark.parametrize("value", [2**63, -(2**63) - 1, float("-inf"), float("inf")])
def test_thread_ids_beyond_int64_or_infinite_are_refused(tmp_path, capsys, key, value):
    doc = _doc()
    _events(doc, "cpu_op")[0][key] = value
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), f"'{key}'", "below 2^63")


def test_correlation_beyond_int64_is_refused(tmp_path, capsys):
    doc = _doc()
    _events(doc, "kernel")[0]["args"]["correlation"] = 2**64
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "'correlation'", "below 2^63")


def test_integers_of_thousands_of_digits_are_refused(tmp_path, capsys):
    # Python refuses to convert integers of more than 4,300 digits from text (CVE-2020-10735 limit).
    text = re.sub(r'"pid": -?\d+', '"pid": ' + "9" * 5000, json.dumps(_doc()), count=1)
    _one_line_error(capsys, tmp_path, _write_text(tmp_path, text), "unreadable JSON number")


def test_nesting_thousands_deep_is_refused(tmp_path, capsys):
    text = '{"traceEvents": [{"ph": "X", "args": ' + "[" * 5000 + "]" * 5000 + "}]}"
    _one_line_error(capsys, tmp_path, _write_text(tmp_path, text), "nested too deeply")


def test_profiler_step_with_a_20_digit_number_is_refused(tmp_path, capsys):
    doc = _doc("a100_train_shapes.json.gz")
    steps = [e for e in _events(doc, "user_annotation") if e["name"].startswith("ProfilerStep#")]
    steps[0]["name"] = "ProfilerStep#" + "1" * 20
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "ProfilerStep#", "out of range")


def test_lone_surrogate_in_a_name_is_repaired_and_counted(tmp_path):
    doc = _doc()
    kernel = _events(doc, "kernel")[0]
    kernel["name"] = "gemm_\ud800_kernel"  # valid JSON escape, invalid Unicode
    trace = ingest(_write(tmp_path, doc))
    assert trace.meta["ingest"]["names_repaired"] == 1
    assert "gemm_\ufffd_kernel" in set(trace.ops["name"])
    again = load(save(trace, tmp_path / "out"))  # Parquet and YAML accept it now
    assert "gemm_\ufffd_kernel" in set(again.ops["name"])


# ---------------------------------------------------------------- silent wrong numbers -------------
def test_every_event_duplicated_is_repaired_not_doubled(tmp_path):
    doc = _doc()
    original = ingest(_write(tmp_path, doc, "once.json.gz"))
    n_complete = len(
        {
            json.dumps(e, sort_keys=True)
            for e in doc["traceEvents"]
            if e.get("ph") == "X"
            and e.get("cat") in ("cpu_op", "kernel", "gpu_memcpy", "cuda_runtime")
        }
    )
    doc["traceEvents"] = doc["traceEvents"] + doc["traceEvents"]
    twice = ingest(_write(tmp_path, doc, "twice.json.gz"))
    assert twice.meta["ingest"]["duplicate_events_removed"] >= n_complete
    assert twice.ops["dur_us"].sum() == pytest.approx(original.ops["dur_us"].sum())
    assert twice.ops["flops"].sum() == pytest.approx(original.ops["flops"].sum())
    assert len(twice.ops) == len(original.ops)


def test_timestamps_near_int64_max_keep_microseconds_and_link(tmp_path):
    # 9.2e18 us: float64 steps there are 1,024 us apart. Rebasing before the float conversion keeps
    # every interval, so linking and durations are those of the original trace.
    doc = _doc(CUDA_SMALL)
    original = ingest(_write(tmp_path, doc, "plain.json.gz"))
    offset = 9_200_000_000_000_000_000
    texts = {}
    for i, event in enumerate(doc["traceEvents"]):
        if isinstance(event.get("ts"), int | float):
            whole, _, frac = repr(float(event["ts"])).partition(".")
            texts[f"@TS{i}@"] = f"{offset + int(whole)}.{frac or '0'}"
            event["ts"] = f"@TS{i}@"
    text = json.dumps(doc)
    for marker, number in texts.items():
        text = text.replace(f'"{marker}"', number)
    shifted = ingest(_write_text(tmp_path, text, "shifted.json.gz"))
    meta = shifted.meta["ingest"]
    assert meta["ts_rebased_by_us"] >= offset
    assert meta["kernels_linked_fraction"] == original.meta["ingest"]["kernels_linked_fraction"]
    assert list(shifted.ops["launch_op"]) == list(original.ops["launch_op"])
    rel = shifted.ops["start_us"] - shifted.ops["start_us"].min()
    rel0 = original.ops["start_us"] - original.ops["start_us"].min()
    np.testing.assert_allclose(rel.to_numpy(), rel0.to_numpy(), atol=1e-3)
    np.testing.assert_allclose(
        (shifted.ops["launch_start_us"] - shifted.ops["start_us"]).to_numpy(),
        (original.ops["launch_start_us"] - original.ops["start_us"]).to_numpy(),
        atol=1e-3,
    )


def test_event_lasting_1e18_us_is_refused(tmp_path, capsys):
    doc = _doc()
    _events(doc, "kernel")[0]["dur"] = 1e18
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "more than a week")


def test_negative_dims_are_refused(tmp_path, capsys):
    doc = _doc()
    op = next(e for e in _events(doc, "cpu_op") if e["name"] == "aten::addmm")
    op["args"]["Input Dims"][1][0] = -5  # the batch of addmm's input matrix
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "Input Dims", op["name"][:30])


def test_negative_byte_count_is_refused(tmp_path, capsys):
    doc = _doc("a100_alexnet_forward.json.gz")
    _events(doc, "gpu_memcpy")[0]["args"]["bytes"] = -4096
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "'bytes'", "-4096")


def test_negative_batch_size_is_refused_at_ingest(tmp_path, capsys):
    doc = _doc()
    annotation = _events(doc, "user_annotation")[0]
    doc["traceEvents"].append(
        {**annotation, "name": "archsim::learner_step#batch_size=-64", "args": {}}
    )
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "batch_size=-64", ">= 1")


def test_ingest_of_a_directory_says_so(tmp_path, capsys):
    trace_dir = save(ingest(kineto_fixture(GPU_SMALL)), tmp_path / "already")
    line = _one_line_error(capsys, tmp_path, trace_dir, "is a directory")
    assert "no such" not in line


# ---------------------------------------------------------------- damaged trace directories --------
@pytest.fixture
def saved(tmp_path) -> Path:
    return save(ingest(kineto_fixture(GPU_SMALL)), tmp_path / "t")


def _load_error(directory: Path, *needles: str) -> str:
    with pytest.raises(ArchsimError) as info:
        load(directory)
    message = str(info.value)
    assert "\n" not in message
    for needle in needles:
        assert needle in message, message
    return message


def test_meta_yaml_not_utf8(saved):
    (saved / "meta.yaml").write_bytes(b"workload:\n  name: \xff\xfe\n")
    _load_error(saved, "meta.yaml", "not UTF-8")


def test_meta_yaml_wrongly_typed_section(saved):
    (saved / "meta.yaml").write_text("format_version: 1\nworkload: x\n")
    _load_error(saved, "meta.yaml", "'workload'", "expected a mapping")


def test_meta_yaml_that_is_a_directory(saved):
    (saved / "meta.yaml").unlink()
    (saved / "meta.yaml").mkdir()
    _load_error(saved, "meta.yaml", "is not a file")


def _with_steps(saved: Path, steps: pd.DataFrame) -> None:
    steps.to_parquet(saved / "steps.parquet", index=False)


def test_steps_parquet_with_duplicated_rows(saved):
    steps = pd.DataFrame({"step_id": [0, 1], "role": ["learner"] * 2, "dur_us": [5.0, 6.0]})
    _with_steps(saved, pd.concat([steps, steps]))
    _load_error(saved, "steps.parquet", "step_id 0 appears 2 times")


def test_steps_parquet_with_an_all_nan_row(saved):
    steps = pd.DataFrame(
        {
            "step_id": [0, 1],
            "role": ["learner"] * 2,
            "dur_us": [5.0, np.nan],
            "start_us": [0.0, np.nan],
        }
    )
    _with_steps(saved, steps)
    _load_error(saved, "steps.parquet", "row 1", "no times")


def test_steps_parquet_with_negative_batch(saved):
    steps = pd.DataFrame(
        {"step_id": [0], "role": ["actor"], "dur_us": [5.0], "start_us": [0.0], "batch_size": [-64]}
    )
    _with_steps(saved, steps)
    _load_error(saved, "steps.parquet", "batch_size -64")


def test_kernels_without_any_runtime_calls_ingest_unlinked(tmp_path):
    # A GPU-only activity trace: kernels and memsets, no launches at all. Nothing is refused; every
    # GPU event is kept and counted as without a launch, and each still joins the aten::mm its
    # External id names (archsim.trace.link.ops_by_external_id), as it did through its launch.
    doc = _doc(CUDA_SMALL)
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e.get("cat") != "cuda_runtime"]
    trace = ingest(_write(tmp_path, doc))
    meta = trace.meta["ingest"]
    assert len(trace.ops) == 6 and meta["unlinked_kernels"] == 6
    assert meta["linked_to_op_by_external_id"] == 6 and (trace.ops["launch_op"] == "aten::mm").all()
    assert trace.ops["launch_start_us"].isna().all()  # no launch time is made up


def test_infinite_cpu_time_marker_is_refused(tmp_path, capsys):
    doc = json.loads(gzip.decompress(MARKED.read_bytes()))
    step = next(
        e
        for e in doc["traceEvents"]
        if str(e.get("name", "")).startswith("archsim::inference_step")
    )  # a CPU-time marker inside it, as archsim.capture records one at the end of each step
    doc["traceEvents"].append(
        {**step, "name": "archsim::cpu#us=1e400", "ts": step["ts"] + step["dur"] - 2, "dur": 1}
    )
    _one_line_error(capsys, tmp_path, _write(tmp_path, doc), "archsim::cpu#us=1e400", "finite")
