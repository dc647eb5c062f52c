"""Any GPU from its trace (issue 12): a source config from deviceProperties and the architecture
table, the architecture from kernel names when the GPU is not named, deviceProperties of the wrong
type refused in one line, and every real fixture with GPU kernels through ``predict --model-only
--phase all --json`` with the trace's own measured time."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from archsim.analysis.predict import predict_phase
from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import load_hw
from archsim.hw.arch_table import ARCHS, arch_from_kernel_names
from archsim.perf.source import preset_for_gpu_name, source_hw_for_trace
from archsim.trace.ingest import ingest
from tests.conftest import KINETO_FIXTURES, error_line, kineto_fixture

# Fixtures with GPU kernels, and the GPU config each one's trace resolves to.
GPU_FIXTURES = {
    "a100_80gb_train_prewindow.json.gz": "dgx-a100",
    "a100_alexnet_forward.json.gz": "dgx-a100",
    "a100_event_sync_multistream.json.gz": "dgx-a100",
    "a100_train_shapes.json.gz": "dgx-a100",
    "gp100_user_annotation.json.gz": "trace-sm_60",  # Quadro GP100: no preset, built from the table
    "h100_timesformer_inference.json.gz": "dgx-h100",
    "mi210_gpu_only.json.gz": "mi210",
    "mi250_mlp_train.json.gz": "trace-gfx90a",  # an MI250 GCD named "AMD Radeon Graphics"
    "mi300x_normalization_bench.json.gz": "mi300x",
    "mi300x_sd35_inference.json.gz": "mi300x",
    "nodevice_sampled_train.json.gz": "trace-sm_80",  # no deviceProperties: cutlass_80/ampere_ kernels
    "rtx2080ti_mlp_train.json.gz": "rtx2080ti",
    "v100_cnn_ddp_train.json.gz": "dgx1-v100",
    "v100_resnet50_train_2021.json.gz": "dgx1-v100",
}
# Refused by ingest (archsim.trace.ingest, helper H6's area): no GPU work archsim can price.
REFUSED_FIXTURES = {
    "a100_cupti_range_no_kernels.json.gz": "no kernel, memcpy or memset events",
    "mtia_inference.json.gz": "non-CUDA/ROCm accelerator",
}


def test_every_fixture_is_listed() -> None:
    if not KINETO_FIXTURES.is_dir():
        pytest.skip(f"{KINETO_FIXTURES} is absent (../shared/fixtures not beside the checkout)")
    present = {p.name for p in KINETO_FIXTURES.glob("*.json.gz")}
    assert present == set(GPU_FIXTURES) | set(REFUSED_FIXTURES)


@pytest.mark.parametrize("name", sorted(GPU_FIXTURES))
def test_every_gpu_fixture_predicts_model_only_with_its_measured_time(
    name: str, capsys: pytest.CaptureFixture[str]
) -> None:
    path = kineto_fixture(name)
    args = ["predict", str(path), "--hw", "dgx-h100", "--phase", "all", "--model-only", "--json"]
    assert main(args) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["model_only"] is True and result["source_hw"] is None
    assert result["measured_gpu_seconds"] is not None and result["measured_gpu_seconds"] > 0
    assert result["gpu_seconds"] > 0 and result["rate_unit"] == "steps/s"


@pytest.mark.parametrize("name", sorted(REFUSED_FIXTURES))
def test_refused_fixtures_exit_2_in_one_line(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    path = kineto_fixture(name)
    assert main(["predict", str(path), "--phase", "all", "--model-only", "--json"]) == 2
    assert REFUSED_FIXTURES[name] in error_line(capsys)


@pytest.fixture(scope="module")
def gp100():
    return ingest(kineto_fixture("gp100_user_annotation.json.gz"))


def test_quadro_gp100_config_from_its_device_properties(gp100) -> None:
    """Quadro GP100 (CC 6.0, 56 SMs): Pascal GP100 rates per SM per clock (P100 whitepaper), its
    datasheet's 717 GB/s (the name says it), limits from the trace, the rest from dgx1-p100."""
    hw = source_hw_for_trace(gp100)
    gpu = hw.gpu
    assert hw.name == "trace-sm_60" and gpu.name == "Quadro GP100"
    assert gpu.sms == 56 and gpu.count == 2  # two devices in deviceProperties
    assert (gpu.fp32_flops_per_clk_per_sm, gpu.fp16_flops_per_clk_per_sm) == (128, 256)
    assert gpu.tensor_flops_per_clk_per_sm == 0 and gpu.tf32 is False
    assert gpu.fp32_peak_flops == pytest.approx(56 * 128 * 1480e6)  # 10.6 TFLOP/s
    assert gpu.dram_bw_gbs == 717
    assert gpu.shared_mem_per_sm_kb == 64 and gpu.registers_per_sm == 65536
    assert gpu.launch_latency_us == load_hw("dgx1-p100").gpu.launch_latency_us


def test_own_gpu_prediction_of_a_preset_less_trace_is_its_measured_time(gp100) -> None:
    """Anchored on the config built from the trace, every op is its measured time (ratio 1) plus
    the GPU-side launch latency."""
    from archsim.perf.kernel import predict_op_seconds

    source = source_hw_for_trace(gp100)
    measured = gp100.ops["dur_us"].to_numpy(dtype=float)
    seconds = predict_op_seconds(gp100.ops, source, source)
    timed = measured > 0  # zero-length records (a few copies) have no duration to anchor to
    assert timed.sum() > 100
    expected = measured[timed] + source.gpu.launch_latency_us
    assert seconds[timed] * 1e6 == pytest.approx(expected, rel=1e-9)


def test_mi250_gcd_named_radeon_graphics_is_cdna2() -> None:
    """HIP reports the MI250's gfx90a as compute capability 9.0, like Hopper; the 64-wide wavefront
    says AMD. 104 CUs of the MI210 reference: its HBM2e bandwidth, MFMA FP16 1024 per CU per clock."""
    hw = source_hw_for_trace(ingest(kineto_fixture("mi250_mlp_train.json.gz")))
    gpu = hw.gpu
    assert hw.name == "trace-gfx90a" and gpu.sms == 104
    assert gpu.tensor_flops_per_clk_per_sm == 1024 and gpu.tf32 is False
    assert gpu.dram_bw_gbs == pytest.approx(1638.4)
    assert gpu.max_threads_per_sm == 2048 and gpu.shared_mem_per_sm_kb == 64


def test_unnamed_gpu_architecture_from_kernel_names() -> None:
    hw = source_hw_for_trace(ingest(kineto_fixture("nodevice_sampled_train.json.gz")))
    assert hw.name == "trace-sm_80" and hw.gpu.sms == ARCHS["sm_80"].ref_sms == 108
    assert "inferred from kernel names" in hw.description


@pytest.mark.parametrize(
    ("names", "expected"),
    [
        (["volta_sgemm_128x64_nn"], "sm_70"),  # also runs on Turing: at least sm_70
        (["volta_sgemm_128x64_nn", "sm90_xmma_gemm_bf16"], "sm_90"),  # the newest mark wins
        (["cutlass_80_tensorop_s1688gemm_64x64", "cutlass_75_wmma"], "sm_80"),
        (["Cijk_Alik_Bljk_gfx942_MT64x64"], "gfx942"),
        (["Cijk_Alik_Bljk_SB_MT64x16x32_MI16x16x1"], None),  # MFMA names no generation
        (["sm80_xmma_gemm", "kernel_gfx90a"], None),  # contradictory vendors: ask the user
        (["void at::native::vectorized_elementwise_kernel<4>"], None),
    ],
)
def test_arch_from_kernel_names(names: list[str], expected: str | None) -> None:
    arch = arch_from_kernel_names(names)
    assert (arch.key if arch else None) == expected


@pytest.mark.parametrize(
    ("name", "preset"),
    [
        ("NVIDIA L4", "l4"),
        ("NVIDIA L40S", None),  # whole words: an L40S is not an L4
        ("NVIDIA H200", "dgx-h200"),
        ("NVIDIA H100 80GB HBM3", "dgx-h100"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI300A", None),
        ("Tesla T4", "t4"),
        ("NVIDIA GeForce RTX 4090", "rtx4090"),
        ("Orin (nvgpu)", "jetson-agx-orin"),
    ],
)
def test_gpu_name_to_preset(name: str, preset: str | None) -> None:
    assert preset_for_gpu_name(name) == preset


def test_every_arch_reference_preset_loads_and_shares_the_architecture() -> None:
    """The reference preset of each architecture has that architecture's per-clock rates (the
    table and the presets cite the same datasheets; GeForce presets have half the tensor rate)."""
    for arch in ARCHS.values():
        if arch.key == "sm_61":
            continue  # no GP10x preset: it borrows dgx1-p100's host and latency figures only
        gpu = load_hw(arch.reference_preset).gpu
        assert gpu.fp32_flops_per_clk_per_sm == arch.fp32_flops_per_clk_per_sm, arch.key
        assert gpu.tensor_flops_per_clk_per_sm in (
            arch.tensor_flops_per_clk_per_sm,
            arch.tensor_flops_per_clk_per_sm * arch.geforce_tensor_factor,
        ), arch.key


def _edited(tmp_path: Path, fixture: str, **fields) -> Path:
    """A copy of a fixture with deviceProperties fields replaced (None removes the key)."""
    with gzip.open(kineto_fixture(fixture), "rt") as handle:
        data = json.load(handle)
    for props in data["deviceProperties"]:
        for key, value in fields.items():
            if value is None:
                props.pop(key, None)
            else:
                props[key] = value
    out = tmp_path / f"edited_{fixture}"
    with gzip.open(out, "wt") as handle:
        json.dump(data, handle)
    return out


def _commands(path: Path, tmp_path: Path) -> list[list[str]]:
    return [
        ["predict", str(path), "--phase", "all"],
        ["breakdown", str(path), "--out", str(tmp_path / "bd")],
        ["calibrate", str(path), "--out", str(tmp_path / "cal.yaml")],
    ]


@pytest.mark.parametrize(
    ("fixture", "fields", "expected"),
    [
        ("gp100_user_annotation.json.gz", {"numSms": "eighty"}, "deviceProperties[0].numSms"),
        ("a100_alexnet_forward.json.gz", {"numSms": "eighty"}, "numSms"),  # a preset's GPU too
        (
            "gp100_user_annotation.json.gz",
            {"computeMinor": "0"},
            "computeMinor: expected an integer",
        ),
        ("gp100_user_annotation.json.gz", {"numSms": 0}, "numSms: expected an integer >= 1"),
        (
            "gp100_user_annotation.json.gz",
            {"name": 42},
            "expected a string, got 42",
        ),
        ("gp100_user_annotation.json.gz", {"computeMajor": 5}, "sm_50 is not in the table"),
        (
            "gp100_user_annotation.json.gz",
            {"computeMajor": None},
            "computeMajor/computeMinor: missing",
        ),
    ],
)
def test_bad_device_properties_exit_2_in_one_line_on_every_command(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], fixture: str, fields: dict, expected: str
) -> None:
    path = _edited(tmp_path, fixture, **fields)
    for args in _commands(path, tmp_path):
        assert main(args) == 2, args
        line = error_line(capsys)
        assert expected in line and str(path) in line, (args, line)
    assert not (tmp_path / "bd").exists() and not (tmp_path / "cal.yaml").exists()


def test_unknown_architecture_works_with_source_hw(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _edited(tmp_path, "gp100_user_annotation.json.gz", computeMajor=5)
    for args in _commands(path, tmp_path):
        assert main([*args, "--source-hw", "dgx1-p100"]) == 0, args
    capsys.readouterr()


def test_no_gpu_name_and_no_kernel_marks_asks_for_source_hw(gp100) -> None:
    trace = ingest(kineto_fixture("gp100_user_annotation.json.gz"))
    trace.meta["source"]["gpu_name"] = None
    trace.meta["source"]["device_properties"] = []
    with pytest.raises(ArchsimError, match="--source-hw") as info:
        source_hw_for_trace(trace)
    assert "\n" not in str(info.value)
    # the model alone needs no source: a prediction still comes out
    result = predict_phase(trace, load_hw("dgx1-p100"), "all", model_only=True)
    assert result["measured_gpu_seconds"] > 0


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (
            {"name": "NVIDIA H100 80GB HBM3", "computeMajor": 9, "computeMinor": 0, "warpSize": 32},
            "sm_90",
        ),
        (
            {"name": "AMD Radeon Graphics", "computeMajor": 9, "computeMinor": 0, "warpSize": 64},
            "gfx90a",
        ),
        (
            {"name": "AMD Instinct MI300X", "computeMajor": 9, "computeMinor": 4, "warpSize": 64},
            "gfx942",
        ),
        ({"name": "NVIDIA GeForce RTX 3090", "computeMajor": 8, "computeMinor": 6}, "sm_86"),
        # HIP reports the MI100 (gfx908) as 9.0 too: its name keeps it from passing as gfx90a
        (
            {"name": "AMD Instinct MI100", "computeMajor": 9, "computeMinor": 0, "warpSize": 64},
            None,
        ),
    ],
)
def test_architecture_from_compute_capability(props: dict, expected: str | None) -> None:
    from archsim.hw.arch_table import arch_for_properties

    if expected is None:
        with pytest.raises(ArchsimError, match="gfx908 is not in the table.*--source-hw"):
            arch_for_properties(props)
    else:
        assert arch_for_properties(props).key == expected


def test_geforce_parts_get_half_the_tensor_rate() -> None:
    """GA102 whitepaper: RTX 3090 71 dense FP16/FP32-acc tensor TFLOP/s = 82 SMs x 512 x 1695 MHz,
    half the A40's 1024 per SM per clock."""
    from archsim.hw.arch_table import gpu_overrides

    geforce = gpu_overrides(ARCHS["sm_86"], {"name": "NVIDIA GeForce RTX 3090", "numSms": 82}, 1)
    assert geforce["tensor_flops_per_clk_per_sm"] == 512
    peak_flops = 82 * geforce["tensor_flops_per_clk_per_sm"] * geforce["clock_mhz"] * 1e6
    assert peak_flops == pytest.approx(71.2e12, rel=0.01)
    a40 = gpu_overrides(ARCHS["sm_86"], {"name": "NVIDIA A40", "numSms": 84}, 1)
    assert a40["tensor_flops_per_clk_per_sm"] == 1024
    # a smaller part of the architecture: DRAM and L2 scale with its SMs (A40 84 of RTX 3090's 82)
    assert a40["dram_bw_gbs"] == pytest.approx(936 * 84 / 82)


def test_calibrate_fits_on_a_config_built_from_the_trace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """No preset for the Quadro GP100: calibrate fits on the trace's own config, --set included."""
    import yaml

    path = kineto_fixture("gp100_user_annotation.json.gz")
    out = tmp_path / "cal.yaml"
    assert main(["calibrate", str(path), "--out", str(out), "--set", "gpu.sms=20"]) == 0
    capsys.readouterr()
    provenance = yaml.safe_load(out.read_text())["provenance"]
    assert provenance["hw"] == "trace-sm_60" and provenance["hw_overrides"] == ["gpu.sms=20"]
    bad = ["calibrate", str(path), "--out", str(tmp_path / "bad.yaml"), "--set", "gpu.sms=-2"]
    assert main(bad) == 2
    assert "gpu.sms" in error_line(capsys) and not (tmp_path / "bad.yaml").exists()


@pytest.mark.parametrize(
    ("device", "name", "major", "minor", "sms", "expected"),
    [
        ("cuda", "NVIDIA L40S", 8, 9, 142, "trace-sm_89"),
        ("rocm", "AMD Instinct MI300A", 9, 4, 228, "trace-gfx942"),
    ],
)
def test_archsims_own_gpu_capture_properties(
    device: str, name: str, major: int, minor: int, sms: int, expected: str
) -> None:
    """archsim's GPU captures (archsim.capture.machine) record torch's names: major, minor and
    total_memory_bytes in one dict, the name and SM count beside it."""
    trace = ingest(kineto_fixture("gp100_user_annotation.json.gz"))
    trace.meta["source"].update(
        device=device,
        gpu_name=name,
        gpu_num_sms=sms,
        gpu_count=1,
        devices_used=[],
        device_properties={"total_memory_bytes": 48 * 2**30, "major": major, "minor": minor},
    )
    hw = source_hw_for_trace(trace)
    assert hw.name == expected and hw.gpu.name == name and hw.gpu.sms == sms
