"""ROCm launch geometry: kernels launched by hipExtModuleLaunchKernel record the grid in work-items
(its globalWorkSize arguments); ingest keeps the launching runtime call in ``launch_api`` and stores
their grid in blocks, so grid x block equals the recorded work size. Expected values are read from
the raw fixture here, independently of the ingester."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pandas as pd
import pytest

from archsim.trace.ingest import ingest
from archsim.trace.kineto import grid_in_blocks
from tests.conftest import kineto_fixture

ROCM_FIXTURES = ["mi210_gpu_only", "mi300x_normalization_bench", "mi300x_sd35_inference"]


def _raw_kernels(name: str) -> dict[int, tuple[str, list[int], list[int]]]:
    """correlation -> (launching runtime call, recorded grid, recorded block) of each kernel."""
    path = kineto_fixture(f"{name}.json.gz")
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    api = {
        e["args"]["correlation"]: e["name"]
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "cuda_runtime" and "correlation" in e["args"]
    }
    return {
        e["args"]["correlation"]: (
            api.get(e["args"]["correlation"], ""),
            e["args"]["grid"],
            e["args"]["block"],
        )
        for e in events
        if e.get("ph") == "X" and e.get("cat") == "kernel" and "grid" in e.get("args", {})
    }


@pytest.mark.parametrize("name", ROCM_FIXTURES)
def test_work_item_grids_become_blocks(name: str) -> None:
    raw = _raw_kernels(name)
    ops = ingest(kineto_fixture(f"{name}.json.gz")).ops
    kernels = ops[ops["kind"] == "kernel"].set_index("correlation")
    ext = [c for c, (api, _, _) in raw.items() if api == "hipExtModuleLaunchKernel"]
    assert ext, "fixture has hipExtModuleLaunchKernel launches"
    for corr, (api, grid, block) in raw.items():
        row = kernels.loc[corr]
        assert row["launch_api"] == api
        got = [int(row[f"grid_{a}"]) for a in "xyz"]
        if api == "hipExtModuleLaunchKernel":
            # grid x block == the recorded global work size (every one is a whole number of blocks)
            assert [g * b for g, b in zip(got, block, strict=True)] == grid
        else:  # hipLaunchKernel / hipModuleLaunchKernel: gridDim already in blocks, kept as is
            assert got == grid


def test_mi210_counts_in_meta() -> None:
    trace = ingest(kineto_fixture("mi210_gpu_only.json.gz"))
    # 339 hipExtModuleLaunchKernel kernels in the raw file (counted by _raw_kernels)
    assert trace.meta["ingest"]["grids_converted_from_work_items"] == 339
    assert (
        sum(
            api == "hipExtModuleLaunchKernel"
            for api, _, _ in _raw_kernels("mi210_gpu_only").values()
        )
        == 339
    )


def test_cuda_launches_unchanged() -> None:
    ops = ingest(kineto_fixture("a100_train_shapes.json.gz")).ops
    kernels = ops[ops["kind"] == "kernel"]
    assert set(kernels["launch_api"]) <= {"cudaLaunchKernel", "cuLaunchKernel", ""}
    assert (kernels["launch_api"] == "cudaLaunchKernel").mean() > 0.9


def test_grid_in_blocks_rounds_up_partial_blocks() -> None:
    # a work size of 1000 items in blocks of 256 needs ceil(1000 / 256) = 4 blocks
    fields = pd.DataFrame(
        {
            "grid_x": [1000, 1000],
            "grid_y": [1, 1],
            "grid_z": [1, 1],
            "block_x": [256, 256],
            "block_y": [1, 1],
            "block_z": [1, 1],
        }
    )
    api = np.array(["hipExtModuleLaunchKernel", "hipLaunchKernel"], dtype=object)
    assert grid_in_blocks(fields, api) == 1
    assert fields["grid_x"].tolist() == [4, 1000]
    assert fields["grid_y"].tolist() == [1, 1]
