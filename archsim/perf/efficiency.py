"""Achieved fractions of peak, from published measurements: the kernel model predicts ACHIEVED time.

The terms of :mod:`archsim.perf.terms` are bounds at the datasheet peaks. Real kernels reach a
fraction of them, and that fraction depends on the architecture (how much of the DRAM bandwidth a
stream kernel can draw), the kernel family (a cuBLAS GEMM, a cuDNN convolution, an element-wise
kernel) and the math unit (vector pipes or matrix units). This module holds those fractions, each
with its source, and nothing fitted to archsim's own accuracy table:

- ``dram``: bandwidth a stream/copy kernel achieves over the datasheet bandwidth; it divides the
  DRAM-bandwidth term of every kernel.
- ``gemm`` / ``gemm_tensor``: throughput cuBLAS/rocBLAS reach on large GEMMs over the vector /
  matrix-unit peak; it divides the compute term of tiled kernels (GEMM, convolution, attention:
  cuDNN's convolutions are implicit GEMMs, Chetlur et al. 2014, "cuDNN: Efficient Primitives for Deep
  Learning", arXiv:1410.0759). Problem size is the wave/tail model's (archsim.perf.terms): a small
  GEMM fills few SMs and pays for its last wave there, not here.
- ``attention``: fused (flash) attention on matrix units over their peak; its softmax between the
  two GEMMs keeps it below a GEMM's fraction.

Element-wise, reduction and normalization kernels keep math fraction 1: they are bound by DRAM,
whose fraction they share. Under the breakdown's ``sm_utilization`` idealization the math fraction
is 1 (perfect SM utilization includes the issue stalls that keep a GEMM below peak).

A generation is recognized from the GPU's name (presets and deviceProperties names) or the
``trace-sm_80`` / ``trace-gfx942`` name of a config built from a trace; an unknown GPU gets the
``default`` row (the median of the measured rows, named as such).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from archsim.hw.schema import GpuConfig


@dataclass(frozen=True)
class Achieved:
    """Achieved fractions of peak for one GPU generation (each in (0, 1])."""

    dram: float
    gemm: float  # FP32 (or FP16-on-vector-pipes) GEMM engines
    gemm_tensor: float  # matrix units (tensor cores, MFMA)
    source: str
    # fused (flash) attention on matrix units: its softmax runs on the vector pipes and special
    # function units between the two GEMMs, so it stays further below peak than a GEMM
    attention: float = 0.35


# The matrix-unit GEMM fractions of Ampere, Hopper, Blackwell and CDNA2/3 are the "Maximum
# Achievable Matmul FLOPS" (MAMF) table of S. Bekman, "Machine Learning Engineering Open Book"
# (github.com/stas00/ml-engineering, compute/accelerator/README.md): the BF16 torch.matmul rate of
# the best shape a brute-force sweep finds, over the datasheet peak. Its current revision reports
# the mean over repeats: A100 SXM 271.2 of 312 (0.869), H100 SXM 794.5 of 989 (0.803), B200 SXM
# 1745.0 of 2250 (0.776), MI300X 668.4 of 1300 (0.514, ROCm 6.3). MI250X (one GCD) is only in an
# earlier revision: 147.0 of 191.5 (0.767, ROCm 6.2); that revision had the MI300X at 781.9 (0.601)
# and notes 450 TFLOP/s (0.35) with ROCm 6.1: library generation matters as much as the chip.
# These are best shapes: smaller GEMMs lose more to tile and wave quantization, which
# archsim.perf.terms models itself.
# Attention: FlashAttention-2 reaches 50-73% of the A100's peak (Dao 2023, arXiv:2307.08691,
# abstract; the low end is the head-dim-64 forward pass, the common case) and 35% of the H100's
# (Shah et al. 2024, "FlashAttention-3", arXiv:2407.08608, abstract); on the MI300X the Triton
# FlashAttention-2 kernel runs B=4, H=48, S=4096, D=64 (8.25e11 FLOPs) in 2.29 ms (meta-pytorch/
# tritonbench pull request 612, "triton_tutorial_flash_v2" on MI300): 360 TFLOP/s of 1307 = 0.275.
# Each row: the published measurement it comes from. Fractions are measured / datasheet peak.
ACHIEVED: dict[str, Achieved] = {
    # Maxwell GM20B (Jetson TX1, 2015-era cuBLAS 7 / cuDNN 4): no published stream or SGEMM
    # measurement of the GM20B was found. DRAM: the Pascal P100 fraction below (Jia et al. 2018, the
    # closest generation measured); GEMM: the Volta cuBLAS fraction (assumption, named as one: the
    # AlexNet comparison in docs/ACCURACY.md shows what the TX1 whitepaper's throughputs imply).
    # Other Maxwell parts do not settle it: cuDNN R4 on a GM200 Titan X ran torchvision's AlexNet
    # forward (batch 128, 182.8 GFLOP) in 27.65 ms, 6.61 TFLOP/s = 1.00 of 3072 x 2 x 1075 MHz, with
    # FFT algorithms allowed (soumith/convnet-benchmarks, torch7/imagenet_winners/output.log), while
    # cuDNN v2-era convolutions on a GTX 980 ran at 0.30-0.75 (Lavin 2015, arXiv:1501.06633): no
    # single fraction to replace 0.85 (docs/ACCURACY.md, Jetson TX1 audit). Matrix units: none.
    "maxwell": Achieved(0.70, 0.85, 1.0, "Jia et al. 2018 (P100 DRAM); Volta GEMM rows (assumed)"),
    # Pascal: Jia et al. 2018 ("Dissecting the NVIDIA Volta GPU Architecture via Microbenchmarking",
    # arXiv:1804.06826, Table 3.1): P100 global memory 510 of 732 GB/s = 0.70. GEMM: the Volta
    # SGEMM fraction below (same authors, same cuBLAS generation).
    "pascal": Achieved(0.70, 0.85, 1.0, "Jia et al. 2018 (arXiv:1804.06826)"),
    # Volta: Jia et al. 2018: V100 global memory 750 of 900 GB/s = 0.83; cuBLAS SGEMM on large
    # matrices ~13.3-14 of 15.7 TFLOP/s (their matrix-multiply figure): 0.85. Tensor cores: Markidis
    # et al. 2018 ("NVIDIA Tensor Core Programmability, Performance & Precision", arXiv:1803.04014):
    # cuBLAS HGEMM ~83 of 125 TFLOP/s = 0.66.
    "volta": Achieved(0.83, 0.85, 0.66, "Jia et al. 2018; Markidis et al. 2018"),
    # Turing: Jia et al. 2019 ("Dissecting the NVidia Turing T4 GPU via Microbenchmarking",
    # arXiv:1903.07486): T4 global memory 220 of 320 GB/s = 0.69; T4 clocks throttle under sustained
    # math (same paper, section on power/thermal limits), so the Volta GEMM fractions are upper ends.
    "turing": Achieved(0.69, 0.85, 0.66, "Jia et al. 2019 (arXiv:1903.07486); Volta GEMM rows"),
    # Ampere: BabelStream (Deakin et al., "Evaluating attainable memory bandwidth of parallel
    # programming models via BabelStream", IJCSE 2018; A100-40GB results in the BabelStream
    # repository) ~1.35-1.4 of 1.555 TB/s: 0.88. SGEMM: the Volta fraction (no independent A100
    # cuBLAS SGEMM measurement at hand); matrix units and attention: see above.
    "ampere": Achieved(
        0.88, 0.85, 0.869, "BabelStream A100; Bekman MAMF A100; Dao 2023 (FA2)", attention=0.50
    ),
    "ada": Achieved(0.82, 0.85, 0.772, "default (median of the measured rows)"),
    # Hopper: no stream figure at hand for the SXM part: the default DRAM row.
    "hopper": Achieved(
        0.82, 0.85, 0.803, "Bekman MAMF H100 SXM; Shah et al. 2024 (FA2 on H100)", attention=0.35
    ),
    # Blackwell: no stream figure at hand: the default DRAM row; matrix units: MAMF B200 SXM.
    "blackwell": Achieved(0.82, 0.85, 0.776, "default DRAM; Bekman MAMF B200 SXM"),
    # CDNA2 (MI210, MI250, MI250X; MI100's CDNA1 taken as the same): BabelStream on one MI250X GCD
    # ~1.3-1.4 of 1.6384 TB/s (OLCF Crusher/Frontier BabelStream results): 0.82. The same on an
    # MI210 (te42kyfo/gpu-benches on github, gpu-stream/mi210.txt, full occupancy): read 1345, scale
    # 1358, triad 1248 GB/s = 0.76-0.83 of 1638.4. FP32 GEMM (rocBLAS runs it on FP32 MFMA, the
    # presets' fp32 rate): rocblas-bench sgemm 8192^3 NN on a bare-metal MI210 at 1635-1700 MHz,
    # 37.9 of 45.3 TFLOP/s = 0.84 (AMD's reply in ROCm/rocm-libraries issue 9453).
    "cdna2": Achieved(
        0.82,
        0.84,
        0.767,
        "BabelStream MI250X GCD; gpu-benches MI210; rocblas-bench MI210; Bekman MAMF MI250X",
    ),
    # CDNA3 (MI300X): te42kyfo/gpu-benches (github; the files as carried by its fork xxrjun/
    # gpu-benches), gpu-stream/mi300x.txt, 100% occupancy: scale (one read and one write stream, what
    # element-wise kernels do) 3997 GB/s of 5300 = 0.754; read-only 4199 (0.79), triad 3866 (0.73).
    # Matrix units: the MAMF figure above. That figure is mostly clock: hipblaslt-bench with
    # HIPBLASLT_BENCH_EFF=1 on a 304-CU part (ROCm/hipBLASLt pull request 1544, 4096 x 4864 x 32896
    # f16) reports a 1096 MHz average engine clock under the GEMM (of 2100) and 81.3% of the peak
    # at that clock, so small kernels that do not hold the chip at its power limit may run faster
    # per CU than the 0.514; no published per-kernel clock was found to model that. AMD's own
    # figure agrees (ROCm blogs, "Measuring Max-Achievable FLOPs - Part 2", 2025, Table 1): MI300X
    # BF16 708 TFLOP/s at a 1207 MHz median clock of the slowest XCD, FP16 654 at 1115 MHz, i.e.
    # 0.94 of the peak at that clock and 0.54 / 0.50 of the datasheet's; the blog says power
    # management lowers the clock under dense matrix work and lets lightly loaded work boost (over
    # 25% for batch-1 LLM inference). A newer hipBLASLt than the MAMF row's ROCm 6.3.
    "cdna3": Achieved(
        0.754,
        0.85,
        0.514,
        "gpu-benches MI300X stream; Bekman MAMF MI300X; tritonbench FA2",
        attention=0.275,
    ),
}
# An AMD GPU of no recognized CDNA generation: the CDNA2 row.
ACHIEVED["cdna"] = ACHIEVED["cdna2"]
# Medians of the measured rows, for generations with no measurement of their own (Ada, Blackwell,
# unknown GPUs): DRAM (0.69, 0.70, 0.83, 0.88, 0.82) -> 0.82 (the rows measured before the MI300X
# row; with its 0.754 the median would be 0.787, which would move the Hopper, Ada and Blackwell
# rows that take this figure: left as it was, for want of a measurement of those parts); matrix
# units (0.66, 0.869, 0.803, 0.776, 0.767, 0.514) -> 0.772; attention (0.50, 0.35, 0.275) -> 0.35; SGEMM: the Volta figure.
ACHIEVED["default"] = Achieved(0.82, 0.85, 0.772, "median of the measured rows", attention=0.35)

# GPU name (or trace config name) -> generation; first match wins.
GENERATION_PATTERNS: tuple[tuple[str, str], ...] = (
    ("maxwell", r"\bgm20|tegra x1|maxwell|titan x\b|gtx 9\d0|sm_5\d"),
    ("pascal", r"p100|gp10\d|p40\b|p4\b|gtx 10\d0|pascal|sm_6\d"),
    ("volta", r"v100|gv100|titan v\b|volta|sm_70|sm_72"),
    ("turing", r"\bt4\b|rtx 20\d0|quadro rtx|turing|tu10\d|sm_75"),
    ("ada", r"\bl4\b|l40|rtx 40\d0|\bada\b|sm_89"),
    ("hopper", r"h100|h200|h800|gh200|hopper|sm_90"),
    ("blackwell", r"b200|gb200|b100|blackwell|sm_100"),
    ("ampere", r"a100|a800|\ba10\b|a30\b|a40\b|rtx 30\d0|orin|ampere|sm_8\d"),
    ("cdna3", r"mi3\d\d|gfx94\w*|cdna ?3"),
    ("cdna2", r"mi2\d\d|mi100|gfx90\w*|gfx908|cdna ?2"),
    ("cdna", r"mi\d{3}|instinct|cdna|gfx9[04]\w*|amd"),
)


def generation(gpu: GpuConfig, config_name: str = "") -> str:
    """The generation of ``gpu`` (a key of ACHIEVED), from its name or the config's name."""
    text = f"{gpu.name} {config_name}".lower()
    for key, pattern in GENERATION_PATTERNS:
        if re.search(pattern, text):
            return key
    return "default"


def is_cdna(gen: str) -> bool:
    """Whether ``gen`` is an AMD CDNA generation (64-wide wavefronts, HIP launch conventions)."""
    return gen.startswith("cdna")


def achieved_fractions(
    tiled: np.ndarray, tensor: np.ndarray, gen: str, attention: np.ndarray | None = None
) -> tuple[np.ndarray, float]:
    """(math fraction per op, DRAM fraction) for ops on a GPU of generation ``gen``: tiled kernels
    (GEMM/conv engines) get the library's GEMM fraction on the unit they run on, fused attention
    on matrix units the attention fraction, others 1."""
    row = ACHIEVED.get(gen, ACHIEVED["default"])
    gemm = np.where(tensor, row.gemm_tensor, row.gemm)
    if attention is not None:
        gemm = np.where(np.asarray(attention, dtype=bool) & tensor, row.attention, gemm)
    return np.where(tiled, gemm, 1.0), row.dram


__all__ = ["ACHIEVED", "Achieved", "achieved_fractions", "generation", "is_cdna"]
