"""Typed access to ops-table columns that may be missing (hand-built tables, foreign traces)."""

from __future__ import annotations

import numpy as np
import pandas as pd

MEASURED_KINDS = ("kernel", "memcpy", "memset")  # ops with a measured device duration


def column(ops: pd.DataFrame, name: str, default: float = 0.0) -> np.ndarray:
    if name not in ops.columns:
        return np.full(len(ops), default, dtype=float)
    return pd.to_numeric(ops[name], errors="coerce").to_numpy(dtype=float, na_value=np.nan)


def strings(ops: pd.DataFrame, name: str) -> pd.Series:
    if name not in ops.columns:
        return pd.Series([""] * len(ops), dtype="string")
    return ops[name].astype("string").fillna("").reset_index(drop=True)
