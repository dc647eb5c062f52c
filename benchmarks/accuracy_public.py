"""Public traces beyond the fixtures, for docs/ACCURACY.md (benchmarks/accuracy_table.py): the
model-only comparison on the real GPU captures under tests/data, each on its own GPU's config. No
model figure was read off them, so they are out of sample; the goals stay stated over the
fixtures. tests/data/README.md gives each file's source, commit and what was cut."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PUBLIC_DIR = ROOT / "tests" / "data"

# file -> (what it is, why it is a real capture); tests/data/README.md has each one's provenance
PUBLIC = {
    "kineto_v100_2021_compute_properties.json.gz": (
        "Kineto tb_plugin test input, V100-DGXS-32GB, captured 2021-05-19; 12 kernels, no shapes",
        "a profiled run's cudaLaunchKernel/kernel pairs with CUPTI correlations",
    ),
    "hta_backward_thread.json.gz": (
        "HTA test excerpt, sm_80 (no deviceProperties), one cutlass_80 GEMM of AddmmBackward0",
        "an excerpt of a profiled step (ProfilerStep#552, event index 95305)",
    ),
    "tracelens_mi300x_add_rocprofiler_sdk.json.gz": (
        "TraceLens eval elem_01, MI300X (ROCm 7), ten fp32 [8192, 8192] adds",
        "deviceProperties, rocprofiler-sdk ids, fractional timestamps",
    ),
    "tracelens_mi300x_gemm_no_correlation.json.gz": (
        "TraceLens eval gemm_02, MI300X per its eval (gfx942 from Tensile names), ten bf16 "
        "[1025, 8192] x [8192, 1025] mm",
        "a hipGetDeviceProperties call before each hipExtModuleLaunchKernel, full Tensile kernel "
        "names, durations drifting 101-113 us (its whole-microsecond times and missing "
        "correlations look rewritten by TraceLens, which adds its own `Ev Idx`)",
    ),
    "tracelens_mi300x_flash_attn_fwd.json.gz": (
        "TraceLens eval sdpa_01, MI300X (ROCm 7), one bf16 flash-attention forward, "
        "[1, 32768, 32, 128]",
        "8 deviceProperties, with_stack, a 658-ms hipDeviceSynchronize",
    ),
}
# tests/data files with GPU events that are not real captures of kernel times
NOT_REAL = {
    "kineto_h100_cuda_sync_2026.json.gz": "libkineto's unit-test activities on a real H100's "
    "deviceProperties: one 20-ns kernel named 'Kernel', CUDA event id 7777",
    "pytorch_inductor_example_h100.json.gz": "two kernels added by hand to a real profile's ops: "
    "no device, no correlation, no runtime calls",
    "tracelens_sdpa_flash_bf16.json.gz": "a hand-made eval trace",
    "tracelens_conv_04_depthwise.json.gz": "a hand-made eval trace",
    "tracelens_conv_06_large_dilation.json.gz": "a hand-made eval trace",
    "tracelens_conv_07_transposed.json.gz": "a hand-made eval trace",
    "tracelens_moe_fused_experts.json.gz": "a hand-made eval trace",
    "tracelens_moe_top2_dense.json.gz": "a hand-made eval trace",
    "kineto_tb_plugin_memory_view.json.gz": "Kineto TensorBoard-plugin test events, simulated "
    "(the test file says so), times renamed to 5-15 us",
}

Row = Callable[[str, str, object, object, str, bool], str]


def public_names() -> list[str]:
    """The real public captures present under tests/data, in table order."""
    return [n for n in PUBLIC if (PUBLIC_DIR / n).exists()]


def public_section(frame_for: Callable[[str, Path], tuple], row: Row) -> list[str]:
    """Markdown lines of the section. ``frame_for(name, folder)`` gives (per-op frame, hardware)
    and ``row(name, provenance, frame, hw, in_sample, judged)`` one table row, as for a fixture."""
    lines = [
        "## Public traces beyond the fixtures",
        "",
        "Out of sample: real GPU captures from public repositories, kept under `tests/data` for",
        "ingest tests (tests/data/README.md gives each one's source, commit and excerpt), compared",
        "the same way, each on its own GPU's config. Nothing in the model was read off them, and",
        "the goals, stated over the fixtures, do not judge them (goals met: n/a). They are small:",
        "a few kernels each, so a row is a check of a few kernels' pricing, not of a workload.",
        "Not compared: "
        + "; ".join(f"`{n}` ({why})" for n, why in NOT_REAL.items() if (PUBLIC_DIR / n).exists())
        + ".",
        "",
        "| trace | provenance | GPU config | ops | kernel time with shapes | measured ms | model ms | "
        "error | kernels only: measured ms | model ms | error | per-kernel median abs error | "
        "goals met | repeat launches: share of measured time kept | error | "
        "per-kernel median abs error | in sample |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name in public_names():
        frame, hw = frame_for(name, PUBLIC_DIR)
        lines.append(row(name, PUBLIC[name][0], frame, hw, "nothing (out of sample)", False))
    lines += [
        "",
        "Why each is taken as a real capture: "
        + "; ".join(f"`{n}`: {PUBLIC[n][1]}" for n in public_names())
        + ".",
    ]
    return lines
