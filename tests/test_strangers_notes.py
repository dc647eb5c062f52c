"""Defects found by running strangers' scripts through archsim: the breakdown's ``all`` bar counts each
step once however many phase groups ran ops in it."""

from __future__ import annotations

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.analysis.breakdown import breakdown, sm_curve
from archsim.cli import main
from archsim.hw import load_hw
from archsim.trace.format import Trace, save
from archsim.trace.schema import OPS_COLUMNS, conform

V100 = load_hw("dgx1-v100")


def _op(phase: str, step_id: int, flops: float) -> dict:
    return {"kind": "cpu", "op_class": "elementwise", "dtype": "float32", "phase": phase,
            "step_id": step_id, "flops": flops, "bytes_read": 8 * flops,
            "bytes_written": 4 * flops}  # fmt: skip


# An on-policy loop as the strangers' A2C captures record it: actor steps 0, 1, 2 each run one act op
# (inference) and one env-side op (other); learner step 3 runs one train op. Groups: inference 3 steps,
# other 3, train 1; the trace holds 4 distinct steps, so the ``all`` bar is over 4 steps, not 3+3+1 = 7.
ACTOR_STEPS, LEARNER_STEP = (0, 1, 2), 3
ON_POLICY = [
    *[_op("act", s, 2.0**20) for s in ACTOR_STEPS],
    *[_op("env_step", s, 2.0**16) for s in ACTOR_STEPS],
    _op("train_forward", LEARNER_STEP, 2.0**22),
]


def _ops(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def test_all_bar_counts_distinct_steps_and_adds_one_step_of_each_group(tmp_path, capsys) -> None:
    table = breakdown(_ops(ON_POLICY), V100, "all")
    steps = table.groupby("phase").steps.first().to_dict()
    assert steps == {"inference": 3, "other": 3, "train": 1, "all": 4}
    # the mean is over those steps: one act op, one env op and one train op per step of each group,
    # each priced as the same op alone in a one-step trace
    alone = {
        phase: breakdown(_ops([_op(phase, 0, flops)]), V100, "all").seconds.sum()
        for phase, flops in (("act", 2.0**20), ("env_step", 2.0**16), ("train_forward", 2.0**22))
    }
    per_bar = table.groupby("phase").seconds.sum()
    assert per_bar["inference"] == pytest.approx(alone["act"], rel=1e-12)
    assert per_bar["other"] == pytest.approx(alone["env_step"], rel=1e-12)
    assert per_bar["all"] == pytest.approx(sum(alone.values()), rel=1e-12)
    assert set(sm_curve(_ops(ON_POLICY), V100, [8, 80]).steps) == {4}

    trace = save(Trace(meta={}, ops=_ops(ON_POLICY), steps=pd.DataFrame()), tmp_path / "t")
    assert main(["breakdown", str(trace), "--hw", "dgx1-v100", "--out", str(tmp_path / "o")]) == 0
    lines = {line.split(":")[0]: line for line in capsys.readouterr().out.splitlines()}
    assert "(mean of 3 steps)" in lines["inference"] and "(mean of 1 step)" in lines["train"]
    assert "one step of each phase above added up, over 4 steps" in lines["all"]
    assert pd.read_csv(tmp_path / "o" / "breakdown.csv").query("phase == 'all'").steps.eq(4).all()


@settings(max_examples=25, deadline=None)
@given(
    rows=st.lists(
        st.tuples(st.sampled_from(["act", "env_step", "train_forward"]), st.integers(0, 5)),
        min_size=1,
        max_size=12,
    )
)
def test_all_bar_steps_between_largest_group_and_trace_steps(rows) -> None:
    """Invariant: the all bar claims at least the steps of its largest group and never more than the
    distinct steps the trace's ops ran in (nor the groups' total)."""
    ops = _ops([_op(phase, step, 1e6) for phase, step in rows])
    steps = breakdown(ops, V100, "all").groupby("phase").steps.first()
    groups = steps.drop("all") if len(steps) > 1 else steps
    assert groups.max() <= steps["all"] <= min(ops.step_id.nunique(), groups.sum())
