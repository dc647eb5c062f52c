"""One run's record (resolved knobs, hardware, seed, metrics) and how it is written to disk."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from typing import Any

from archsim.sim.run import SimResult


def result_record(
    result: SimResult, hw, trace_path: Path, hw_name: str, hw_set: list[str]
) -> dict[str, Any]:
    """Flat mapping: inputs first (trace, hardware, every knob resolved), then the metrics."""
    return {
        "trace": str(trace_path),
        "hw": hw_name,
        "hw_set": ";".join(hw_set),
        "sms": hw.gpu.sms if hw.gpu is not None else 0,
        **result.config.to_dict(),
        "hw_threads": hw.cpu.hw_threads,
        "path": result.engine,
        "events": result.events,
        **result.metrics,
    }


def write_metrics(directory: Path, record: dict[str, Any]) -> None:
    """metrics.json and a one-row metrics.csv with the same columns."""
    directory = Path(directory)
    (directory / "metrics.json").write_text(json.dumps(record, indent=2, sort_keys=False) + "\n")
    with open(directory / "metrics.csv", "w", newline="") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(record))
        writer.writeheader()
        writer.writerow({k: "" if v is None else v for k, v in record.items()})
