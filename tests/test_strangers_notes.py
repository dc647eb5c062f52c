"""Defects found by running strangers' scripts through archsim: the breakdown's ``all`` bar counts each
step once however many phase groups ran ops in it; bf16 ops on a GPU without BF16 math (V100, T4,
P100, TX1, 2080 Ti) are priced at its FP32 rate and every prediction says so in one line; an A2C
capture, whose update runs no forward pass of its own, says its learner batch is unknown."""

from __future__ import annotations

import json
import textwrap

import pandas as pd
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.analysis.breakdown import breakdown, sm_curve
from archsim.cli import main
from archsim.hw import load_hw
from archsim.perf.math_units import math_units
from archsim.trace.format import Trace, load, save
from archsim.trace.schema import OPS_COLUMNS, conform
from tests.capture_toy import TOY_ENV

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


NO_BF16 = ("dgx1-v100", "t4", "dgx1-p100", "jetson-tx1", "rtx2080ti")


def _bf16_kineto(path) -> None:
    """A real CPU profile of three bf16 512^3 GEMMs and their ReLUs."""
    a = torch.randn(512, 512, dtype=torch.bfloat16)
    b = torch.randn(512, 512, dtype=torch.bfloat16)
    with torch.profiler.profile(
        activities=[torch.profiler.ProfilerActivity.CPU], record_shapes=True
    ) as prof:
        for _ in range(3):
            torch.relu(a @ b)
    prof.export_chrome_trace(str(path))


def test_presets_without_bf16_math_are_the_pre_ampere_nvidia_ones() -> None:
    from archsim.hw.presets import list_presets

    without = {name for name in list_presets() if (hw := load_hw(name)).gpu and not hw.gpu.bf16}
    assert without == set(NO_BF16)


def test_bf16_gemm_runs_at_the_fp32_rate_where_there_is_no_bf16_math() -> None:
    gemm = {"kind": "cpu", "op_class": "gemm", "flops": 2.0 * 512**3, "name": "aten::mm"}
    kernels = [
        "ampere_bf16_s16816gemm_bf16_128x128_ldg8_f2f_tn",
        "Cijk_Ailk_Bljk_BBS_BH_MT128x128x32_MI16x16x8",
    ]
    ops = _ops([{**gemm, "dtype": "bfloat16"}, {**gemm, "dtype": "float32"},
                {**gemm, "dtype": "float16"}, *[{**gemm, "dtype": "", "name": k} for k in kernels]])  # fmt: skip
    for name in NO_BF16:
        gpu = load_hw(name).gpu
        rate, tensor = math_units(ops, gpu)
        fp32 = gpu.fp32_flops_per_clk_per_sm * gpu.clock_mhz * 1e6  # per SM
        bf16 = [0, 3, 4]
        assert rate[bf16] == pytest.approx(fp32) and not tensor[bf16].any(), name
        assert rate[2] >= fp32  # fp16 keeps its tensor cores where the GPU has them
    a100 = load_hw("dgx-a100").gpu
    rate, tensor = math_units(ops, a100)
    assert tensor[[0, 3, 4]].all() and rate[0] == pytest.approx(rate[2])  # BF16 = FP16 rate


def test_predict_breakdown_simulate_say_bf16_is_not_native(tmp_path, capsys) -> None:
    trace = tmp_path / "bf16.json"
    _bf16_kineto(trace)
    capsys.readouterr()
    args = ["predict", str(trace), "--phase", "all", "--json"]
    assert main([*args, "--hw", "dgx1-v100"]) == 0
    out = capsys.readouterr()
    result = json.loads(out.out)
    [note] = result["notes"]
    assert "bfloat16" in note and "Tesla V100-SXM2 (dgx1-v100)" in note and "FP32 rate" in note
    assert note in out.err
    # Three 512^3 GEMMs at the V100's FP32 peak (80 SMs x 128 FLOP/clk x 1530 MHz): 51.4 us at least
    assert result["gpu_seconds"] >= 3 * 2 * 512**3 / (80 * 128 * 1530e6)
    # the same trace where bf16 is native: tensor cores, no note
    assert main([*args, "--hw", "dgx1-v100", "--set", "gpu.bf16=true"]) == 0
    native = json.loads(capsys.readouterr().out)
    assert native["notes"] == [] and native["gpu_seconds"] < result["gpu_seconds"] / 2
    assert main([*args, "--hw", "dgx-a100"]) == 0
    assert json.loads(capsys.readouterr().out)["notes"] == []

    assert main(["breakdown", str(trace), "--hw", "t4", "--out", str(tmp_path / "bd")]) == 0
    assert "which Tesla T4 (t4) has no BF16 math" in capsys.readouterr().err


# A2C as it is usually written: act with grad on (batch of one env), keep the outputs, and after a
# rollout of ``rollout`` steps back-propagate a loss over them: the update runs no forward of its
# own, so the capture never sees the learner batch (5 samples an update here). argv: iterations.
A2C_TOY = (
    textwrap.dedent(
        """
    import sys
    import gymnasium as gym
    import numpy as np
    import torch
    """
    )
    + TOY_ENV
    + textwrap.dedent(
        """

    if __name__ == "__main__":
        functional = sys.argv[2:] == ["functional"]
        env, net = ToyEnv(), torch.nn.Linear(4, 2)
        opt = torch.optim.SGD(net.parameters(), lr=0.01)
        obs, _ = env.reset()
        for _ in range(int(sys.argv[1])):
            outs = []
            for _ in range(5):
                x = torch.as_tensor(obs)
                # functional: the layer's maths without calling the module, so no forward is seen
                out = torch.nn.functional.linear(x, net.weight, net.bias) if functional else net(x)
                obs, *_ = env.step(int(out.argmax()))
                outs.append(out)
            loss = torch.stack(outs).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    """
    )
)


def test_an_a2c_update_trains_the_rollouts_grad_on_acting_forwards(tmp_path) -> None:
    """The loss is built from the 5 acting forwards' outputs (grad on, batch 1 each) since the last
    backward, so each update trains 5 samples (f502cad). It read batch 1 before: no train forward."""
    script = tmp_path / "a2c_toy.py"
    script.write_text(A2C_TOY)
    cap = tmp_path / "cap"
    schedule = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]
    assert main(["capture", "run", "--out", str(cap), *schedule, "--", str(script), "8"]) == 0
    steps = load(cap).steps
    learner = steps[steps.role.astype(str) == "learner"]
    assert len(learner) >= 1 and (learner.batch_size == 5).all()


def test_an_a2c_capture_says_its_learner_batch_is_unknown(tmp_path, capsys) -> None:
    """With the layer called functionally no forward is seen, so the learner batch is unknown."""
    script = tmp_path / "a2c_toy.py"
    script.write_text(A2C_TOY)
    cap = tmp_path / "cap"
    schedule = ["--wait", "2", "--warmup", "1", "--active", "6", "--repeat", "2"]
    args = ["capture", "run", "--out", str(cap), *schedule, "--", str(script), "8", "functional"]
    assert main(args) == 0
    trace = load(cap)
    learner = trace.steps[trace.steps.role.astype(str) == "learner"]
    assert len(learner) >= 1 and (learner.batch_size == 1).all()  # the default: no forward seen
    phases = set(trace.ops[trace.ops.step_id.isin(learner.step_id)].phase.astype(str))
    assert "train_backward" in phases and "train_forward" not in phases
    capsys.readouterr()

    assert main(["predict", str(cap), "--hw", "dgx-a100", "--phase", "train", "--json"]) == 0
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert result["batch_known"] is False and result["rate_unit"] != "samples/s"
    bd = ["breakdown", str(cap), "--hw", "dgx-a100", "--phase", "train", "--force"]
    assert main([*bd, "--out", str(tmp_path / "plain")]) == 0
    assert "learner batch" not in capsys.readouterr().err  # no flag, nothing to say
    assert main([*bd, "--learner-batch", "64", "--out", str(tmp_path / "b64")]) == 0
    [line] = [x for x in capsys.readouterr().err.splitlines() if "learner batch" in x]
    assert "learner batch of this trace is unknown" in line
    assert "--learner-batch 64 resized the train ops from batch 1" in line
    sim = ["simulate", str(cap), "--hw", "dgx-a100", "--out", str(tmp_path / "sim")]
    assert main(sim) == 0
    assert "learner samples count one per update" in capsys.readouterr().err
