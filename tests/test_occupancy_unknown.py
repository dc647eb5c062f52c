"""occupancy._unknown_as_zero is np.nan_to_num(x, nan=0.0) as a float copy, bit for bit."""

from __future__ import annotations

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from archsim.perf.occupancy import _unknown_as_zero

floats = hnp.arrays(np.float64, st.integers(0, 12), elements=st.floats(allow_nan=True))


@given(floats)
def test_same_bits_as_nan_to_num(values):
    got = _unknown_as_zero(values)
    want = np.nan_to_num(np.asarray(values, dtype=float), nan=0.0)
    assert got.dtype == want.dtype and got.shape == want.shape and got.tobytes() == want.tobytes()
    assert got is not values and not np.shares_memory(got, values)  # a copy: the input is kept


def test_integers_and_lists():
    assert _unknown_as_zero([3, 0]).tolist() == [3.0, 0.0]
    assert _unknown_as_zero(np.array([np.nan, -np.inf])).tolist() == [0.0, np.finfo(float).min]
