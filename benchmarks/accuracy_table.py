"""Regenerate docs/ACCURACY.md: kernel-model accuracy on the real GPU fixtures.

    python benchmarks/accuracy_table.py            # writes docs/ACCURACY.md and prints it

For each fixture: total measured device time (kernels, memcpy, memset) versus the model's prediction
from the trace's op shapes alone (no measured durations, efficiency 1), and versus the model calibrated
on the V100 fixture (per-class efficiencies from archsim.perf.calibrate), with per-class errors. Only
the V100 fixture is used for fitting; every other row is out of sample for the calibration.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archsim.atomic import atomic_output_file  # noqa: E402
from archsim.hw import load_hw  # noqa: E402
from archsim.perf.calibrate import class_errors, fit_table  # noqa: E402
from archsim.trace.ingest import ingest  # noqa: E402

FIXTURES = ROOT.parent / "shared" / "fixtures" / "kineto"
FIT_FIXTURE = ("v100_cnn_ddp_train.json.gz", "dgx1-v100")
EVAL_FIXTURES = [
    ("v100_cnn_ddp_train.json.gz", "dgx1-v100", "the efficiencies (fitted on it)"),
    ("a100_alexnet_forward.json.gz", "dgx-a100", "its memcpys ({copies} of its measured time): the "
     "pageable staging rate (4.3 GB/s) and first-chunk size (1 MiB) were measured in it; not the "
     "efficiencies"),
    ("a100_event_sync_multistream.json.gz", "dgx-a100", "nothing"),
    ("rtx2080ti_mlp_train.json.gz", "rtx2080ti", "the preset's 2-us kernel floor was read from it; "
     "not the efficiencies"),
    ("mi250_mlp_train.json.gz", None, "no preset: AMD MI250 (CDNA2); the trace has no grid, block "
     "or register fields and archsim's occupancy model is NVIDIA's, so it is not modelled"),
]  # fmt: skip
# Totals of this table at commit 7aeb9b5, before the kernel-model revision of f8d3d78..HEAD (grid-only
# GEMM engines vs auxiliary kernels, ILP latency hiding, operands read once, tile from threads, pooling
# class, pageable staging): (shapes-only error, calibrated error, calibrated kernels-only error).
BEFORE = {
    "v100_cnn_ddp_train.json.gz": (1.873, 0.0, 0.0),
    "a100_alexnet_forward.json.gz": (-0.290, -0.269, -0.048),
    "a100_event_sync_multistream.json.gz": (1.259, -0.325, -0.334),
    "rtx2080ti_mlp_train.json.gz": (0.307, -0.457, -0.466),
}
BEFORE_CPU_ALEXNET = -0.351
# GEMM depth (K) of the fixtures' main GEMM kernels, worked out by hand from the workloads for the
# "What limits accuracy" table. Documentation only: the model never sees these numbers.
# - RTX 2080 Ti MLP: 21 linear layers of 1024 x 1024 at batch 512 (element-wise grids of 1024 blocks
#   x 512 elements = 512 x 1024; optimizer 320 + 37 chunks of 65,536 = 21 x (16 + 1): 21 weights of
#   1024 x 1024 and their biases; softmax_warp_forward<..., 10, ...> = 1024 classes; per training step
#   21 forward, 20 input-gradient and 21 weight-gradient GEMMs), so forward and input-gradient GEMMs are
#   1024 deep (grid z = 2 K-slices of 512) and weight-gradient GEMMs 512 deep (K = batch).
# - V100 CNN: its classifier has 1000 classes at batch 32 (softmax grid 8 blocks x 4 rows, 2^10
#   columns) and 2048 input features (the weight-gradient output, 16 x 128 by 32 x 32 tiles = 2048 x
#   1024 padding 1000): forward 2048 deep in 5 slices, input gradient 1000 deep in 5, weight gradient
#   32 deep (K = batch).
# - A100 AlexNet (torchvision layout, batch 128 from the grids): fc6 9216 deep (its weights, 150,994,944
#   B = 4096 x 9216 x 4, are copied in this fixture), fc7 4096, fc8 4096 in 6 slices.
# - A100 event sync: 1024 x 1024 outputs in 5 K-slices; the depth is not recoverable from the trace.
GEMM_DEPTHS = {
    ("rtx2080ti_mlp_train.json.gz", "volta_sgemm_128x128_nt", "8,8,1"): "512 (weight gradient)",
    ("rtx2080ti_mlp_train.json.gz", "volta_sgemm_128x64_nn", "8,8,2"): "1024 in 2 slices",
    ("rtx2080ti_mlp_train.json.gz", "volta_sgemm_64x64_tn", "16,8,2"): "1024 in 2 slices",
    ("v100_cnn_ddp_train.json.gz", "volta_sgemm_64x32_sliced1x4_tn", "16,1,5"): "2048 in 5 slices",
    ("v100_cnn_ddp_train.json.gz", "volta_sgemm_64x32_sliced1x4_nn", "32,1,5"): "1000 in 5 slices",
    ("v100_cnn_ddp_train.json.gz", "volta_sgemm_128x32_nt", "16,32,1"): "32 (weight gradient)",
    ("a100_event_sync_multistream.json.gz", "ampere_sgemm_128x64_nn", "8,16,5"): "unknown, 5 slices",
    ("a100_alexnet_forward.json.gz", "ampere_sgemm_32x32_sliced1x4_tn", "128,4,1"): "9216 (fc6), 4096 (fc7)",
    ("a100_alexnet_forward.json.gz", "ampere_sgemm_32x32_sliced1x4_tn", "32,4,6"): "4096 in 6 slices (fc8)",
}  # fmt: skip
TARGET_ERROR = 0.20
# AlexNet forward captured on this CPU (bundled trace, batch 32, fp32) resized to the fixture's batch
# 128 and predicted on dgx-a100, versus the A100 fixture's steady (last) forward pass. Batch 128 is read
# from the fixture's launch grids (workloads/alexnet/sanity.py).
CPU_TRACE = ROOT / "traces" / "alexnet-b32-fp32"
CPU_TRACE_BATCH, FIXTURE_BATCH = 32, 128
A100_ALEXNET = "a100_alexnet_forward.json.gz"
FORWARD_MARKER = "|measure|forward"


def last_forward_window_us(path: Path) -> tuple[float, float]:
    """(start, end) of the fixture's last forward-pass annotation, in trace microseconds."""
    import gzip
    import json

    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    last = max((e for e in events if FORWARD_MARKER in e.get("name", "")), key=lambda e: e["ts"])
    return float(last["ts"]), float(last["ts"] + last["dur"])


def cpu_capture_rows():
    """Measured (fixture) and predicted (CPU capture) seconds per op class, or None if absent."""
    import pandas as pd

    from archsim.perf.kernel import predict_op_seconds, scale_ops_to_batch
    from archsim.trace.format import load

    if not CPU_TRACE.is_dir():
        return None
    trace = load(CPU_TRACE)
    ops = trace.ops[trace.ops.step_id == trace.ops.step_id.max()]  # one steady step
    ops = scale_ops_to_batch(ops, CPU_TRACE_BATCH, FIXTURE_BATCH)
    predicted = (
        pd.Series(
            predict_op_seconds(ops, load_hw("dgx-a100"), include_launch=False), index=ops.index
        )
        .groupby(ops["op_class"].astype(str))
        .sum()
    )
    fixture = FIXTURES / A100_ALEXNET
    start, end = last_forward_window_us(fixture)
    fops = ingest(fixture).ops
    fops = fops[(fops.kind == "kernel") & (fops.start_us >= start) & (fops.start_us <= end)]
    measured = (fops.dur_us * 1e-6).groupby(fops["op_class"].astype(str)).sum()
    table = pd.DataFrame({"measured_s": measured, "predicted_s": predicted}).fillna(0.0)
    table.loc["total"] = table.sum()
    table["error"] = table["predicted_s"] / table["measured_s"] - 1.0
    return table


def _pct(x: float) -> str:
    return f"{100 * x:+.1f}%"


def _ms(seconds: float) -> str:
    return f"{1e3 * seconds:.3f}"


def gemm_depth_rows(name: str, ops, hw, efficiency) -> list[str]:
    """Rows of the GEMM-depth table: the fixture's grid-only GEMM engines by kernel and grid."""
    import pandas as pd

    from archsim.perf.calibrate import measured_ops
    from archsim.perf.kernel import body_seconds, efficiency_class

    ops = measured_ops(ops)
    keep = (efficiency_class(ops) == "gemm_grid").to_numpy()
    ops = ops[keep].reset_index(drop=True)
    if ops.empty:
        return []
    frame = pd.DataFrame(
        {
            "kernel": ops["name"].astype(str),
            "grid": [f"{int(x)},{int(y)},{int(z)}" for x, y, z in
                     zip(ops["grid_x"], ops["grid_y"], ops["grid_z"], strict=True)],
            "measured": ops["dur_us"].astype(float),
            "bound": body_seconds(ops, hw) * 1e6,
            "calibrated": body_seconds(ops, hw, efficiency=efficiency) * 1e6,
        }
    )  # fmt: skip
    rows = []
    for (kernel, grid), g in frame.groupby(["kernel", "grid"], sort=False):
        depth = GEMM_DEPTHS.get((name, kernel, grid), "not worked out")
        rows.append(
            f"| {name} | {kernel} | {grid} | {len(g)} | {depth} | {g.measured.mean():.1f} | "
            f"{g.bound.mean():.1f} | {g.bound.sum() / g.measured.sum():.2f} | "
            f"{g.calibrated.mean():.1f} |"
        )
    return rows


def main() -> int:
    fit_ops = ingest(FIXTURES / FIT_FIXTURE[0]).ops
    fit_hw = load_hw(FIT_FIXTURE[1])
    fit = fit_table(fit_ops, fit_hw)
    efficiency = {str(c): float(e) for c, e in fit["efficiency"].items() if c != "all"}

    lines = [
        "# Kernel-model accuracy on real GPU traces",
        "",
        # no run date: the page changes only when its content does
        "Generated by `python benchmarks/accuracy_table.py`; do not edit by hand.",
        "",
        "Device time = sum of measured kernel, memcpy and memset durations (serial sum, launch gaps",
        "excluded). *Shapes only*: `archsim.perf.kernel.body_seconds` from the ops table alone (no",
        "measured durations, every efficiency 1). *Calibrated*: the same with per-class efficiencies",
        f"fitted on `{FIT_FIXTURE[0]}` (`archsim calibrate ... --hw {FIT_FIXTURE[1]}`).",
        "Error = predicted / measured - 1. Goal: within 20% on totals.",
        "",
        "None of the NVIDIA fixtures records the launching ops' `Input Dims`, so their kernels have no",
        "FLOPs or bytes: the model infers work from grid, block and kernel name",
        "(`archsim.perf.blocks.estimate_work_from_launch`): element-wise kernels from their grid's",
        "elements, GEMM engines from their tiles with an assumed depth of 512 per K-slice",
        "(`ASSUMED_TILE_K`), because the depth of a GEMM is not in its launch. The calibrated rows show",
        "how per-class efficiencies fitted on one GPU and workload transfer to another; *in sample* says",
        "which figures were read off the fixture itself, so that its row does not test them.",
        "",
        "## Totals",
        "",
        "| fixture | preset | ops | measured ms | shapes only ms | error | calibrated ms | error | "
        "within 20% | kernels only: measured ms | calibrated ms | error | in sample |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    details, history, depth_rows = [], [], []
    for name, preset, note in EVAL_FIXTURES:
        if preset is None:
            lines.append(f"| {name} | no preset | | | | | | | | | | | {note} |")
            continue
        ops = ingest(FIXTURES / name).ops
        hw = load_hw(preset)
        raw = class_errors(ops, hw, None)
        cal = class_errors(ops, hw, efficiency)
        total_raw, total_cal = raw.loc["total"], cal.loc["total"]
        kernels = [
            c for c in cal.index if c not in ("total", "memset") and not c.startswith("memcpy")
        ]
        k_meas = cal.loc[kernels, "measured_s"].sum()
        k_cal = cal.loc[kernels, "predicted_s"].sum()
        copies = [c for c in cal.index if c.startswith("memcpy")]
        copy_share = cal.loc[copies, "measured_s"].sum() / total_cal.measured_s
        in_sample = note.format(copies=f"{copy_share:.0%}")
        ok = "yes" if abs(total_cal.error) <= TARGET_ERROR else "no"
        if ok == "yes" and abs(k_cal / k_meas - 1) > TARGET_ERROR:
            ok = "yes, kernels only no"
        lines.append(
            f"| {name} | {preset} | {int(total_raw.ops)} | {_ms(total_raw.measured_s)} | "
            f"{_ms(total_raw.predicted_s)} | {_pct(total_raw.error)} | {_ms(total_cal.predicted_s)} | "
            f"{_pct(total_cal.error)} | {ok} | {_ms(k_meas)} | {_ms(k_cal)} | "
            f"{_pct(k_cal / k_meas - 1)} | {in_sample} |"
        )
        if name in BEFORE:
            b_raw, b_cal, b_kernels = BEFORE[name]
            history.append(
                f"| {name} | {_pct(b_raw)} | {_pct(total_raw.error)} | {_pct(b_cal)} | "
                f"{_pct(total_cal.error)} | {_pct(b_kernels)} | {_pct(k_cal / k_meas - 1)} |"
            )
        depth_rows += gemm_depth_rows(name, ops, hw, efficiency)
        details += [
            "",
            f"### {name} on {preset}",
            "",
            f"Kernels only (no memcpy/memset): measured {_ms(k_meas)} ms, calibrated {_ms(k_cal)} ms "
            f"({_pct(k_cal / k_meas - 1)}).",
            "",
            "| class | ops | measured ms | shapes only ms | error | calibrated ms | error |",
            "|---|---|---|---|---|---|---|",
        ]
        for cls in cal.index:
            r, c = raw.loc[cls], cal.loc[cls]
            details.append(
                f"| {cls} | {int(r.ops)} | {_ms(r.measured_s)} | {_ms(r.predicted_s)} | "
                f"{_pct(r.error)} | {_ms(c.predicted_s)} | {_pct(c.error)} |"
            )
    cpu = cpu_capture_rows()
    lines += [
        "",
        "### Before and after the kernel-model revision",
        "",
        "Errors at commit 7aeb9b5 (before) and now. The earlier A100 AlexNet kernels-only -4.8% was",
        "errors cancelling: its reductions were predicted +655% (batch-norm efficiency applied to",
        "pooling kernels) against conv -75% and GEMM -96%.",
        "",
        "| fixture | shapes only before | now | calibrated before | now | "
        "calibrated kernels only before | now |",
        "|---|---|---|---|---|---|---|",
        *history,
    ]
    if cpu is not None:
        lines.append(
            f"| AlexNet captured on a CPU, predicted for dgx-a100 | {_pct(BEFORE_CPU_ALEXNET)} | "
            f"{_pct(cpu.loc['total', 'error'])} | | | | |"
        )
    gemm_fit = fit.loc["gemm_grid"] if "gemm_grid" in fit.index else None
    lines += [
        "",
        "## What limits accuracy",
        "",
        "**GEMM depth.** A GEMM's launch shows its output tiles and K-slices, not its depth K, and the",
        "fixtures' GEMMs run from 32 to 9216 deep. The model assumes 512 per K-slice; the table below",
        "gives the depth worked out by hand from each workload (documentation only; the model never",
        "sees it), the model's bound with 512-deep slices, and the V100-calibrated prediction:",
        "",
        "| fixture | kernel | grid | launches | depth (by hand) | measured us | bound us | "
        "bound / measured | calibrated us |",
        "|---|---|---|---|---|---|---|---|---|",
        *depth_rows,
        "",
        "Where the depth happens to be 512 per slice (the RTX 2080 Ti MLP), the sgemm engines run at",
        "0.65-0.84 of the model's bound (at the preset's reference boost clock), a plausible cuBLAS",
        "SGEMM efficiency. The V100 `gemm_grid` class, though, is 15 launches (0.34 ms of 472 ms) whose",
        "time-weighted fit is dominated by a weight-gradient GEMM only 32 deep (K = batch), priced for",
        "512: efficiency "
        + (
            f"{gemm_fit.efficiency:.2f} (median per op {gemm_fit.median_efficiency:.2f})"
            if gemm_fit is not None
            else "n/a"
        )
        + ".",
        "Applied to the RTX's GEMMs, which are as deep as assumed, it predicts them 3.4-4.4x too fast;",
        "applied to AlexNet's fc6 and fc7, 18x and 8x deeper, the error runs the other way. The A100",
        "event-sync GEMMs land within 20% because their bound / measured (2.27) is near the V100 fit's:",
        "if they are 1024^3 products, their slices are 205 deep, shallow like the V100's. The same holds",
        "for convolutions (AlexNet's TF32 implicit GEMMs are C x R x S = 1728-3456 deep and run at",
        "0.23-0.34 of the 512-deep bound). No single efficiency fixes a depth that varies 30-fold",
        "between workloads; a trace with recorded shapes (`record_shapes=True`) does, and then the",
        "kernels get real FLOPs and bytes and leave the `_grid` classes.",
        "",
        "**Loop extents of reductions.** cuDNN's batch-norm kernels (one block per channel) and",
        "PyTorch's `reduce_kernel` loop over an extent their grid does not show, so their inferred work",
        "is the V100 workload's (`reduction_grid` efficiency "
        + (
            f"{fit.loc['reduction_grid', 'efficiency']:.2f}"
            if "reduction_grid" in fit.index
            else "n/a"
        )
        + ").",
        "It lands near the RTX's bias-gradient reductions only by chance. Pooling kernels, one thread",
        "per element, are a class of their own (`reduction_pool_grid`).",
        "",
        "**Host copies.** Pageable copies run at the host's staging memcpy rate beyond the first",
        "staged MiB (`archsim.perf.kernel.host_link_seconds`). The only fixture with host copies",
        "(a100_alexnet_forward, 84% of its device time) is where the rate and chunk were measured, so",
        "its total checks the model's shape, not a prediction; its kernels-only column is the",
        "out-of-sample part. The fixture's host is not a DGX: its sub-MiB copies move at ~11 GB/s, about",
        "a PCIe 3.0 x16 pinned rate, not the dgx-a100 preset's 25.2 GB/s.",
        "",
        "**Tiny kernels.** Floors are per GPU and coarse: the RTX fixture's memsets take 1 us but get",
        "the 2-us kernel floor read from its kernels (memset +100% shapes only); its `nll_loss` kernels",
        "are one block of 32 threads looping over the batch (7-12 us, predicted at the floor); the A100",
        "AlexNet fixture's shortest kernels take 4-5 us against the assumed 1.25-us floor. Together",
        "about 1% of any fixture's time.",
    ]
    if cpu is not None:
        total = cpu.loc["total"]
        lines += [
            "",
            "## From op shapes, captured on a CPU",
            "",
            "The NVIDIA fixtures have no shapes; archsim's own CPU captures do. AlexNet forward captured on",
            f"this CPU (`{CPU_TRACE.relative_to(ROOT)}`, one steady step, resized {CPU_TRACE_BATCH} -> "
            f"{FIXTURE_BATCH} with `scale_ops_to_batch`) predicted on `dgx-a100` from FLOPs and bytes",
            f"alone (no calibration), versus the kernels of the last forward pass in `{A100_ALEXNET}`",
            "(batch 128, fp32 with TF32 convolutions):",
            "",
            "| class | measured ms | predicted ms | error |",
            "|---|---|---|---|",
        ]
        for cls, row in cpu.iterrows():
            err = _pct(row.error) if row.measured_s > 0 else "n/a"
            lines.append(f"| {cls} | {_ms(row.measured_s)} | {_ms(row.predicted_s)} | {err} |")
        ok = "within" if abs(total.error) <= TARGET_ERROR else "outside"
        lines += ["", f"Total {_pct(total.error)}: {ok} the 20% goal. Part of the gap is the workloads: "
                  "the fixture's AlexNet adds each conv bias in a separate element-wise kernel and runs "
                  "dropout (about 0.5 ms of its element-wise time), which the captured torch AlexNet "
                  "(bias fused into the conv, eval mode) does not. The rest is efficiency: the model is "
                  "a bound (efficiency 1) and cuBLAS/cuDNN reach a fraction of it (the 32x32 sgemm of the "
                  "classifier runs at ~60% of FP32 peak, the TF32 convolutions at 62-71% of TF32 peak, "
                  "PyTorch's adaptive average pool on AlexNet's 6x6 maps at ~5% of DRAM bandwidth). "
                  "Calibrating that needs a GPU trace with recorded shapes (`record_shapes=True`), which "
                  "none of the fixtures has."]  # fmt: skip
    lines += ["", "## Fitted efficiencies (V100 fixture)", "",
              "| class | ops | measured ms | model bound ms | efficiency (time-weighted) | median per op |",
              "|---|---|---|---|---|---|"]  # fmt: skip
    for cls, row in fit.iterrows():
        lines.append(
            f"| {cls} | {int(row.ops)} | {_ms(row.measured_s)} | {_ms(row.bound_s)} | "
            f"{row.efficiency:.4f} | {row.median_efficiency:.4f} |"
        )
    lines += ["", "An efficiency above 1 means the model's bound is pessimistic for that class. "
              "Classes the V100 trace lacks keep efficiency 1; `all` is shown for reference only. "
              "The `_grid` suffix marks kernels whose work was inferred from the launch grid; those "
              "efficiencies never apply to ops with real FLOPs and bytes. `_aux` marks the kernels a "
              "GEMM/conv op launches around its GEMM engine (FFT, Winograd and layout transforms, "
              "split-K reductions, epilogues), `_pool` pooling kernels.", "",
              "## Per-class errors", *details, ""]  # fmt: skip
    text = "\n".join(lines)
    out = ROOT / "docs" / "ACCURACY.md"
    with atomic_output_file(out) as handle:
        handle.write(text)
    print(text)
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
