"""Bad input, round 4: a sweep.csv edited by hand or cut short. A resumed sweep names a cell that is
not its column's type, a row of the wrong width inside the file, or a point given twice, by line,
and changes nothing (it had cut such a row as a torn write, dropping every finished row after it,
or died in the Parquet stream); only the last row is taken as torn. ``archsim report`` reads the
file as a resume would, and refuses a table too large to be archsim's unread."""

from __future__ import annotations

from pathlib import Path

import pytest

from archsim.cli import main
from tests.conftest import error_line

# --- sweep.csv edited by hand ------------------------------------------------------------------

SWEEP = ["--actors", "4,8", "--inference-batch", "4", "--sim-seconds", "0.02", "--no-progress"]


@pytest.fixture(scope="module")
def finished_sweep(trace_dir, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("sweep") / "sw"
    assert main(["sweep", str(trace_dir), *SWEEP, "--out", str(out)]) == 0
    return out


def _edit_cell(lines: list[str], line: int, column: int, value: str) -> None:
    cells = lines[line].rstrip("\n").split(",")
    cells[column] = value
    lines[line] = ",".join(cells) + "\n"


@pytest.mark.parametrize(
    ("edit", "needle"),
    [
        # before: a ValueError traceback from the Parquet stream ("write to closed file")
        (lambda ls: _edit_cell(ls, 1, 3, "fast"), "line 2, column frames_per_s is 'fast'"),
        (lambda ls: _edit_cell(ls, 1, 0, "four"), "line 2, column actors is 'four'"),
        (lambda ls: _edit_cell(ls, 1, 0, "4.0"), "column actors is '4.0' (expected an integer"),
        # before: cut there as a torn write, silently dropping the finished rows after it
        (lambda ls: ls.__setitem__(1, ls[1].rstrip("\n") + ",extra\n"), "line 2 has"),
        (lambda ls: ls.__setitem__(1, ls[1].rsplit(",", 3)[0] + "\n"), "line 2 has"),
        (lambda ls: ls.__setitem__(1, '"' + ls[1]), "line 2 has 1 cells"),
        # before: resumed, and sweep.parquet held the point twice
        (lambda ls: ls.insert(2, ls[1]), "line 3 repeats the point of line 2"),
    ],
)
def test_a_hand_edited_sweep_csv_is_named_and_kept_whole(
    trace_dir, finished_sweep, tmp_path, capsys, edit, needle
):
    import shutil

    out = Path(shutil.copytree(finished_sweep, tmp_path / "sw"))
    lines = (out / "sweep.csv").read_text().splitlines(keepends=True)
    edit(lines)
    (out / "sweep.csv").write_text("".join(lines))
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert main(["sweep", str(trace_dir), *SWEEP, "--out", str(out)]) == 2
    line = error_line(capsys)
    assert str(out / "sweep.csv") in line and needle in line
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # nothing lost or added


def test_a_torn_last_row_is_still_cut_and_rerun(trace_dir, finished_sweep, tmp_path, capsys):
    import shutil

    out = Path(shutil.copytree(finished_sweep, tmp_path / "sw"))
    lines = (out / "sweep.csv").read_text().splitlines(keepends=True)
    lines[-1] = lines[-1][: len(lines[-1]) // 2]  # a crash in the middle of the last append
    (out / "sweep.csv").write_text("".join(lines))
    assert main(["sweep", str(trace_dir), *SWEEP, "--out", str(out)]) == 0
    rows = (out / "sweep.csv").read_text().splitlines()
    assert len(rows) == 3 and {r.split(",")[0] for r in rows[1:]} == {"4", "8"}


# --- report over a sweep.csv cut short or edited by hand ----------------------------------------


def _report_of_sweep(finished_sweep: Path, tmp_path: Path, edit) -> tuple[int, Path]:
    import shutil

    out = Path(shutil.copytree(finished_sweep, tmp_path / "runs" / "sw"))
    edit(out / "sweep.csv")
    page = tmp_path / "page.html"
    return main(["report", str(tmp_path / "runs"), "--out", str(page)]), page


def test_report_leaves_out_a_torn_last_row_as_a_resume_would(finished_sweep, tmp_path, capsys):
    # Before: a crash's torn last line ('x', no newline) was a ValueError traceback in knee().
    def tear(csv_path: Path) -> None:
        with open(csv_path, "a") as handle:
            handle.write("x")

    status, page = _report_of_sweep(finished_sweep, tmp_path, tear)
    assert status == 0 and page.is_file()


def test_report_names_a_sweep_cell_that_is_not_a_number(finished_sweep, tmp_path, capsys):
    def edit(csv_path: Path) -> None:
        lines = csv_path.read_text().splitlines(keepends=True)
        _edit_cell(lines, 1, 0, "four")
        csv_path.write_text("".join(lines))

    status, page = _report_of_sweep(finished_sweep, tmp_path, edit)
    assert status == 2 and not page.exists()
    assert "sweep.csv: column actors holds 'four'" in error_line(capsys)


def test_report_refuses_a_huge_table_without_reading_it(finished_sweep, tmp_path, capsys):
    # Before: a 300 MB sweep.csv took 53 s and 2.9 GB peak RSS.
    def grow(csv_path: Path) -> None:
        with open(csv_path, "ab") as handle:
            handle.truncate(2**30)

    status, page = _report_of_sweep(finished_sweep, tmp_path, grow)
    assert status == 2 and not page.exists()
    assert "over the 128 MiB cap" in error_line(capsys)
