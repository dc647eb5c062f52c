"""Power model: idle plus utilization-proportional dynamic power; energy is its integral."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.perf.power import device_power_w, energy_j, frames_per_joule


def test_power_is_idle_plus_utilization_times_the_dynamic_range():
    # V100: 55 W idle, 300 W TDP (REFERENCE.md): at 40% busy 55 + 0.4 * 245 = 153 W.
    assert device_power_w(0.4, 55, 300) == pytest.approx(153.0)
    assert device_power_w(0.0, 55, 300) == 55 and device_power_w(1.0, 55, 300) == 300
    assert device_power_w(1.7, 55, 300) == 300  # utilization is clipped to [0, 1]


@given(st.lists(st.floats(0, 1), min_size=1, max_size=50), st.floats(1e-3, 10))
def test_energy_of_a_utilization_series_is_idle_energy_plus_busy_energy(utils, dt):
    # Power is linear in utilization, so integral(power) = idle * T + (max - idle) * busy time.
    power = device_power_w(np.array(utils), 40, 135)
    expected = 40 * dt * len(utils) + (135 - 40) * dt * float(np.sum(utils))
    assert energy_j(power, dt) == pytest.approx(expected, rel=1e-9)


def test_frames_per_joule():
    assert frames_per_joule(1_000, 250.0) == 4.0
    assert np.isnan(frames_per_joule(10, 0.0))
