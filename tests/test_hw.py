"""Hardware presets: load, derived peaks match REFERENCE.md, bad configs are one-line errors, CLI exit 2."""

from __future__ import annotations

import pytest
import yaml

from archsim.cli import main
from archsim.errors import ArchsimError
from archsim.hw import list_presets, load_hw, presets_dir
from archsim.hw.local import detect_cpu, detect_local

PRESETS = ["dgx1-v100", "dgx-a100", "dgx-h100", "jetson-tx1"]


def test_every_preset_and_local_load() -> None:
    names = list_presets()
    for name in [*PRESETS, "local"]:
        assert name in names
        assert load_hw(name).name == name


# REFERENCE.md GPU table: FP32 / FP16-vector / tensor peaks in TFLOP/s.
@pytest.mark.parametrize(
    ("preset", "fp32", "fp16", "tensor"),
    [
        ("dgx1-v100", 15.7, 31.4, 125.0),  # 80*128*1530e6 = 15.67 T; 80*1024*1530e6 = 125.3 T
        ("dgx-a100", 19.5, 78.0, 312.0),  # 108*128*1410e6 = 19.49 T; 108*2048*1410e6 = 311.9 T
        ("dgx-h100", 66.9, 133.8, 989.0),  # 132*256*1980e6 = 66.9 T
        ("jetson-tx1", 0.512, 1.024, 0.0),  # 2*256*998e6 = 0.511 T
    ],
)
def test_derived_peaks_match_reference(
    preset: str, fp32: float, fp16: float, tensor: float
) -> None:
    gpu = load_hw(preset).gpu
    assert gpu is not None
    assert gpu.fp32_peak_flops / 1e12 == pytest.approx(fp32, rel=0.01)
    assert gpu.fp16_peak_flops / 1e12 == pytest.approx(fp16, rel=0.01)
    assert gpu.tensor_peak_flops / 1e12 == pytest.approx(tensor, rel=0.01, abs=1e-9)


def test_v100_fp32_peak_by_hand() -> None:
    # 80 SMs * 64 lanes * 2 FLOP/FMA * 1530e6 Hz = 15.6672e12
    assert load_hw("dgx1-v100").gpu.fp32_peak_flops == pytest.approx(15.6672e12)


def test_system_thread_counts_match_reference() -> None:
    assert load_hw("dgx1-v100").cpu.hw_threads == 80  # 2 sockets * 20 cores * 2
    assert load_hw("dgx-a100").cpu.hw_threads == 256
    assert load_hw("dgx-h100").cpu.hw_threads == 224
    assert load_hw("jetson-tx1").cpu.cores == 4


def test_every_number_in_presets_is_commented() -> None:
    """Rule of the house: every figure cites its source; each numeric line has a comment on it or above."""
    for path in presets_dir().glob("*.yaml"):
        lines = path.read_text().splitlines()
        for i, line in enumerate(lines):
            key, _, value = line.partition(":")
            value = value.split("#")[0].strip()
            try:
                float(value)
            except ValueError:
                continue
            has_comment = "#" in line or lines[i - 1].lstrip().startswith("#")
            # count / sockets-like small integers that restate the section are allowed without comment
            assert has_comment or key.strip() in {"count"}, f"{path.name}:{i + 1} {line!r}"


def test_overrides_apply_with_type_coercion() -> None:
    hw = load_hw("dgx1-v100", ["gpu.sms=40", "gpu.dram_bw_gbs=1800", "network.stack=kernel_bypass"])
    assert hw.gpu.sms == 40 and isinstance(hw.gpu.sms, int)
    assert hw.gpu.dram_bw_gbs == 1800.0
    assert hw.network.stack == "kernel_bypass"


def _write(tmp_path, data) -> str:
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(data))
    return str(path)


def _v100_data() -> dict:
    return yaml.safe_load((presets_dir() / "dgx1-v100.yaml").read_text())


@pytest.mark.parametrize(
    ("mutate", "expected"),
    [
        (lambda d: d["gpu"].pop("dram_bw_gbs"), "gpu.dram_bw_gbs is missing"),
        (lambda d: d["gpu"].__setitem__("hbm_stacks", 4), "gpu.hbm_stacks is not a known key"),
        (lambda d: d["gpu"].__setitem__("dram_bw_gbs", -900), "gpu.dram_bw_gbs"),
        (lambda d: d["gpu"].__setitem__("sms", 0), "gpu.sms"),
        (lambda d: d.pop("network"), "network is missing"),
        (lambda d: d["cpu"].__setitem__("smt_yield", 1.5), "cpu.smt_yield"),
    ],
)
def test_bad_config_names_file_and_key(tmp_path, mutate, expected: str) -> None:
    data = _v100_data()
    mutate(data)
    path = _write(tmp_path, data)
    with pytest.raises(ArchsimError) as info:
        load_hw(path)
    message = str(info.value)
    assert path in message and expected in message
    assert "\n" not in message


def test_unknown_preset_and_bad_set_key() -> None:
    with pytest.raises(ArchsimError, match="unknown hardware preset"):
        load_hw("dgx-9000")
    with pytest.raises(ArchsimError, match="has no key gpu.smz"):
        load_hw("dgx1-v100", ["gpu.smz=40"])
    with pytest.raises(ArchsimError, match="expected key=value"):
        load_hw("dgx1-v100", ["gpu.sms"])
    with pytest.raises(ArchsimError, match="gpu.sms"):
        load_hw("dgx1-v100", ["gpu.sms=-3"])


def test_cli_hw_list_show_and_errors(capsys) -> None:
    assert main(["hw", "list"]) == 0
    assert "dgx-h100" in capsys.readouterr().out
    assert main(["hw", "show", "dgx1-v100", "--set", "gpu.sms=40"]) == 0
    shown = yaml.safe_load(capsys.readouterr().out)
    assert shown["gpu"]["sms"] == 40
    assert main(["hw", "show", "no-such-box"]) == 2
    assert main(["hw", "show", "dgx1-v100", "--set", "gpu.nope=1"]) == 2
    err = capsys.readouterr().err
    assert "no-such-box" in err and "gpu.nope" in err and "Traceback" not in err


def test_local_detection_parses_cpuinfo() -> None:
    cpuinfo = "\n\n".join(
        f"processor\t: {i}\nmodel name\t: Test CPU\nphysical id\t: {i // 4}\ncore id\t\t: {(i % 4) // 2}\ncpu MHz\t\t: 2500.0"
        for i in range(8)
    )
    cpu = detect_cpu(cpuinfo)
    # 8 logical CPUs, 2 sockets, 2 cores per socket -> 2 threads per core
    assert (cpu.sockets, cpu.cores_per_socket, cpu.threads_per_core) == (2, 2, 2)
    assert cpu.base_clock_mhz == 2500.0 and cpu.thread_speed_rel == 1.0
    local = detect_local()
    assert local.cpu.hw_threads >= 1


def test_cli_bad_config_file_exits_2(tmp_path, capsys) -> None:
    data = _v100_data()
    data["gpu"]["sms"] = 0
    path = _write(tmp_path, data)
    assert main(["hw", "show", path]) == 2
    err = capsys.readouterr().err
    assert path in err and "gpu.sms" in err and "Traceback" not in err
    assert main(["hw", "show", "local", "--set", "gpu.sms=4"]) in (0, 2)  # 2 when local has no GPU
