"""Bad input, round 4: a Dask ``--scheduler`` address that Dask cannot parse is one line before any
work (it was a ValueError traceback); YAML inputs (hardware config, calibration, meta.yaml) and
archsim's JSON files (metrics.json, measurements.json) are read no further than their caps, so a
huge or endless file (a sparse GiB file, /dev/zero) is refused in bounded memory, and a directory,
FIFO or device is named instead of blocking on open or being called missing; a NaN or Infinity in
metrics.json is refused; a write that fails on a full disk names the output and keeps the old one;
an empty --source-hw, a workload archsim.capture could not save, a trace table that is not a file.
One line, exit 2, no traceback, nothing written. sweep.csv: test_bad_input_round4_sweep.py."""

from __future__ import annotations

import os
import re
import tracemalloc
from pathlib import Path

import pytest

from archsim.cli import main
from tests.conftest import error_line

# --- sweep --scheduler -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("address", "needle"),
    [
        ("tcp://[::1", "Invalid IPv6 URL"),
        ("tcp://host:notaport", "Port could not be cast"),
        ("tcp://host:99999", "out of range"),
        ("tcp://host", "tcp://HOST:PORT"),
        ("tcp://:8786", "tcp://HOST:PORT"),
    ],
)
def test_a_scheduler_address_dask_cannot_parse_is_one_line(
    trace_dir, tmp_path, capsys, address, needle
):
    # Before: "tcp://[::1" and "tcp://host:notaport" reached distributed.Client, a ValueError
    # traceback (exit 1).
    out = tmp_path / "sw"
    argv = ["sweep", str(trace_dir), "--actors", "4,8", "--sim-seconds", "0.02", "--no-progress"]
    argv += ["--backend", "dask", f"--scheduler={address}", "--out", str(out)]
    assert main(argv) == 2
    line = error_line(capsys)
    assert "--scheduler" in line and needle in line
    assert list(tmp_path.iterdir()) == []


# --- YAML inputs that are not regular files, or far too large ---------------------------------


def _not_regular_files(tmp_path: Path) -> list[tuple[Path, str]]:
    folder = tmp_path / "folder.yaml"
    folder.mkdir()
    fifo = tmp_path / "fifo.yaml"
    os.mkfifo(fifo)  # open() would wait for a writer that never comes
    zero = tmp_path / "zero.yaml"
    zero.symlink_to("/dev/zero")  # read() never ends
    return [(folder, "is a directory"), (fifo, "FIFO"), (zero, "FIFO, device")]


def test_a_hardware_config_that_is_not_a_regular_file_is_named(tmp_path, capsys):
    # Before: a folder or FIFO was "hardware config file does not exist".
    for path, needle in _not_regular_files(tmp_path):
        assert main(["hw", "show", str(path)]) == 2
        line = error_line(capsys)
        assert str(path) in line and needle in line and "does not exist" not in line


def test_a_calibration_that_is_not_a_regular_file_is_named(trace_dir, tmp_path, capsys):
    # Before: a FIFO blocked forever and /dev/zero grew memory without end.
    for path, needle in _not_regular_files(tmp_path):
        assert (
            main(["predict", str(trace_dir), "--hw", "dgx1-v100", "--calibration", str(path)]) == 2
        )
        line = error_line(capsys)
        assert str(path) in line and needle in line


def test_a_huge_yaml_input_is_refused_without_reading_it(trace_dir, tmp_path, capsys):
    # A sparse 1 GiB file: read_text took 2 GiB before its size was checked (512 MiB: 1.1 GB RSS).
    huge = tmp_path / "huge.yaml"
    with open(huge, "wb") as handle:
        handle.truncate(2**30)
    tracemalloc.start()
    try:
        assert main(["hw", "show", str(huge)]) == 2
        assert main(["predict", str(trace_dir), "--hw", "t4", "--calibration", str(huge)]) == 2
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_bytes < 64 * 2**20
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 2 and all("MiB of text, over the 1 MiB" in line for line in lines)
    # said as a size, not as bad YAML (it read "not valid YAML (2.0 MiB of text, ...)")
    assert all("too large to read" in line and "not valid YAML" not in line for line in lines)


def test_a_huge_meta_yaml_is_refused_without_reading_it(trace_dir, tmp_path, capsys):
    import shutil

    copy = tmp_path / "t"
    shutil.copytree(trace_dir, copy)
    with open(copy / "meta.yaml", "ab") as handle:
        handle.truncate(2**30)
    assert main(["trace", "info", str(copy)]) == 2
    line = error_line(capsys)
    assert "meta.yaml" in line and "MiB of text, over the 1 MiB" in line
    assert "too large to read" in line


def test_a_yaml_input_that_is_not_utf8_still_names_the_byte_at_its_file_offset(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_bytes(b"name: x\n" + b"# " + b"a" * 20_000 + b"\n\xff\n")
    assert main(["hw", "show", str(config)]) == 2
    line = error_line(capsys)
    assert "byte 0xff at offset 20011" in line


# --- metrics.json edited by hand, or not a small regular file ---------------------------------


@pytest.fixture(scope="module")
def simulation(trace_dir, tmp_path_factory) -> Path:
    """A finished simulation A; each test compares it with an edited copy B."""
    root = tmp_path_factory.mktemp("sims")
    argv = ["simulate", str(trace_dir), "--actors", "4", "--inference-batch", "4"]
    assert main([*argv, "--sim-seconds", "0.02", "--out", str(root / "a")]) == 0
    return root / "a"


@pytest.mark.parametrize(
    ("value", "needle"),
    [
        ("NaN", "NaN is not JSON"),
        ("-Infinity", "-Infinity is not JSON"),
        ("1e400", "1e400 is not a finite number"),
    ],
)
def test_a_metrics_json_with_a_non_finite_number_is_refused(
    simulation, tmp_path, capsys, value, needle
):
    # Before: accepted, and `compare --json` printed Infinity (not JSON) in its rows.
    import shutil

    a = simulation
    b = Path(shutil.copytree(a, tmp_path / "b"))
    text = (b / "metrics.json").read_text()
    (b / "metrics.json").write_text(text.replace('"actors": 4', f'"actors": {value}', 1))
    assert main(["compare", str(a), str(b), "--json"]) == 2
    line = error_line(capsys)
    assert str(b / "metrics.json") in line and needle in line


def test_a_huge_metrics_json_is_refused_without_reading_it(simulation, tmp_path, capsys):
    # Before: a 600 MB metrics.json took 1.3 GB peak RSS before json.loads refused it.
    import shutil

    a = simulation
    b = Path(shutil.copytree(a, tmp_path / "b"))
    with open(b / "metrics.json", "ab") as handle:
        handle.truncate(2**30)
    tracemalloc.start()
    try:
        assert main(["compare", str(a), str(b)]) == 2
        peak_bytes = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak_bytes < 64 * 2**20
    assert "over 16 MiB" in error_line(capsys)


# --- a full disk --------------------------------------------------------------------------------


def _archsim_with_file_size_limit(argv: list[str], limit_bytes: int):
    """Run archsim in a process whose files may not grow past ``limit_bytes``: each write past it
    fails with EFBIG, as one on a full disk fails with ENOSPC (no root, no mount needed)."""
    import resource
    import signal
    import subprocess
    import sys

    def limit() -> None:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the writer
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))

    return subprocess.run(
        [sys.executable, "-m", "archsim", *argv],
        preexec_fn=limit,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_write_that_fails_names_the_output_and_keeps_the_old_one(trace_dir, tmp_path):
    # Before: "archsim: error: File too large" (or "No space left on device") naming no file.
    import shutil

    old = Path(shutil.copytree(trace_dir, tmp_path / "old"))  # any finished output will do
    before = {p.name: p.read_bytes() for p in old.iterdir()}
    argv = ["simulate", str(trace_dir), "--actors", "4", "--inference-batch", "4"]
    argv += ["--sim-seconds", "0.02", "--timeline", "--force", "--out", str(old)]
    done = _archsim_with_file_size_limit(argv, 4096)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"archsim: error: {old}/"), lines
    assert "cannot write the output" in lines[0] and ".tmp-" not in lines[0]
    assert {p.name: p.read_bytes() for p in old.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["old"]  # no temporary left


def test_ingest_onto_a_full_disk_blames_the_output_not_the_input(tmp_path):
    # Before: "<the Kineto file>: No space left on device", naming the input it copied.
    from tests.conftest import PROJECT_ROOT

    source = PROJECT_ROOT / "tests" / "data" / "kineto_h100_cuda_sync_2026.json.gz"
    out = tmp_path / "ing"
    done = _archsim_with_file_size_limit(["ingest", str(source), "--out", str(out)], 1024)
    assert done.returncode == 2, done.stderr
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith(f"archsim: error: {out}"), lines
    assert str(source) not in lines[0]
    assert list(tmp_path.iterdir()) == []


# --- small things ---------------------------------------------------------------------------------


@pytest.mark.parametrize("command", ["predict", "breakdown", "calibrate"])
@pytest.mark.parametrize("value", ["", "  "])
def test_an_empty_source_hw_is_refused_not_taken_as_absent(
    trace_dir, tmp_path, capsys, command, value
):
    # Before: `--source-hw ""` was read as not given and the trace's own GPU used without a word.
    with pytest.raises(SystemExit) as stop:
        main([command, str(trace_dir), f"--source-hw={value}", "--out", str(tmp_path / "o")])
    assert stop.value.code == 2
    line = error_line(capsys)
    assert "--source-hw" in line and "is empty" in line
    assert list(tmp_path.iterdir()) == []


def test_a_kineto_file_with_a_byte_order_mark_reads_like_one_without(tmp_path, capsys):
    # Before: "not JSON (Expecting value)"; RFC 8259 lets a reader skip the mark.
    import gzip

    from tests.conftest import PROJECT_ROOT

    text = gzip.decompress(
        (PROJECT_ROOT / "tests" / "data" / "kineto_h100_cuda_sync_2026.json.gz").read_bytes()
    )
    (tmp_path / "plain").mkdir()
    (tmp_path / "marked").mkdir()
    plain, marked = tmp_path / "plain" / "t.json", tmp_path / "marked" / "t.json"
    plain.write_bytes(text)
    marked.write_bytes(b"\xef\xbb\xbf" + text)
    assert main(["trace", "info", str(plain), "--json"]) == 0
    expected = capsys.readouterr().out.replace(str(plain), "")
    assert main(["trace", "info", str(marked), "--json"]) == 0
    assert capsys.readouterr().out.replace(str(marked), "") == expected


@pytest.mark.parametrize(
    ("workload", "needle"),
    [
        ([1, 2], "workload_meta is list (expected a mapping"),
        ({"name": 5, "settings": {}}, "workload_meta['name'] is 5"),
        ({"name": "x", "settings": [1]}, "workload_meta['settings'] is not a mapping"),
        ({"name": "x", "settings": {"a": object()}}, "a value meta.yaml cannot store"),
    ],
)
def test_capture_refuses_a_workload_it_could_not_save_before_the_loop_runs(
    tmp_path, workload, needle
):
    # Before: a list or object() was a TypeError/RepresenterError after the whole loop had run
    # (nothing saved); a name of 5 was saved, and every command then refused the trace.
    import archsim
    from archsim.errors import ArchsimError

    ran = []
    refused = pytest.raises(ArchsimError, match=re.escape(needle))
    with refused, archsim.capture(tmp_path / "cap", workload):
        ran.append(True)
    assert ran == [] and list(tmp_path.iterdir()) == []


def test_validate_from_a_measurements_file_that_is_huge_or_a_fifo_is_one_line(tmp_path, capsys):
    # Before: a FIFO blocked read_text forever; a 1 GiB file was read whole (2 GiB) first.
    earlier = tmp_path / "earlier"
    earlier.mkdir()
    measurements = earlier / "measurements.json"
    with open(measurements, "wb") as handle:
        handle.truncate(2**30)
    argv = ["validate", "--from", str(earlier), "--out", str(tmp_path / "v")]
    assert main(argv) == 2
    assert "over 16 MiB" in error_line(capsys)
    measurements.unlink()
    os.mkfifo(measurements)
    assert main(argv) == 2
    assert f"{measurements}: not a regular file" in error_line(capsys)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["earlier"]


@pytest.mark.parametrize("table", ["ops.parquet", "steps.parquet"])
def test_a_trace_table_that_is_not_a_file_is_named(trace_dir, tmp_path, capsys, table):
    # Before: a FIFO or device was "not a readable Parquet table (FileNotFoundError)", a folder
    # was read as an empty dataset ("has no op_id ... column").
    import shutil

    for kind in ("fifo", "folder"):
        copy = Path(shutil.copytree(trace_dir, tmp_path / kind))
        (copy / table).unlink()
        os.mkfifo(copy / table) if kind == "fifo" else (copy / table).mkdir()
        assert main(["trace", "info", str(copy)]) == 2
        assert f"{copy / table}: is not a file" in error_line(capsys)


def test_a_path_the_system_refuses_is_one_line_even_with_a_newline_in_it(capsys):
    # Before: the last-resort OSError line echoed the name's newline: two lines on stderr.
    name = "a" * 300 + "\nb" * 2 + ".yaml"  # a component past NAME_MAX: File name too long
    assert main(["hw", "show", name]) == 2
    assert "File name too long" in error_line(capsys)
