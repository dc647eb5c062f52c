"""A fourth set of other people's public files (tests/data, provenance in tests/data/README.md),
each of a kind the first three sets lack: the PyTorch execution trace that
torch.profiler.ExecutionTraceObserver writes beside a Kineto trace (facebookresearch/param's
linear_et.json) and the async-event trace of NCCL's example profiler plugin (NVIDIA/nccl's own
README), which archsim refuses in one line that says what each is; and TraceLens's
mixture-of-experts eval, a vLLM fused-MoE custom op whose FLOPs and bytes follow from its
token, expert-weight and router shapes."""

from __future__ import annotations

import gzip
import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from archsim.cli import main
from archsim.hw import load_hw
from archsim.trace.flops import kernel_class, op_class, op_cost
from archsim.trace.flops.moe import expected_experts_reached
from archsim.trace.ingest import ingest
from tests.test_public_traces import _predict_json

DATA = Path(__file__).parent / "data"
PARAM_ET = DATA / "param_linear_execution_trace.json.gz"
MOE = DATA / "tracelens_moe_fused_experts.json.gz"
MOE_DENSE = DATA / "tracelens_moe_top2_dense.json.gz"
NCCL_PLUGIN = DATA / "nccl_profiler_plugin_example.json.gz"
MI300X = ["--source-hw", "mi300x"]  # the eval names no GPU; TraceLens's evals are MI300X traces


def test_every_command_reads_the_moe_eval(tmp_path: Path, capsys) -> None:
    """No traceback, no refusal, finite positive times from ingest, trace info, breakdown and
    predict (model-only and measured, on the eval's MI300X and on an H100)."""
    out = tmp_path / "tr"
    assert main(["ingest", str(MOE), "--out", str(out)]) == 0
    assert main(["trace", "info", str(out)]) == 0
    bd = ["breakdown", str(MOE), "--hw", "dgx-h100", "--out", str(tmp_path / "bd"), *MI300X]
    assert main(bd) == 0
    for hw in ("mi300x", "dgx-h100"):
        for extra in (["--model-only"], MI300X):
            got = _predict_json(capsys, str(MOE), "--hw", hw, "--phase", "all", *extra)
            for key in ("gpu_seconds", "seconds_per_batch", "measured_gpu_seconds"):
                assert math.isfinite(got[key]) and got[key] > 0, (hw, key, got)


# Worked by hand from the file: hidden [16, 4096] bf16 (T = 16 tokens, H = 4096), w1 [64, 22016,
# 4096] (E = 64 experts, N1 = 22016 = 2 x 11008 gate and up), w2 [64, 4096, 11008], router
# weights [16, 2] fp32 (k = 2). FLOPs: T * k * 2 * (N1 * H + H * N2). One expert's weights:
# (22016 * 4096 + 4096 * 11008) * 2 B = 270,532,608 B; under uniform top-2 routing 16 tokens reach
# 64 * (1 - (62/64)^16) = 25.49 of the 64 experts.
MOE_FLOPS = 16 * 2 * 2 * (22016 * 4096 + 4096 * 11008)  # 8,657,043,456
EXPERT_BYTES = (22016 * 4096 + 4096 * 11008) * 2
REACHED = 64 * (1 - (62 / 64) ** 16)
MOE_READ = 16 * 4096 * 2 + 16 * 2 * 4 + REACHED * EXPERT_BYTES  # tokens + router + weights


def test_fused_moe_priced_on_the_experts_it_reaches(capsys) -> None:
    """Before: vllm::rocm_aiter_fused_moe had no formula: 0 FLOPs, class 'other', and 17.3 GB
    read (all 64 experts' weights, though 16 tokens of top-2 can reach at most 32 of them); the
    model-only time on an MI300X was 29.9 ms. Now 8.66 GFLOP of GEMMs in bf16 and the expected
    25.5 experts' weights (6.90 GB); its kernel is a GEMM."""
    trace = ingest(MOE)
    moe = trace.ops.query("launch_op == 'vllm::rocm_aiter_fused_moe'")
    (op,) = moe.itertuples()
    assert (op.name, op.op_class, op.dtype) == ("aiter_fused_moe_kernel_bf16", "gemm", "bfloat16")
    assert op.has_formula and op.flops == MOE_FLOPS
    assert op.bytes_read == pytest.approx(MOE_READ, rel=1e-12)
    assert op.bytes_written == 16 * 4096 * 2 and op.dur_us == 280.0
    assert trace.meta["ingest"]["linked_by_external_id"] == 4  # launch and kernel: no correlation
    got = _predict_json(capsys, str(MOE), "--hw", "mi300x", "--phase", "all", "--model-only")
    assert got["measured_gpu_seconds"] == pytest.approx((280.0 + 3 * 30.0) * 1e-6)
    gpu = load_hw("mi300x").gpu
    assert got["gpu_seconds"] >= MOE_FLOPS / gpu.tensor_peak_flops
    assert got["gpu_seconds"] >= MOE_READ / (gpu.dram_bw_gbs * 1e9)
    assert got["gpu_seconds"] < 0.0299  # not the 17.3 GB of every expert any more


# moe_04 by hand: 512 tokens of 7168, 16 experts, w1 [16, 28672, 7168], w2 [16, 7168, 14336], top-2.
# 1,024 (token, expert) pairs over 16 experts reach all 16: 16 * (1 - (14/16)^512) = 16 to 1e-29.
DENSE_FLOPS = 2 * 512 * 2 * (28672 * 7168 + 7168 * 14336)  # 631,360,192,512
DENSE_READ = 512 * 7168 * 2 + 512 * 2 * 4 + 16 * (28672 * 7168 + 7168 * 14336) * 2  # 9.87 GB


def test_many_tokens_read_every_expert(capsys) -> None:
    """TraceLens's moe_04 (top-2, dense routing): every expert is read, 9.87 GB, so no model
    time can beat the MI300X's 5.3 TB/s on it: at least 1.863 ms, though the hand-made eval's
    kernel says 1.8 ms (5.48 TB/s, more than the card's DRAM can give). Before: 0 FLOPs, the
    same bytes by accident (all inputs read)."""
    (op,) = ingest(MOE_DENSE).ops.itertuples()
    assert op.op_class == "gemm" and op.flops == DENSE_FLOPS
    assert op.bytes_read == pytest.approx(DENSE_READ, rel=1e-12)
    got = _predict_json(capsys, str(MOE_DENSE), "--hw", "mi300x", "--phase", "all", "--model-only")
    gpu = load_hw("mi300x").gpu
    assert got["gpu_seconds"] >= DENSE_READ / (gpu.dram_bw_gbs * 1e9) > 1.8e-3
    assert got["gpu_seconds"] >= DENSE_FLOPS / gpu.tensor_peak_flops


def _moe_cost(w1_hidden: int = 4096, tokens: int = 16, experts: int = 64):
    dims = [[tokens, 4096], [experts, 22016, w1_hidden], [experts, 4096, 11008], [tokens, 2]]
    types = ["c10::BFloat16", "c10::BFloat16", "c10::BFloat16", "float"]
    return op_cost("vllm::inplace_fused_experts", dims, types)


def test_fused_experts_signatures() -> None:
    """vLLM's and SGLang's inplace/outplace_fused_experts take the same first five arguments as
    rocm_aiter_fused_moe; weights packed two values a byte (int4, w1 [E, N1, H/2]) fail the shape
    check and keep no formula rather than half the FLOPs."""
    assert op_class("sglang::outplace_fused_experts") == "gemm"
    cost = _moe_cost()
    assert cost.has_formula and cost.flops == MOE_FLOPS and cost.dtype == "bfloat16"
    packed = _moe_cost(w1_hidden=2048)
    assert not packed.has_formula and packed.flops == 0.0
    one_token = _moe_cost(tokens=1)  # one token reads exactly its k = 2 experts
    assert one_token.bytes_read == pytest.approx(4096 * 2 + 2 * 4 + 2 * EXPERT_BYTES)


@given(
    experts=st.integers(1, 512),
    top_k=st.integers(1, 16),
    tokens=st.integers(1, 100_000),
)
def test_experts_reached_bounds(experts: int, top_k: int, tokens: int) -> None:
    """k experts at one token, never more than E or T * k, and never fewer for more tokens."""
    top_k = min(top_k, experts)
    reached = expected_experts_reached(experts, top_k, tokens)
    assert top_k - 1e-9 <= reached <= min(experts, tokens * top_k) + 1e-9
    assert expected_experts_reached(experts, top_k, tokens + 1) >= reached - 1e-9
    assert expected_experts_reached(experts, top_k, 1) == pytest.approx(top_k)


@pytest.mark.parametrize(
    ("name", "klass"),
    [
        ("fused_moe_kernel", "gemm"),  # vLLM's Triton grouped GEMM, w1 and w2 launches
        ("fused_moe_kernel_gptq_awq", "gemm"),
        ("aiter_fused_moe_kernel_bf16", "gemm"),
        ("moe_align_block_size_kernel", "other"),  # its helpers multiply nothing
        ("_moe_sum_kernel", "other"),
    ],
)
def test_fused_moe_kernels_are_gemms(name: str, klass: str) -> None:
    """Before: every fused-MoE kernel was 'other', so an unlinked one was priced as a copy."""
    assert kernel_class(name) == klass


@pytest.mark.parametrize("command", ["ingest", "breakdown", "predict"])
def test_execution_trace_is_refused_saying_what_it_is(command: str, tmp_path: Path, capsys) -> None:
    """facebookresearch/param's linear_et.json: the PyTorch execution trace of a 2023 run
    ('schema' 1.0.1, op nodes with shapes and ids, no times). Before: 'not a Kineto trace (no
    traceEvents list)', which did not say that this is the other file the profiler writes. Now
    one line naming it and the trace to ingest instead, exit 2."""
    args = {
        "ingest": ["ingest", str(PARAM_ET), "--out", str(tmp_path / "tr")],
        "breakdown": ["breakdown", str(PARAM_ET), "--hw", "dgx-a100", "--out", str(tmp_path)],
        "predict": ["predict", str(PARAM_ET), "--hw", "dgx-a100"],
    }[command]
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "PyTorch execution trace (schema '1.0.1', 9 nodes" in err
    assert "ExecutionTraceObserver" in err and "export_chrome_trace" in err
    assert not (tmp_path / "tr").exists()


def test_chakra_schema_execution_trace_is_named(tmp_path: Path, capsys) -> None:
    """Newer execution traces (torch 2.5+) write 'schema' as '1.1.1-chakra.0.0.4' and nodes whose
    inputs are objects; the same line names them. A JSON object with neither key keeps the plain
    message."""
    path = tmp_path / "host_0.json.gz"
    doc = {
        "schema": "1.1.1-chakra.0.0.4",
        "pid": 2784631,
        "time": "2025-04-11 13:43:51",
        "start_ts": 2188364098,
        "nodes": [{"id": 2, "name": "[pytorch|profiler|execution_trace|thread]", "ctrl_deps": 1}],
    }
    with gzip.open(path, "wt") as handle:
        json.dump(doc, handle)
    assert main(["ingest", str(path), "--out", str(tmp_path / "tr")]) == 2
    err = capsys.readouterr().err
    assert "PyTorch execution trace (schema '1.1.1-chakra.0.0.4', 1 node," in err
    plain = tmp_path / "other.json"
    plain.write_text('{"schema": 3, "nodes": []}')
    assert main(["ingest", str(plain), "--out", str(tmp_path / "tr2")]) == 2
    err = capsys.readouterr().err
    assert "no 'traceEvents' list)" in err and "execution trace" not in err


def test_nccl_profiler_plugin_trace_is_named(tmp_path: Path, capsys) -> None:
    """NVIDIA/nccl's ext-profiler/example README trace: a JSON array of 20 async events ('b'/'e':
    GROUP, COLL, PROXY and NET steps of one ncclAllReduce) and a trailing {}. Before: 'none of its
    21 events is a complete ('X') or 'B'/'E' span', true but silent on what the file is. Now the
    line counts its async events by category and names NCCL's profiler plugin, exit 2."""
    assert main(["ingest", str(NCCL_PLUGIN), "--out", str(tmp_path / "tr")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    assert "none of its 21 events is a complete ('X') or 'B'/'E' span" in err
    assert "20 are async ('b'/'e') events of categories 'NET' (14)" in err
    assert "an NCCL profiler-plugin trace" in err


def test_other_async_events_are_counted_not_named(tmp_path: Path, capsys) -> None:
    """Async events of other categories are counted by category, with no claim of whose they
    are."""
    path = tmp_path / "async.json"
    events = [
        {"name": "load", "cat": "net", "ph": "b", "id": 1, "pid": 1, "tid": 1, "ts": 1.0},
        {"name": "load", "cat": "net", "ph": "e", "id": 1, "pid": 1, "tid": 1, "ts": 2.0},
    ]
    path.write_text(json.dumps({"traceEvents": events}))
    assert main(["ingest", str(path), "--out", str(tmp_path / "tr")]) == 2
    err = capsys.readouterr().err
    assert "2 are async ('b'/'e') events of categories 'net' (2)" in err and "NCCL" not in err
