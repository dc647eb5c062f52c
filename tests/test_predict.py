"""archsim predict: per-batch predictions from real AlexNet captures, invariants across hardware,
the dtype retargeting worked by hand, and the bad-input errors of the CLI."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from archsim.analysis.predict import (
    predict_inference,
    predict_phase,
    retarget_dtype,
    select_phase_ops,
)
from archsim.capture.session import CaptureSchedule
from archsim.cli import main
from archsim.hw import load_hw
from archsim.trace import load
from archsim.trace.schema import PHASE_GROUPS
from tests.conftest import kineto_fixture

# One warm-up and two recorded forward passes: enough for per-step grouping, fast on 2 cores.
TINY_SCHEDULE = CaptureSchedule(skip_first=0, wait=0, warmup=1, active=2, repeat=1)
JSON_KEYS = {"batch", "dtype", "seconds_per_batch", "images_per_s"}


@pytest.fixture(scope="module")
def traces(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Real AlexNet captures on this CPU: batch 1 and 32 in fp32, and batch 32 for an fp16 target."""
    from workloads.alexnet.run import capture_alexnet

    root = tmp_path_factory.mktemp("alexnet-traces")
    out = {}
    for key, batch, dtype in (("b1", 1, "fp32"), ("b32", 32, "fp32"), ("b32_fp16", 32, "fp16")):
        out[key] = root / key
        capture_alexnet(out[key], batch, dtype, schedule=TINY_SCHEDULE)
    return out


def _predict_cli(trace: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> dict:
    assert main(["predict", str(trace), "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_has_the_documented_keys_and_images_per_s_is_batch_over_time(
    traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    result = _predict_cli(traces["b32"], capsys, "--hw", "dgx1-v100")
    assert set(result) >= JSON_KEYS
    assert result["batch"] == 32
    assert result["dtype"] == "float32"
    assert result["images_per_s"] == pytest.approx(result["batch"] / result["seconds_per_batch"])
    assert result["seconds_per_batch"] == pytest.approx(
        max(result["gpu_seconds"], result["launch_overhead_seconds"])
    )
    assert result["n_steps"] == TINY_SCHEDULE.active


def test_launch_overhead_is_launches_times_the_presets_cost(traces: dict[str, Path]) -> None:
    hw = load_hw("dgx1-v100")
    result = predict_inference(load(traces["b1"]), hw)
    assert result["launches"] == result["n_ops"]  # one launch per op of a step
    assert result["launch_overhead_seconds"] == pytest.approx(
        result["launches"] * hw.gpu.launch_overhead_us * 1e-6
    )


def test_text_output_names_hardware_and_rate(
    traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(traces["b1"]), "--hw", "dgx-a100"]) == 0
    text = capsys.readouterr().out
    assert "dgx-a100" in text and "images/s" in text and "predicted time per batch" in text


def test_batch_32_has_higher_throughput_than_batch_1_on_v100(traces: dict[str, Path]) -> None:
    hw = load_hw("dgx1-v100")
    b1 = predict_inference(load(traces["b1"]), hw)
    b32 = predict_inference(load(traces["b32"]), hw)
    assert b32["images_per_s"] > b1["images_per_s"]


@pytest.mark.parametrize("preset", ["dgx1-v100", "dgx-a100"])
def test_fp16_target_is_faster_than_fp32_on_tensor_core_gpus(
    traces: dict[str, Path], preset: str
) -> None:
    fp16_trace = load(traces["b32_fp16"])
    assert fp16_trace.meta["target_dtype"] == "float16"
    hw = load_hw(preset)
    fp32 = predict_inference(load(traces["b32"]), hw)
    fp16 = predict_inference(fp16_trace, hw)
    assert fp16["dtype"] == "float16"
    assert fp16["images_per_s"] > fp32["images_per_s"]


@settings(
    max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(fewer=st.integers(min_value=1, max_value=200), extra=st.integers(min_value=1, max_value=200))
def test_more_sms_are_never_slower(traces: dict[str, Path], fewer: int, extra: int) -> None:
    trace = load(traces["b32"])
    small = predict_inference(trace, load_hw("dgx1-v100", [f"gpu.sms={fewer}"]))
    large = predict_inference(trace, load_hw("dgx1-v100", [f"gpu.sms={fewer + extra}"]))
    assert large["gpu_seconds"] <= small["gpu_seconds"] * (1 + 1e-12)


def test_no_ops_in_phase_is_a_one_line_error_exit_2(
    traces: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(traces["b1"]), "--hw", "dgx1-v100", "--phase", "train"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0
    assert (
        "no ops in phase 'train'" in err and "inference_batch" in err and str(traces["b1"]) in err
    )


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--hw", "dgx-z900"], "unknown hardware preset"),
        (["--hw", "dgx1-v100", "--set", "gpu.warp_drive=1"], "gpu.warp_drive"),
        (["--hw", "dgx1-v100", "--phase", "lunch"], "unknown phase"),
    ],
)
def test_bad_input_exits_2_with_one_line(
    traces: dict[str, Path], capsys: pytest.CaptureFixture[str], args: list[str], expected: str
) -> None:
    assert main(["predict", str(traces["b1"]), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("archsim: error:") and expected in err and "\n" not in err


def test_a_folder_that_is_not_a_trace_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["predict", str(tmp_path), "--hw", "dgx1-v100"]) == 2
    assert "not a trace directory" in capsys.readouterr().err


def test_retarget_dtype_halves_float_bytes_and_keeps_integer_ops() -> None:
    ops = pd.DataFrame(
        {
            "dtype": ["float32", "int64", "float16"],
            "bytes_read": [4000.0, 800.0, 200.0],
            "bytes_written": [400.0, 8.0, 20.0],
            "flops": [1e6, 0.0, 1e3],
        }
    )
    out = retarget_dtype(ops, "float16")
    # float32 -> float16: 2/4 of the bytes (4000 -> 2000, 400 -> 200); int64 unchanged; fp16 stays.
    assert out["dtype"].tolist() == ["float16", "int64", "float16"]
    assert out["bytes_read"].tolist() == [2000.0, 800.0, 200.0]
    assert out["bytes_written"].tolist() == [200.0, 8.0, 20.0]
    assert out["flops"].tolist() == ops["flops"].tolist()  # the work itself does not change
    assert ops["dtype"].tolist()[0] == "float32"  # a copy: the trace's table is left alone


def test_measured_gpu_trace_predicted_on_its_own_gpu_is_its_measured_time() -> None:
    """The A100 AlexNet fixture predicted on the A100 preset: every kernel anchors to its measured
    duration (model ratio 1), so the GPU time is the sum of durations plus one launch latency each."""
    from archsim.trace.ingest import ingest

    trace = ingest(kineto_fixture("a100_alexnet_forward.json.gz"))
    hw = load_hw("dgx-a100", [f"gpu.sms={trace.meta['source'].get('gpu_num_sms') or 108}"])
    phase = str(trace.ops["phase"].mode()[0])
    result = predict_phase(trace, hw, phase)
    ops = trace.ops[trace.ops["phase"] == phase]
    expected = ops["dur_us"].sum() * 1e-6 + len(ops) * hw.gpu.launch_latency_us * 1e-6
    assert result["n_steps"] == 1  # no archsim step markers: the whole trace is one step
    assert result["gpu_seconds"] == pytest.approx(expected, rel=1e-9)
    assert np.isfinite(result["items_per_s"])


def test_train_phase_of_a_foreign_gpu_trace_is_per_inferred_learner_step(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The V100 DDP training fixture has no archsim markers: ingest infers its learner steps from
    torch's own annotations (archsim.trace.infer_steps); on its own GPU each op is its measured time,
    and the batch stays unknown (inferred steps do not say it)."""
    out = tmp_path / "v100"
    assert (
        main(["ingest", str(kineto_fixture("v100_cnn_ddp_train.json.gz")), "--out", str(out)]) == 0
    )
    capsys.readouterr()
    result = _predict_cli(out, capsys, "--hw", "dgx1-v100", "--phase", "train")
    trace = load(out)
    ops = trace.ops[trace.ops["phase"].isin(PHASE_GROUPS["train"])]
    ops = ops[ops["step_id"] >= 0]
    hw = load_hw("dgx1-v100")
    per_step_s = ops.groupby("step_id")["dur_us"].sum() * 1e-6 + (
        ops.groupby("step_id").size() * hw.gpu.launch_latency_us * 1e-6
    )
    assert result["steps_from"] == "step_id"
    assert result["n_steps"] == ops["step_id"].nunique() == 5
    assert result["batch_known"] is False and result["rate_unit"] == "steps/s"
    assert result["gpu_seconds"] == pytest.approx(float(np.median(per_step_s)), rel=1e-9)


@pytest.mark.parametrize("name", ["alexnet-b1-fp32", "alexnet-b32-fp32", "alexnet-b32-fp16"])
def test_bundled_example_traces_load_and_predict(name: str) -> None:
    trace = load(Path(__file__).resolve().parents[1] / "traces" / name)
    settings = trace.meta["workload"]["settings"]
    result = predict_inference(trace, load_hw("dgx1-v100"))
    assert result["batch"] == settings["batch_size"]
    assert result["dtype"] == trace.meta["target_dtype"]
    assert result["n_steps"] == trace.meta["capture"]["schedule"]["active"]
    assert result["images_per_s"] > 0


def test_fp32_capture_for_an_fp16_target_predicts_like_a_native_fp16_capture(
    traces: dict[str, Path], tmp_path: Path
) -> None:
    """Retargeting (dtype column, bytes halved) reproduces what an fp16 capture records itself."""
    import torch

    from workloads.alexnet.run import capture_alexnet, cpu_runs_dtype

    if not cpu_runs_dtype(torch.float16):
        pytest.skip("this CPU's torch cannot run conv2d in float16")
    native = capture_alexnet(tmp_path / "fp16", 1, "fp16", TINY_SCHEDULE, capture_dtype="target")
    assert set(native.ops["dtype"]) == {"float16"}
    retargeted = load(traces["b1"])
    retargeted.meta["target_dtype"] = "float16"
    for preset in ("dgx1-v100", "jetson-tx1"):
        hw = load_hw(preset)
        expected = predict_inference(native, hw)
        got = predict_inference(retargeted, hw)
        assert got["dtype"] == expected["dtype"] == "float16"
        assert got["seconds_per_batch"] == pytest.approx(expected["seconds_per_batch"], rel=1e-9)


def test_calibration_overlay_divides_each_ops_model_time_by_its_efficiency(
    traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every class at efficiency 0.5 doubles each op's body time; the GPU launch latency per op is
    not scaled: calibrated = 2 x plain - ops x launch_latency."""
    from archsim.perf.kernel import efficiency_class

    classes = sorted(set(efficiency_class(load(traces["b32"]).ops)))
    overlay = tmp_path / "half.yaml"
    overlay.write_text("efficiency:\n" + "".join(f"  {name}: 0.5\n" for name in classes))
    args = ["--hw", "dgx1-v100"]
    plain = _predict_cli(traces["b32"], capsys, *args)
    calibrated = _predict_cli(traces["b32"], capsys, *args, "--calibration", str(overlay))
    latency_s = load_hw("dgx1-v100").gpu.launch_latency_us * 1e-6
    expected = 2 * plain["gpu_seconds"] - plain["n_ops"] * latency_s
    assert calibrated["calibrated"] is True and plain["calibrated"] is False
    assert calibrated["gpu_seconds"] == pytest.approx(expected, rel=1e-9)
    overlay.write_text("efficiency:\n  conv: -1\n")
    assert main(["predict", str(traces["b32"]), *args, "--calibration", str(overlay)]) == 2
    assert "efficiency.conv" in capsys.readouterr().err


def test_a_target_without_a_gpu_exits_2(
    traces: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """jetson-tx1 with its gpu section removed: predict needs a GPU to run the ops on."""
    import yaml

    from archsim.hw.presets import presets_dir

    config = yaml.safe_load((presets_dir() / "jetson-tx1.yaml").read_text())
    config["gpu"] = None
    path = tmp_path / "cpu-only.yaml"
    path.write_text(yaml.safe_dump(config))
    assert main(["predict", str(traces["b1"]), "--hw", str(path)]) == 2
    assert "predict needs a GPU target" in capsys.readouterr().err


EXAMPLE_TRACES = Path(__file__).resolve().parents[1] / "traces"


@pytest.mark.parametrize(
    ("trace", "phase", "unit"),
    [
        ("alexnet-b1-fp32", "inference", "images/s"),
        ("alexnet-b1-fp32", "all", "images/s"),  # every op is inference: still one image batch
        ("dqn-pong-cpu", "inference", "observations/s"),
        ("dqn-pong-cpu", "train", "samples/s"),
        ("dqn-pong-cpu", "all", "steps/s"),  # actor batch 1 and learner batch 32: no one batch
    ],
)
def test_rate_unit_names_what_is_counted(
    trace: str, phase: str, unit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = EXAMPLE_TRACES / trace
    result = _predict_cli(path, capsys, "--hw", "dgx1-v100", "--phase", phase)
    assert result["rate_unit"] == unit
    assert main(["predict", str(path), "--hw", "dgx1-v100", "--phase", phase]) == 0
    text = capsys.readouterr().out
    assert f"{unit}:" in text
    if unit != "images/s":
        assert "images/s" not in text


def test_phase_all_on_dqn_is_the_mean_iteration_of_actor_and_learner_work() -> None:
    """DQN's CPU capture: 160 profiler iterations, a learner step in some. Per iteration the GPU time
    is the whole recorded GPU time over the iterations (the mean), and it lies between the actor's
    step and the learner's."""
    from archsim.perf.kernel import predict_op_seconds

    trace = load(EXAMPLE_TRACES / "dqn-pong-cpu")
    hw = load_hw("dgx1-v100")
    every = predict_phase(trace, hw, "all")
    assert every["steps_from"] == "profiler_step" and every["batch_known"] is False
    ops = select_phase_ops(trace, "all")
    ops = ops[ops["profiler_step"] >= 0]
    iterations = ops["profiler_step"].nunique()
    assert every["n_steps"] == iterations
    total_s = float(np.sum(predict_op_seconds(ops, hw)))
    assert every["gpu_seconds"] == pytest.approx(total_s / iterations, rel=1e-9)
    actor = predict_phase(trace, hw, "inference")["gpu_seconds"]
    learner = predict_phase(trace, hw, "train")["gpu_seconds"]
    assert actor < every["gpu_seconds"] < learner


def test_cpu_capture_has_no_measured_time_and_model_only_changes_nothing(
    capsys: pytest.CaptureFixture[str],
) -> None:
    path = EXAMPLE_TRACES / "alexnet-b32-fp32"
    plain = _predict_cli(path, capsys, "--hw", "dgx-a100")
    model = _predict_cli(path, capsys, "--hw", "dgx-a100", "--model-only")
    assert plain["measured_gpu_seconds"] is None and model["measured_gpu_seconds"] is None
    assert model["model_only"] is True and plain["model_only"] is False
    assert model["gpu_seconds"] == pytest.approx(plain["gpu_seconds"], rel=1e-12)


def test_measured_gpu_seconds_is_the_traces_own_device_time(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A100 AlexNet fixture (one step, no markers): measured = sum of kernel, copy and memset
    durations; anchored on its own GPU the prediction is that plus one launch latency per op."""
    from archsim.trace.ingest import ingest

    path = kineto_fixture("a100_alexnet_forward.json.gz")
    trace = ingest(path)
    measured_s = trace.ops["dur_us"].sum() * 1e-6
    result = _predict_cli(path, capsys, "--hw", "dgx-a100", "--phase", "all")
    latency_s = load_hw("dgx-a100").gpu.launch_latency_us * 1e-6
    assert result["measured_gpu_seconds"] == pytest.approx(measured_s, rel=1e-9)
    assert result["gpu_seconds"] == pytest.approx(measured_s + len(trace.ops) * latency_s, rel=1e-9)
    assert result["source_hw"] == "dgx-a100"
    model = _predict_cli(path, capsys, "--hw", "dgx-a100", "--phase", "all", "--model-only")
    assert model["measured_gpu_seconds"] == pytest.approx(measured_s, rel=1e-9)
    assert model["source_hw"] is None and model["gpu_seconds"] != result["gpu_seconds"]
    text_args = ["predict", str(path), "--hw", "dgx-a100", "--phase", "all"]
    assert main(text_args) == 0
    assert "measured in the trace" in capsys.readouterr().out


def test_source_hw_flag_replaces_the_traces_gpu(capsys: pytest.CaptureFixture[str]) -> None:
    """The A100 fixture declared as measured on a V100: every op is scaled by model(A100)/model(V100),
    so on the V100 itself each op is again its measured time."""
    path = kineto_fixture("a100_alexnet_forward.json.gz")
    own = _predict_cli(
        path, capsys, "--hw", "dgx1-v100", "--phase", "all", "--source-hw", "dgx1-v100"
    )
    latency_s = load_hw("dgx1-v100").gpu.launch_latency_us * 1e-6
    assert own["source_hw"] == "dgx1-v100"
    assert own["gpu_seconds"] == pytest.approx(
        own["measured_gpu_seconds"] + own["n_ops"] * latency_s, rel=1e-9
    )
    assert main(["predict", str(path), "--source-hw", "dgx-z900"]) == 2
    assert "dgx-z900: unknown hardware preset" in capsys.readouterr().err
