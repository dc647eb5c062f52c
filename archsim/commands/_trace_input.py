"""TRACE arguments: a trace directory (archsim.trace.load), or a raw Kineto .json/.json.gz that is
ingested on the fly (convenient for the fixtures)."""

from __future__ import annotations

from pathlib import Path

from archsim.errors import ArchsimError


def load_trace_input(path: Path):  # -> archsim.trace.format.Trace
    path = Path(path)
    if path.is_dir():
        from archsim.trace.format import load

        return load(path)
    if path.is_file() and (path.name.endswith(".json") or path.name.endswith(".json.gz")):
        from archsim.commands.ingest import ingest_with_progress

        return ingest_with_progress(path)  # a progress bar on a terminal
    if not path.exists():
        raise ArchsimError(f"{path}: no such trace directory or file")
    raise ArchsimError(f"{path}: expected a trace directory or a Kineto .json/.json.gz file")
