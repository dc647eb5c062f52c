"""The normalized trace: a directory of ``meta.yaml``, ``ops.parquet``, ``steps.parquet`` and the raw
Kineto JSON.gz it came from. ``load(save(t)) == t``.
"""

from __future__ import annotations

import dataclasses
import gzip
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from archsim.atomic import atomic_output_dir
from archsim.errors import ArchsimError
from archsim.trace.schema import FORMAT_VERSION, OPS_COLUMNS, STEPS_COLUMNS, conform

META_FILE = "meta.yaml"
OPS_FILE = "ops.parquet"
STEPS_FILE = "steps.parquet"
RAW_FILE = "raw_trace.json.gz"


@dataclasses.dataclass
class Trace:
    """A parsed-once trace. ``meta`` is plain YAML-able data; ``ops``/``steps`` follow trace.schema."""

    meta: dict[str, Any]
    ops: pd.DataFrame
    steps: pd.DataFrame
    raw_path: Path | None = None  # the raw Kineto JSON(.gz), when known

    def __post_init__(self) -> None:
        self.ops = conform(self.ops, OPS_COLUMNS)
        self.steps = conform(self.steps, STEPS_COLUMNS)
        self.meta.setdefault("format_version", FORMAT_VERSION)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Trace):
            return NotImplemented
        return (
            self.meta == other.meta
            and self.ops.equals(other.ops)
            and self.steps.equals(other.steps)
        )


def save(trace: Trace, out: Path, force: bool = False) -> Path:
    """Write ``trace`` to directory ``out`` atomically (temporary directory, then rename)."""
    out = Path(out)
    with atomic_output_dir(out, force=force) as tmp:
        meta = dict(trace.meta)
        meta["format_version"] = FORMAT_VERSION
        if trace.raw_path is not None:
            _copy_gzipped(Path(trace.raw_path), tmp / RAW_FILE)
            meta["raw_trace"] = RAW_FILE
        (tmp / META_FILE).write_text(yaml.safe_dump(meta, sort_keys=False))
        trace.ops.to_parquet(tmp / OPS_FILE, index=False)
        trace.steps.to_parquet(tmp / STEPS_FILE, index=False)
    trace.meta = meta
    trace.raw_path = out / RAW_FILE if (out / RAW_FILE).exists() else None
    return out


def _copy_gzipped(source: Path, target: Path) -> None:
    """Copy the raw trace: gzip input byte for byte, plain JSON gzip-compressed at level 1 (the
    default level 9 took about a third of the ingest time of a 313 MB trace, issue 13; level 1 is
    several times faster for a larger file)."""
    with open(source, "rb") as handle:
        is_gzip = handle.read(2) == b"\x1f\x8b"
    if is_gzip:
        shutil.copyfile(source, target)
        return
    with open(source, "rb") as src, gzip.open(target, "wb", compresslevel=1) as dst:
        shutil.copyfileobj(src, dst, 1 << 20)


# Columns every trace has had since format version 1 (later columns are filled when absent): a table
# without them is not this table (e.g. steps.parquet copied over ops.parquet).
CORE_COLUMNS = {
    OPS_FILE: ("op_id", "kind", "name", "phase", "dur_us"),
    STEPS_FILE: ("step_id", "role", "dur_us"),
}


def _checked_table(
    path: Path, table: pd.DataFrame, columns: dict[str, tuple[str, object]], core: tuple[str, ...]
) -> pd.DataFrame:
    """``table`` conformed to the schema; a missing core column or an uncastable one is an error."""
    missing = [name for name in core if name not in table.columns]
    if missing:
        raise ArchsimError(f"{path}: has no {', '.join(missing)} column (not a trace table?)")
    try:
        return conform(table, columns)
    except (TypeError, ValueError):
        for name, spec in columns.items():
            if name in table.columns:
                try:
                    conform(table[[name]], {name: spec})
                except (TypeError, ValueError):
                    raise ArchsimError(
                        f"{path}: column {name} holds {table[name].dtype} values that are not "
                        f"{spec[0]}"
                    ) from None
        raise


# meta.yaml sections that every consumer reads as mappings (`workload: x` would fail far away).
_META_MAPPINGS = ("workload", "source", "capture", "ingest")


def _check_meta(path: Path, meta: dict[str, Any]) -> None:
    for key in _META_MAPPINGS:
        if key in meta and not isinstance(meta[key], dict):
            raise ArchsimError(
                f"{path}: '{key}' is {type(meta[key]).__name__} {str(meta[key])[:40]!r} "
                "(expected a mapping)"
            )
    workload = meta.get("workload", {})
    if "name" in workload and not isinstance(workload["name"], str | type(None)):
        raise ArchsimError(f"{path}: 'workload.name' is not a string")
    if "settings" in workload and not isinstance(workload["settings"], dict | type(None)):
        raise ArchsimError(f"{path}: 'workload.settings' is not a mapping")
    from archsim.trace.meta_checks import check_meta_fields

    check_meta_fields(path, meta)


def _check_steps(path: Path, steps: pd.DataFrame) -> None:
    """One row per step, each with some recorded time, no negative durations, batches >= 1."""
    dup = steps["step_id"].duplicated()
    if dup.any():
        raise ArchsimError(
            f"{path}: step_id {int(steps['step_id'][dup].iloc[0])} appears "
            f"{int((steps['step_id'] == steps['step_id'][dup].iloc[0]).sum())} times "
            "(expected one row per step)"
        )
    timed = [c for c in steps.columns if c.endswith("_us")]
    empty = steps[timed].isna().all(axis=1).to_numpy()
    if empty.any():
        row = int(np.flatnonzero(empty)[0])
        raise ArchsimError(
            f"{path}: row {row} (step_id {int(steps['step_id'].iloc[row])}) has no times at all "
            "(every *_us column is NaN)"
        )
    # every duration, wall or CPU time
    _check_finite_nonnegative(
        path, steps, [c for c in timed if c != "start_us"], "a finite duration >= 0"
    )
    _check_finite_times(path, steps, ("start_us",))
    low = steps["batch_size"] < 1
    if low.any():
        row = int(np.flatnonzero(low.to_numpy())[0])
        raise ArchsimError(
            f"{path}: row {row} has batch_size {int(steps['batch_size'].iloc[row])} (expected >= 1)"
        )


def _check_finite_nonnegative(
    path: Path, table: pd.DataFrame, columns, expected: str, negative_ok: bool = False
) -> None:
    """The first row of ``table`` whose value in one of ``columns`` is infinite or (unless
    ``negative_ok``: timestamps) negative, as an error naming the row, column and value (NaN: not
    recorded, allowed)."""
    for column in columns:
        values = table[column].to_numpy(dtype=np.float64)
        bad = np.isinf(values) if negative_ok else (values < 0) | np.isinf(values)
        if bad.any():
            row = int(np.flatnonzero(bad)[0])
            raise ArchsimError(
                f"{path}: row {row} has {column} {values[row]} (expected {expected})"
            )


def _check_ops(path: Path, ops: pd.DataFrame) -> None:
    """Measured times and counted work are never negative or infinite (NaN: not recorded)."""
    _check_finite_nonnegative(
        path,
        ops,
        ("dur_us", "launch_dur_us", "flops", "bytes_read", "bytes_written"),
        "a finite number >= 0",
    )
    _check_finite_times(path, ops, ("start_us", "launch_start_us"))
    _check_dtypes(path, ops)
    _check_shape_depth(path, ops)
    for column in ("grid_x", "grid_y", "grid_z", "block_x", "block_y", "block_z"):
        low = ops[column].to_numpy() < 0  # 0: not recorded
        if low.any():
            row = int(np.flatnonzero(low)[0])
            raise ArchsimError(
                f"{path}: row {row} has {column} {int(ops[column].iloc[row])} (expected >= 0)"
            )


def known_dtypes() -> frozenset[str]:
    """Element types an op may carry: ingest's (archsim.trace.flops.TENSOR_TYPES), the kernel
    model's byte table (archsim.perf.blocks.DTYPE_BYTES), torch's spelling of both, and ""."""
    from archsim.perf.blocks import DTYPE_BYTES
    from archsim.trace.flops.args import TENSOR_TYPES

    names = {name for name, _ in TENSOR_TYPES.values()} | set(DTYPE_BYTES)
    return frozenset({"", *names, *(f"torch.{name}" for name in names)})


def _check_dtypes(path: Path, ops: pd.DataFrame) -> None:
    """A dtype the model does not know would be priced at 4 B an element and printed as given
    ('float13', or a 5,000-character string, in predict and trace info)."""
    if "dtype" not in ops.columns or ops.empty:
        return
    values = ops["dtype"].astype("string").fillna("")
    unknown = ~values.isin(known_dtypes()).to_numpy(dtype=bool)
    if unknown.any():
        row = int(np.flatnonzero(unknown)[0])
        raise ArchsimError(
            f"{path}: row {row} has dtype {str(values.iloc[row])[:40]!r} (expected an element "
            "type such as float32, float16, bfloat16, int64, or empty)"
        )


# Shapes, strides and types are JSON lists the kernel model parses (json.loads) per op: a tensor
# list's shapes are 3 deep ([[[2, 3], [4]]]); 32 is far past any, and far below the recursion limit.
MAX_SHAPE_DEPTH = 32
_BRACKETS_ONLY = str.maketrans("", "", "".join(chr(c) for c in range(128) if chr(c) not in "[]"))


def _check_shape_depth(path: Path, ops: pd.DataFrame) -> None:
    """``[[[[...`` in a shape column would be a RecursionError traceback in the kernel model."""
    for column in ("input_dims", "input_strides", "input_types"):
        if column not in ops.columns:
            continue
        text = ops[column].astype("string").fillna("")
        maybe = (text.str.count(r"\[") > MAX_SHAPE_DEPTH).to_numpy(dtype=bool)  # rare: scan those
        for row in np.flatnonzero(maybe):
            depth = deepest = 0
            for char in str(text.iloc[row]).translate(_BRACKETS_ONLY):
                depth += 1 if char == "[" else -1 if char == "]" else 0
                deepest = max(deepest, depth)
                if deepest > MAX_SHAPE_DEPTH:
                    break
            if deepest > MAX_SHAPE_DEPTH:
                raise ArchsimError(
                    f"{path}: row {int(row)} has {column} nested more than {MAX_SHAPE_DEPTH} "
                    "deep (expected JSON lists of shapes)"
                )


def _check_finite_times(path: Path, table: pd.DataFrame, columns: tuple[str, ...]) -> None:
    """Timestamps may be any finite number (NaN: not recorded), never infinite."""
    _check_finite_nonnegative(path, table, columns, "a finite timestamp", negative_ok=True)


def check_trace(path: Path, trace: Trace) -> None:
    """The checks ``load`` makes, on a trace made in memory (a Kineto file ingested on the fly or
    before saving), so that what ingest writes always loads; errors name ``path`` and, for the
    GPU's SM count, the file's own ``deviceProperties[i].numSms``."""
    from archsim.errors import name_trace_in_errors
    from archsim.hw.arch_table import check_sm_count

    props = ((trace.meta or {}).get("source") or {}).get("device_properties")
    with name_trace_in_errors(path):
        for index, entry in enumerate(props if isinstance(props, list) else []):
            check_sm_count(entry, f"[{index}]")
    _check_meta(path, trace.meta)
    _check_steps(path, trace.steps)
    _check_ops(path, trace.ops)


def load(directory: Path) -> Trace:
    """Read a trace directory, checking that it is one and that its format version is understood."""
    from archsim.hw.strict_yaml import read_yaml_text, safe_load_unique, yaml_refusal

    directory = Path(directory)
    meta_path = directory / META_FILE
    if not directory.is_dir():
        raise ArchsimError(
            f"{directory}: not a trace directory (expected a folder with {META_FILE})"
        )
    if not meta_path.exists():
        raise ArchsimError(f"{directory}: not a trace directory ({META_FILE} is missing)")
    if not meta_path.is_file():
        raise ArchsimError(f"{meta_path}: is not a file (expected the trace's YAML metadata)")
    try:
        meta = safe_load_unique(read_yaml_text(meta_path))
    except UnicodeDecodeError:
        raise ArchsimError(f"{meta_path}: not UTF-8 text (expected YAML metadata)") from None
    except OSError as exc:
        raise ArchsimError(f"{meta_path}: cannot be read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise ArchsimError(yaml_refusal(meta_path, exc)) from None
    except RecursionError:
        raise ArchsimError(f"{meta_path}: not valid YAML (RecursionError)") from None
    if not isinstance(meta, dict):
        raise ArchsimError(f"{meta_path}: expected a mapping of trace metadata")
    _check_meta(meta_path, meta)
    version = meta.get("format_version")
    if version != FORMAT_VERSION:
        raise ArchsimError(
            f"{meta_path}: format_version {version!r} is not supported (expected {FORMAT_VERSION})"
        )
    tables = {}
    for name, columns in ((OPS_FILE, OPS_COLUMNS), (STEPS_FILE, STEPS_COLUMNS)):
        path = directory / name
        if not path.exists():
            raise ArchsimError(f"{path}: missing table of the trace")
        if not path.is_file():  # a folder read as an empty dataset; a FIFO "FileNotFoundError"
            raise ArchsimError(f"{path}: is not a file (expected the trace's Parquet table)")
        try:
            table = pd.read_parquet(path)
        except Exception as exc:  # pyarrow raises several types for corrupt files
            raise ArchsimError(
                f"{path}: not a readable Parquet table ({exc.__class__.__name__})"
            ) from None
        tables[name] = _checked_table(path, table, columns, CORE_COLUMNS[name])
    _check_steps(directory / STEPS_FILE, tables[STEPS_FILE])
    _check_ops(directory / OPS_FILE, tables[OPS_FILE])
    raw = directory / RAW_FILE
    return Trace(
        meta=meta,
        ops=tables[OPS_FILE],
        steps=tables[STEPS_FILE],
        raw_path=raw if raw.exists() else None,
    )
