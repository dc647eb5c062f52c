"""The paper's breakdown steps, literally (Inci et al. 2020): golden breakdowns worked by hand on the
dgx1-v100 preset, invariants (shares >= 0 summing to 1, the kernel floor never in math, per-step values
independent of how many identical steps a trace holds), the batch knobs, and the charts' contents."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.analysis.breakdown import COMPONENTS, breakdown, resize_batches, sm_curve
from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.perf.kernel import math_rate_per_sm
from archsim.report.breakdown_chart import sm_tick_labels
from archsim.trace.format import load
from archsim.trace.schema import OPS_COLUMNS, conform

V100 = load_hw("dgx1-v100")
DQN = Path(__file__).resolve().parents[1] / "traces" / "dqn-pong-cpu"
US = 1e-6

# V100 (dgx1-v100 preset): N = 80 SMs, per-SM fp32 rate P = 128 FLOP/clk x 1530 MHz = 195.84 GFLOP/s,
# DRAM W = 900 GB/s, L = 317 ns, L2 2155 GB/s, kernel floor 1.25 us.
P = 128 * 1530e6
N = 80

# Element-wise add of 2^20 fp32 elements: reads 8 MiB, writes 4 MiB, 2^20 FLOPs. No grid, so the
# model launches ceil(2^20 / 512) = 2048 blocks of 128 threads (22 registers: 16 resident per SM).
E = 2**20
ELEMENTWISE = {"kind": "cpu", "op_class": "elementwise", "dtype": "float32",
               "phase": "train_forward", "flops": float(E), "bytes_read": 8.0 * E,
               "bytes_written": 4.0 * E}  # fmt: skip
# 512^3 fp32 GEMM as traced: volta_sgemm_128x128 on a 16-block grid of 256 threads, 128 registers,
# 32 KiB shared memory (2 resident per SM); reads A and B (2 MiB), writes C (1 MiB).
GEMM = {"kind": "kernel", "name": "volta_sgemm_128x128_nn", "op_class": "gemm", "dtype": "float32",
        "phase": "train_forward", "flops": 2.0 * 512**3, "bytes_read": 2 * 512 * 512 * 4.0,
        "bytes_written": 512 * 512 * 4.0, "grid_x": 16, "grid_y": 1, "grid_z": 1, "block_x": 256,
        "block_y": 1, "block_z": 1, "registers_per_thread": 128.0,
        "shared_memory_bytes": 32768.0}  # fmt: skip


def ops_table(rows: list[dict]) -> pd.DataFrame:
    return conform(pd.DataFrame(rows), OPS_COLUMNS)


def seconds_by_component(table: pd.DataFrame, bar: str = "train") -> dict[str, float]:
    rows = table[table.phase == bar]
    return dict(zip(rows.component, rows.seconds, strict=True))


def test_golden_elementwise_floor_goes_to_sm_utilization() -> None:
    d = 12.0 * E  # DRAM bytes
    t_math = E / (N * P)  # 0.0669 us
    # baseline: bandwidth-bound, D / W = 13.98 us (latency: 1280 resident blocks x 128 threads x 16 B
    # in flight = 2.62 MB, C / L = 5.2 TB/s > W, so the latency term equals D / W too)
    baseline = d / (900e9 * 0.83)  # achievable: 0.83 of 900 GB/s (archsim.perf.efficiency, Volta)
    # plus the pipeline fill, two 317-ns DRAM round trips (archsim.perf.pipeline_fill): 14.61 us
    baseline += 2 * 317e-9
    # (1) W = inf: the latency term 2 L + D / (C / L) = 3.0 us, the L2 term D / 2155 GB/s = 5.84 us
    l2 = d / 2155e9
    # (2) L = 0: still the L2 term. (3) ideal memory: the floor, 1.25 us (compute is 0.068 us).
    floor = 1.25 * US
    # (4) one SM runs all 2048 blocks, 16 at a time, 2048 threads >= 512: fully used, no floor.
    expected = {
        "dram_bw": baseline - l2,
        "dram_latency": 0.0,
        "memory_system": l2 - floor,
        "sm_utilization": floor - t_math,
        "math": t_math,
    }
    got = seconds_by_component(breakdown(ops_table([ELEMENTWISE]), V100, "train"))
    for component, value in expected.items():
        assert got[component] == pytest.approx(value, rel=1e-9, abs=1e-15), component


def test_golden_gemm_too_few_blocks_is_sm_utilization_not_math() -> None:
    t_math = 2.0 * 512**3 / (N * P)  # 17.13 us: perfect parallelism over 80 SMs
    # 16 blocks on 80 SMs: the busiest SM runs 1 block (256 threads >= the 128 a tiled engine needs)
    # while 64 SMs idle, so the kernel takes 80 x 1 / 16 = 5 x t_math = 85.7 us. DRAM (3.5 us),
    # latency (64 KiB in flight / 317 ns: 15 us) and L2 (8 MiB of panel re-reads: 3.9 us) are hidden.
    # cuBLAS reaches 0.85 of peak (archsim.perf.efficiency, Volta): 5 t_math / 0.85, and perfect SM
    # utilization idealizes that fraction away with the idle SMs.
    # In series with the math (archsim.perf.gemm_latency.prologue_seconds, a traced tiled kernel):
    # the fixed cost T_min - L = 1.25 - 0.317 us plus one DRAM round trip per round of resident
    # blocks; the busiest SM holds ceil(16 / 80) = 1 block, 2 fit, so ceil(1 / 2) = 1 round: + 0.317
    # us -> 1.25 us. No epilogue term: the op records no dims, so the grid is not confirmed as the
    # tile count. Idealized in turn: W = inf leaves it; L = 0 takes the round trip but the fixed cost
    # becomes the whole floor T_min (archsim.perf.memory_parallelism.serial_overhead_seconds), 1.25
    # us either way, so DRAM latency gets 0; perfect SM utilization removes the fixed cost with the
    # floor (the floor counts as SM utilization, never as math), so those 1.25 us go there too.
    fixed = 1.25 * US - 317e-9
    prologue = fixed + 1 * 317e-9  # = 1.25 us
    total = 5 * t_math / 0.85 + prologue  # 100.77 + 1.25 = 102.02 us
    expected = {
        "dram_bw": 0.0,
        "dram_latency": 0.0,
        "memory_system": 0.0,
        "sm_utilization": total - t_math,
        "math": t_math,  # one SM runs the 16 blocks, 2 at a time, fully used: 80 t_math / 80
    }
    table = breakdown(ops_table([GEMM]), V100, "train")
    got = seconds_by_component(table)
    for component, value in expected.items():
        assert got[component] == pytest.approx(value, rel=1e-9, abs=1e-15), component
    # math 17.13 / 102.02 = 0.168 (0.17 = 0.85 / 5 without the prologue), SM utilization 0.832
    shares = [0, 0, 0, (total - t_math) / total, t_math / total]
    assert table.share.tolist() == pytest.approx(shares, rel=1e-9, abs=1e-15)


def _random_ops(flops: list[float], nbytes: list[float], blocks: list[int]) -> pd.DataFrame:
    rows = []
    for i, (f, b, g) in enumerate(zip(flops, nbytes, blocks, strict=False)):
        row = {"kind": "cpu", "op_class": ["gemm", "elementwise", "conv", "reduction"][i % 4],
               "dtype": "float32", "phase": ["train_forward", "act"][i % 2], "flops": f,
               "bytes_read": b, "bytes_written": b / 2}  # fmt: skip
        if i % 3 == 2:  # a traced kernel with its own grid
            row.update(kind="kernel", grid_x=g, block_x=128, registers_per_thread=32.0)
        rows.append(row)
    return ops_table(rows)


ops_strategy = st.builds(
    _random_ops,
    st.lists(st.floats(0, 1e11), min_size=1, max_size=6),
    st.lists(st.floats(1, 1e9), min_size=6, max_size=6),
    st.lists(st.integers(1, 5000), min_size=6, max_size=6),
)


@settings(max_examples=20, deadline=None)  # the suite's time budget
@given(
    ops=ops_strategy, preset=st.sampled_from(["dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1"])
)
def test_shares_are_nonnegative_sum_to_one_and_math_holds_no_floor(ops, preset) -> None:
    hw = load_hw(preset)
    table = breakdown(ops, hw, "all")
    assert (table.seconds >= 0).all() and (table.share >= 0).all()
    for _, rows in table.groupby("phase"):
        assert list(rows.component) == list(COMPONENTS)
        assert rows.share.sum() == pytest.approx(1.0, abs=1e-9)
    # The floor is a fixed cost: raising it may only move time into SM utilization, never into math.
    floored = breakdown(ops, load_hw(preset, ["gpu.kernel_min_us=40"]), "all")
    math_s = table[table.component == "math"].seconds.to_numpy()
    assert floored[floored.component == "math"].seconds.to_numpy() == pytest.approx(math_s)
    # Physics: math never beats the FLOPs at the GPU's peak rate over all its SMs (one step each).
    peak_s = (ops.flops / (hw.gpu.sms * math_rate_per_sm(ops, hw.gpu))).sum()
    all_math = table[(table.phase == "all") & (table.component == "math")].seconds.iloc[0]
    assert all_math >= peak_s * (1 - 1e-9)
    sm = table[table.component == "sm_utilization"].seconds.to_numpy()
    assert (floored[floored.component == "sm_utilization"].seconds.to_numpy() >= sm - 1e-15).all()


@settings(max_examples=15, deadline=None)
@given(ops=ops_strategy, copies=st.integers(2, 6))
def test_per_step_values_do_not_depend_on_how_many_identical_steps_were_recorded(ops, copies):
    one = ops.assign(step_id=0)
    many = pd.concat([ops.assign(step_id=k) for k in range(copies)], ignore_index=True)
    a, b = breakdown(one, V100, "all"), breakdown(many, V100, "all")
    assert b.seconds.to_numpy() == pytest.approx(a.seconds.to_numpy(), rel=1e-9, abs=1e-18)
    assert b.share.to_numpy() == pytest.approx(a.share.to_numpy(), abs=1e-9)
    assert (b.steps == copies * a.steps).all()  # one step of each phase group in ``one``
    curve_a = sm_curve(one, V100, [8, 80], phase="train")
    curve_b = sm_curve(many, V100, [8, 80], phase="train")
    assert curve_b.seconds.to_numpy() == pytest.approx(curve_a.seconds.to_numpy(), rel=1e-9)


def test_dqn_inference_math_is_no_longer_the_kernel_floor() -> None:
    """Before: math was exactly 1,920 ops x 1.25 us (all 160 steps summed) and SM utilization 0%."""
    if not DQN.exists():
        pytest.skip(f"bundled trace {DQN} not in this checkout")
    trace = load(DQN)
    act = trace.ops[trace.ops.phase == "act"]
    table = breakdown(trace.ops, V100, "inference")
    got = seconds_by_component(table, "inference")
    assert table.steps.iloc[0] == act.step_id.nunique() > 1  # actor steps with act ops
    ops_per_step = len(act) / act.step_id.nunique()
    assert got["math"] < 0.5 * ops_per_step * 1.25 * US
    assert got["sm_utilization"] > got["math"]


def test_batch_knobs_resize_like_the_simulator(tmp_path) -> None:
    if not DQN.exists():
        pytest.skip(f"bundled trace {DQN} not in this checkout")
    trace = load(DQN)
    ops = trace.ops
    batch = trace.steps.groupby("role").batch_size.median().astype(int)
    assert batch["learner"] == 32 and batch["actor"] == 1  # every step at the same batch
    # the recorded batch resizes nothing
    same = resize_batches(ops, trace.steps, learner_batch=32, inference_batch=1)
    base = breakdown(ops, V100, "all")
    assert breakdown(same, V100, "all").seconds.to_numpy() == pytest.approx(base.seconds)
    bigger = breakdown(resize_batches(ops, trace.steps, learner_batch=256), V100, "all")
    bar = {p: rows.seconds.sum() for p, rows in bigger.groupby("phase")}
    old = {p: rows.seconds.sum() for p, rows in base.groupby("phase")}
    assert bar["train"] > old["train"] and bar["inference"] == pytest.approx(old["inference"])
    out = tmp_path / "bd"
    argv = ["breakdown", str(DQN), "--hw", "dgx1-v100", "--phase", "train", "--out", str(out)]
    assert main([*argv, "--learner-batch", "256"]) == 0
    csv = pd.read_csv(out / "breakdown.csv")
    assert csv.seconds.sum() == pytest.approx(bar["train"], rel=1e-9)
    assert csv.steps.iloc[0] == (trace.steps.role == "learner").sum()
    assert main([*argv, "--learner-batch", "0", "--force"]) == 2
    assert main([*argv, "--inference-batch", "many", "--force"]) == 2
    unlinked = ops.assign(step_id=-1)
    with pytest.raises(ArchsimError, match="--learner-batch: .* not in a recorded step"):
        resize_batches(unlinked, trace.steps, learner_batch=64)


def test_charts_show_per_step_times_step_counts_and_percentages(tmp_path) -> None:
    if not DQN.exists():
        pytest.skip(f"bundled trace {DQN} not in this checkout")
    out = tmp_path / "bd"
    argv = ["breakdown", str(DQN), "--hw", "dgx1-v100", "--phase", "inference",
            "--sms", "2,4,8,16,32,64,80", "--out", str(out)]  # fmt: skip
    assert main(argv) == 0
    steps = load(DQN).ops.query("phase == 'act'").step_id.nunique()
    svg = (out / "breakdown.svg").read_text()
    assert f"{steps} steps" in svg and "GPU time per step, ms" in svg
    assert len(re.findall(r">\d+%<", svg)) >= 4  # percentages on the segments
    curve = pd.read_csv(out / "sm_curve.csv")
    assert set(curve.phase) == {"inference"} and set(curve.steps) == {steps}
    table = pd.read_csv(out / "breakdown.csv")
    # the curve is THAT phase's: at the preset's 80 SMs it equals the inference bar
    assert curve.seconds.iloc[-1] == pytest.approx(table.seconds.sum(), rel=1e-9)
    svg = (out / "sm_curve.svg").read_text()
    assert "GPU time per inference step, ms" in svg and "slowdown vs 80 SMs" in svg
    for count in (2, 4, 8, 16, 32, 64, 80):
        assert f">{count}<" in svg, count


def test_sm_tick_labels_keep_every_count_that_fits_and_the_baseline() -> None:
    assert sm_tick_labels([2, 4, 8, 16, 32, 64, 80]) == ["2", "4", "8", "16", "32", "64", "80"]
    dense = sm_tick_labels(list(range(2, 81, 2)))
    assert dense[0] == "2" and dense[-1] == "80" and "" in dense


def test_a_tiny_bar_is_not_drawn_at_full_height(tmp_path) -> None:
    """The R2D2 case: a 0.004 ms "other" bar beside an 18.5 ms one gets its value, not a split bar."""
    from archsim.report.breakdown_chart import draw_breakdown

    rows = [("train", 18.5e-3), ("other", 0.004e-3), ("all", 18.504e-3)]
    table = pd.DataFrame(
        [{"phase": bar, "component": c, "seconds": total / 5, "share": 0.2, "steps": 3}
         for bar, total in rows for c in COMPONENTS]
    )  # fmt: skip
    draw_breakdown(table, tmp_path / "bd", "tiny")
    svg = (tmp_path / "bd.svg").read_text()
    assert "not split" in svg and "0.004 ms" in svg
    # the split (right) panel labels 20% on each segment of the two large bars only
    assert svg.count(">20%<") == 2 * 5 * 2  # left panel: 2 bars x 5 segments; right panel: same


def test_recurrent_learner_batch_resizes_the_folded_sequence_inputs(tmp_path) -> None:
    """R2D2's learner feeds [batch x steps, ...] tensors; folded first (as the simulator does), they
    grow with the batch too, so the resized step has more FLOPs than without folding."""
    from archsim.commands.breakdown import _unrolls
    from archsim.sim.rnn_lowering import lower_trace_ops

    r2d2 = DQN.parent / "r2d2-seed-2x2-cpu"
    if not r2d2.exists():
        pytest.skip(f"bundled trace {r2d2} not in this checkout")
    trace = load(r2d2)
    unrolls = _unrolls(trace)
    assert unrolls  # a recurrent trace
    ops = lower_trace_ops(trace)
    recorded = int(trace.steps[trace.steps.role == "learner"].batch_size.median())
    train = ops[ops.phase.isin(["train_forward", "train_backward"])].flops.sum()
    folded = resize_batches(ops, trace.steps, learner_batch=4 * recorded, unrolls=unrolls)
    plain = resize_batches(ops, trace.steps, learner_batch=4 * recorded)
    phases = ["train_forward", "train_backward"]
    grown = folded[folded.phase.isin(phases)].flops.sum()
    assert grown > plain[plain.phase.isin(phases)].flops.sum() > train
    seconds = [
        breakdown(resize_batches(ops, trace.steps, learner_batch=b, unrolls=unrolls), V100,
                  "train").seconds.sum()
        for b in (recorded, 2 * recorded, 4 * recorded)
    ]  # fmt: skip
    assert seconds[0] < seconds[1] < seconds[2]
