"""``--loop distributed`` of a ``capture run`` trace whose envs step in vector-env worker processes:
the profiler's cost comes out of each process's steps by that process's own unprofiled figures
(archsim.sim.workload.without_process_profiler_cost), as ``--loop sequential`` does, not by the
actor figures pooled over the parent and its workers."""

from __future__ import annotations

import pandas as pd
import pytest

from archsim.hw import load_hw
from archsim.perf.network import stack_seconds_per_message
from archsim.sim.actor_work import derive_actor_work
from archsim.sim.config import SimConfig
from archsim.sim.profiler_cost import without_profiler_cost
from archsim.sim.workload import without_process_profiler_cost
from archsim.trace.format import Trace

PARENT, WORKER_A, WORKER_B = 100, 201, 202
# profiled CPU per step (us): the parent's vector step (batch 2) and its env_step phase, each
# worker's env step; a training step every K parent steps
P_US, P_ENV_US, A_US, B_US, T_US, K = 500.0, 200.0, 1000.0, 3000.0, 20_000.0, 4
STEPS = 16  # profiled steps of each process
UNPROFILED = 20  # unprofiled steps each process timed


def _figures(step_us: float, env_us: float) -> dict:
    return {
        "step": {"steps": UNPROFILED, "mean_us": step_us},
        "env_step": {"steps": UNPROFILED, "mean_us": env_us},
    }


def _pooled(*parts: dict) -> dict:
    """Step-weighted means over processes with UNPROFILED steps each, as capture run pools them."""
    return {
        name: {"steps": UNPROFILED * len(parts),
               "mean_us": sum(p[name]["mean_us"] for p in parts) / len(parts)}
        for name in ("step", "env_step")
    }  # fmt: skip


def _trace() -> Trace:
    """Unprofiled, the parent's steps take half their profiled CPU (250 us, env_step 100 us),
    worker A's the same as profiled (1000 us: nothing to take out), worker B's half (1500 us)."""
    rows = []
    for i in range(STEPS):
        rows.append(
            {"role": "actor", "actor": 0, "pid": PARENT, "tid": PARENT, "batch_size": 2,
             "dur_us": 4000.0, "cpu_us": P_US, "env_step_us": 3500.0, "env_step_cpu_us": P_ENV_US}
        )  # fmt: skip
        for actor, pid, us in ((1, WORKER_A, A_US), (2, WORKER_B, B_US)):
            rows.append(
                {"role": "actor", "actor": actor, "pid": pid, "tid": pid, "batch_size": 1,
                 "dur_us": us, "cpu_us": us, "env_step_us": us, "env_step_cpu_us": us}
            )  # fmt: skip
        if i % K == 0:
            rows.append(
                {"role": "learner", "actor": -1, "pid": PARENT, "tid": PARENT, "batch_size": 32,
                 "dur_us": T_US, "cpu_us": T_US, "train_forward_us": T_US,
                 "train_forward_cpu_us": T_US}
            )  # fmt: skip
    parent, a, b = (
        _figures(P_US / 2, P_ENV_US / 2),
        _figures(A_US, A_US),
        _figures(B_US / 2, B_US / 2),
    )
    meta = {
        "capture": {
            "unprofiled_cpu_us": {"actor": _pooled(parent, a, b)},
            "processes": [
                {"role": "learner", "pid": PARENT, "unprofiled_cpu_us": {"actor": parent}},
                {"role": "actor", "pid": WORKER_A, "unprofiled_cpu_us": {"actor": a}},
                {"role": "actor", "pid": WORKER_B, "unprofiled_cpu_us": {"actor": b}},
            ],
        }
    }
    return Trace(meta=meta, ops=pd.DataFrame(), steps=pd.DataFrame(rows))


def _column(steps: pd.DataFrame, pid: int, column: str) -> list[float]:
    return steps.loc[(steps["pid"] == pid) & (steps["role"] == "actor"), column].tolist()


def test_each_process_loses_its_own_profiler_cost():
    """Parent: its own unprofiled figures are the pool less the workers' ((3 x 20 x 916.7 - 20 x
    1000 - 20 x 1500) / 20 = 250 us a step, env_step 100 us), so 500 -> 250 and 200 -> 100;
    worker A 1000 as it was; worker B 3000 -> 1500 (its own figures over its profiled mean)."""
    steps = without_process_profiler_cost(_trace()).steps
    assert _column(steps, PARENT, "cpu_us") == pytest.approx([P_US / 2] * STEPS)
    assert _column(steps, PARENT, "env_step_cpu_us") == pytest.approx([P_ENV_US / 2] * STEPS)
    assert _column(steps, WORKER_A, "cpu_us") == [A_US] * STEPS
    assert _column(steps, WORKER_B, "cpu_us") == pytest.approx([B_US / 2] * STEPS)
    assert _column(steps, WORKER_B, "env_step_cpu_us") == pytest.approx([B_US / 2] * STEPS)
    # the learner's steps and the rows' order are as they were
    assert steps.index.tolist() == _trace().steps.index.tolist()
    assert steps.loc[steps["role"] == "learner", "cpu_us"].tolist() == [T_US] * (STEPS // K)


def test_the_pooled_figures_would_scale_every_process_alike():
    """What the distributed path did before: one factor for all actor rows, the pooled unprofiled
    env_step mean (100 + 1000 + 1500) / 3 over the pooled profiled one (200 + 1000 + 3000) / 3,
    = 2600 / 4200, so worker A's steps (no profiler cost of their own) lost 38%."""
    steps = without_profiler_cost(_trace()).steps
    factor = 2600.0 / 4200.0
    assert _column(steps, WORKER_A, "env_step_cpu_us") == pytest.approx([A_US * factor] * STEPS)


def test_distributed_actor_work_uses_the_per_process_figures():
    """The distributed loop's actor work per env step (central inference): env_step CPU per env
    plus one message's stack cost: the parent's rows 100 / 2 = 50 us, A's 1000 us, B's 1500 us."""
    hw = load_hw("dgx1-v100")
    work = derive_actor_work(without_process_profiler_cost(_trace()), hw, SimConfig())
    stack_s = stack_seconds_per_message(hw.network) * hw.cpu.thread_speed_rel
    env_s = sorted(set((work.actor_step_cpu_s - stack_s).round(12)))
    assert env_s == pytest.approx([50e-6, 1000e-6, 1500e-6])


def test_traces_of_separate_processes_keep_the_pooled_figures():
    """An actor/learner system of separate processes (a capture r2d2 trace: no actor steps on the
    learner's pid) is not a loop with env workers: the role's pooled figures apply as before."""
    trace = _trace()
    steps = trace.steps[~((trace.steps["pid"] == PARENT) & (trace.steps["role"] == "actor"))]
    trace = Trace(meta=trace.meta, ops=trace.ops, steps=steps.reset_index(drop=True))
    expected = without_profiler_cost(trace).steps
    pd.testing.assert_frame_equal(without_process_profiler_cost(trace).steps, expected)
