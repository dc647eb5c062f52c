"""Per-wave block turnover and block reductions of block-per-row kernels (archsim.perf.block_sync):
chains worked by hand from PyTorch's code, turnovers from the gpu-benches stream tables, and
invariants of the softmax they price (hypothesis)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.block_sync import (
    SMEM_SERIAL,
    SYNC_FIGURES,
    TURNOVER_NS,
    WARP_TREE,
    WELFORD,
    chain_cycles,
    pass_floor_seconds,
    reduction_cycles,
    wave_fixed_seconds,
)
from archsim.perf.kernel import body_seconds
from archsim.trace.schema import OPS_COLUMNS, conform

H100 = load_hw("dgx-h100")
FIGURES = SYNC_FIGURES["hopper"]
FORWARD = (
    "void at::native::(anonymous namespace)::cunn_SoftMaxForward<8, c10::BFloat16, float, "
    "c10::BFloat16, at::native::(anonymous namespace)::SoftMaxForwardEpilogue>"
)
NAMES = pd.Series([
    FORWARD,
    "void at::native::(anonymous namespace)::cunn_SoftMaxForwardSmem<8, float, float, float>",
    "void at::native::(anonymous namespace)::cunn_SoftMaxBackward<4, float, float, float>",
    "void at::native::(anonymous namespace)::vectorized_layer_norm_kernel<c10::BFloat16, float>",
    "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel<float, float>",
    "void at::native::vectorized_elementwise_kernel<4>",
])  # fmt: skip


def test_chains_worked_by_hand() -> None:
    threads = np.array([128.0, 1024.0])
    # BlockReduce + broadcast: 2 x 5 x (4-cycle shuffle issue + 4-cycle combine) + 2 x 23 = 126
    assert list(chain_cycles(WARP_TREE, threads, FIGURES)) == [126.0, 126.0]
    # blockReduce: 3 x 23 + 32 x 4 + warps x (23 + 4): 4 warps 305, 32 warps 1061
    assert list(chain_cycles(SMEM_SERIAL, threads, FIGURES)) == [305.0, 1061.0]
    # compute_stats: 5 x (4 + 8 + 3 x 4) + log2(warps) x (23 + 8 + 3 x 4) + 23: 4 warps 229,
    # one warp 143 (no tree)
    welford = chain_cycles(WELFORD, np.array([128.0, 32.0]), FIGURES)
    assert list(welford) == [229.0, 143.0]


def test_reductions_per_kernel() -> None:
    threads = np.full(len(NAMES), 1024.0)
    cycles = reduction_cycles(NAMES, threads, "hopper")
    # forward: two blockReduceWarp; Smem: one pass, none priced; backward: one blockReduce;
    # layer norm: one Welford over 32 warps (5 x 24 + 5 x 43 + 23 = 358); its backward two
    # BlockReduceSum; an element-wise kernel none
    assert list(cycles) == [252.0, 0.0, 1061.0, 358.0, 252.0, 0.0]
    # Pascal: dependent FMA 6 cycles, shuffle 2 and MUFU 4 on one of GP100's 2 processing blocks,
    # shared load 23: forward 2 x (2 x 5 x (2 + 6) + 2 x 23) = 252; backward 3 x 23 + 32 x 6 +
    # 32 warps x (23 + 6) = 1,189; Welford 5 x (2 + 4 + 18) + 5 x (23 + 22) + 23 = 368
    pascal = reduction_cycles(NAMES, threads, "pascal")
    assert list(pascal) == [252.0, 0.0, 1189.0, 368.0, 252.0, 0.0]
    # the older part's chains are never shorter than Volta's (newer, same figures as Hopper's)
    assert (pascal >= reduction_cycles(NAMES, threads, "volta")).all()
    # no published chain figures for Maxwell: no reduction cost there
    assert not reduction_cycles(NAMES, threads, "maxwell").any()


def test_amd_chains_worked_by_hand() -> None:
    # wave64: 6 shuffle steps, each a ds_bpermute at the LDS latency (MI300X 52, MI210 48 cycles)
    # plus a 4-cycle VALU op; the reciprocal priced at its 4-cycle issue
    mi300x, mi210 = SYNC_FIGURES["cdna3"], SYNC_FIGURES["cdna2"]
    # BlockReduce + broadcast: 2 x 6 x (52 + 4) + 2 x 52 = 776
    assert list(chain_cycles(WARP_TREE, np.array([256.0, 1024.0]), mi300x)) == [776.0, 776.0]
    # blockReduce: 3 x 48 + 64 x 4 + 4 wavefronts x (48 + 4) = 608
    assert list(chain_cycles(SMEM_SERIAL, np.array([256.0]), mi210)) == [608.0]
    # compute_stats: 6 x (52 + 4 + 3 x 4) + log2(4) x (52 + 4 + 12) + 52 = 596; one wave 460
    welford = chain_cycles(WELFORD, np.array([256.0, 64.0]), mi300x)
    assert list(welford) == [596.0, 460.0]
    threads = np.full(len(NAMES), 1024.0)
    # per kernel on an MI210, 16 wavefronts: forward 2 x (2 x 6 x (48 + 4) + 2 x 48) = 1,440;
    # backward 3 x 48 + 64 x 4 + 16 x (48 + 4) = 1,232; Welford 6 x 64 + log2(16) x 64 + 48 = 688
    assert list(reduction_cycles(NAMES, threads, "cdna2")) == [1440.0, 0.0, 1232.0, 688.0,
                                                               1440.0, 0.0]  # fmt: skip
    # an AMD chain is never shorter than NVIDIA's: slower LDS, more steps, wider fold
    nvidia = reduction_cycles(NAMES, threads, "hopper")
    assert (reduction_cycles(NAMES, threads, "cdna3") >= nvidia).all()


def test_turnover_from_the_stream_tables() -> None:
    # H100 PCIe: rows of 64 and 128 threads x 114 SMs x 8 B at 96 and 189 GB/s: 608.0 and 617.7 ns,
    # median 612.8, less the 375-ns pointer chase
    assert TURNOVER_NS["hopper"] == pytest.approx(
        (64 * 114 * 8 / 96 + 128 * 114 * 8 / 189) / 2 - 375
    )
    assert TURNOVER_NS["cdna"] == TURNOVER_NS["cdna2"]
    # no stream table: the turnover of the table its loaded-latency curve comes from
    # (archsim.perf.loaded_latency.CURVE_FROM)
    for gen in ("pascal", "maxwell", "turing"):
        assert TURNOVER_NS[gen] == TURNOVER_NS["volta"]
    assert TURNOVER_NS["blackwell"] == TURNOVER_NS["default"] == TURNOVER_NS["hopper"]
    assert all(0 < ns < 300 for ns in TURNOVER_NS.values())


def test_wave_cost_and_idealization() -> None:
    threads = np.full(len(NAMES), 1024.0)
    per_wave = wave_fixed_seconds(NAMES, threads, H100.gpu, "hopper", frozenset())
    expected = TURNOVER_NS["hopper"] * 1e-9 + np.array([252, 0, 1061, 358, 252, 0]) / 1980e6
    assert per_wave == pytest.approx(expected)
    busy = wave_fixed_seconds(NAMES, threads, H100.gpu, "hopper", frozenset({"sm_utilization"}))
    assert not busy.any()
    # a generation with neither a stream table nor chain figures gets the turnover of the table it
    # borrows (Maxwell: Volta's) and no block reductions
    maxwell = wave_fixed_seconds(NAMES, threads, H100.gpu, "maxwell", frozenset())
    assert maxwell == pytest.approx(np.full(len(NAMES), TURNOVER_NS["volta"] * 1e-9))


def test_issue_floor_of_the_passes() -> None:
    names = pd.Series([FORWARD, NAMES[2], FORWARD])
    rows = np.array([3137.0, 3137.0, 3137.0])
    threads, size, resident = np.full(3, 1024.0), np.full(3, 2.0), np.full(3, 2.0)
    # rows of 3,137 bf16 elements never vectorize (ILP x T = 8,192): 99 scalar warp-iterations a
    # pass whatever the row's shift (32 of the prologue + 67 of the tail, or 99 of the tail);
    # 2 blocks x 99 x (17 | 31 instructions) / 4 sub-partitions: 841.5 and 1,534.5 cycles; the
    # write pass less the output's transfer per wave (0.3 us; the third op's 1 us hides it all);
    # the backward has no floor
    write = np.array([0.3e-6, 0.3e-6, 1e-6])
    floors = pass_floor_seconds(names, rows, threads, size, resident, write, H100.gpu, "hopper",
                                frozenset())  # fmt: skip
    cycle = 1 / 1980e6
    assert floors[0] == pytest.approx([841.5 * cycle, 1534.5 * cycle - 0.3e-6])
    assert list(floors[1]) == [0.0, 0.0]
    assert floors[2] == pytest.approx([841.5 * cycle, 0.0])
    assert not pass_floor_seconds(names, rows, threads, size, resident, write, H100.gpu, "cdna3",
                                  frozenset()).any()  # fmt: skip
    assert not pass_floor_seconds(names, rows, threads, size, resident, write, H100.gpu, "hopper",
                                  frozenset({"sm_utilization"})).any()  # fmt: skip


def _softmax(rows: int, columns: int) -> pd.DataFrame:
    read = rows * columns * 2.0
    row = {
        "kind": "kernel", "name": FORWARD, "op_class": "softmax", "dtype": "bfloat16",
        "bytes_read": read, "bytes_written": read, "flops": 5.0 * read / 2,
        "grid_x": rows, "grid_y": 1, "grid_z": 1, "block_x": 1024, "block_y": 1, "block_z": 1,
        "registers_per_thread": 32, "shared_memory_bytes": 128,
        "input_dims": f"[[{rows}, {columns}]]",
    }  # fmt: skip
    return conform(pd.DataFrame([row]), OPS_COLUMNS)


@settings(max_examples=40, deadline=None)
@given(
    rows=st.integers(1, 400_000),
    columns=st.integers(1024, 8191),
    extra=st.integers(1, 4096),
)
def test_longer_rows_never_faster(rows: int, columns: int, extra: int) -> None:
    # rows shorter than ILP x T = 8,192 bf16 elements load one element per round trip (no vector
    # loop), so a longer row makes at least as many round trips and moves more bytes. Rows of one
    # alignment phase only (lengths equal mod 8 bf16 = 16 B): a length that is a multiple of 8
    # starts every row aligned and skips the scalar shift prologue, so across phases a longer row
    # can issue less (found by hypothesis: 265 rows of 1,787 columns 3.8106 us, of 1,788 3.8047 us;
    # the prologue is the one of PyTorch's softmax loops that archsim.perf.issue_rate counts)
    longer = columns + 8 * min(extra, (8191 - columns) // 8)
    short, long = (body_seconds(_softmax(rows, c), H100)[0] for c in (columns, longer))
    assert long >= short * (1 - 1e-12)


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 400_000), sms=st.integers(1, 263), more=st.integers(1, 132))
def test_more_sms_never_slower(rows: int, sms: int, more: int) -> None:
    ops = _softmax(rows, 3137)

    def on(n: int) -> float:
        gpu = H100.gpu.model_copy(update={"sms": n})
        return float(body_seconds(ops, H100.model_copy(update={"gpu": gpu}))[0])

    assert on(sms + more) <= on(sms) * (1 + 1e-12)
