"""Power model (DESIGN.md "Power"): idle power plus a dynamic part proportional to utilization, per
GPU and per CPU socket. Pure functions; energy is the time integral of power.
"""

from __future__ import annotations

import numpy as np


def device_power_w(util: np.ndarray | float, idle_w: float, max_w: float) -> np.ndarray:
    """Power of one device at utilization ``util`` in [0, 1]: idle + util * (max - idle)."""
    u = np.clip(np.asarray(util, dtype=float), 0.0, 1.0)
    return idle_w + u * (max_w - idle_w)


def energy_j(power_w: np.ndarray, dt_s: np.ndarray | float) -> float:
    """Energy of a piecewise-constant power series: sum of power * interval."""
    return float(np.sum(np.asarray(power_w, dtype=float) * dt_s))


def frames_per_joule(frames: float, energy_joules: float) -> float:
    return frames / energy_joules if energy_joules > 0 else float("nan")
