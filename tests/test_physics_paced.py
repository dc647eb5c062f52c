"""More or faster GPU never lowers throughput of a PACED learner (the Ape-X trace, issue 11's rule).

tests/test_physics.py checks the DQN and R2D2 traces. The bundled Ape-X capture records no replay
ratio (meta.workload.samples_per_insert), so its learner runs unpaced: a faster GPU lets it run more
updates (dgx1-v100, 4 actors, 80 -> 160 SMs: 444 -> 602 updates/s), which take more of the GPU and
of the learner process's interpreter that the inference server shares, and the actors' frames fall
(2,380 -> 1,936 /s). That is a different amount of work, not a contradiction of physics: held at a
replay ratio, the same what-if leaves frames at 2,380 -> 2,368 /s (noise) and updates at 444 ->
451 /s. So the invariant is stated for the paced learner: the same work, more resource, never
slower.
"""

from __future__ import annotations

import functools
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.hw.presets import list_presets
from archsim.sim.config import SimConfig
from archsim.sim.run import simulate
from archsim.trace import load

ROOT = Path(__file__).resolve().parents[1]
GPU_PRESETS = tuple(p for p in list_presets() if load_hw(p).gpu is not None)
NOISE = 0.03  # as tests/test_physics.py: a learner step or batch straddling the window's end
# (key, factor): a GPU resource grows (factor > 1) or a latency shrinks (factor < 1)
HELPS = (
    ("gpu.sms", 2.0), ("gpu.clock_mhz", 1.5), ("gpu.dram_bw_gbs", 2.0),
    ("gpu.dram_latency_ns", 0.5), ("gpu.launch_latency_us", 0.5),
)  # fmt: skip


@functools.cache
def _apex():
    return load(ROOT / "traces" / "apex-dqn-cpu")


@settings(
    max_examples=8, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
@given(
    preset=st.sampled_from(GPU_PRESETS),
    knob=st.sampled_from(HELPS),
    actors=st.sampled_from((4, 16, 64)),
    replay_ratio=st.sampled_from((8.0, 24.0)),
)
def test_more_gpu_never_lowers_a_paced_apex_run(preset, knob, actors, replay_ratio):
    key, factor = knob
    section, field = key.split(".")
    value = getattr(getattr(load_hw(preset), section), field)
    grown = max(value + 1, int(value * factor)) if isinstance(value, int) else value * factor
    config = SimConfig(actors=actors, sim_seconds=0.4, replay_ratio=replay_ratio)
    low = simulate(_apex(), load_hw(preset), config).metrics
    high = simulate(_apex(), load_hw(preset, [f"{key}={grown}"]), config).metrics
    for metric in ("frames_per_s", "learner_updates_per_s"):
        assert high[metric] >= low[metric] * (1 - NOISE), (
            f"{preset} {key} {value} -> {grown}: {metric} {low[metric]:.1f} -> {high[metric]:.1f}"
        )
