"""Generations without a stream table of their own take the nearest published generation's
latency-under-load curve and block turnover (archsim.perf.loaded_latency.CURVE_FROM), never a flat
curve: a flat one priced the older part's loaded DRAM below the newer's (jetson-agx-orin up to 4.2%
slower than jetson-tx1 on the 2-block index kernels of a100_train_shapes while Maxwell was flat)."""

from __future__ import annotations

import numpy as np
import pytest

from archsim.hw import load_hw
from archsim.perf.block_sync import TURNOVER_NS, generation_turnover_ns
from archsim.perf.efficiency import GENERATION_PATTERNS, generation
from archsim.perf.kernel import body_seconds
from archsim.perf.loaded_latency import (
    CURVE_FROM,
    CURVES,
    GENERATION_ORDER,
    TABLES,
    curve_generation,
    dram_load,
    latency_curve,
    latency_multiplier,
)
from tests.test_newer_gpu import _fixture_ops

EVERY_GENERATION = sorted({key for key, _ in GENERATION_PATTERNS} | {"default"})


def _nearest_tabled(gen: str) -> str:
    """The tabled generation nearest ``gen`` in its vendor's order, the older on a tie."""
    order = next(o for o in GENERATION_ORDER if gen in o)
    here = order.index(gen)
    tabled = [i for i, g in enumerate(order) if g in TABLES]
    return order[min(tabled, key=lambda i: (abs(i - here), i))]


@pytest.mark.parametrize("gen", EVERY_GENERATION)
def test_every_generation_maps_to_a_measured_curve(gen: str) -> None:
    source = curve_generation(gen)
    assert source in TABLES
    assert latency_curve(gen) is CURVES[source]
    assert dram_load(1000.0, gen, frozenset()).curve is CURVES[source]
    assert generation_turnover_ns(gen) == TURNOVER_NS[source] > 0.0
    # a borrowed curve raises latency under load like the one it is (m(0.9) > 1 on every table)
    assert latency_multiplier(latency_curve(gen), np.array([0.9]))[0] > 1.0


def test_the_borrowed_curve_is_the_named_generations() -> None:
    assert set(TABLES) <= set(CURVES)
    for gen in TABLES:
        assert curve_generation(gen) == gen, "a generation with a table keeps its own"
    # the explicit table says what the module docstring says: Maxwell, Pascal -> Volta (the oldest
    # table), Turing -> Volta, Blackwell -> Hopper, an unrecognized CDNA part -> CDNA2
    assert CURVE_FROM == {
        "maxwell": "volta", "pascal": "volta", "turing": "volta", "blackwell": "hopper",
        "cdna": "cdna2", "default": "hopper",
    }  # fmt: skip
    for gen, source in CURVE_FROM.items():
        assert gen not in TABLES and source in TABLES
        assert latency_curve(gen) is CURVES[source]
        if gen != "default":  # every other entry is the nearest tabled generation in the order
            assert source == _nearest_tabled(gen), gen
    # every generation archsim.perf.efficiency recognizes has a place in the order
    assert {key for key, _ in GENERATION_PATTERNS} == {g for o in GENERATION_ORDER for g in o}
    # a generation in no order (a name no pattern knows) takes the default's
    assert latency_curve("kepler") is CURVES[CURVE_FROM["default"]]


def test_orin_is_not_slower_than_tx1_on_the_index_kernels() -> None:
    """a100_train_shapes' index_elementwise kernels (2 blocks): 1.042x the TX1's time while Maxwell
    was flat, 0.83x now. What is left of any op's excess is cited: Orin's 320-ns chase against the
    TX1's 317 (jetson-agx-orin.yaml, jetson-tx1.yaml) and the A100 table's light-load multiplier
    against the V100's (both measured, archsim.perf.loaded_latency)."""
    ops = _fixture_ops("a100_train_shapes.json.gz")
    old, new = load_hw("jetson-tx1"), load_hw("jetson-agx-orin")
    assert (generation(old.gpu, old.name), generation(new.gpu, new.name)) == ("maxwell", "ampere")
    ratio = body_seconds(ops, new) / body_seconds(ops, old)
    index = ops["name"].astype(str).str.contains("index_elementwise").to_numpy()
    assert index.sum() > 0
    assert ratio[index].max() < 1.0
    u = np.linspace(0.0, 1.0, 1001)
    curves = latency_multiplier(CURVES["ampere"], u) / latency_multiplier(CURVES["volta"], u)
    allowed = new.gpu.dram_latency_ns / old.gpu.dram_latency_ns * curves.max()
    assert ratio.max() <= allowed
