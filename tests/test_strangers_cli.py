"""The user's path through the CLI on bundled traces, as a stranger reads its output."""

from __future__ import annotations

from pathlib import Path

from archsim.cli import main

TRACES = Path(__file__).resolve().parents[1] / "traces"


def test_compare_of_two_traces_names_each_groups_unit(capsys):
    """The text table printed op times with no unit (the JSON had ``unit: ms``): every group of a
    trace comparison now says its unit."""
    a, b = str(TRACES / "dqn-pong-cpu"), str(TRACES / "r2d2-seed-2x2-cpu")
    assert main(["compare", a, b]) == 0
    lines = capsys.readouterr().out.splitlines()
    groups = {line[:36].strip() for line in lines[2:]}
    assert groups == {
        "op time per step, by phase (ms)",
        "op time per step, by op class (ms)",
        "median step time (ms)",
        "recorded (count)",
    }
    assert lines[1].startswith("group (unit)")


def _plain_profile(path: Path) -> None:
    """A user's own torch.profiler trace of a few training steps: no archsim markers."""
    import torch
    from torch.profiler import ProfilerActivity, profile

    net = torch.nn.Linear(4, 2)
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as prof:
        for _ in range(3):
            loss = net(torch.randn(16, 4)).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    prof.export_chrome_trace(str(path))


def test_breakdown_refuses_to_resize_a_batch_it_cannot_know(tmp_path, capsys):
    """A raw trace's learner steps are inferred, their batch the schema's fill value (1):
    ``--learner-batch 64`` changed nothing and said nothing. Now one line, exit 2, nothing written."""
    raw = tmp_path / "mine.json"
    _plain_profile(raw)
    out = tmp_path / "bd"
    argv = ["breakdown", str(raw), "--hw", "dgx1-v100", "--phase", "train", "--out", str(out)]
    assert main([*argv, "--learner-batch", "64"]) == 2
    assert capsys.readouterr().err.strip() == (
        "archsim: error: --learner-batch: the trace's steps were inferred by ingest (no archsim "
        "markers), so the batch its ops were captured at is unknown; capture with archsim to "
        "resize batches"
    )
    assert not out.exists()
    assert main(argv) == 0  # without the flag the trace breaks down as it is


def test_simulate_refuses_a_learner_batch_it_cannot_resize_from(tmp_path, capsys):
    """``simulate --learner-batch 64`` on a user's own profile scaled the learner's CPU work from
    the fill batch 1 to 64 (a PPO trace on --hw local: 121 updates/s became 10.6) and said nothing;
    sweeps go through the same check."""
    raw = tmp_path / "mine.json"
    _plain_profile(raw)
    out = tmp_path / "sim"
    argv = ["simulate", str(raw), "--hw", "local", "--learner-batch", "64", "--out", str(out)]
    assert main(argv) == 2
    assert capsys.readouterr().err.strip().splitlines()[-1] == (
        "archsim: error: --learner-batch: the trace's steps were inferred by ingest (no archsim "
        "markers), so the batch its ops were captured at is unknown; capture with archsim to "
        "resize batches"
    )
    assert not out.exists()


def test_trace_info_says_compiled_graphs_on_the_cpu_hide_their_fused_kernels(tmp_path, capsys):
    """A CPU capture of torch.compile'd code: Inductor's fused C++ kernels have no op events (an
    A2C policy's 128 graph calls spent 2.3 of their 5.9 ms outside any aten op), so a GPU
    prediction misses that work. ingest counts the calls and trace info says so; the repository's
    AlexNet capture (no compiled code) says nothing of it."""
    import gzip
    import json

    raw = TRACES / "alexnet-b1-fp32" / "raw_trace.json.gz"
    doc = json.loads(gzip.decompress(raw.read_bytes()))
    ops = [e for e in doc["traceEvents"] if e.get("cat") == "cpu_op" and e.get("ph") == "X"]
    for op in ops[:3]:  # a compiled graph call around three ops, as Inductor's wrapper records it
        doc["traceEvents"].append(
            {**op, "cat": "user_annotation", "name": "## Call CompiledFxGraph fab ##", "args": {}}
        )
    mine = tmp_path / "compiled.json.gz"
    mine.write_bytes(gzip.compress(json.dumps(doc).encode()))
    for path, calls in ((raw, 0), (mine, 3)):
        out = tmp_path / f"t{calls}"
        assert main(["ingest", str(path), "--out", str(out)]) == 0
        assert main(["trace", "info", str(out)]) == 0
        printed = capsys.readouterr().out
        said = [line for line in printed.splitlines() if line.startswith("torch.compile:")]
        assert said == ([f"torch.compile: {calls} calls of compiled graphs on the CPU; the kernels "
                         "Inductor fused in them are not profiler ops, so GPU predictions price "
                         "only the library ops inside (matmuls, convolutions), not the fused "
                         "elementwise work"] if calls else [])  # fmt: skip
