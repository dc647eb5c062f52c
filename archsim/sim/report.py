"""One run's record (resolved knobs, hardware, seed, metrics) and how it is written to disk.

``metrics.json`` is strict JSON (RFC 8259 has no NaN or Infinity): a metric that is not a finite
number (NaN: e.g. a wait mean over no arrivals; +-inf) is written as ``null``, as an empty cell in
``metrics.csv``, so every JSON parser reads the file.
"""

from __future__ import annotations

import csv
import json
import math
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
        # per-link and per-component detail of the replay's network (archsim.sim.replay_server);
        # metrics.json only, the flat metrics above are the CSV's
        **({"network": result.network} if getattr(result, "network", None) else {}),
    }


def strict_json_value(value: Any) -> Any:
    """``value`` with every non-finite float (NaN, +-inf; numpy's too) replaced by None (null)."""
    if isinstance(value, dict):
        return {key: strict_json_value(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [strict_json_value(item) for item in value]
    if isinstance(value, float) and not math.isfinite(value):  # numpy float64 is a float
        return None
    if hasattr(value, "item") and hasattr(value, "dtype"):  # other numpy scalars
        return strict_json_value(value.item())
    return value


def write_metrics(directory: Path, record: dict[str, Any]) -> None:
    """metrics.json (strict JSON: non-finite numbers are null) and a one-row metrics.csv with the
    same columns (null is an empty cell)."""
    directory = Path(directory)
    strict = strict_json_value(record)
    text = json.dumps(strict, indent=2, sort_keys=False, allow_nan=False)
    (directory / "metrics.json").write_text(text + "\n")
    with open(directory / "metrics.csv", "w", newline="") as handle:
        flat = {k: v for k, v in strict.items() if not isinstance(v, dict)}  # nested: JSON only
        writer = csv.DictWriter(handle, fieldnames=list(flat))
        writer.writeheader()
        writer.writerow({k: "" if v is None else v for k, v in flat.items()})
