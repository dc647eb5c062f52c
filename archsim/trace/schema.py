"""Column schema of the normalized trace tables (DEVELOPERS.md "Layout"; each column's meaning is
beside it below).

One place defines every column, its dtype and its fill value for "unknown", so that ingest, capture,
save/load and every analysis agree. Units live in the column names.
"""

from __future__ import annotations

from functools import cache

import numpy as np
import pandas as pd

FORMAT_VERSION = 1

# Canonical phase names. `archsim.phase(name)` markers use these; ingest maps them onto ops and steps.
# display: drawing the game screen (DQN --display-every), in the acting thread as the original DQN did.
ACTOR_PHASES = ("env_step", "display", "preprocess", "act", "inference_wait", "replay_insert")
LEARNER_PHASES = (
    "replay_sample",
    "train_forward",
    "train_backward",
    "optimizer_step",
    "priority_update",
    "target_sync",
    "param_publish",
)
INFERENCE_PHASES = ("inference_batch",)
PHASES = ACTOR_PHASES + LEARNER_PHASES + INFERENCE_PHASES
UNKNOWN_PHASE = "other"

# Groups used by `--phase` on breakdown/predict: which op phases make up "inference" and "train".
PHASE_GROUPS: dict[str, tuple[str, ...]] = {
    "inference": ("act", "inference_batch"),
    "train": (
        "train_forward",
        "train_backward",
        "optimizer_step",
        "target_sync",
        "priority_update",
    ),
}

# Step boundary markers: a step row spans one of these; phases nested inside it become its columns.
STEP_ROLES = ("actor", "learner", "inference")

OP_KINDS = ("kernel", "memcpy", "memset", "cpu")

# ops.parquet: one row per operation that costs device time (a CUDA kernel/memcpy/memset, or the leaf
# compute op on the CPU when the run had no GPU).
OPS_COLUMNS: dict[str, tuple[str, object]] = {
    "op_id": ("int64", -1),
    "kind": ("string", ""),  # one of OP_KINDS
    "name": ("string", ""),  # kernel name, or cpu op name for kind == "cpu"
    "launch_op": ("string", ""),  # innermost cpu op that launched it (== name for cpu ops)
    "op_class": (
        "string",
        "other",
    ),  # gemm, conv, elementwise, reduction, ... (archsim.trace.flops)
    "phase": ("string", UNKNOWN_PHASE),
    "profiler_step": ("int64", -1),  # ProfilerStep# number, -1 outside profiler steps
    "step_id": ("int64", -1),  # steps.step_id of the actor/learner/inference step it ran in, or -1
    "device": ("int64", -1),  # GPU index; -1 for the CPU
    "stream": ("int64", -1),
    "pid": ("int64", -1),
    "tid": ("int64", -1),
    "correlation": ("int64", -1),
    "start_us": ("float64", np.nan),
    "dur_us": ("float64", np.nan),
    "launch_start_us": ("float64", np.nan),  # CPU-side runtime call (cudaLaunchKernel etc.)
    "launch_dur_us": ("float64", np.nan),
    # runtime/driver call that launched it (cudaLaunchKernel, hipExtModuleLaunchKernel, ...), "" when
    # unlinked or on the CPU; grid_* are in blocks for every launch API (ingest converts work-items)
    "launch_api": ("string", ""),
    "dtype": ("string", ""),  # e.g. float32, float16, bfloat16
    "flops": ("float64", 0.0),
    "bytes_read": ("float64", 0.0),
    "bytes_written": ("float64", 0.0),
    "has_formula": ("bool", False),  # False: bytes from tensor sizes, FLOPs 0
    "input_dims": ("string", ""),  # JSON of the launching op's Input Dims
    "input_types": ("string", ""),  # JSON of the launching op's Input type
    "input_strides": ("string", ""),  # JSON of the launching op's Input Strides ("" if none)
    "reduction_loop_steps": ("float64", np.nan),  # a looped Triton reduction's R0 loop steps
    "grid_x": ("int64", 0),
    "grid_y": ("int64", 0),
    "grid_z": ("int64", 0),
    "block_x": ("int64", 0),
    "block_y": ("int64", 0),
    "block_z": ("int64", 0),
    "registers_per_thread": ("float64", np.nan),
    "shared_memory_bytes": ("float64", np.nan),
    "blocks_per_sm": ("float64", np.nan),
    "warps_per_sm": ("float64", np.nan),
    "est_occupancy_pct": ("float64", np.nan),
}

# steps.parquet: one row per actor step, learner step or central inference batch. Per-phase durations
# are `<phase>_us` columns (wall time), NaN where that phase did not occur in the step; `cpu_us` and
# `<phase>_cpu_us` are the thread CPU time inside the step / phase (archsim.capture markers record
# it), NaN in traces made without them. Wall minus CPU is time waiting: locks, the GIL, a busy core.
# `gap_cpu_us`: the thread's CPU time between its previous recorded step and this one (the loop's
# own work outside the steps, e.g. an inference server's request reads), NaN where not recorded.
STEPS_BASE_COLUMNS: dict[str, tuple[str, object]] = {
    "step_id": ("int64", -1),
    "role": ("string", ""),  # one of STEP_ROLES
    "actor": ("int64", -1),  # actor index for actor steps (process rank in multi-process captures)
    "pid": ("int64", -1),
    "tid": ("int64", -1),
    "start_us": ("float64", np.nan),
    "dur_us": ("float64", np.nan),
    "batch_size": ("int64", 1),  # envs stepped / requests batched / learner batch
}
STEPS_COLUMNS: dict[str, tuple[str, object]] = {
    **STEPS_BASE_COLUMNS,
    **{f"{phase}_us": ("float64", np.nan) for phase in PHASES},
    "cpu_us": ("float64", np.nan),
    "gap_cpu_us": ("float64", np.nan),
    **{f"{phase}_cpu_us": ("float64", np.nan) for phase in PHASES},
}


def empty_table(columns: dict[str, tuple[str, object]]) -> pd.DataFrame:
    """An empty table with the schema's columns and dtypes."""
    return pd.DataFrame({name: pd.Series([], dtype=dtype) for name, (dtype, _) in columns.items()})


def conform(df: pd.DataFrame, columns: dict[str, tuple[str, object]]) -> pd.DataFrame:
    """Return ``df`` with exactly the schema's columns, in order, with missing ones filled and dtypes set.

    Extra columns are dropped: the schema is the contract between producers and consumers.
    """
    out = {}
    n = len(df)
    index = df.index
    renumbered = (
        isinstance(index, pd.RangeIndex)
        and index.start == 0
        and index.step == 1
        and index.name is None
    )
    for name, (dtype, fill) in columns.items():
        if name in df.columns:
            series = df[name]
            if series.dtype == _resolved(dtype):
                # already conforming (a table made by conform, then filtered or extended): nothing
                # to fill (numpy int64/bool hold no NaN) or convert; copy on write
                out[name] = series if renumbered else series.reset_index(drop=True)
                continue
            if dtype in ("int64", "bool"):
                series = series.fillna(fill)
            out[name] = series.astype(dtype).reset_index(drop=True)
        else:
            out[name] = pd.Series([fill] * n, dtype=dtype)
    return pd.DataFrame(out)


@cache
def _resolved(dtype: str) -> object:
    """The dtype a schema name converts to (``"string"``: pandas' NA-backed string dtype)."""
    return pd.Series([], dtype=dtype).dtype
