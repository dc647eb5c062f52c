"""Bad input, round 3: an empty item in a comma list (``--sms 4,,8``, ``--actors 4,8,``) is named,
not skipped; a calibration class the model does not know (a typo) is refused with the known ones; an
empty ``--set KEY=`` is not a silent null, and a bad ``--set`` value is not blamed on the YAML file;
``predict --model-only --source-hw`` checks the name and notes it is unused; the card's own figures
(``gpu.card_clock_mhz``, ``gpu.card_dram_bw_gbs``, ``cpu.physical_*``) take only valid numbers. One
line, exit 2, no traceback, nothing written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from archsim.cli import main
from tests.conftest import PROJECT_ROOT, error_line

# --- comma lists -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "item"), [("4,,8", 2), ("4,8,", 3), (",4", 1), ("2,4,,...,80", 3)]
)
def test_an_empty_sm_count_is_named_not_skipped(trace_dir, tmp_path, capsys, value, item):
    # Before: `--sms 4,,8` swept 4 and 8 as if the typo were not there.
    out = tmp_path / "bd"
    assert main(["breakdown", str(trace_dir), "--sms", value, "--out", str(out)]) == 2
    line = error_line(capsys)
    assert f"--sms {value}" in line and f"item {item} is empty" in line
    assert not out.exists()


@pytest.mark.parametrize(
    ("flag", "value", "item"),
    [("--actors", "4,,8", 2), ("--actors", "4,8,", 3), ("--cpu-threads", ",2", 1)],
)
def test_an_empty_knob_item_is_named(trace_dir, tmp_path, capsys, flag, value, item):
    out = tmp_path / "sw"
    argv = ["sweep", str(trace_dir), f"{flag}={value}", "--out", str(out), "--no-progress"]
    assert main(argv) == 2
    line = error_line(capsys)
    assert flag in line and f"item {item} is empty" in line
    assert not out.exists()


# --- calibration classes ------------------------------------------------------------------------


def test_a_misspelled_calibration_class_is_refused_with_the_known_ones(trace_dir, tmp_path, capsys):
    # Before: `gemn: 0.5` loaded, matched no op, and the "calibrated" prediction was the plain one.
    overlay = tmp_path / "cal.yaml"
    overlay.write_text("efficiency:\n  elementwise: 0.5\n  gemn: 0.5\n")
    for argv in (
        ["predict", str(trace_dir), "--calibration", str(overlay)],
        ["breakdown", str(trace_dir), "--calibration", str(overlay), "--out", str(tmp_path / "b")],
    ):
        assert main(argv) == 2
        line = error_line(capsys)
        assert str(overlay) in line and "efficiency.gemn is not a calibration class" in line
        assert (
            "did you mean gemm?" in line and "memcpy_htod" in line and "conv_aux_grid" not in line
        )
    assert not (tmp_path / "b").exists()


def test_every_class_the_model_gives_is_known() -> None:
    """The known list is the model's own: every class efficiency_class can give on the real
    traces, the suffixed ones included, loads from an overlay."""
    import pandas as pd

    from archsim.perf.classes import known_efficiency_classes
    from archsim.perf.kernel import efficiency_class

    ops = pd.read_parquet(PROJECT_ROOT / "traces" / "alexnet-b32-fp32" / "ops.parquet")
    given = set(efficiency_class(ops))
    known = known_efficiency_classes()
    assert given and given <= known
    assert {"conv_aux_grid", "reduction_pool_grid", "memcpy_dtoh", "memset"} <= known


def test_every_known_class_loads(tmp_path) -> None:
    from archsim.perf.calibrate import load_efficiency
    from archsim.perf.classes import known_efficiency_classes

    overlay = tmp_path / "all.yaml"
    known = sorted(known_efficiency_classes())
    overlay.write_text(yaml.safe_dump({"efficiency": dict.fromkeys(known, 0.5)}))
    assert load_efficiency(overlay) == dict.fromkeys(known, 0.5)


# --- hardware fields and --set --------------------------------------------------------------------

CARD_FIELDS = (
    "gpu.card_clock_mhz",
    "gpu.card_dram_bw_gbs",
    "cpu.physical_cores_per_socket",
    "cpu.physical_threads_per_core",
)


@pytest.mark.parametrize("field", CARD_FIELDS)
@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "abc", "1e308", "true", "[1]"])
def test_a_bad_card_figure_by_set_is_one_line_naming_set(trace_dir, capsys, field, value):
    assert main(["predict", str(trace_dir), "--set", f"{field}={value}"]) == 2
    line = error_line(capsys)
    assert f"with --set {field}={value}" in line and f"key {field}" in line


# 2.5 is bad only as a count (cores, threads); 2.5 MHz and 2.5 GB/s lie within the documented ranges.
_BAD_YAML_CARD_FIGURES = [
    (field, value)
    for field in CARD_FIELDS
    for value in [0, -3, float("nan"), "abc", 10**30, True, [1], 2.5]
    if not (value == 2.5 and field.startswith("gpu."))
]


@pytest.mark.parametrize(("field", "value"), _BAD_YAML_CARD_FIGURES)
def test_a_bad_card_figure_in_a_yaml_file_is_one_line(trace_dir, tmp_path, capsys, field, value):
    data = yaml.safe_load((PROJECT_ROOT / "hwconfigs" / "dgx-a100.yaml").read_text())
    section, _, key = field.partition(".")
    data[section][key] = value
    hw = tmp_path / "box.yaml"
    hw.write_text(yaml.safe_dump(data))
    assert main(["predict", str(trace_dir), "--hw", str(hw)]) == 2
    line = error_line(capsys)
    assert f"box.yaml: key {field}" in line


@pytest.mark.parametrize(
    "item", ["gpu.card_clock_mhz=", "gpu.sms= ", "cpu.physical_cores_per_socket="]
)
def test_an_empty_set_value_is_not_a_silent_null(trace_dir, capsys, item):
    # Before: `--set gpu.card_clock_mhz=` (an empty shell variable) cleared the field silently.
    assert main(["predict", str(trace_dir), "--set", item]) == 2
    assert "no value after '='" in error_line(capsys)


def test_set_null_still_clears_an_optional_field(trace_dir, capsys) -> None:
    assert main(["predict", str(trace_dir), "--set", "gpu.card_clock_mhz=null"]) == 0
    capsys.readouterr()


# --- predict --model-only, capture run --stop-when-recorded ----------------------------------------


def test_model_only_checks_source_hw_and_says_it_is_unused(trace_dir, capsys) -> None:
    # Before: --source-hw was ignored under --model-only, so `--source-hw nosuch` passed unseen. The
    # pair stays accepted (issue 12's interface allows both); the name is checked and the note says
    # the source does not enter a model-only prediction.
    argv = ["predict", str(trace_dir), "--model-only", "--source-hw", "nosuch"]
    assert main(argv) == 2
    assert "nosuch" in error_line(capsys)
    argv = ["predict", str(trace_dir), "--hw", "dgx1-v100", "--model-only", "--json"]
    assert main([*argv, "--source-hw", "dgx-a100"]) == 0
    with_source = capsys.readouterr()
    assert "--source-hw dgx-a100 has no effect with --model-only" in with_source.err
    assert main(argv) == 0
    without = json.loads(capsys.readouterr().out)
    with_source_json = json.loads(with_source.out)
    assert with_source_json["gpu_seconds"] == without["gpu_seconds"]


@pytest.mark.parametrize(
    ("extra", "expected"),
    [
        (["--stop-when-recorded=1"], "ignored explicit argument"),
        (["--stop-when-recorded", "--repeat", "0"], "needs --repeat N > 0"),
        (["--stop-when-recorded", "--repeat", "-1"], "repeat=-1"),
        (["--stop-when-recorded", "--active", "0"], "active=0"),
    ],
)
def test_stop_when_recorded_bad_combinations(tmp_path, capsys, extra, expected) -> None:
    script = PROJECT_ROOT / "examples" / "dqn_single_file.py"
    out = tmp_path / "cap"
    argv = ["capture", "run", "--out", str(out), *extra, "--", str(script)]
    assert _exit_code(argv) == 2
    assert expected in error_line(capsys)
    assert not out.exists()


def _exit_code(argv: list[str]) -> int:
    """main's return code, or argparse's exit code for a usage error."""
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


# --- ops.parquet dtype (trace info's kernel_dtypes, predict's dtype line) -------------------------


@pytest.mark.parametrize("value", ["float13", "x" * 5000, "123", "Float"])
def test_an_unknown_dtype_in_a_saved_trace_is_one_line(trace_dir, tmp_path, capsys, value):
    # Before: predict printed 'dtype: float13' (or the 5,000 characters) and priced it at 4 B.
    import shutil

    import pandas as pd

    trace = Path(shutil.copytree(trace_dir, tmp_path / "t"))
    ops = pd.read_parquet(trace / "ops.parquet")
    ops.loc[ops.index[-1], "dtype"] = value
    ops.to_parquet(trace / "ops.parquet")
    for argv in (["trace", "info", str(trace)], ["predict", str(trace), "--model-only"]):
        assert main(argv) == 2
        line = error_line(capsys)
        assert f"row {len(ops) - 1} has dtype" in line and "ops.parquet" in line
        assert len(line) < 300


def test_every_dtype_ingest_writes_is_known() -> None:
    from archsim.trace.flops.args import TENSOR_TYPES
    from archsim.trace.format import known_dtypes

    assert {name for name, _ in TENSOR_TYPES.values()} | {"", "torch.float16"} <= known_dtypes()


@pytest.mark.parametrize("value", [None, "no", 5, []])
def test_shapes_recorded_must_be_true_or_false(trace_dir, tmp_path, capsys, value):
    # Before: null or [] made predict --model-only say "record_shapes was off"; 'no' read as true.
    import shutil

    trace = Path(shutil.copytree(trace_dir, tmp_path / "t"))
    meta = yaml.safe_load((trace / "meta.yaml").read_text())
    meta.setdefault("ingest", {})["shapes_recorded"] = value
    (trace / "meta.yaml").write_text(yaml.safe_dump(meta))
    assert main(["predict", str(trace), "--model-only"]) == 2
    line = error_line(capsys)
    assert "meta.yaml: ingest.shapes_recorded is" in line and "true or false" in line


# --- deeply nested YAML, very long --set values ------------------------------------------------


@pytest.mark.parametrize("which", ["hw", "calibration"])
def test_deeply_nested_yaml_is_one_line(trace_dir, tmp_path, capsys, which):
    # Before: a RecursionError traceback from PyYAML's constructor.
    path = tmp_path / "deep.yaml"
    key = "efficiency" if which == "calibration" else "gpu"
    path.write_text(f"{key}: " + "[" * 3_000 + "]" * 3_000 + "\n")
    assert main(["predict", str(trace_dir), f"--{which}", str(path)]) == 2
    assert "not valid YAML (collections nested too deeply)" in error_line(capsys)


@pytest.mark.parametrize(
    "item",
    ["gpu.sms=" + "[" * 3_000, "gpu.sms=" + "x" * 100_000, "x" * 100_000 + "=1", "x" * 100_000],
    ids=["deep-value", "long-value", "long-key", "no-equals"],
)
def test_a_huge_set_item_is_one_short_line(trace_dir, capsys, item):
    assert main(["predict", str(trace_dir), "--set", item]) == 2
    assert len(error_line(capsys)) < 400


# --- 100,000-character values and paths ----------------------------------------------------------

_LONG = "x" * 100_000


@pytest.mark.parametrize(
    "argv",
    [
        ["predict", _LONG],  # was an OSError traceback: File name too long
        ["predict", "{t}", "--hw", _LONG],
        ["predict", "{t}", "--source-hw", _LONG],
        ["ingest", _LONG, "--out", "{tmp}/o"],
        ["sweep", "{t}", "--actors", _LONG, "--out", "{tmp}/o"],
        ["breakdown", "{t}", "--sms", _LONG, "--out", "{tmp}/o"],
        ["predict", "{t}", "--phase", _LONG],
        ["capture", "dqn", "--steps", _LONG, "--out", "{tmp}/o"],
    ],
    ids=["trace", "hw", "source-hw", "ingest", "actors", "sms", "phase", "steps"],
)
def test_a_huge_argument_is_one_short_line(trace_dir, tmp_path, capsys, argv):
    argv = [a.format(t=trace_dir, tmp=tmp_path) if len(a) < 100 else a for a in argv]
    assert _exit_code(argv) == 2
    line = error_line(capsys)
    assert len(line) <= 1000 and "characters)" in line
    assert not (tmp_path / "o").exists()


# --- YAML aliases that expand exponentially ("billion laughs") ----------------------------------


def _laughs(levels: int = 9) -> str:
    """About 400 bytes of YAML whose aliases expand to 10**levels scalars."""
    lines = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"]
    lines += [f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, levels)]
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("which", ["hw", "calibration", "meta"])
def test_a_billion_laughs_yaml_is_refused_at_once(trace_dir, tmp_path, capsys, which):
    # Before: --hw took 2.2 GB and died with a MemoryError traceback (the error message's repr of
    # the value); --calibration ran 32 s and 2.2 GB before its one line.
    import resource
    import shutil

    trace = Path(shutil.copytree(trace_dir, tmp_path / "t"))
    argv = ["predict", str(trace)]
    if which == "meta":
        meta = trace / "meta.yaml"
        meta.write_text(_laughs() + meta.read_text())
    else:
        path = tmp_path / f"{which}.yaml"
        path.write_text(
            _laughs() + ("efficiency:\n  gemm: *l8\n" if which == "calibration" else "")
        )
        argv += [f"--{which}", str(path)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    assert main(argv) == 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_utime - before < 2.0  # CPU, not wall
    assert "not valid YAML (aliases expand past 1,000,000 nodes)" in error_line(capsys)


def test_aliases_within_the_cap_still_load(tmp_path) -> None:
    from archsim.hw.strict_yaml import safe_load_unique

    doc = safe_load_unique(_laughs(4) + "x: *l3\n")
    assert len(doc["x"]) == 10 and len(doc["x"][0][0]) == 10


def test_a_billion_laughs_set_value_is_one_line(trace_dir, capsys) -> None:
    value = "[&a [1,1,1,1,1,1,1,1,1,1]" + "".join(
        f", &{b} [{','.join([f'*{a}'] * 10)}]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)
    )
    assert main(["predict", str(trace_dir), "--set", f"gpu.sms={value}]"]) == 2
    assert "key gpu.sms" in error_line(capsys)


# --- deeply nested JSON in other inputs ------------------------------------------------------------

_DEEP = "[" * 100_000 + "]" * 100_000


def test_deeply_nested_shapes_in_ops_parquet_name_the_row(trace_dir, tmp_path, capsys) -> None:
    # Before: a RecursionError traceback from the kernel model's json.loads of input_dims.
    import shutil

    import pandas as pd

    trace = Path(shutil.copytree(trace_dir, tmp_path / "t"))
    ops = pd.read_parquet(trace / "ops.parquet")
    ops.loc[ops.index[0], "input_dims"] = _DEEP
    ops.loc[ops.index[1], "input_dims"] = "[" + ",".join(["[1,2]"] * 500) + "]"  # wide, shallow
    ops.to_parquet(trace / "ops.parquet")
    assert main(["predict", str(trace), "--model-only"]) == 2
    assert "row 0 has input_dims nested more than 32 deep" in error_line(capsys)


@pytest.mark.parametrize("which", ["metrics", "sweep", "measurements"])
def test_deeply_nested_json_files_are_one_line(trace_dir, tmp_path, capsys, which) -> None:
    folder = tmp_path / "d"
    folder.mkdir()
    (folder / f"{which}.json").write_text(_DEEP)
    argv = {
        "metrics": ["compare", str(folder), str(folder)],
        "sweep": ["sweep", str(trace_dir), "--actors", "1,2", "--out", str(folder)],
        "measurements": ["validate", "--from", str(folder), "--out", str(tmp_path / "v")],
    }[which]
    if which == "sweep":
        (folder / "sweep.csv").write_text("actors\n1\n")
    assert main(argv) == 2
    assert f"{which}.json" in error_line(capsys)


@pytest.mark.parametrize("which", ["hw", "calibration", "meta"])
def test_a_yaml_over_a_mib_is_refused_before_parsing(trace_dir, tmp_path, capsys, which):
    # Before: PyYAML parsed 4.3 MB of list items in 23.6 s (360 MB peak) before the usual error.
    import resource
    import shutil

    big = "\n".join(f"  - {i}" for i in range(300_000))  # about 2.3 MB
    trace = Path(shutil.copytree(trace_dir, tmp_path / "t"))
    argv = ["predict", str(trace)]
    if which == "meta":
        (trace / "meta.yaml").write_text((trace / "meta.yaml").read_text() + "big:\n" + big)
    else:
        path = tmp_path / f"{which}.yaml"
        path.write_text("big:\n" + big)
        argv += [f"--{which}", str(path)]
    before = resource.getrusage(resource.RUSAGE_SELF).ru_utime
    assert main(argv) == 2
    assert resource.getrusage(resource.RUSAGE_SELF).ru_utime - before < 2.0  # CPU, not wall
    assert "MiB of text, over the 1 MiB" in error_line(capsys)


def test_an_empty_calibration_is_refused(trace_dir, tmp_path, capsys) -> None:
    # Before: `efficiency: {}` printed "with calibrated efficiencies" and changed nothing.
    overlay = tmp_path / "cal.yaml"
    overlay.write_text("efficiency: {}\n")
    assert main(["predict", str(trace_dir), "--calibration", str(overlay)]) == 2
    assert "efficiency is empty" in error_line(capsys)
