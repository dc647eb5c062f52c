"""Interval containment used to link launches to cpu ops and ops to phases: checked against a
brute-force search on random nested and overlapping intervals."""

from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.trace.link import ancestors_table, innermost_containing, latest_containing


@st.composite
def nested(draw):
    """Random properly nested intervals on up to 3 keys, like ops on threads: each key's intervals
    come from a random balanced-parenthesis sequence over distinct sorted time points."""
    keys, starts, ends = [], [], []
    for key in range(draw(st.integers(1, 3))):
        n = draw(st.integers(0, 20))
        points = sorted(
            draw(
                st.lists(
                    st.floats(0, 1000, allow_nan=False), min_size=2 * n, max_size=2 * n, unique=True
                )
            )
        )
        opens = draw(st.lists(st.booleans(), min_size=2 * n, max_size=2 * n))
        stack: list[float] = []
        opened = 0
        for point, want_open in zip(points, opens, strict=True):
            # Opening at most n and closing only what is open balances the 2n points exactly.
            if opened < n and (want_open or not stack):
                stack.append(point)
                opened += 1
            else:
                keys.append(key)
                starts.append(stack.pop())
                ends.append(point)
    queries = draw(st.lists(st.tuples(st.integers(0, 3), st.floats(0, 1000)), max_size=30))
    return (
        np.array(keys, dtype=np.int64),
        np.array(starts),
        np.array(ends),
        np.array([q[0] for q in queries], dtype=np.int64),
        np.array([q[1] for q in queries], dtype=np.float64),
    )


def _brute_innermost(key, start, end, q_key, q_t):
    out = []
    for k, t in zip(q_key, q_t, strict=True):
        inside = np.flatnonzero((key == k) & (start <= t) & (t <= end))
        if len(inside) == 0:
            out.append(None)
            continue
        # innermost = shortest containing interval (nesting makes it unique up to ties)
        out.append(float((end[inside] - start[inside]).min()))
    return out


@settings(max_examples=200, deadline=None)
@given(nested())
def test_innermost_containing_matches_brute_force(case):
    key, start, end, q_key, q_t = case
    found = innermost_containing(q_key, q_t, key, start, end)
    expected = _brute_innermost(key, start, end, q_key, q_t)
    for pos, t, k, want in zip(found, q_t, q_key, expected, strict=True):
        if want is None:
            assert pos == -1
        else:
            assert pos >= 0 and key[pos] == k and start[pos] <= t <= end[pos]
            assert end[pos] - start[pos] == want


@settings(max_examples=200, deadline=None)
@given(
    st.lists(st.tuples(st.integers(0, 2), st.floats(0, 100), st.floats(0, 50)), max_size=30),
    st.lists(st.tuples(st.integers(0, 2), st.floats(0, 150)), max_size=30),
)
def test_latest_containing_matches_brute_force(intervals, queries):
    key = np.array([i[0] for i in intervals], dtype=np.int64)
    start = np.array([i[1] for i in intervals])
    end = start + np.array([i[2] for i in intervals])
    q_key = np.array([q[0] for q in queries], dtype=np.int64)
    q_t = np.array([q[1] for q in queries])
    found = latest_containing(q_key, q_t, key, start, end, chunk=7)
    for pos, k, t in zip(found, q_key, q_t, strict=True):
        inside = np.flatnonzero((key == k) & (start <= t) & (t <= end))
        if len(inside) == 0:
            assert pos == -1
        else:
            assert pos in inside and start[pos] == start[inside].max()


def test_touching_ops_are_siblings_and_same_start_ops_nest():
    # aten::linear [0, 10] holds aten::addmm [0, 6]; aten::relu [10, 15] starts as linear ends.
    ops = pd.DataFrame(
        {
            "pid": [1, 1, 1],
            "tid": [1, 1, 1],
            "ts": [0.0, 0.0, 10.0],
            "end": [10.0, 6.0, 15.0],
        }
    )
    assert ancestors_table(ops).tolist() == [-1, 0, -1]
    # A launch at t=10 belongs to relu (the op that starts there), one at t=3 to addmm.
    key = np.zeros(3, dtype=np.int64)
    found = innermost_containing(
        np.zeros(2, dtype=np.int64),
        np.array([10.0, 3.0]),
        key,
        ops["ts"].to_numpy(),
        ops["end"].to_numpy(),
    )
    assert found.tolist() == [2, 1]
