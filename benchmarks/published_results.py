"""archsim beside published results it was never fitted to: writes docs/PUBLISHED.md.

Every published throughput, latency or peak figure that a bundled trace and preset can be put beside
(the inventory in PUBLISHED's ``source`` fields and in NOT_COMPARED): the script runs archsim's
Python API on the closest bundled workload and preset, prints the table and writes the page. Nothing
here feeds back into the model: no constant was set from these figures, and where archsim is far off
the row says the likely cause instead of a correction.

Run: ``python benchmarks/published_results.py [--out docs/PUBLISHED.md]`` (about 5 s of CPU on
the 2-core development VM; every simulation is deterministic, so the page is reproducible).
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import sys
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
import network_paper as paper  # noqa: E402
from accuracy_notes import PUBLISHED as TX1_TABLE3  # noqa: E402
from published_runs import (  # noqa: E402
    NETWORK_SETS,
    R2D2_ACTORS,
    R2D2_BATCH,
    R2D2_SEQUENCE_STEPS,
    apex_learner_batches_per_s,
    dgx_peak_pflops,
    envpool_thread_frames_per_s,
    network_reductions,
    r2d2_actor_env_steps_per_s,
    r2d2_learner_steps_per_s,
    seed_frames_per_s,
    tx1_alexnet_images_per_s,
)

BEGIN = "<!-- published_results.py: generated table begins -->"
END = "<!-- published_results.py: generated table ends -->"


@dataclasses.dataclass(frozen=True)
class Published:
    """One published figure and how archsim is put beside it."""

    key: str
    source: str  # citation: who, where, which table or section
    figure: str  # what the number is
    low: float  # a point figure has low == high; a published range has low < high
    high: float
    unit: str
    setup: str  # the archsim run: trace, preset, knobs
    differs: str  # where the published setup differs, and the assumption made for it
    before: str  # where archsim already compared against it ("new" when nowhere)
    cause: str = ""  # likely cause, in one line, when archsim is far off


@dataclasses.dataclass(frozen=True)
class Row:
    published: Published
    archsim: float

    @property
    def workload(self) -> bool:
        """False for the data-sheet peak rows, which check a preset, not a workload's prediction."""
        return not self.published.key.startswith(PEAK_PREFIX)

    @property
    def error(self) -> float:
        return relative_error(self.archsim, self.published.low, self.published.high)


def relative_error(value: float, low: float, high: float) -> float:
    """Signed error of ``value`` against a published point (low == high) or range [low, high]: 0
    inside the range, else relative to the nearer end (above: to ``high``, below: to ``low``)."""
    if not low <= high:
        raise ValueError(f"published range: low {low} above high {high}")
    if value > high:
        return value / high - 1.0
    if value < low:
        return value / low - 1.0
    return 0.0


PEAK_PREFIX = "peak_"
FAR_OFF = 0.5  # |error| beyond which a row's cause is printed in the table's last column


# ---------------------------------------------------------------------------------------------
# the published figures

FURUKAWA = (
    "Furukawa & Matsutani, PDP 2022 (arXiv:2110.13506), abstract; docs/NETWORK.md's system: "
    "8 actors on 4 nodes, 40GbE, Ape-X trace"
)
NETWORK_SETUP = (
    "apex-dqn-cpu, dgx1-v100, `--actors 8 --nodes 4 --inference local --replay-ratio 1 "
    + " ".join(f"--set {s}" for s in NETWORK_SETS)
    + "`, `network.stack` and the replay's placement as the figure names, the capture's "
    "recorded (Python) replay work"
)
NETWORK_DIFFERS = (
    "their replay is a DPDK program with its own message sizes (not published in the abstract); "
    "this trace inserts 16 transitions (903 KB) and samples 32 (1.8 MB) a message"
)
NETWORK_CAUSE = (
    "this trace's messages are 0.9-1.8 MB, 190-380 us of 40GbE wire that no stack or hop shortens, "
    "and the Python replay's ms of work per access dwarfs the network (docs/NETWORK.md)"
)
TX1_SOURCE = "NVIDIA, GPU-Based Deep Learning Inference whitepaper (2015), Table 3"
TX1_DIFFERS = (
    "Caffe + cuDNN 4 in 2015 against the captured torchvision AlexNet (eval) priced at the "
    "model's Volta-era GEMM fraction (0.85)"
)
TX1_CAUSE = (
    "2015 Caffe/cuDNN 4 reached ~0.4 of the GM20B's FP32 peak at batch 128 (0.13 at batch 1); "
    "the model assumes 0.85, kept because other Maxwell parts give 0.3-1.0 (cuDNN R4 ran this "
    "AlexNet at 1.0 of a Titan X's peak, FFT allowed): docs/ACCURACY.md, Jetson TX1 audit"
)
# Caffe's half2 gain at batch 128: the whitepaper's FP16 over its FP32 figure (accuracy_notes)
TX1_HALF2_GAIN = (
    TX1_TABLE3["jetson-tx1", "alexnet-b32-fp16", 128]
    / TX1_TABLE3["jetson-tx1", "alexnet-b32-fp32", 128]
)
TX1_FP16_CAUSE = (
    "two errors of opposite sign: the FP32 rows' excess (as #7) and Caffe's native half2 "
    f"gain ({TX1_HALF2_GAIN:.2f}x at batch 128) absent from PyTorch's FP32-compute fp16"
)
TX1_FP16_DIFFERS = (
    TX1_DIFFERS + "; the whitepaper's FP16 is native half2 math, PyTorch computes fp16 in FP32 "
    "on this GPU (halved bytes only)"
)


def published_figures() -> list[tuple[Published, Callable[[], float]]]:
    """Every row of the table with the archsim run that gives its figure."""
    rows: list[tuple[Published, Callable[[], float]]] = [
        (
            Published(
                "seed_r2d2",
                "Espeholt et al., SEED RL, ICLR 2020: ALE R2D2 GPU row",
                "R2D2 on one V100, 256 envs, 55 actor CPUs",
                67_000,
                67_000,
                "frames/s",
                "r2d2-seed-2x2-cpu, dgx1-v100, `--actors 256 --learner-batch 64`, central "
                "inference, the trace's replay ratio",
                "SEED's server is compiled TensorFlow behind gRPC, its actors on 55 other CPUs; "
                "here the bundled Python server (87 us of CPU per request) and the DGX-1's own host "
                "threads; sequences 20+10 steps, not 80+40",
                "README, docs/FIGURES.md",
                "one Python inference-server thread closes ~107 batches/s (docs/FIGURES.md); "
                "SEED's compiled server is not that thread",
            ),
            seed_frames_per_s,
        ),
        (
            Published(
                "r2d2_learner",
                "Kapturowski et al., R2D2, ICLR 2019, sec. 2.3",
                "learner: ~5 updates/s of 64 sequences of 80 (+40 burn-in) steps = 38,400 "
                "sequence steps/s",
                5 * R2D2_BATCH * R2D2_SEQUENCE_STEPS,
                5 * R2D2_BATCH * R2D2_SEQUENCE_STEPS,
                "sequence steps/s",
                "r2d2-seed-2x2-cpu, dgx1-v100, `--actors 256 --learner-batch 64 --replay-ratio "
                "none`: updates/s x 64 x 30",
                "the paper names no GPU (a V100 is taken); the trace's sequences are 20+10 steps "
                "(the same burn-in share, 1/3), so the comparison is per sequence step; its "
                "inference runs on the learner's GPU (SEED layout), R2D2's on the actors",
                "new",
                "R2D2's learner also sampled and re-prioritized a large sequence replay in its "
                "loop (this trace's holds 256 sequences); its GPU may be older than a V100",
            ),
            r2d2_learner_steps_per_s,
        ),
        (
            Published(
                "r2d2_actor",
                "Kapturowski et al., R2D2, ICLR 2019, sec. 2.3",
                "one actor, Atari: ~260 env steps/s",
                260,
                260,
                "env steps/s per actor",
                f"apex-dqn-cpu, dgx1-v100, `--actors {R2D2_ACTORS} --inference local "
                "--replay-ratio none`: env steps/s / actors",
                "R2D2's actor runs an LSTM net (~24 MFLOP a step against Nature DQN's 18.7) on an "
                "unnamed CPU; here the Ape-X capture's Nature DQN on a Xeon E5-2698 v4 thread",
                "new",
            ),
            r2d2_actor_env_steps_per_s,
        ),
        (
            Published(
                "apex_learner",
                "Horgan et al., Ape-X, ICLR 2018 (docs/REFERENCE.md)",
                "learner: ~19 batches of 512 per second",
                19,
                19,
                "batches/s",
                "apex-dqn-cpu, dgx1-v100, `--actors 360 --inference local --learner-batch 512 "
                "--replay-ratio none`",
                "the paper names no GPU (a V100 is taken); its 360 actors ran on other machines, "
                "here they time-share the DGX-1's 80 threads beside the learner's own",
                "new",
                "Ape-X's learner process also took 360 actors' inserts and sampled a 2M "
                "prioritized replay; the trace's learner sampled 4,096 fed by 2 actors",
            ),
            apex_learner_batches_per_s,
        ),
        (
            Published(
                "envpool_thread",
                "Weng et al., EnvPool, NeurIPS 2022 (docs/REFERENCE.md)",
                "ALE on one thread",
                7_000,
                12_000,
                "frames/s",
                "dqn-pong-cpu's actor work per env step under central inference (env step, "
                "preprocessing, one request message) on one dgx-a100 host thread",
                "EnvPool steps ALE from C++ with no Python; the trace's env step is ale-py through "
                "gymnasium and the DQN wrappers, plus a message's stack cost",
                "new",
            ),
            envpool_thread_frames_per_s,
        ),
    ]
    for trace, batch, differs, cause in (
        ("alexnet-b1-fp32", 1, TX1_DIFFERS, TX1_CAUSE),
        ("alexnet-b32-fp32", 128, TX1_DIFFERS, TX1_CAUSE),
        ("alexnet-b32-fp16", 1, TX1_FP16_DIFFERS, TX1_FP16_CAUSE),
        ("alexnet-b32-fp16", 128, TX1_FP16_DIFFERS, TX1_FP16_CAUSE),
    ):
        value = TX1_TABLE3["jetson-tx1", trace, batch]  # the whitepaper's Table 3, cited there
        dtype = "FP16" if "fp16" in trace else "FP32"
        rows.append(
            (
                Published(
                    f"tx1_alexnet_{dtype.lower()}_b{batch}",
                    TX1_SOURCE,
                    f"AlexNet on Jetson TX1, {dtype}, batch {batch}",
                    value,
                    value,
                    "images/s",
                    f"`archsim predict traces/{trace} --hw jetson-tx1` resized to batch {batch} "
                    "(GPU time per batch, no launch overhead)",
                    differs,
                    "docs/ACCURACY.md",
                    cause,
                ),
                lambda trace=trace, batch=batch: tx1_alexnet_images_per_s(trace, batch),
            )
        )
    ranges = paper.PUBLISHED  # the paper's ranges as benchmarks/network_paper.py cites them
    network = (
        ("bypass_network_part", "kernel bypass vs kernel TCP: network part of a replay access",
         ranges["bypass_network_access"]),
        ("bypass_access", "kernel bypass vs kernel TCP: replay access latency",
         ranges["bypass_network_access"]),
        ("in_network_access_kernel_tcp", "in-network vs server replay, kernel TCP: access latency",
         ranges["in_network_access"]),
        ("in_network_sampling_kernel_tcp",
         "in-network vs server replay, kernel TCP: prioritized sampling latency",
         ranges["in_network_sampling"]),
        ("in_network_access_kernel_bypass",
         "in-network vs server replay, kernel bypass: access latency", ranges["in_network_access"]),
        ("in_network_sampling_kernel_bypass",
         "in-network vs server replay, kernel bypass: prioritized sampling latency",
         ranges["in_network_sampling"]),
    )  # fmt: skip
    cache: dict[str, dict[str, float]] = {}

    def reduction(key: str) -> float:
        if "all" not in cache:
            cache["all"] = network_reductions()
        return cache["all"][key]

    for key, figure, (low, high) in network:
        rows.append(
            (
                Published(
                    f"furukawa_{key}",
                    FURUKAWA.split(";")[0],
                    figure,
                    low,
                    high,
                    "% cut",
                    NETWORK_SETUP,
                    NETWORK_DIFFERS,
                    "docs/NETWORK.md",
                    NETWORK_CAUSE,
                ),
                lambda key=key: reduction(key),
            )
        )
    for preset, rate, sparse, figure, value in (
        ("dgx1-p100", "fp16", False, "DGX-1 (P100): 170 TFLOPS FP16", 0.170),
        ("dgx1-v100", "tensor", False, "DGX-1 (V100): 1 PFLOPS mixed precision", 1.0),
        ("dgx-a100", "tensor", True, "DGX A100: 5 PFLOPS AI (FP16 tensor, 2:4 sparse)", 5.0),
        ("dgx-h100", "fp8", True, "DGX H100: 32 PFLOPS FP8 (2:4 sparse)", 32.0),
    ):
        rows.append(
            (
                Published(
                    f"{PEAK_PREFIX}{preset}",
                    "NVIDIA DGX data sheet",
                    figure,
                    value,
                    value,
                    "PFLOP/s",
                    f"`archsim hw show {preset}`: 8 GPUs x SMs x per-SM {rate} rate x clock"
                    + (" x 2 (sparsity)" if sparse else ""),
                    "a peak, not a workload: checks the preset's per-GPU figures (from the GPU "
                    "whitepapers) against the box's own data sheet",
                    "new",
                ),
                lambda preset=preset, rate=rate, sparse=sparse: dgx_peak_pflops(
                    preset, rate, sparse
                ),
            )
        )
    return rows


# Published figures found but not put beside archsim, and why (the inventory's other half).
NOT_COMPARED = (
    ("IMPALA (Espeholt et al., ICML 2018): 200-250K frames/s on DMLab with many CPU machines",
     "V-trace actor-critic on DMLab: no bundled workload or trace of either"),
    ("Sample Factory (Petrenko et al., ICML 2020): ~45K frames/s on 10 cores, ~130K on 36, Atari",
     "APPO, not bundled; no preset of its machines (the rtx2080ti preset's host CPU is a "
     "placeholder)"),
    ("EnvPool (Weng et al., NeurIPS 2022): ~1.07M frames/s on all 256 threads of a DGX A100",
     "environment stepping alone on every thread: archsim simulates an agent, not an env pool "
     "(the one-thread figure is in the table)"),
    ("R2D2 (Kapturowski et al., ICLR 2019): ~130 env steps/s per actor on DMLab",
     "no DMLab trace"),
    ("Inci et al. 2020: throughput, power and SM-sweep figures of SEED RL on DGX systems",
     "the paper's body was not among the stored pages searched (only its abstract), so no "
     "figure of it is quoted; its CPU/GPU ratio definitions are matched in tests/test_ratio.py "
     "(DGX-1 40 cores / 640 SMs = 0.0625; DGX A100 256 threads / 864 SMs = 0.296), a definition "
     "in sample, not a comparison"),
    ("NVIDIA TX1 whitepaper: 45 images/s/W (AlexNet FP16, batch 128; ~5.7 W)",
     "`archsim predict` gives no power, and the jetson-tx1 preset's GPU power (1.5 W idle, "
     "7.5 W max) is an even split of the module's, not a measurement"),
    ("NVIDIA TX1 whitepaper: GoogLeNet, and Titan X / Core i7-6700K rows",
     "no GoogLeNet trace; no Titan X (GM200) or desktop-CPU preset"),
    ("NVIDIA DGX data sheets: system power (DGX-1 3.5 kW, DGX A100 6.5 kW, DGX H100 ~10.2 kW max)",
     "archsim models GPU and CPU-socket power, not fans, NICs, storage or supplies"),
)  # fmt: skip


# ---------------------------------------------------------------------------------------------
# the page


def fmt(value: float) -> str:
    """A figure with digits that suit its size."""
    if not math.isfinite(value):
        return "n/a"
    if abs(value) >= 1000:
        return f"{value:,.0f}"
    if abs(value) >= 10:
        return f"{value:.1f}"
    return f"{value:#.3g}"  # three significant digits, trailing zeros kept (1.00, 0.170)


def published_cell(p: Published) -> str:
    return fmt(p.low) if p.low == p.high else f"{fmt(p.low)}-{fmt(p.high)}"


def error_cell(row: Row) -> str:
    if row.published.low == row.published.high:
        return f"{100 * row.error:+.1f}%"
    if row.error == 0:
        return "inside"
    return f"{100 * row.error:+.1f}% ({'above' if row.error > 0 else 'below'})"


def table_lines(rows: list[Row]) -> list[str]:
    """The markdown table: one line per row, its archsim cell the run's output."""
    lines = [
        "| # | published figure | source | published | archsim | unit | error | archsim run "
        "| what differs | likely cause (when \\|error\\| > 50%) | compared before in |",
        "|---:|---|---|---:|---:|---|---:|---|---|---|---|",
    ]
    first: dict[str, int] = {}  # a text's first row: later rows with the same text say "as #N"

    def once(text: str, i: int) -> str:
        if not text:
            return ""
        n = first.setdefault(text, i)
        return text if n == i else f"as #{n}"

    for i, row in enumerate(rows, 1):
        p = row.published
        cause = once(p.cause, i) if abs(row.error) > FAR_OFF else ""
        lines.append(
            f"| {i} | {p.figure} | {p.source} | {published_cell(p)} | {fmt(row.archsim)} | "
            f"{p.unit} | {error_cell(row)} | {once(p.setup, i)} | {once(p.differs, i)} | "
            f"{cause} | {p.before} |"
        )
    return lines


def summary(rows: list[Row]) -> dict:
    """Over the workload rows (the data-sheet peaks left out): counts, and the best and worst rows
    by |error| (a row inside a published range counts 0)."""
    work = [r for r in rows if r.workload]
    ordered = sorted(work, key=lambda r: abs(r.error))
    return {
        "rows": len(work),
        "within_20": sum(abs(r.error) <= 0.2 for r in work),
        "within_2x": sum(0.5 <= 1 + r.error <= 2 for r in work),
        "best": ordered[0],
        "worst": ordered[-1],
    }


def page(rows: list[Row]) -> str:
    s = summary(rows)
    best, worst = s["best"], s["worst"]
    text = [
        "# archsim against published results",
        "",
        "Published figures archsim was **not** fitted to, beside what archsim gives for the closest",
        "bundled workload and preset. No model constant was set from any of them; where archsim is",
        "far off, the row gives the likely cause instead of a correction. Real runs of this machine",
        "are compared in [VALIDATION.md](VALIDATION.md), GPU traces in [ACCURACY.md](ACCURACY.md).",
        "",
        "Regenerate (the whole page; deterministic, about 5 s):",
        "",
        "```",
        "python benchmarks/published_results.py --out docs/PUBLISHED.md",
        "```",
        "",
        "Error = archsim / published - 1; against a published range, 0 inside it, else to the",
        "nearer end. The DGX peak rows check presets against a second document, not a workload.",
        "",
        BEGIN,
        "",
        *table_lines(rows),
        "",
        f"{s['rows']} workload rows (the {len(rows) - s['rows']} data-sheet peaks aside): "
        f"{s['within_20']} within 20%, {s['within_2x']} within a factor of 2. "
        f"Closest: #{rows.index(best) + 1} {best.published.figure} ({error_cell(best)}); "
        f"farthest: #{rows.index(worst) + 1} {worst.published.figure} ({error_cell(worst)}).",
        "",
        END,
        "",
        "## Published figures not put beside archsim",
        "",
        "| figure | why not |",
        "|---|---|",
        *[f"| {figure} | {why} |" for figure, why in NOT_COMPARED],
        "",
        "## Reading it",
        "",
        "- The RL-system rows compare different software on the same kind of machine: the bundled",
        "  traces are Python runtimes captured on a 2-core CPU VM, the published systems compiled",
        "  (TensorFlow, gRPC, C++ environments) on machines the papers partly name. A row far off",
        "  says how far this trace's software is from theirs as much as how far the model is.",
        "- No row is in sample: none of these figures set a model constant. The archsim column is",
        "  computed at run time from archsim's Python API",
        "  (`archsim.sim.run.simulate`, `archsim.analysis.predict.predict_inference`,",
        "  `archsim.sim.workload.derive_service_times`, the presets) and",
        "  `tests/test_published_results.py` recomputes rows from those calls.",
        "",
    ]
    return "\n".join(text)


def measure(figures=None) -> list[Row]:
    """Run archsim for every figure (``figures``: pairs as published_figures() gives)."""
    figures = published_figures() if figures is None else figures
    return [Row(p, float(run())) for p, run in figures]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, help="write the page here (e.g. docs/PUBLISHED.md)")
    args = parser.parse_args(argv)
    start = time.process_time()
    rows = measure()
    cpu_s = time.process_time() - start
    print("\n".join(table_lines(rows)))
    print(f"\n{cpu_s:.1f} s of CPU")
    if args.out:
        args.out.write_text(page(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
