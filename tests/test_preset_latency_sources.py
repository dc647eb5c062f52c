"""Every GPU preset's DRAM and L2 latency is the published pointer chase its comment cites (issue 12).

Worked by hand from the data files of te42kyfo/gpu-benches (github; gh200, mi300x and a40 as carried
by its fork xxrjun/gpu-benches): each row is loads chased, the clock, the footprint in KB,
milliseconds for the whole chase and cycles per load, so ns per load = ms x 1e6 / loads, whatever
the clock. The largest footprint (past L2, Infinity Cache and the TLB reach):
  V100        cuda-latency/v100.txt        7746.9 ms / 24,465,205 = 316.6 ns -> 317
  A100-40GB   cuda-latency/a100_40.txt     9970.5 ms / 24,465,205 = 407.5 ns -> 408
  GH200       gpu-latency/gh200.txt        6786.4 ms / 19,801,884 = 342.7 ns -> 343
  L40         gpu-latency/l40.txt          4449.7 ms / 17,533,612 = 253.8 ns -> 254
  A40         gpu-latency/a40.txt          3016.6 ms /  9,428,272 = 320.0 ns -> 320
  MI210       gpu-latency/mi210.txt        9570.5 ms / 24,465,205 = 391.2 ns -> 390
  MI300X      gpu-latency/mi300x.txt       7434.8 ms / 17,150,357 = 433.5 ns -> 434
L2 hits (cycles, from the same files) at each preset's own clock: V100 215 / 1530 MHz = 140.5 ns,
A100 213 / 1410 = 151 ns, GH200 280.3 / 1980 = 141.5 ns, L40 276.5 at the L4's 2040 = 135.5 ns, A40
250.4 at Orin's 1300 = 193 ns, MI210 240 / 1700 = 141 ns, MI300X 213 / 2100 = 101.4 ns; B200 295 and
RTX 4090 296 (markdewing/AI_kernels latency table) / 1979 = 149.1 and / 2520 = 117.5 ns; T4 188 and
P100 234 (Jia et al. 2019, arXiv:1903.07486, Table 3.1) / 1590 = 118.2 and / 1480 = 158.1 ns, the
T4's at the RTX 2080 Ti's 1545 = 121.7 ns and the M60's 207 at the TX1's 998 = 207.4 ns. The B200's
and RTX 4090's DRAM figures are their own markdewing rows (tests/test_hw_latency_sources.py). Presets
with no measured part of their own take a sibling's figure, and their comment says "assumed"."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.cli import main
from archsim.hw import list_presets, load_hw, presets_dir
from archsim.perf.passes import L2_HIT_CYCLES, l2_hit_seconds, reread_terms

# preset -> (ns per load worked by hand above, rounded figure the preset holds)
MEASURED_DRAM = {
    "dgx1-v100": (7746.9e6 / 24_465_205, 317),
    "dgx-a100": (9970.5e6 / 24_465_205, 408),
    "dgx-h100": (6786.4e6 / 19_801_884, 343),
    "mi210": (9570.5e6 / 24_465_205, 390),
    "mi300x": (7434.8e6 / 17_150_357, 434),
}
L40_DRAM_NS = (4449.7e6 / 17_533_612, 254)
A40_DRAM_NS = (3016.6e6 / 9_428_272, 320)
# preset -> the preset whose measured figure it assumes (same die, architecture or closest part)
SIBLING = {
    "dgx-h200": "dgx-h100",
    "dgx1-p100": "dgx1-v100",
    "t4": "dgx1-v100",
    "rtx2080ti": "dgx1-v100",
    "jetson-tx1": "dgx1-v100",
    "mi250x": "mi210",
}
# preset -> (L2 hit cycles from its cited file, the preset's clock in MHz, l2_latency_ns it holds)
MEASURED_L2 = {
    "dgx1-v100": (215, 1530, 140.5),
    "dgx-a100": (213, 1410, 151),
    "dgx-h100": (280.3, 1980, 141.5),
    "dgx-h200": (280.3, 1980, 141.5),
    "jetson-agx-orin": (250.4, 1300, 193),
    "mi300x": (213, 2100, 101.4),
    "l4": (276.5, 2040, 135.5),
    "rtx4090": (296, 2520, 117.5),
    "mi210": (240, 1700, 141),
    "mi250x": (240, 1700, 141),
    # markdewing/AI_kernels (github) latency/README.md, in cycles: B200 295 at its 1979 MHz
    "dgx-b200": (295, 1979, 149.1),
    # Jia et al. 2019 (arXiv:1903.07486), Table 3.1: T4 188, P100 234, M60 (Maxwell) 207 cycles
    "t4": (188, 1590, 118.2),
    "rtx2080ti": (188, 1545, 121.7),
    "dgx1-p100": (234, 1480, 158.1),
    "jetson-tx1": (207, 998, 207.4),
}
GPU_PRESETS = [name for name in list_presets() if load_hw(name).gpu is not None]


def _comment_above(preset: str, key: str) -> str:
    """The comment lines directly above (and on) ``key``'s line in the preset's YAML."""
    lines = (presets_dir() / f"{preset}.yaml").read_text().splitlines()
    at = next(i for i, line in enumerate(lines) if line.strip().startswith(f"{key}:"))
    block = [lines[at]]
    i = at - 1
    while i >= 0 and lines[i].strip().startswith("#"):
        block.insert(0, lines[i])
        i -= 1
    return "\n".join(block)


@pytest.mark.parametrize("preset", sorted(MEASURED_DRAM))
def test_measured_dram_latency_is_the_cited_pointer_chase(preset: str) -> None:
    worked_ns, held = MEASURED_DRAM[preset]
    assert load_hw(preset).gpu.dram_latency_ns == held
    assert (
        abs(worked_ns - held) <= 1.5
    )  # rounded, within the 370-394 ns spread where MI210's is cited
    assert "gpu-benches" in _comment_above(preset, "dram_latency_ns")


@pytest.mark.parametrize(
    "preset, cited, file",
    [("l4", L40_DRAM_NS, "l40.txt"), ("jetson-agx-orin", A40_DRAM_NS, "a40.txt")],
)  # fmt: skip
def test_presets_take_their_siblings_published_pointer_chase(preset, cited, file) -> None:
    worked_ns, held = cited
    assert round(worked_ns) == held == load_hw(preset).gpu.dram_latency_ns
    comment = _comment_above(preset, "dram_latency_ns")
    assert f"gpu-latency/{file}" in comment and "assumed" in comment


@pytest.mark.parametrize("preset", sorted(SIBLING))
def test_assumed_latency_is_the_siblings_measured_one_and_says_so(preset: str) -> None:
    sibling = SIBLING[preset]
    assert load_hw(preset).gpu.dram_latency_ns == load_hw(sibling).gpu.dram_latency_ns
    comment = _comment_above(preset, "dram_latency_ns")
    assert "assumed" in comment, comment


@pytest.mark.parametrize("preset", sorted(MEASURED_L2))
def test_l2_latency_is_the_cited_cycles_at_the_presets_clock(preset: str) -> None:
    cycles, clock_mhz, held = MEASURED_L2[preset]
    gpu = load_hw(preset).gpu
    assert gpu.clock_mhz == clock_mhz
    assert gpu.l2_latency_ns == held
    assert cycles / clock_mhz * 1e3 == pytest.approx(held, abs=0.5)
    assert l2_hit_seconds(gpu) == pytest.approx(held * 1e-9)


@pytest.mark.parametrize("preset", GPU_PRESETS)
def test_every_latency_is_sourced_and_an_l2_hit_beats_dram(preset: str) -> None:
    gpu = load_hw(preset).gpu
    comment = _comment_above(preset, "dram_latency_ns")
    assert re.search(r"gpu-benches|assumed|measured", comment), comment
    # physics: a hit in L2 returns before a trip to DRAM behind it; both sub-microsecond
    assert 0 < l2_hit_seconds(gpu) < gpu.dram_latency_ns * 1e-9 < 1e-6


def test_a_config_without_l2_latency_keeps_voltas_193_cycles() -> None:
    gpu = load_hw("t4").gpu.model_copy(update={"l2_latency_ns": None})
    assert l2_hit_seconds(gpu) == pytest.approx(L2_HIT_CYCLES / 1590e6)  # 193 cycles at 1590 MHz
    assert L2_HIT_CYCLES == 193


def test_an_old_config_without_the_field_loads(tmp_path: Path) -> None:
    data = yaml.safe_load((presets_dir() / "dgx-h100.yaml").read_text())
    del data["gpu"]["l2_latency_ns"]
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(data))
    gpu = load_hw(str(path)).gpu
    assert gpu.l2_latency_ns is None
    assert l2_hit_seconds(gpu) == pytest.approx(193 / 1980e6)


@pytest.mark.parametrize("value", ["0", "-5", "1e9"])
def test_impossible_l2_latency_is_one_line_naming_the_key(capsys, value: str) -> None:
    assert main(["hw", "show", "dgx-h100", "--set", f"gpu.l2_latency_ns={value}"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "l2_latency_ns" in err and "Traceback" not in err


@settings(max_examples=40, deadline=None)
@given(
    low=st.floats(1.0, 400.0, allow_nan=False),
    extra=st.floats(0.0, 400.0, allow_nan=False),
)
def test_a_slower_l2_never_makes_a_multi_pass_row_faster(low: float, extra: float) -> None:
    # 132 blocks of 300 KB rows on dgx-h100: beyond L1, within L2, so both re-reads are L2 hits
    base = load_hw("dgx-h100").gpu
    args = (np.array([3.0]), np.array([132 * 300e3]), np.array([132.0]), np.array([1.0]))
    fast = base.model_copy(update={"l2_latency_ns": low})
    slow = base.model_copy(update={"l2_latency_ns": low + extra})
    lat_fast = reread_terms(*args, fast, "hopper", frozenset())[2][0]
    lat_slow = reread_terms(*args, slow, "hopper", frozenset())[2][0]
    assert lat_fast == pytest.approx(343e-9 + 2 * low * 1e-9)
    assert lat_slow >= lat_fast
    # idealizing the memory system removes the L2 hits, whatever their latency
    ideal = reread_terms(*args, slow, "hopper", frozenset({"memory_system"}))[2][0]
    assert ideal == pytest.approx(343e-9)
