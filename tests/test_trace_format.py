"""Round trip and validation of the normalized trace directory."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import yaml

from archsim.errors import ArchsimError
from archsim.trace import FORMAT_VERSION, Trace, load, save
from archsim.trace.schema import OPS_COLUMNS, STEPS_COLUMNS


def _small_trace() -> Trace:
    ops = pd.DataFrame(
        {
            "op_id": [0, 1],
            "kind": ["kernel", "cpu"],
            "name": ["volta_sgemm_128x64_nn", "aten::relu"],
            "phase": ["act", "train_forward"],
            "dur_us": [12.5, 3.0],
            "flops": [2.0e6, 0.0],
            "has_formula": [True, False],
        }
    )
    steps = pd.DataFrame({"step_id": [0], "role": ["actor"], "env_step_us": [250.0]})
    return Trace(meta={"workload": {"name": "test"}}, ops=ops, steps=steps)


def test_schema_fills_missing_columns_with_documented_defaults():
    trace = _small_trace()
    assert list(trace.ops.columns) == list(OPS_COLUMNS)
    assert list(trace.steps.columns) == list(STEPS_COLUMNS)
    assert trace.ops.loc[0, "device"] == -1
    assert np.isnan(trace.steps.loc[0, "act_us"])
    assert trace.steps.loc[0, "env_step_us"] == 250.0


def test_round_trip_is_identity(tmp_path):
    trace = _small_trace()
    save(trace, tmp_path / "t")
    again = load(tmp_path / "t")
    assert again == trace
    assert again.meta["format_version"] == FORMAT_VERSION


def test_save_refuses_non_empty_directory_and_leaves_it_untouched(tmp_path):
    out = tmp_path / "t"
    out.mkdir()
    (out / "keep.txt").write_text("x")
    with pytest.raises(ArchsimError, match="not empty"):
        save(_small_trace(), out)
    assert [p.name for p in out.iterdir()] == ["keep.txt"]
    save(_small_trace(), out, force=True)
    assert not (out / "keep.txt").exists()


def test_load_rejects_unknown_format_version(tmp_path):
    save(_small_trace(), tmp_path / "t")
    meta_path = tmp_path / "t" / "meta.yaml"
    meta = yaml.safe_load(meta_path.read_text())
    meta["format_version"] = 999
    meta_path.write_text(yaml.safe_dump(meta))
    with pytest.raises(ArchsimError, match="format_version 999"):
        load(tmp_path / "t")


def test_load_names_the_missing_piece(tmp_path):
    with pytest.raises(ArchsimError, match="not a trace directory"):
        load(tmp_path / "nothing")
    save(_small_trace(), tmp_path / "t")
    (tmp_path / "t" / "ops.parquet").unlink()
    with pytest.raises(ArchsimError, match="ops.parquet"):
        load(tmp_path / "t")


def test_saved_directory_gets_the_usual_permissions_not_mkdtemp_s(tmp_path):
    import os
    import stat

    save(_small_trace(), tmp_path / "t")
    umask = os.umask(0)
    os.umask(umask)
    mode = stat.S_IMODE((tmp_path / "t").stat().st_mode)
    assert mode == 0o777 & ~umask
