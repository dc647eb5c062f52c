"""torch.distributed collectives in CPU-only traces: a real gloo capture (2 local processes, torch
2.13, tests/data/gloo_cpu_collectives_2proc.json.gz) keeps each process group's work
(``gloo:all_reduce``, one colon, filed as a user annotation) and c10d's dispatcher ops as class
communication; NCCL kernels are communication by name too."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from archsim.trace.flops import is_collective, kernel_class, op_class
from archsim.trace.ingest import ingest

DATA = Path(__file__).parent / "data"
GLOO = DATA / "gloo_cpu_collectives_2proc.json.gz"
# rank 0's loop: 3 iterations of 2 all_reduce (weight, bias grads), 1 broadcast, 1 all_gather and
# 1 barrier (the capture's own calls, counted in its script)
EXPECTED = {"gloo:all_reduce": 6, "gloo:broadcast": 3, "gloo:all_gather": 3, "gloo:barrier": 3}


def _raw_events(path: Path) -> list[dict]:
    return json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("gloo:all_reduce", True),
        ("nccl:_all_gather_base", True),
        ("mpi:all_reduce", True),
        ("c10d::allreduce_", True),
        ("aten::add_", False),
        ("ProfilerStep#3", False),
        ("autograd::engine::evaluate_function: AddmmBackward0", False),
        ("gloo:all_reduce extra", False),
    ],
)
def test_collective_names(name, expected):
    assert is_collective(name) is expected
    assert (op_class(name) == "communication") is expected


def test_nccl_kernels_are_communication_not_reductions():
    # the "reduce" token of AllReduce had classed it a reduction
    assert kernel_class("ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)") == "communication"
    assert kernel_class("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)") == (
        "communication"
    )
    assert kernel_class("void at::native::reduce_kernel<512, 1>") == "reduction"


def test_gloo_capture_keeps_each_collective_with_its_time():
    raw = [e for e in _raw_events(GLOO) if e.get("ph") == "X"]
    ops = ingest(GLOO).ops
    comm = ops[ops.op_class == "communication"]
    counts = comm.name.value_counts().to_dict()
    for name, n in EXPECTED.items():
        assert counts.get(name) == n, name
        measured = sum(e["dur"] for e in raw if e["name"] == name)
        assert comm[comm.name == name].dur_us.sum() == pytest.approx(measured, rel=1e-9)
    # c10d's dispatcher ops on the calling thread, one per call
    assert counts["c10d::allreduce_"] == 6 and counts["c10d::barrier"] == 3
    assert set(comm.name) == set(EXPECTED) | {
        "c10d::allreduce_",
        "c10d::broadcast_",
        "c10d::allgather_",
        "c10d::barrier",
    }
    # the gloo work runs on its own threads, never the caller's
    caller = set(ops[ops.name.str.startswith("aten::")].tid)
    assert not caller & set(comm[comm.name.str.startswith("gloo:")].tid)


def test_all_gather_is_kept_whole():
    # gloo's all_gather copies into the output list with aten::copy_ inside its own span: the copies
    # are its time, not ops of their own
    ops = ingest(GLOO).ops
    gathers = ops[ops.name == "gloo:all_gather"]
    for start, dur, tid in zip(gathers.start_us, gathers.dur_us, gathers.tid, strict=True):
        inside = ops[(ops.tid == tid) & (ops.start_us >= start) & (ops.start_us < start + dur)]
        assert inside.name.tolist() == ["gloo:all_gather"]


def test_older_torch_cpu_op_category(tmp_path):
    # torch 1.x filed the process group's work as cpu_op; the same events under that category
    events = _raw_events(GLOO)
    for event in events:
        if is_collective(str(event.get("name"))) and event.get("cat") == "user_annotation":
            event["cat"] = "cpu_op"
    doc = json.loads(gzip.decompress(GLOO.read_bytes()))
    doc["traceEvents"] = events
    path = tmp_path / "gloo_cpu_op.json"
    path.write_text(json.dumps(doc))
    counts = ingest(path).ops.name.value_counts().to_dict()
    for name, n in EXPECTED.items():
        assert counts.get(name) == n, name


def test_each_collective_priced_once_on_a_gpu():
    # predicted on a GPU, the caller's c10d op is the collective's one launch and kernel; the gloo
    # work op on the group's thread is the same collective again (archsim.perf.collectives)
    from archsim.hw import load_hw
    from archsim.perf.collectives import repeated_collectives
    from archsim.perf.kernel import cpu_launch_seconds, predict_op_seconds

    ops = ingest(GLOO).ops
    repeated = repeated_collectives(ops)
    assert ops.name[repeated].value_counts().to_dict() == EXPECTED
    hw = load_hw("dgx-a100")
    gpu_s, launch_s = predict_op_seconds(ops, hw), cpu_launch_seconds(ops, hw)
    assert (gpu_s[repeated] == 0).all() and (launch_s[repeated] == 0).all()
    callers = ops.name.str.startswith("c10d::").to_numpy()
    assert callers.sum() == sum(EXPECTED.values())  # one priced op per collective
    assert (gpu_s[callers] > 0).all() and (launch_s[callers] > 0).all()
    # a trace of the process group's work alone (no c10d op) prices the work ops
    alone = ops[~callers].reset_index(drop=True)
    assert not repeated_collectives(alone).any()
    work = alone.name.str.startswith("gloo:").to_numpy()
    assert (predict_op_seconds(alone, hw)[work] > 0).all()
    # another process's c10d ops do not stand for this one's work
    other = ops.copy()
    other.loc[callers, "pid"] = other.loc[callers, "pid"] + 1
    assert not repeated_collectives(other).any()
