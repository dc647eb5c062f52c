"""Physics invariants, round 2: what tests/test_physics*.py left out (power under clock and DRAM
what-ifs, the network and replay placements, shared-DRAM SoCs, the breakdown, dominance across
presets). Each bound that is physics rather than a defect names its mechanism.

Tolerance as tests/test_physics.py: ``NOISE`` (3%) covers a learner step or batch straddling the end
of a short window; the defects these caught were 10% to 60%.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.analysis.breakdown import breakdown
from archsim.hw import load_hw
from archsim.hw.presets import list_presets
from archsim.perf.kernel import IDEALIZATIONS, body_seconds, predict_op_seconds
from archsim.perf.power import gpu_power_w
from archsim.sim.config import SimConfig
from archsim.sim.machine import derive_machine
from archsim.sim.run import simulate
from archsim.trace import load
from tests.conftest import KINETO_FIXTURES

ROOT = Path(__file__).resolve().parents[1]
SIM_SECONDS = 0.4
NOISE = 0.03
GPU_PRESETS = tuple(p for p in list_presets() if load_hw(p).gpu is not None)
EXAMPLES = settings(
    max_examples=6, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)


@functools.cache
def _trace(name: str):
    return load(ROOT / "traces" / name)


def _metrics(trace: str, preset: str, overrides: tuple[str, ...] = (), **knobs) -> dict:
    config = SimConfig(sim_seconds=knobs.pop("sim_seconds", SIM_SECONDS), **knobs)
    return simulate(_trace(trace), load_hw(preset, list(overrides)), config).metrics


def _scaled(preset: str, key: str, factor: float) -> str:
    section, field = key.split(".")
    return f"{key}={getattr(getattr(load_hw(preset), section), field) * factor}"


# --- power under clock and DRAM-bandwidth what-ifs ------------------------------------------------


@given(
    preset=st.sampled_from(GPU_PRESETS),
    share=st.floats(0.0, 1.0),
    dram_frac=st.floats(0.0, 1.0),
    factor=st.sampled_from((0.5, 2.0, 4.0, 8.0)),
)
@settings(max_examples=60, deadline=None, derandomize=True)
def test_a_busy_sm_draws_what_the_card_draws_whatever_dram_bandwidth_a_what_if_gives(
    preset, share, dram_frac, factor
):
    """The fault: the SM budget was TDP less idle less DRAM at the WHAT-IF bandwidth, so more DRAM
    bandwidth made every busy SM draw less (rtx4090, R2D2, 64 actors, the same work: 87.0 W at
    1,008 GB/s, 34.2 W at 8x). The card's bandwidth splits the card's TDP; DRAM power stays bytes x
    energy per bit."""
    card = derive_machine(load_hw(preset), SimConfig()).power
    what_if = derive_machine(
        load_hw(preset, [_scaled(preset, "gpu.dram_bw_gbs", factor)]), SimConfig()
    ).power
    assert what_if == card
    gpu = load_hw(preset).gpu
    w = gpu_power_w(
        share, dram_frac * gpu.dram_bw_gbs * 1e9, gpu.idle_power_w, gpu.max_power_w,
        card.gpu_dram_bw_gbs, card.gpu_dram_pj_per_bit,
    )  # fmt: skip
    assert gpu.idle_power_w - 1e-9 <= w <= gpu.max_power_w + 1e-9


def test_sm_power_scales_with_the_what_if_clock_worked_by_hand():
    """V100: 300 W TDP, 55 W idle, 28.08 W of HBM2 at 900 GB/s leave 216.92 W for 80 busy SMs at
    1,530 MHz. At 765 MHz half of that (alpha C V^2 f at the card's voltage): 55 + 108.46 W; at
    3,060 MHz twice, clipped at TDP as a board caps its power."""
    for clock, want in ((1530, 55 + 216.92), (765, 55 + 216.92 / 2), (3060, 300.0)):
        power = derive_machine(load_hw("dgx1-v100", [f"gpu.clock_mhz={clock}"]), SimConfig()).power
        assert power.gpu_clock_rel == pytest.approx(clock / 1530)
        w = gpu_power_w(1.0, 0.0, 55, 300, 900, 3.9, power.gpu_clock_rel)
        assert float(w) == pytest.approx(want, abs=0.01)


@pytest.mark.parametrize(("preset", "trace"), [("dgx-a100", "r2d2-seed-2x2-cpu")])
def test_a_higher_clock_never_draws_less_for_the_same_work(preset, trace):
    """Held at a replay ratio the learner reaches on either clock, the run does the same work; its
    SMs switch as often per op and more often per second, so GPU power never falls (it did:
    dgx-a100 705 -> 2,820 MHz drew 96.0 -> 95.2 W at the same 330 updates/s)."""
    clock = load_hw(preset).gpu.clock_mhz
    runs = [
        _metrics(trace, preset, (f"gpu.clock_mhz={clock * f}",), actors=64, replay_ratio=0.03)
        for f in (1.0, 2.0)
    ]
    for low, high in zip(runs, runs[1:], strict=False):
        assert high["learner_updates_per_s"] == pytest.approx(
            low["learner_updates_per_s"], rel=0.02
        )
        assert high["gpu_power_w"] > low["gpu_power_w"]


# --- a faster GPU on the R2D2 trace's own pacing: frames traded for updates, never lost ----------


R2D2_GPU_HELPS = (
    ("gpu.dram_latency_ns", 0.5), ("gpu.dram_bw_gbs", 2.0), ("gpu.clock_mhz", 1.5),
)  # fmt: skip


@settings(EXAMPLES, max_examples=2)  # 4 runs of R2D2 each: the slowest draws here
@given(
    preset=st.sampled_from(GPU_PRESETS),
    knob=st.sampled_from(R2D2_GPU_HELPS),
    actors=st.sampled_from((16, 64)),
)
def test_a_faster_gpu_on_the_r2d2_traces_pacing_trades_frames_for_updates(preset, knob, actors):
    """The R2D2 capture paces its learner to at most 0.1 samples per inserted transition
    (replay_limit learner) and the simulated learner runs below that cap, so a faster GPU lets it
    train more, and its steps take more of the learner process (the interpreter its inference
    server shares, and the GPU): frames fall while updates rise (dgx-h100, 64 actors, DRAM latency
    343 -> 171.5 ns: 48,880 -> 46,330 frames/s, 382.5 -> 392.5 updates/s; l4, 16 actors, 300 -> 600
    GB/s: 28,960 -> 27,680 frames/s, 225 -> 335 updates/s). The same work moved, not lost: as
    tests/test_physics_paced.py says of unpaced Ape-X. Held at a ratio the learner reaches (0.03),
    neither output falls."""
    key, factor = knob
    grown = (_scaled(preset, key, factor),)
    low = _metrics("r2d2-seed-2x2-cpu", preset, actors=actors)
    high = _metrics("r2d2-seed-2x2-cpu", preset, grown, actors=actors)
    if high["frames_per_s"] < low["frames_per_s"] * (1 - NOISE):
        assert high["learner_updates_per_s"] > low["learner_updates_per_s"] * (1 + NOISE)
    held = {"actors": actors, "replay_ratio": 0.03}
    low = _metrics("r2d2-seed-2x2-cpu", preset, **held)
    high = _metrics("r2d2-seed-2x2-cpu", preset, grown, **held)
    for metric in ("frames_per_s", "learner_updates_per_s"):
        assert high[metric] >= low[metric] * (1 - NOISE), f"{preset} {grown}: {metric}"


# --- the network and the replay's placement (Ape-X across nodes) ---------------------------------


NETWORK_HELPS = (
    ("network.nic_bw_gbs", 2.0), ("network.latency_us", 0.5), ("network.switch_latency_ns", 0.25),
    ("network.kernel_tcp_us_per_msg", 0.5), ("network.kernel_bypass_us_per_msg", 0.5),
    ("network.rdma_us_per_msg", 0.5), ("network.kernel_tcp_ns_per_byte", 0.5),
    ("network.link_length_m", 0.1),
)  # fmt: skip
LATENCIES = ("replay_insert_latency_us", "replay_sample_latency_us", "priority_sampling_latency_us")


@settings(EXAMPLES, max_examples=10)
@given(
    preset=st.sampled_from(("dgx1-v100", "dgx-a100", "rtx4090", "jetson-agx-orin", "local")),
    knob=st.sampled_from((*NETWORK_HELPS, ("network.stack", "rdma"))),
    stack=st.sampled_from(("kernel_tcp", "kernel_bypass", "rdma")),
    placement=st.sampled_from(("learner", "server", "in-network")),
    nodes=st.sampled_from((2, 4)),
    actors=st.sampled_from((4, 16, 64)),
)
def test_a_faster_network_never_lowers_a_paced_apex_run(
    preset, knob, stack, placement, nodes, actors
):
    """More bandwidth, less latency or a cheaper stack never lowers frames or updates. A replay
    latency may rise, but only because the replay carries more: a FIFO server's wait grows with its
    load (Pollaczek-Khinchine: W = rho E[S^2] / (2 E[S] (1 - rho)); Kleinrock, "Queueing Systems"
    vol. 1, 1975), and a saturated replay's mean grows with the window (jetson-agx-orin, server
    placement, 4 actors, 1.25 -> 2.5 GB/s: 1,560 -> 1,640 frames/s, replay busy 65.9 -> 69.5%,
    insert latency 9.57 -> 9.90 ms)."""
    key, factor = knob
    base = (f"network.stack={stack}",)
    if key == "network.stack":
        low, high = ("network.stack=kernel_tcp",), ("network.stack=rdma",)
    else:
        low, high = base, (*base, _scaled(preset, key, factor))
    run = {"actors": actors, "inference": "local", "nodes": nodes, "replay_placement": placement}
    a = _metrics("apex-dqn-cpu", preset, low, replay_ratio=8.0, **run)
    b = _metrics("apex-dqn-cpu", preset, high, replay_ratio=8.0, **run)
    for metric in ("frames_per_s", "learner_updates_per_s"):
        assert b[metric] >= a[metric] * (1 - NOISE), f"{preset} {high}: {metric}"
    carries_more = b["replay_server_util"] > a["replay_server_util"] or any(
        b[m] > a[m] for m in ("frames_per_s", "learner_updates_per_s")
    )
    for metric in LATENCIES:
        assert b[metric] <= a[metric] * (1 + NOISE) or carries_more, f"{preset} {high}: {metric}"


# --- shared-DRAM SoCs ----------------------------------------------------------------------------


SOCS = ("jetson-tx1", "jetson-agx-orin")


@settings(EXAMPLES, max_examples=5)
@given(
    preset=st.sampled_from(SOCS),
    trace=st.sampled_from(("dqn-pong-cpu", "r2d2-seed-2x2-cpu")),
    actors=st.sampled_from((2, 8, 64)),
    what_if=st.sampled_from(("memory.shared_with_gpu=false", "memory.zero_copy=true", "bw")),
)
def test_sharing_one_dram_never_speeds_either_side(preset, trace, actors, what_if):
    """CPU and GPU on one DRAM contend (archsim.perf.shared_memory): separate memories, mapped
    memory instead of a DRAM-to-DRAM copy, or more of the shared bandwidth never lower throughput."""
    if what_if == "bw":
        what_if = _scaled(preset, "memory.host_dram_bw_gbs", 2.0)
    low = _metrics(trace, preset, actors=actors)
    high = _metrics(trace, preset, (what_if,), actors=actors)
    for metric in ("frames_per_s", "learner_updates_per_s"):
        assert high[metric] >= low[metric] * (1 - NOISE), f"{preset} {what_if}: {metric}"


@pytest.mark.parametrize("preset", SOCS)
def test_more_cpu_traffic_never_speeds_the_gpu_of_an_soc(preset):
    """More actors write more observations into the shared DRAM: the learner's GPU step never gets
    shorter, and the actors' own steps never either."""
    from archsim.sim.workload import derive_service_times

    hw, trace = load_hw(preset), _trace("dqn-pong-cpu")
    times = [derive_service_times(trace, hw, SimConfig(actors=a), 32) for a in (1, 2, 4, 8, 64)]
    for fewer, more in zip(times, times[1:], strict=False):
        for field in ("learner_gpu_s", "inference_gpu_s", "actor_step_cpu_s"):
            a, b = np.atleast_1d(getattr(fewer, field)), np.atleast_1d(getattr(more, field))
            n = min(len(a), len(b))  # inference: one time per batch size up to the largest
            assert np.all(b[:n] >= a[:n] * (1 - 1e-12)), f"{preset} {field}"


# --- per op: the breakdown on measured ops, dominance, no speedup beyond the resource -------------


@functools.cache
def _op_sets() -> tuple[tuple[str, pd.DataFrame, object], ...]:
    """(name, ops, the card the trace ran on) for the bundled traces and a small real GPU trace."""
    from archsim.perf.kernel import source_hw_for_trace
    from archsim.trace.ingest import ingest

    traces = [(n, _trace(n)) for n in ("alexnet-b32-fp16", "r2d2-seed-2x2-cpu")]
    real = KINETO_FIXTURES / "a100_alexnet_forward.json.gz"
    if real.exists():
        traces.append((real.name, ingest(real)))
    return tuple((n, t.ops.reset_index(drop=True), source_hw_for_trace(t)) for n, t in traces)


@settings(EXAMPLES, max_examples=5)
@given(preset=st.sampled_from(GPU_PRESETS), which=st.integers(0, 2))
def test_every_idealization_only_removes_time_from_measured_ops(preset, which):
    """tests/test_physics_ops.py checks the model's ops; here ops keep their measured time scaled by
    the model's idealized / baseline ratio (as ``archsim breakdown`` runs them), and the check is on
    the raw stages, before the breakdown's guard that clips a stage to the one before it."""
    name, ops, source = _op_sets()[which % len(_op_sets())]
    hw = load_hw(preset)
    previous = predict_op_seconds(ops, hw, source, frozenset(), None, False)
    for n in range(1, len(IDEALIZATIONS) + 1):
        current = predict_op_seconds(ops, hw, source, frozenset(IDEALIZATIONS[:n]), None, False)
        assert np.all(np.isfinite(current)) and np.all(current >= 0)
        assert np.all(current <= previous * (1 + 1e-9) + 1e-15), f"{name} {IDEALIZATIONS[n - 1]}"
        previous = current
    table = breakdown(ops, hw, "all", source)
    for _, bar in table.groupby("phase"):
        assert (bar["seconds"] >= 0).all()
        assert bar["share"].sum() == pytest.approx(1.0, abs=1e-9) or bar["seconds"].sum() == 0


UP = (
    "sms", "clock_mhz", "fp32_flops_per_clk_per_sm", "fp16_flops_per_clk_per_sm",
    "tensor_flops_per_clk_per_sm", "dram_bw_gbs", "l2_size_mb", "l2_bw_gbs", "max_threads_per_sm",
    "max_blocks_per_sm", "registers_per_sm", "shared_mem_per_sm_kb", "tf32", "bf16",
    "fp8_flops_per_clk_per_sm",
)  # fmt: skip
DOWN = ("dram_latency_ns", "l2_latency_ns", "launch_latency_us", "kernel_min_us")


def _dominates(a: str, b: str) -> bool:
    """Every figure of ``a``'s GPU at least ``b``'s (latencies and floors at most); the same vendor
    (the kernel model prices CDNA and NVIDIA kernels apart)."""
    ga, gb = load_hw(a).gpu, load_hw(b).gpu
    if ga.name.startswith("AMD") != gb.name.startswith("AMD"):
        return False
    if any(getattr(ga, f) < getattr(gb, f) for f in UP):
        return False
    return all((getattr(ga, f) or 0) <= (getattr(gb, f) or 0) for f in DOWN)


DOMINANT = tuple((a, b) for a in GPU_PRESETS for b in GPU_PRESETS if a != b and _dominates(a, b))


def test_a_preset_that_dominates_another_is_never_slower_on_any_op():
    """Found from the presets' figures, so a new preset is checked too (today: dgx-h100 and dgx-h200
    over dgx-a100, dgx-h200 over dgx-h100, mi250x over mi210). Near misses are not contradictions:
    mi300x's DRAM latency (434 ns, measured) is above mi250x's 390, and its small kernels are up to
    36% slower. dgx1-v100 over dgx1-p100 joined once the P100 took the V100's own measured L2 hit
    (215 cycles at its clock) instead of Jia et al.'s lower 193 (tests/test_physics_round3.py)."""
    assert ("dgx-h200", "dgx-h100") in DOMINANT and ("mi250x", "mi210") in DOMINANT
    for name, ops, source in _op_sets():
        for a, b in DOMINANT:
            fast = predict_op_seconds(ops, load_hw(a), source, frozenset(), None, False)
            slow = predict_op_seconds(ops, load_hw(b), source, frozenset(), None, False)
            worse = fast > slow * (1 + 1e-9) + 1e-15
            assert not worse.any(), f"{name}: {a} slower than {b} on {int(worse.sum())} ops"


@settings(EXAMPLES, max_examples=5)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    key=st.sampled_from(("gpu.clock_mhz", "gpu.dram_bw_gbs")),
    factor=st.sampled_from((1.25, 2.0, 4.0)),
)
def test_no_op_speeds_up_by_more_than_its_resource_grew(preset, key, factor):
    """A clock or a bandwidth x f shortens what it paces by f at most, and fixed costs (launch
    floors, latencies) not at all: no op runs more than f times faster."""
    for name, ops, _ in _op_sets():
        before = body_seconds(ops, load_hw(preset))
        after = body_seconds(ops, load_hw(preset, [_scaled(preset, key, factor)]))
        speedup = before / np.maximum(after, 1e-30)
        assert np.all(speedup <= factor * (1 + 1e-9)), f"{name} {preset} {key} x{factor}"


def test_a_replay_on_its_own_machine_draws_that_machines_power():
    """The fault: the replay's host drew nothing (dgx1-v100, apex-dqn-cpu, 16 actors, ratio 8, one
    actor node and a replay server: 87.9 W of CPU for two machines whose sockets idle at 2 x 2 x 40
    W). Each machine now draws at least its idle, and a replay moved off the learner's machine onto
    its own never lowers the CPU power."""
    hw = load_hw("dgx1-v100")
    idle_w = hw.cpu.sockets * hw.cpu.idle_power_w
    run = {"actors": 16, "inference": "local", "replay_ratio": 8.0}
    learner = _metrics("apex-dqn-cpu", "dgx1-v100", **run)
    server = _metrics("apex-dqn-cpu", "dgx1-v100", nodes=1, replay_placement="server", **run)
    assert server["cpu_power_w"] >= 2 * idle_w
    assert server["cpu_power_w"] > learner["cpu_power_w"]
    assert server["energy_j"] == pytest.approx(server["avg_power_w"] * SIM_SECONDS, rel=1e-12)


@settings(EXAMPLES, max_examples=3)
@given(
    preset=st.sampled_from(("dgx1-v100", "dgx-a100", "rtx4090", "jetson-agx-orin", "mi300x")),
    trace=st.sampled_from(("dqn-pong-cpu", "r2d2-seed-2x2-cpu")),
    what_if=st.sampled_from(("cores", "smt")),
)
def test_fewer_cores_or_threads_never_draw_more_cpu_power_for_the_same_work(preset, trace, what_if):
    """The fault: the socket's TDP was spread over the WHAT-IF cores, so disabling cores made each
    busy one draw more (dgx1-v100, DQN, 16 actors, the same frames and updates: 91.9 W at 20 cores a
    socket, 103.9 W at 10). The part's cores and threads (``cpu.physical_*``) split it now."""
    cpu = load_hw(preset).cpu
    if what_if == "cores":
        fewer = f"cpu.cores_per_socket={max(1, cpu.cores_per_socket // 2)}"
    else:
        fewer = "cpu.threads_per_core=1"
    a = _metrics(trace, preset, actors=16)
    b = _metrics(trace, preset, (fewer,), actors=16)
    if b["frames_per_s"] == a["frames_per_s"] and b["env_steps_per_s"] == a["env_steps_per_s"]:
        assert b["cpu_power_w"] <= a["cpu_power_w"] * (1 + 1e-9), f"{preset} {fewer}"
    assert derive_machine(load_hw(preset, [fewer]), SimConfig()).power == (
        derive_machine(load_hw(preset), SimConfig()).power
    )


# --- a machine better on every knob at once --------------------------------------------------------


BETTER = (
    ("gpu.sms", 2.0), ("gpu.clock_mhz", 1.5), ("gpu.dram_bw_gbs", 2.0), ("gpu.l2_size_mb", 2.0),
    ("gpu.dram_latency_ns", 0.5), ("gpu.launch_overhead_us", 0.5), ("gpu.kernel_min_us", 0.5),
    ("cpu.thread_speed_rel", 1.5), ("cpu.cores_per_socket", 2.0), ("host_link.bw_gbs", 2.0),
    ("network.latency_us", 0.5), ("memory.host_dram_bw_gbs", 2.0),
)  # fmt: skip


@settings(EXAMPLES, max_examples=5)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    trace=st.sampled_from(("dqn-pong-cpu", "r2d2-seed-2x2-cpu", "apex-dqn-cpu")),
    knobs=st.sets(st.sampled_from(BETTER), min_size=2, max_size=6),
    actors=st.sampled_from((4, 64)),
)
def test_a_machine_better_on_several_knobs_at_once_is_never_slower(preset, trace, knobs, actors):
    """tests/test_physics.py grows one knob at a time; together they never lower throughput either
    (80 draws over every preset found no exception). Paced so the work is the same: R2D2 at a ratio
    its learner reaches (above), Ape-X at 8 samples per insert."""
    hw = load_hw(preset)
    grown = []
    for key, factor in sorted(knobs):
        section, field = key.split(".")
        value = getattr(getattr(hw, section), field)
        grown.append(f"{key}={max(value + 1, int(value * factor))}" if isinstance(value, int)
                     else f"{key}={value * factor}")  # fmt: skip
    run = {"actors": actors}
    if trace == "r2d2-seed-2x2-cpu":
        run["replay_ratio"] = 0.03
    if trace == "apex-dqn-cpu":
        run.update(inference="local", replay_ratio=8.0)
    a = _metrics(trace, preset, **run)
    b = _metrics(trace, preset, tuple(grown), **run)
    for metric in ("frames_per_s", "learner_updates_per_s"):
        assert b[metric] >= a[metric] * (1 - NOISE), f"{preset} {grown}: {metric}"
