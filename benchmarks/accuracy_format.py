"""Cell formats shared by the generators of docs/ACCURACY.md, so every table prints numbers one way."""

from __future__ import annotations

import numpy as np


def pct(x: float) -> str:
    """A signed error as a percentage with one decimal; n/a when undefined (nothing measured)."""
    return "n/a" if not np.isfinite(x) else f"{100 * x:+.1f}%"


def ms(seconds: float) -> str:
    """Seconds as milliseconds with three decimals (microsecond resolution, as the traces record)."""
    return f"{1e3 * seconds:.3f}"
