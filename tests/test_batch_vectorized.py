"""scale_ops_to_batches (one call for many (from, to) batch pairs, as the simulator's job_times makes)
gives each row exactly what scale_ops_to_batch gives it for its own pair."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.errors import ArchsimError
from archsim.perf.batch import scale_ops_to_batch, scale_ops_to_batches
from archsim.trace import load

OPS = load(Path(__file__).resolve().parents[1] / "traces" / "alexnet-b32-fp32").ops.head(40)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 64), st.integers(1, 256)), min_size=1, max_size=4))
def test_each_row_as_if_scaled_alone(pairs):
    n = len(OPS)
    pair_of_row = np.arange(n) % len(pairs)
    from_batch = np.array([pairs[i][0] for i in pair_of_row])
    to_batch = np.array([pairs[i][1] for i in pair_of_row])
    before = OPS.copy()
    together = scale_ops_to_batches(OPS, from_batch, to_batch)
    alone = pd.concat(
        [scale_ops_to_batch(OPS.iloc[[i]], int(from_batch[i]), int(to_batch[i])) for i in range(n)],
        ignore_index=True,
    )
    pd.testing.assert_frame_equal(together, alone)  # values, dtypes and column order
    assert OPS.equals(before)  # the input is left as it was (copy on write)


def test_a_batch_below_one_is_refused_naming_the_pair():
    with pytest.raises(ArchsimError, match="got from 2 to 0"):
        scale_ops_to_batches(OPS.head(2), np.array([2, 2]), np.array([4, 0]))
