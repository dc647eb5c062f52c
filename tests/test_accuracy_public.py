"""docs/ACCURACY.md's "Public traces beyond the fixtures" (benchmarks/accuracy_public.py): every real
GPU capture under tests/data gets a row with a finite model-only error, every other tests/data trace
with GPU events is named as not compared, and the committed page holds the rows."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

from archsim.errors import ArchsimError
from archsim.trace.ingest import ingest

ROOT = Path(__file__).resolve().parents[1]


def _load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


table = _load("accuracy_table")
public = _load("accuracy_public")
# "| trace | provenance | GPU config | ops | shapes | measured ms | model ms | error | ..."
_ROW = re.compile(r"^\| (\S+\.json\.gz) \|(?:[^|]*\|){6} ([+-]\d+\.\d)% \|")


def _rows(lines: list[str]) -> dict[str, float]:
    start = lines.index("## Public traces beyond the fixtures")
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    return {m[1]: float(m[2]) for line in lines[start:end] if (m := _ROW.match(line))}


def test_section_lists_each_real_capture_with_a_finite_error():
    rows = _rows(public.public_section(table.fixture_frame, table.fixture_row))
    assert set(rows) == set(public.PUBLIC) and len(rows) == 5
    for name, error in rows.items():
        assert -100.0 < error < 1000.0, name


def test_every_tests_data_trace_with_gpu_events_is_rated_or_named():
    gpu = set()
    for path in sorted(public.PUBLIC_DIR.glob("*.json.gz")):
        try:
            ops = ingest(path).ops
        except ArchsimError:
            continue  # refused: not a torch.profiler trace
        if (ops["kind"].astype(str) != "cpu").any():
            gpu.add(path.name)
    assert gpu == set(public.PUBLIC) | set(public.NOT_REAL)
    assert not set(public.PUBLIC) & set(public.NOT_REAL)


def test_committed_page_holds_the_rows():
    lines = (ROOT / "docs" / "ACCURACY.md").read_text().splitlines()
    rows = _rows(lines)
    assert set(rows) == set(public.PUBLIC)
    # the goals stay stated over the fixtures: no public row is judged
    start = lines.index("## Public traces beyond the fixtures")
    rows_text = [
        line for line in lines[start:] if _ROW.match(line) and line.split(" | ")[0][2:] in rows
    ]
    assert all("| n/a (out of sample) |" in line for line in rows_text) and len(rows_text) == 5


@pytest.mark.parametrize("name", sorted(public.PUBLIC))
def test_public_rows_are_out_of_sample(name):
    frame, hw = table.fixture_frame(name, public.PUBLIC_DIR)
    row = table.fixture_row(name, "p", frame, hw, "nothing (out of sample)", False)
    assert "| n/a (out of sample) |" in row and row.endswith("nothing (out of sample) |")
