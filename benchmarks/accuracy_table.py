"""Regenerate docs/ACCURACY.md: kernel-model accuracy on real GPU traces it was not fitted to.

    python benchmarks/accuracy_table.py            # writes docs/ACCURACY.md and prints it
    python benchmarks/accuracy_table.py --out F    # writes F instead (trying a model change)

For every GPU fixture: the model's time of every measured kernel, memcpy and memset from the trace's
shapes and launch geometry alone (``predict --model-only``: no measured durations), on the fixture's
own GPU (its preset, or a config built from its deviceProperties), against the measured durations;
per kernel class; calibrated on one fixture and applied to the others; kernels only beside totals
with copies. The model's achieved fractions (archsim.perf.efficiency) come from published
microbenchmarks, not from these files; the few figures that were read off a fixture are named in
the table's *in sample* column. Then the real GPU captures under tests/data, out of sample
(accuracy_public.py). Last: AlexNet captured on a CPU, predicted on several presets, against
published throughputs.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from archsim.atomic import atomic_output_file  # noqa: E402
from archsim.perf.calibrate import measured_ops  # noqa: E402
from archsim.perf.classes import is_unfitted_class  # noqa: E402
from archsim.perf.kernel import body_seconds, efficiency_class, work_inferred  # noqa: E402
from archsim.perf.source import source_hw_for_trace  # noqa: E402
from archsim.trace.ingest import ingest  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))
import accuracy_repeats as repeats  # noqa: E402
from accuracy_alexnet import alexnet_section, cpu_capture_section  # noqa: E402
from accuracy_format import ms, pct  # noqa: E402
from accuracy_limits import LIMITS  # noqa: E402
from accuracy_notes import BEFORE, FIXTURE_NOTES, REFUSED  # noqa: E402
from accuracy_public import public_section  # noqa: E402

FIXTURES = ROOT.parent / "shared" / "fixtures" / "kineto"
TARGET_TOTAL, TARGET_KERNEL = 0.20, 0.30


def fixture_frame(name: str, folder: Path = FIXTURES):
    """(per-op frame of measured and model seconds, hardware) for one fixture."""
    trace = ingest(folder / name)
    hw = source_hw_for_trace(trace)
    ops = measured_ops(trace.ops)
    kind = ops["kind"].astype(str).to_numpy()
    frame = pd.DataFrame(
        {
            "cls": efficiency_class(ops).astype(str).to_numpy(),
            "kernel": kind == "kernel",
            "shaped": ~work_inferred(ops) & (kind == "kernel"),
            "measured_s": ops["dur_us"].to_numpy(dtype=float) * 1e-6,
            "model_s": body_seconds(ops, hw),
            "key": repeats.launch_keys(ops).to_numpy(),
            "first": repeats.first_launches(ops),
        }
    )
    return frame, hw


def fixture_row(
    name: str, provenance: str, frame: pd.DataFrame, hw, in_sample: str, judged: bool = True
) -> str:
    """One row of the model-only table; ``judged`` False (out of sample) leaves the goals n/a."""
    s = summary(frame)
    if not judged:
        goals = "n/a (out of sample)"
    elif s["shaped_share"] >= 0.5:
        ok = abs(s["error"]) <= TARGET_TOTAL and s["median_abs"] <= TARGET_KERNEL
        goals = "yes" if ok else "no"
    else:
        goals = "n/a (no shapes)"
    return (
        f"| {name} | {provenance} | {hw.name} ({hw.gpu.name}) | {len(frame)} | "
        f"{s['shaped_share']:.0%} | {ms(s['measured'])} | {ms(s['model'])} | "
        f"{pct(s['error'])} | {ms(s['k_measured'])} | {ms(s['k_model'])} | "
        f"{pct(s['k_error'])} | {100 * s['median_abs']:.0f}% | {goals} | "
        f"{repeats.repeat_cells(repeats.repeat_summary(frame))} {in_sample} |"
    )


def summary(frame: pd.DataFrame, efficiency: dict[str, float] | None = None) -> dict[str, float]:
    pred = frame.model_s / frame.cls.map(lambda c: (efficiency or {}).get(c, 1.0))
    k = frame.kernel
    ratio = pred[k] / frame.measured_s[k]
    return {
        "measured": frame.measured_s.sum(),
        "model": pred.sum(),
        "error": pred.sum() / frame.measured_s.sum() - 1,
        "k_measured": frame.measured_s[k].sum(),
        "k_model": pred[k].sum(),
        "k_error": pred[k].sum() / frame.measured_s[k].sum() - 1 if k.any() else np.nan,
        "median_abs": float(np.median(np.abs(ratio - 1))) if k.any() else np.nan,
        "shaped_share": frame.measured_s[frame.shaped].sum()
        / max(frame.measured_s[k].sum(), 1e-30),
    }


def fitted_ops(frame: pd.DataFrame) -> pd.DataFrame:
    """The ops a calibration fits and moves: all but the collectives (archsim.perf.classes)."""
    return frame[~frame.cls.map(is_unfitted_class).astype(bool)]


def fit(frame: pd.DataFrame) -> tuple[dict[str, float], dict[str, float]]:
    """(clipped efficiency, unclipped model/measured) per class, as archsim.perf.calibrate fits:
    collectives left out."""
    g = fitted_ops(frame).groupby("cls")[["model_s", "measured_s"]].sum()
    raw = (g.model_s / g.measured_s).to_dict()
    return {c: min(1.0, r) for c, r in raw.items()}, raw


def class_rows(frame: pd.DataFrame) -> list[str]:
    rows = []
    for cls, g in frame.groupby("cls"):
        ratio = g.model_s / g.measured_s
        rows.append(
            f"| {cls} | {len(g)} | {ms(g.measured_s.sum())} | {ms(g.model_s.sum())} | "
            f"{pct(g.model_s.sum() / g.measured_s.sum() - 1)} | "
            f"{100 * float(np.median(np.abs(ratio - 1))):.0f}% |"
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--out", type=Path, default=ROOT / "docs" / "ACCURACY.md", help="file to write"
    )
    args = parser.parse_args(argv)
    names = [n for n in FIXTURE_NOTES if (FIXTURES / n).exists()]
    frames, hws = {}, {}
    for name in names:
        frames[name], hws[name] = fixture_frame(name)
    lines = [
        "# Kernel-model accuracy on real GPU traces",
        "",
        "Generated by `python benchmarks/accuracy_table.py`; do not edit by hand.",
        "",
        "*Model only*: every measured kernel, memcpy and memset of a fixture priced by",
        "`archsim.perf.kernel.body_seconds` from the trace's shapes (FLOPs and bytes from `Input Dims`)",
        "or, without shapes, its launch grid, on the fixture's own GPU (`predict --model-only`: no",
        "measured duration is used), against the measured durations (serial sum, launch gaps excluded).",
        "Error = predicted / measured - 1. The model predicts achieved time: DRAM at the achievable",
        "fraction measured by stream benchmarks per architecture, GEMM/conv engines at the fraction",
        "cuBLAS reaches (`archsim.perf.efficiency`, each figure with its published source); none of",
        "those figures was read off these files. *In sample* names what was. Goals: totals within 20%",
        "on every fixture with shapes, per-kernel median |error| within 30%, no efficiency above 1.",
        "",
        "Fixtures (real torch.profiler traces from public repositories: facebookresearch/",
        "HolisticTraceAnalysis (HTA), AMD-AGI/TraceLens, pytorch/kineto, facebookresearch/param);",
        "not compared: " + "; ".join(f"`{n}` ({why})" for n, why in REFUSED.items()) + ".",
        "",
        "## Model only, on each fixture's own GPU",
        "",
        "| fixture | provenance | GPU config | ops | kernel time with shapes | measured ms | model ms | "
        "error | kernels only: measured ms | model ms | error | per-kernel median abs error | "
        "goals met | repeat launches: share of measured time kept | error | "
        "per-kernel median abs error | in sample |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    sums, reps = {}, {}
    for name in names:
        sums[name] = summary(frames[name])
        reps[name] = repeats.repeat_summary(frames[name])
        lines.append(
            fixture_row(
                name, FIXTURE_NOTES[name][0], frames[name], hws[name], FIXTURE_NOTES[name][1]
            )
        )
    shaped_names = [n for n in names if sums[n]["shaped_share"] >= 0.5]
    met = [n for n in shaped_names if abs(sums[n]["error"]) <= TARGET_TOTAL]
    med = [n for n in shaped_names if sums[n]["median_abs"] <= TARGET_KERNEL]
    lines += [
        "",
        f"Of {len(shaped_names)} fixtures with shapes, {len(met)} meet the 20% total goal and "
        f"{len(med)} the 30% per-kernel median goal. Before issue 12 (model at peak), model-only "
        "totals of the four fixtures then compared were: "
        + "; ".join(f"`{n}` {b[0]}" for n, b in BEFORE.items())
        + "; now: "
        + "; ".join(f"`{n}` {pct(sums[n]['error'])}" for n in BEFORE if n in sums)
        + ".",
        "",
        *repeats.goals_sentence({n: reps[n] for n in shaped_names}, TARGET_TOTAL, TARGET_KERNEL),
        "",
        *repeats.cold_table(reps),
        "",
        *public_section(fixture_frame, fixture_row),
    ]
    lines += ["", *LIMITS]
    # calibrate on one, predict the others
    fits = {n: fit(frames[n]) for n in names}
    collective_share = {
        n: 1 - fitted_ops(f).measured_s.sum() / f.measured_s.sum() for n, f in frames.items()
    }
    lines += [
        "",
        "## Calibrated on one fixture, predicting the others",
        "",
        "Per-class efficiencies fitted on the row's fixture (`archsim calibrate`: time-weighted, "
        "clipped to 1), applied to the column's fixture (model-only totals). Classes are split by "
        "whether the work came from shapes or was inferred from the grid (`_grid`), so a fit on a "
        "fixture without shapes moves only fixtures without shapes. NCCL/RCCL collectives (class "
        "`communication`) are left out of the fit, their time on a GPU trace being spent waiting "
        "on peers and the wire, not the GPU's own work, and out of both totals here, which no fit "
        "moves (the model-only tables keep them at the model's time): "
        + ", ".join(
            f"{100 * share:.1f}% of `{n.split('.')[0]}`'s measured time"
            for n, share in collective_share.items()
            if share > 0
        )
        + ". Diagonal: in sample.",
        "",
        "| fitted on \\ predicted | " + " | ".join(n.split(".")[0] for n in names) + " |",
        "|---|" + "---|" * len(names),
    ]
    for fitted in names:
        eff = fits[fitted][0]
        cells = [pct(summary(fitted_ops(frames[n]), eff)["error"]) for n in names]
        lines.append(f"| {fitted.split('.')[0]} | " + " | ".join(cells) + " |")
    lines += [
        "",
        "## No efficiency above 1",
        "",
        "Largest fitted model / measured per fixture before clipping, and how many fitted classes it "
        "clipped. Above 1 the model's inferred WORK is too large (a grid-only GEMM priced 512 deep "
        "per K-slice; a reduction whose loop extent the grid does not show), not its rates.",
        "",
        "| fixture | classes | max model / measured | class | clipped classes | max efficiency |",
        "|---|---|---|---|---|---|",
    ]
    for name in names:
        eff, raw = fits[name]
        top = max(raw, key=raw.get)
        lines.append(
            f"| {name} | {len(raw)} | {raw[top]:.2f} | {top} | "
            f"{sum(r > 1 for r in raw.values())} | {max(eff.values()):.2f} |"
        )
    lines += ["", "## Per-class errors, model only", ""]
    for name in names:
        s = sums[name]
        lines += [
            f"### {name} on {hws[name].name}",
            "",
            f"Kernels only: measured {ms(s['k_measured'])} ms, model {ms(s['k_model'])} ms "
            f"({pct(s['k_error'])}); with copies {pct(s['error'])}.",
            "",
            "| class | ops | measured ms | model ms | error | median abs error per op |",
            "|---|---|---|---|---|---|",
            *class_rows(frames[name]),
            "",
        ]
    lines += cpu_capture_section()
    from archsim.perf.efficiency import ACHIEVED

    lines += [
        "## Achieved fractions the model uses",
        "",
        "From `archsim.perf.efficiency` (the comments there cite each figure); none was fitted to",
        "a fixture. Element-wise, reduction and normalization kernels: DRAM fraction, math 1.",
        "",
        "| generation | DRAM | GEMM/conv, vector pipes | GEMM/conv, matrix units | fused attention "
        "| source |",
        "|---|---|---|---|---|---|",
        *[f"| {g} | {a.dram:.2f} | {a.gemm:.2f} | {a.gemm_tensor:.3f} | {a.attention:.3f} "
          f"| {a.source} |" for g, a in ACHIEVED.items()],
        "",
    ]  # fmt: skip
    lines += alexnet_section()
    text = "\n".join(lines)
    out = args.out
    with atomic_output_file(out) as handle:
        handle.write(text)
    print(text)
    print(f"\nwrote {out}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
