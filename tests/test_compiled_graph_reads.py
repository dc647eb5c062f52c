"""A compiled graph's wrapper op (AOTAutograd's CompiledFunction / CompiledFunctionBackward) records
the graph's inputs, not a kernel's arguments (archsim.trace.inductor_args, GRAPH_WRAPPER_OPS): its
kernels get none of those bytes and are priced from their launch. Golden values by hand, an
invariant over the wrapper's shapes (hypothesis), and the A100 prewindow fixture's kernels."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from archsim.hw import load_hw
from archsim.perf.calibrate import measured_ops
from archsim.perf.kernel import body_seconds
from archsim.trace.inductor_args import GRAPH_WRAPPER_OPS, read_bytes
from archsim.trace.ingest import ingest
from tests.conftest import kineto_fixture
from tests.test_gpu_costs_inductor import F32, _call

A100_PROPS = {
    "id": 0, "name": "NVIDIA A100-SXM4-40GB", "totalGlobalMem": 42505273344, "computeMajor": 8,
    "computeMinor": 0, "numSms": 108, "maxThreadsPerBlock": 1024,
    "maxThreadsPerMultiprocessor": 2048, "regsPerBlock": 65536, "regsPerMultiprocessor": 65536,
    "warpSize": 32, "sharedMemPerBlock": 49152, "sharedMemPerMultiprocessor": 167936,
    "sharedMemPerBlockOptin": 166912,
}  # fmt: skip


def _one_kernel_trace(path: Path, op: str, dims: list[list[int]], grid: int, threads: int) -> Path:
    """A trace of one cpu op that replays a CUDA graph of one Triton kernel (as the prewindow
    fixture records them: cudaGraphLaunch under the op, the kernel on stream 7)."""
    events = [
        {"ph": "X", "cat": "cpu_op", "name": op, "pid": 1, "tid": 1, "ts": 0, "dur": 100,
         "args": {"External id": 1, "Input Dims": dims, "Input type": ["float"] * len(dims)}},
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaGraphLaunch", "pid": 1, "tid": 1,
         "ts": 10, "dur": 5, "args": {"External id": 7, "correlation": 7}},
        {"ph": "X", "cat": "kernel", "name": "triton__0d1d23d", "pid": 0, "tid": 7, "ts": 50,
         "dur": 3, "args": {"External id": 7, "correlation": 7, "device": 0, "stream": 7,
                            "grid": [grid, 1, 1], "block": [threads, 1, 1],
                            "registers per thread": 21, "shared memory": 512}},
    ]  # fmt: skip
    path.write_text(json.dumps({"traceEvents": events, "deviceProperties": [A100_PROPS]}))
    return path


def test_wrapper_ops_read_nothing_known_by_hand() -> None:
    # The prewindow's CompiledFunctionBackward of one [4096, 2862] fp32 tangent: the fallback
    # (the op's input bytes) had been 4,096 x 2,862 x 4 B = 46,891,008 B for its one kernel.
    args = _call([[4096, 2862]], [F32], [""])
    for name in sorted(GRAPH_WRAPPER_OPS):
        assert read_bytes(name, args) == 0.0
    assert read_bytes("aten::sum", args) is None  # not a wrapper, not a Triton record


def test_one_block_kernel_of_a_wrapper_is_priced_from_its_launch(tmp_path: Path) -> None:
    dims = [[4096, 2862]]
    wrapped = ingest(
        _one_kernel_trace(tmp_path / "w.json", "CompiledFunctionBackward", dims, 1, 128)
    )
    other = ingest(_one_kernel_trace(tmp_path / "o.json", "SomeCustomOp", dims, 1, 128))
    assert wrapped.ops["bytes_read"].iloc[0] == 0.0 and wrapped.ops["bytes_written"].iloc[0] == 0.0
    assert other.ops["bytes_read"].iloc[0] == 4096 * 2862 * 4  # an op's own tensors: unchanged
    hw = load_hw("dgx-a100")
    # By hand: 1 block x 128 threads x 4 elements x 3 operands x 4 B = 6,144 B from the launch:
    # far under the 3.0-us kernel floor of dgx-a100, which prices it (3 us measured).
    body = body_seconds(measured_ops(wrapped.ops), hw)
    assert np.asarray(body)[0] == pytest.approx(hw.gpu.kernel_min_us * 1e-6)


@settings(max_examples=15, deadline=None)
@given(
    dims=st.lists(st.lists(st.integers(1, 4096), min_size=1, max_size=3), min_size=1, max_size=4),
    grid=st.integers(1, 4096),
    threads=st.sampled_from([64, 128, 256, 512]),
)
def test_wrapper_kernel_price_does_not_depend_on_the_graph_inputs(dims, grid, threads) -> None:
    """Whatever tensors the wrapper recorded, its kernel costs what the same launch costs under a
    wrapper that recorded one scalar-sized input: the graph's inputs are not its reads."""
    with tempfile.TemporaryDirectory() as tmp:
        a = ingest(_one_kernel_trace(Path(tmp) / "a.json", "CompiledFunction", dims, grid, threads))
        b = ingest(
            _one_kernel_trace(Path(tmp) / "b.json", "CompiledFunction", [[1]], grid, threads)
        )
    hw = load_hw("dgx-a100")
    assert (a.ops["bytes_read"] == 0).all() and (a.ops["bytes_written"] == 0).all()
    body_a = np.asarray(body_seconds(measured_ops(a.ops), hw))
    body_b = np.asarray(body_seconds(measured_ops(b.ops), hw))
    assert body_a == pytest.approx(body_b, rel=1e-12)
    assert np.all(body_a >= hw.gpu.kernel_min_us * 1e-6 * (1 - 1e-12))


def test_prewindow_wrapper_kernels_carry_no_graph_input_bytes() -> None:
    """a100_80gb_train_prewindow (PyTorch 2.0, torch.compile with CUDA graphs): 135 kernels replayed
    under CompiledFunction(Backward). The five one-block triton__0d1d23d had been handed the
    [4096, 2862] tangent's 46.9 MB (9.4 ms each against 3 us measured: 15.6 TB/s, 7.7 times the
    A100 80GB's HBM); now none of the wrapper's kernels carries its bytes, and those five are at the
    floor."""
    trace = ingest(kineto_fixture("a100_80gb_train_prewindow.json.gz"))
    ops = measured_ops(trace.ops).reset_index(drop=True)
    wrapped = (ops["kind"] == "kernel") & ops["launch_op"].isin(GRAPH_WRAPPER_OPS)
    assert wrapped.sum() == 135  # 75 Triton, 60 cuBLAS (CUTLASS GEMMs, gemv2T)
    assert (ops.loc[wrapped, "bytes_read"] == 0).all()
    assert (ops.loc[wrapped, "bytes_written"] == 0).all()
    hw = load_hw("dgx-a100")
    one_block = wrapped & (ops["name"] == "triton__0d1d23d") & (ops["grid_x"] == 1)
    assert one_block.sum() == 5
    body = np.asarray(body_seconds(ops[one_block].reset_index(drop=True), hw))
    assert body == pytest.approx(np.full(5, hw.gpu.kernel_min_us * 1e-6))
    assert np.all(ops.loc[one_block, "dur_us"].to_numpy() == 3.0)
