"""The results of a sweep on disk: ``sweep.csv`` (one row per finished point, appended and fsynced as
each batch of points finishes, so an interrupted sweep resumes where it stopped) and ``sweep.json`` (the settings
fingerprint a resumed sweep must match). Every problem with these files is one ArchsimError naming it.
"""

from __future__ import annotations

import contextlib
import csv
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from archsim.analysis.sweep_store import PARQUET_NAME, PARTIAL_PARQUET_NAME
from archsim.errors import ArchsimError

if TYPE_CHECKING:
    from archsim.analysis.sweep import SweepSpec

CSV_NAME = "sweep.csv"
# Recorded in sweep.json but not compared on resume: the same trace may be reached by another path
# (its content hash is compared instead).
INFORMATIONAL = frozenset({"trace"})
SETTINGS_NAME = "sweep.json"
# Added after format 1's first release: an older sweep.csv without it is given the column on
# resume, each value derived from its row's env_steps_per_s as the simulator defines it
# (archsim.sim.run.simulate: 1000 / env_steps_per_s).
ADDED_COLUMN = "seconds_per_1000_steps"
# The clocks a point ran at (the hardware config's cpu.boost_clock_mhz and gpu.clock_mhz, or lower
# where the power cap held the run within TDP: archsim.sim.power_cap). Added later still: an older
# sweep.csv is given them empty on resume, as its rows do not say whether a cap lowered them.
CLOCK_COLUMNS = ("cpu_boost_clock_mhz_run", "gpu_clock_mhz_run")
ADDED_COLUMNS = (ADDED_COLUMN, *CLOCK_COLUMNS)
# Metric columns of every row, after the knob columns (missing ones are left empty).
METRIC_COLUMNS = (
    "frames_per_s",
    "env_steps_per_s",
    "seconds_per_1000_steps",  # wall seconds per 1000 env steps (issue 15), both loops
    "learner_updates_per_s",
    "gpu_util",
    "gpu_sm_util",
    "cpu_util",
    "cpu_core_util_max",  # issue 15: the busiest core and the mean over cores (archsim.sim.metrics)
    "cpu_core_util_mean",
    "gpu_power_w",
    "cpu_power_w",
    "avg_power_w",
    "energy_per_mframes_j",
    "frames_per_joule",
    "actor_wait_s_per_step",
    "inference_batch_mean",
    "recorded_inference_batch_mean",  # SEED traces: the capture's own mean batch
    "inference_queue_mean",
    "inference_wait_mean_us",
    "cpu_run_queue_mean",
    "cpu_run_wait_mean_us",
    "gpu_inference_queue_mean",
    "gpu_learner_queue_mean",
    "replay_insert_wait_mean_us",
    "replay_sample_wait_mean_us",
    # issue 14 item 3 (archsim.sim.replay_server): 0 for a run without a network
    "replay_access_latency_us",
    "priority_sampling_latency_us",
    "network_bytes_per_s",
    "nic_util_max",
    "replay_server_util",
    "hw_threads",
    "sms_total",
    *CLOCK_COLUMNS,
    "path",
    "events",
    "wall_s",
)


def _older_header(header: list[str], columns: list[str]) -> bool:
    """True when ``header`` is ``columns`` less some of ADDED_COLUMNS (an earlier archsim's)."""
    return all(c in ADDED_COLUMNS for c in columns if c not in header) and header == [
        c for c in columns if c in header
    ]


def _read_text(path: Path) -> str:
    """A results file's text; one ArchsimError naming it when it is not UTF-8."""
    data = Path(path).read_bytes()
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ArchsimError(
            f"{path}: not UTF-8 text (byte {data[exc.start]:#04x} at offset {exc.start}), so not "
            "a sweep's own file (use a new --out, or --force to start over)"
        ) from None


class ResultsFile:
    """sweep.csv plus sweep.json: append one row at a time, durably; read back finished points."""

    def __init__(self, out: Path, spec: SweepSpec) -> None:
        self.out = Path(out)
        self.csv = self.out / CSV_NAME
        self.settings = self.out / SETTINGS_NAME
        self.spec = spec
        self.columns = spec.knob_names + list(METRIC_COLUMNS)

    def open(self, force: bool) -> set[tuple[str, ...]]:
        """Prepare the directory; returns the keys of points already finished (resume). A file
        that cannot be read or written is one ArchsimError naming it."""
        try:
            return self._open(force)
        except OSError as exc:
            raise ArchsimError(
                f"{exc.filename or self.out}: cannot prepare the sweep output ({exc.strerror})"
            ) from None

    def _open(self, force: bool) -> set[tuple[str, ...]]:
        from archsim.atomic import atomic_output_file

        fingerprint = self.spec.fingerprint()
        if force or self._nothing_finished():
            from archsim.analysis.sweep_store import remove_stale_streams

            self.csv.unlink(missing_ok=True)
            self.settings.unlink(missing_ok=True)
            (self.out / PARQUET_NAME).unlink(missing_ok=True)
            remove_stale_streams(self.out)
        if self.csv.exists():
            self._check_settings(fingerprint)
            return self._finished_keys()
        if self.out.is_dir() and any(self.out.iterdir()) and not force:
            stray = [p.name for p in self.out.iterdir() if p.name != SETTINGS_NAME]
            if stray:
                raise ArchsimError(
                    f"{self.out}: output directory holds no {CSV_NAME} to resume but is not empty "
                    "(use --force to replace it, or a new --out)"
                )
        self.out.mkdir(parents=True, exist_ok=True)
        with atomic_output_file(self.settings) as handle:
            json.dump(fingerprint, handle, indent=2)
        with atomic_output_file(self.csv) as handle:
            csv.writer(handle).writerow(self.columns)
        return set()

    def _check_settings(self, fingerprint: dict[str, Any]) -> None:
        if not self.settings.exists():
            raise ArchsimError(
                f"{self.csv}: no {SETTINGS_NAME} beside it, so it cannot be resumed safely "
                "(use --force to start over, or a new --out)"
            )
        try:
            stored = json.loads(_read_text(self.settings))
        except (json.JSONDecodeError, RecursionError):  # RecursionError: [[[[... too deep
            raise ArchsimError(f"{self.settings}: not valid JSON") from None
        if not isinstance(stored, dict):
            raise ArchsimError(
                f"{self.settings}: expected a JSON object of the sweep's settings, got "
                f"{type(stored).__name__} (use a new --out, or --force to start over)"
            )
        for key, value in fingerprint.items():
            if key in INFORMATIONAL:
                continue
            old = stored.get(key)
            if key == "trace_sha256" and old != value:
                raise ArchsimError(
                    f"{self.csv}: was written by a sweep of another trace: the tables of "
                    f"{self.spec.trace} differ from those of {stored.get('trace')} that it ran on "
                    "(use a new --out, or --force to start over)"
                )
            if isinstance(value, dict) and isinstance(old, dict) and old != value:
                name = next(k for k in sorted({*old, *value}) if old.get(k) != value.get(k))
                raise ArchsimError(
                    f"{self.csv}: was written by a sweep with different settings: fixed knob "
                    f"{name} was {old.get(name, 'not set')!r}, now {value.get(name, 'not set')!r} "
                    "(use a new --out, or --force to start over)"
                )
            if old != value:
                raise ArchsimError(
                    f"{self.csv}: was written by a sweep with different settings: {key} was "
                    f"{stored.get(key)!r}, now {value!r} (use a new --out, or --force to start over)"
                )

    def _finished_keys(self) -> set[tuple[str, ...]]:
        """Keys of complete rows; a torn last line (a crash mid-write) is cut off."""
        lines = _read_text(self.csv).splitlines(keepends=True)
        if not lines:
            raise ArchsimError(f"{self.csv}: empty file (expected a header row)")
        header = next(csv.reader([lines[0]]))
        if header != self.columns and _older_header(header, self.columns):
            lines = self._add_column(lines, header)
            header = self.columns
        if header != self.columns:
            at = next(
                (i for i, (a, b) in enumerate(zip(header, self.columns, strict=False)) if a != b),
                min(len(header), len(self.columns)),
            )
            found = repr(header[at]) if at < len(header) else "nothing"
            wanted = repr(self.columns[at]) if at < len(self.columns) else "nothing"
            raise ArchsimError(
                f"{self.csv}: header column {at + 1} is {found} where this sweep writes {wanted} "
                "(use a new --out, or --force to start over)"
            )
        keep = [lines[0]]
        keys: dict[tuple[str, ...], int] = {}
        key_at = [self.columns.index(name) for name in sorted(self.spec.knob_names)]
        kinds = self._column_kinds()
        for number, line in enumerate(lines[1:], start=2):
            row = next(csv.reader([line]), [])
            if len(row) != len(self.columns) or not line.endswith("\n"):
                if number == len(lines):
                    break  # torn write of the last row: everything before it is intact
                # Rows are appended whole, so only the last can be torn: a bad row inside the file
                # was edited, and cutting there (as before) dropped every finished row after it.
                raise ArchsimError(
                    f"{self.csv}: line {number} has {len(row)} cells where this sweep writes "
                    f"{len(self.columns)} (use a new --out, or --force to start over)"
                )
            self._check_cells(number, row, kinds)
            key = tuple(row[at] for at in key_at)
            if key in keys:
                raise ArchsimError(
                    f"{self.csv}: line {number} repeats the point of line {keys[key]} "
                    "(use a new --out, or --force to start over)"
                )
            keep.append(line)
            keys[key] = number
        if len(keep) != len(lines):
            from archsim.atomic import atomic_output_file

            with atomic_output_file(self.csv) as handle:
                handle.write("".join(keep))
        return set(keys)

    def _column_kinds(self) -> list[str]:
        from archsim.analysis.sweep_store import column_types

        types = column_types(self.spec.knobs, tuple(self.columns[len(self.spec.knob_names) :]))
        return [types[name] for name in self.columns]

    def _check_cells(self, number: int, row: list[str], kinds: list[str]) -> None:
        """Each cell parses as its column's type (empty is a missing value), as the Parquet table
        built from these rows needs: a hand-edited 'fast' was a ValueError traceback there."""
        for column, cell, kind in zip(self.columns, row, kinds, strict=True):
            if cell == "" or kind == "string":
                continue
            try:
                int(cell) if kind == "int64" else float(cell)
            except ValueError:
                expected = "an integer" if kind == "int64" else "a number"
                raise ArchsimError(
                    f"{self.csv}: line {number}, column {column} is {cell[:40]!r} (expected "
                    f"{expected}; use a new --out, or --force to start over)"
                ) from None

    def _add_column(self, lines: list[str], old: list[str]) -> list[str]:
        """An older sweep.csv's lines (header ``old``) with the ADDED_COLUMNS it lacks added
        (rewritten in place, atomically): ``seconds_per_1000_steps`` derived, the clocks empty; a
        torn last line is left for the caller to cut."""
        import io

        from archsim.atomic import atomic_output_file

        steps_at = old.index("env_steps_per_s")
        buffer = io.StringIO()
        writer = csv.writer(buffer)
        writer.writerow(self.columns)
        new_lines = [buffer.getvalue()]
        for line in lines[1:]:
            row = next(csv.reader([line]), [])
            if len(row) != len(old) or not line.endswith("\n"):
                new_lines.append(line)  # torn: cut by the caller
                continue
            try:
                steps_per_s = float(row[steps_at])
                value = repr(1000.0 / steps_per_s if steps_per_s > 0 else float("inf"))
            except ValueError:
                value = ""  # no env_steps_per_s in that row: left empty like any missing metric
            cells = dict.fromkeys(CLOCK_COLUMNS, "") | dict(zip(old, row, strict=True))
            cells.setdefault(ADDED_COLUMN, value)
            buffer = io.StringIO()
            csv.writer(buffer).writerow([cells[c] for c in self.columns])
            new_lines.append(buffer.getvalue())
        with atomic_output_file(self.csv) as handle:
            handle.write("".join(new_lines))
        return new_lines

    def _nothing_finished(self) -> bool:
        """A sweep killed before its first point finished: only its own files, no data row.
        Nothing is lost by starting it over, whatever its settings were."""
        if not self.csv.is_file() or self.finished_rows() > 0:
            return False
        own = {CSV_NAME, SETTINGS_NAME, PARQUET_NAME, PARTIAL_PARQUET_NAME}
        return all(
            p.name in own or p.name.startswith(f".{PARQUET_NAME}.tmp-") for p in self.out.iterdir()
        )

    def finished_rows(self) -> int:
        """Complete data rows in sweep.csv (0 when it is missing or holds only its header)."""
        if not self.csv.is_file():
            return 0
        lines = _read_text(self.csv).splitlines(keepends=True)
        return sum(1 for line in lines[1:] if line.endswith("\n"))

    def remove(self, remove_dir: bool) -> None:
        """Remove sweep.csv and sweep.json (a sweep that finished no point), and with
        ``remove_dir`` the output directory too when nothing else is in it."""
        from archsim.analysis.sweep_store import remove_stale_streams

        self.csv.unlink(missing_ok=True)
        self.settings.unlink(missing_ok=True)
        remove_stale_streams(self.out)
        if remove_dir:
            with contextlib.suppress(OSError):
                self.out.rmdir()  # fails unless empty: never removes anything else

    def append(self, rows: list[dict[str, Any]]) -> None:
        """Append finished rows with one write and one fsync (a batch of points at a time)."""
        if not rows:
            return
        try:
            with open(self.csv, "a", newline="") as handle:
                writer = csv.DictWriter(handle, fieldnames=self.columns, extrasaction="ignore")
                writer.writerows(rows)
                handle.flush()
                os.fsync(handle.fileno())
        except OSError as exc:  # a full disk: named, and the rows before these stay whole
            raise ArchsimError(f"{self.csv}: cannot append results ({exc.strerror})") from None

    def rows(self) -> Iterator[dict[str, str]]:
        """The finished rows as text, one at a time (to stream them into Parquet on resume)."""
        with open(self.csv, newline="", encoding="utf-8") as handle:
            yield from csv.DictReader(handle)

    def read(self):
        import pandas as pd

        return pd.read_csv(self.csv)
