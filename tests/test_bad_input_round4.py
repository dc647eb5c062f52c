"""Bad input, round 4: a Dask ``--scheduler`` address that Dask cannot parse is one line before any
work (it was a ValueError traceback); a YAML input (hardware config, calibration overlay, meta.yaml)
is read no further than its 1 MiB cap, so a huge or endless file (a sparse GiB file, /dev/zero) is
refused in bounded memory, and a directory, FIFO or device is named as such instead of blocking on
open or being called missing. One line, exit 2, no traceback, nothing written."""

from __future__ import annotations

import os
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


def test_a_huge_meta_yaml_is_refused_without_reading_it(trace_dir, tmp_path, capsys):
    import shutil

    copy = tmp_path / "t"
    shutil.copytree(trace_dir, copy)
    with open(copy / "meta.yaml", "ab") as handle:
        handle.truncate(2**30)
    assert main(["trace", "info", str(copy)]) == 2
    line = error_line(capsys)
    assert "meta.yaml" in line and "MiB of text, over the 1 MiB" in line


def test_a_yaml_input_that_is_not_utf8_still_names_the_byte_at_its_file_offset(tmp_path, capsys):
    config = tmp_path / "bad.yaml"
    config.write_bytes(b"name: x\n" + b"# " + b"a" * 20_000 + b"\n\xff\n")
    assert main(["hw", "show", str(config)]) == 2
    line = error_line(capsys)
    assert "byte 0xff at offset 20011" in line
