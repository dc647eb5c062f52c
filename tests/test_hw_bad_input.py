"""Bad hardware input on every command that takes ``--hw``: an unknown preset, ``--set`` on a key that
does not exist, impossible values (negative, zero, infinite): one line naming the file or flag and the
key, exit 2, nothing written (sweep included: it checks the hardware before creating its directory)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from archsim.cli import main
from archsim.hw import presets_dir
from tests.conftest import PROJECT_ROOT, kineto_fixture

DQN_TRACE = PROJECT_ROOT / "traces" / "dqn-pong-cpu"


def _commands(tmp_path: Path) -> dict[str, list[str]]:
    """Every command that takes --hw, with an output in tmp_path/out where it writes one."""
    out = str(tmp_path / "out")
    trace = str(DQN_TRACE)
    return {
        "hw show": ["hw", "show"],  # takes the config as its NAME argument
        "breakdown": ["breakdown", trace, "--out", out],
        "predict": ["predict", trace],
        "simulate": ["simulate", trace, "--sim-seconds", "0.05", "--out", out],
        "sweep": ["sweep", trace, "--actors", "2,4", "--sim-seconds", "0.05", "--out", out],
        "ratio": ["ratio"],
        "calibrate": ["calibrate", str(kineto_fixture("mi250_mlp_train.json.gz")), "--out", out],
    }


def _with_hw(argv: list[str], hw: str) -> list[str]:
    return [*argv, hw] if argv[:2] == ["hw", "show"] else [*argv, "--hw", hw]


def _expect_error(capsys, tmp_path: Path, argv: list[str], *needles: str) -> None:
    before = sorted(p.name for p in tmp_path.iterdir())
    assert main(argv) == 2
    lines = capsys.readouterr().err.splitlines()
    assert len(lines) == 1, lines
    assert lines[0].startswith("archsim: error: ")
    for needle in needles:
        assert needle in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == before  # no output, no temporaries


COMMANDS = ["hw show", "breakdown", "predict", "simulate", "sweep", "ratio", "calibrate"]


@pytest.mark.parametrize("command", COMMANDS)
def test_unknown_preset(tmp_path, capsys, command):
    argv = _with_hw(_commands(tmp_path)[command], "dgx-9000")
    _expect_error(capsys, tmp_path, argv, "dgx-9000: unknown hardware preset", "dgx1-v100")


@pytest.mark.parametrize("command", COMMANDS)
def test_set_on_a_key_that_does_not_exist(tmp_path, capsys, command):
    argv = [*_with_hw(_commands(tmp_path)[command], "dgx1-v100"), "--set", "gpu.smz=40"]
    _expect_error(capsys, tmp_path, argv, "--set gpu.smz", "has no key gpu.smz")


@pytest.mark.parametrize("command", COMMANDS)
def test_impossible_values_from_set(tmp_path, capsys, command):
    argv = [*_with_hw(_commands(tmp_path)[command], "dgx1-v100"), "--set", "gpu.sms=0"]
    _expect_error(capsys, tmp_path, argv, "dgx1-v100.yaml", "gpu.sms", "got 0")


@pytest.mark.parametrize(
    "key, value, expected",
    [
        ("dram_bw_gbs", -900, "greater than 0"),
        ("dram_bw_gbs", float("inf"), "finite number"),
        ("clock_mhz", float("nan"), "finite number"),
        ("sms", 0, "greater than or equal to 1"),
    ],
)
@pytest.mark.parametrize("command", ["hw show", "sweep", "simulate"])
def test_impossible_values_in_a_config_file(tmp_path, capsys, command, key, value, expected):
    data = yaml.safe_load((presets_dir() / "dgx1-v100.yaml").read_text())
    data["gpu"][key] = value
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(data))
    argv = _with_hw(_commands(tmp_path)[command], str(config))
    _expect_error(capsys, tmp_path, argv, str(config), f"gpu.{key}", expected)


def test_infinite_value_from_set(tmp_path, capsys):
    argv = ["hw", "show", "dgx-a100", "--set", "gpu.dram_bw_gbs=.inf"]
    _expect_error(capsys, tmp_path, argv, "gpu.dram_bw_gbs", "finite number", "inf")


@pytest.mark.parametrize("missing", ["cpu", "gpu.sms"])
def test_missing_key_in_a_config_file(tmp_path, capsys, missing):
    data = yaml.safe_load((presets_dir() / "dgx1-v100.yaml").read_text())
    if missing == "cpu":
        del data["cpu"]
    else:
        del data["gpu"]["sms"]
    config = tmp_path / "bad.yaml"
    config.write_text(yaml.safe_dump(data))
    argv = _with_hw(_commands(tmp_path)["sweep"], str(config))
    _expect_error(capsys, tmp_path, argv, str(config), f"key {missing} is missing")


def test_a_swept_sms_value_that_is_impossible_names_the_point(tmp_path, capsys):
    argv = [*_commands(tmp_path)["sweep"], "--sms", "0,40"]
    _expect_error(capsys, tmp_path, argv, "sweep point", "sms=0", "gpu.sms", "got 0")


@pytest.mark.parametrize("command", COMMANDS)
def test_a_config_file_that_is_not_utf8_is_one_line(tmp_path, capsys, command):
    bad = tmp_path / "latin1.yaml"
    bad.write_bytes("name: Caf\xe9 box\n".encode("latin-1"))  # 0xe9 alone is not UTF-8
    argv = _with_hw(_commands(tmp_path)[command], str(bad))
    _expect_error(capsys, tmp_path, argv, str(bad), "not UTF-8 text", "0xe9")


@pytest.mark.parametrize(
    "override, needles",
    [
        ("cpu.sockets=1000000000000", ["key cpu.sockets = 1,000,000,000,000", "1..32"]),
        ("cpu.cores_per_socket=10000000", ["key cpu.cores_per_socket = 10,000,000", "1..512"]),
        ("gpu.dram_bw_gbs=1e300", ["key gpu.dram_bw_gbs = 1e+300"]),
        ("cpu.thread_speed_rel=1.0e-300", ["key cpu.thread_speed_rel", "0.001..100"]),
    ],
)
@pytest.mark.parametrize("command", ["hw show", "simulate", "sweep"])
def test_values_beyond_any_real_machine_are_refused_with_the_range(
    tmp_path, capsys, command, override, needles
):
    argv = _with_hw(_commands(tmp_path)[command], "dgx1-v100")
    _expect_error(capsys, tmp_path, [*argv, "--set", override], *needles, "docs/LIMITS.md")
