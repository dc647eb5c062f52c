"""GPU architecture table: a source hardware config for any GPU from a trace's ``deviceProperties``.

A trace from a GPU with no preset (a Quadro GP100, an MI250 GCD named "AMD Radeon Graphics") still
says its SM count, compute capability (HIP reports gfx9 parts as 9.x), memory and limits. The per-SM,
per-clock rates follow from the architecture, so a config is the trace's own figures plus the
architecture's: math rates per SM per clock, a typical boost clock, and DRAM bandwidth and L2 of the
architecture's reference part, scaled by the SM ratio where the trace's GPU is a smaller or larger part
(within an architecture, narrower SKUs have proportionally fewer SMs and memory channels; an
approximation, named in the config's description). A name that says its memory (``80GB``, ``HBM3``,
``PCIe``) picks the datasheet bandwidth instead. Figures the table does not hold (latencies, launch
costs, power, host CPU and links) come from ``reference_preset``, a system preset with a GPU of the
same architecture.

AMD: a compute unit (CU) is an SM; ``tensor`` is the MFMA (matrix core) FP16 rate; ``fp32`` is the
packed-FP32/MFMA-FP32 rate (v_pk_fma_f32 and FP32 MFMA both give 256 FLOP/clk/CU on CDNA2 and CDNA3;
rocBLAS runs sgemm on MFMA, kernels named ``..._MI16x16x1``). Wavefronts are 64 wide.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from archsim.errors import ArchsimError


@dataclass(frozen=True)
class GpuArch:
    """Per-SM, per-clock figures of one GPU architecture and its reference part."""

    key: str  # sm_80, gfx942, ...
    family: str
    fp32_flops_per_clk_per_sm: float
    fp16_flops_per_clk_per_sm: float
    tensor_flops_per_clk_per_sm: float  # dense FP16 matrix rate, FP32 accumulate; 0 = none
    tf32: bool
    clock_mhz: float  # typical boost clock of the reference part
    ref_sms: int
    ref_dram_bw_gbs: float
    ref_l2_size_mb: float
    ref_l2_bw_gbs: float
    reference_preset: str  # system preset of the same architecture: latencies, host, links
    source: str
    # GeForce parts of Turing/Ampere/Ada run FP16 tensor math with FP32 accumulate at half the rate
    # of the data-center parts (Turing whitepaper appendix; GA102 whitepaper table 1; Ada whitepaper
    # appendix: RTX 4090 165.2 dense FP16/FP32-acc vs 330.3 FP16-acc TFLOP/s).
    geforce_tensor_factor: float = 1.0


ARCHS: dict[str, GpuArch] = {
    a.key: a
    for a in (
        # NVIDIA Jetson TX1 module data sheet (DS-07224): 256 CUDA cores (2 SMs of 128) at 998 MHz,
        # LPDDR4 25.6 GB/s, 256 KB L2; Tegra X1 whitepaper: FP16 at twice the FP32 rate.
        GpuArch("sm_53", "Maxwell GM20B", 256, 512, 0, False, 998, 2, 25.6, 0.25, 35.1,
                "jetson-tx1", "Jetson TX1 data sheet; Tegra X1 whitepaper"),
        # NVIDIA Tesla P100 whitepaper (2016): 56 SMs x 64 FP32 cores, FP16 2x (21.2 TFLOP/s SXM2),
        # 1480 MHz boost, HBM2 732 GB/s, 4 MB L2. L2 bandwidth: V100's per SM per clock (17.6 B, Jia
        # et al. 2018) x 56 x 1480 MHz = 1459 GB/s (no published GP100 figure found).
        GpuArch("sm_60", "Pascal GP100", 128, 256, 0, False, 1480, 56, 732, 4, 1459,
                "dgx1-p100", "Tesla P100 whitepaper"),
        # Pascal GP104 whitepaper: 128 FP32 cores per SM. CUDA C Programming Guide, "Arithmetic
        # Instructions": CC 6.1 does 2 FP16 results per clock per SM, so cuBLAS and PyTorch compute
        # FP16 tensors in FP32 there (compute type 32F, opmath float): the FP32 rate bounds both.
        # Reference part Tesla P40 (datasheet): 30 SMs, 1531 MHz, 346 GB/s, 3 MB L2. L2 bandwidth:
        # V100's 17.6 B per SM per clock x 30 x 1531 MHz = 808 GB/s.
        GpuArch("sm_61", "Pascal GP10x", 256, 256, 0, False, 1531, 30, 346, 3, 808,
                "dgx1-p100", "Pascal GP104 whitepaper; Tesla P40 datasheet"),
        # NVIDIA Tesla V100 whitepaper: 80 SMs, 1530 MHz, 125 TFLOP/s tensor, HBM2 900 GB/s, 6 MB L2;
        # L2 bandwidth measured 2155 GB/s (Jia et al. 2018, "Dissecting the Volta GPU").
        GpuArch("sm_70", "Volta GV100", 128, 256, 1024, False, 1530, 80, 900, 6, 2155,
                "dgx1-v100", "Tesla V100 whitepaper; Jia et al. 2018"),
        # NVIDIA T4 datasheet: 40 SMs, 1590 MHz, 65 TFLOP/s mixed precision (40*1024*1590e6 = 65.1T),
        # GDDR6 320 GB/s; Turing whitepaper: 4 MB L2, FP16 2x FP32. L2 bandwidth: V100's 17.6 B per SM
        # per clock x 40 x 1590 MHz = 1119 GB/s.
        GpuArch("sm_75", "Turing TU10x", 128, 256, 1024, False, 1590, 40, 320, 4, 1119,
                "t4", "T4 datasheet; Turing whitepaper", geforce_tensor_factor=0.5),
        # NVIDIA A100 whitepaper: 108 SMs, 1410 MHz, FP16 4x FP32 (78 TFLOP/s), 312 TFLOP/s tensor,
        # TF32, HBM2 1555 GB/s (40 GB), 40 MB L2 at 2.3x V100's bandwidth (2.3 x 2155 = 4957 GB/s).
        GpuArch("sm_80", "Ampere GA100", 128, 512, 2048, True, 1410, 108, 1555, 40, 4957,
                "dgx-a100", "A100 whitepaper"),
        # NVIDIA GA102 whitepaper: 128 FP32 cores per SM, FP16 non-tensor 1:1 with FP32; A40 datasheet
        # 149.7 dense FP16 tensor TFLOP/s at 84 SMs x 1740 MHz = 1024 per SM per clock (GeForce half).
        # Reference RTX 3090: 82 SMs, 1695 MHz, GDDR6X 936 GB/s, 6 MB L2. L2 bandwidth: V100's 17.6 B
        # per SM per clock x 82 x 1695 MHz = 2446 GB/s.
        GpuArch("sm_86", "Ampere GA10x", 256, 256, 1024, True, 1695, 82, 936, 6, 2446,
                "rtx4090", "GA102 whitepaper; A40 datasheet", geforce_tensor_factor=0.5),
        # Jetson AGX Orin technical brief: 2048 CUDA cores (16 SMs of 128) at 1300 MHz (5.3 FP32
        # TFLOP/s), 170 sparse INT8 TOPS on the GPU = 42.5 dense FP16 TFLOP/s = 2043 -> 2048 per SM
        # per clock; LPDDR5 204.8 GB/s; 4 MB L2. FP16 non-tensor taken 1:1 as in GA102 (not stated).
        # L2 bandwidth: V100's 17.6 B per SM per clock x 16 x 1300 MHz = 366 GB/s.
        GpuArch("sm_87", "Ampere GA10B (Orin)", 256, 256, 2048, True, 1300, 16, 204.8, 4, 366,
                "jetson-agx-orin", "Jetson AGX Orin technical brief"),
        # NVIDIA Ada whitepaper and L4 datasheet: 128 FP32 cores per SM, FP16 1:1, L4 121 dense FP16
        # tensor TFLOP/s at 58 SMs x 2040 MHz = 1022 -> 1024 (GeForce half: RTX 4090 165.2 at 128 x
        # 2520 MHz = 512); L4: GDDR6 300 GB/s, 48 MB L2. L2 bandwidth: V100's 17.6 B per SM per clock
        # x 58 x 2040 MHz = 2083 GB/s.
        GpuArch("sm_89", "Ada AD10x", 256, 256, 1024, True, 2040, 58, 300, 48, 2083,
                "l4", "Ada whitepaper; L4 datasheet", geforce_tensor_factor=0.5),
        # NVIDIA H100 datasheet (SXM5): 132 SMs, 1980 MHz boost, 66.9 FP32 / 133.8 FP16 / 989 dense
        # tensor TFLOP/s (989e12 / (132 x 1980e6) = 3784 per SM per clock), HBM3 3350 GB/s, 50 MB L2.
        # L2 bandwidth measured on the same die: te42kyfo/gpu-benches gpu-l2-cache/h200.txt, 9780 GB/s
        # (median over 8-40 MB data sets; hwconfigs/dgx-h100.yaml).
        GpuArch("sm_90", "Hopper GH100", 256, 512, 3784, True, 1980, 132, 3350, 50, 9780,
                "dgx-h100", "H100 datasheet; Hopper whitepaper"),
        # NVIDIA HGX B200 datasheet, per GPU: 75 FP32 TFLOP/s, 2.25 dense FP16 tensor PFLOP/s, HBM3e
        # 8 TB/s; 148 SMs (2 dies x 74). Clock: 75e12 / (148 x 256) = 1979 MHz (128 FP32 cores per SM
        # as in Hopper); tensor 2.25e15 / (148 x 1979e6) = 7682 per SM per clock. FP16 non-tensor 2x
        # FP32 as in Hopper (not stated). L2 126 MB as reported from a B200 device query (Jarmusch et
        # al. 2025, "Dissecting the NVIDIA Blackwell Architecture with Microbenchmarks"; no NVIDIA
        # figure); bandwidth: GH100's measured 37.4 B per SM per clock (gpu-benches h200.txt, the
        # newest generation measured) x 148 x 1979 MHz = 10954 GB/s, as hwconfigs/dgx-b200.yaml.
        GpuArch("sm_100", "Blackwell B200", 256, 512, 7682, True, 1979, 148, 8000, 126, 10954,
                "dgx-b200", "HGX B200 datasheet"),
        # AMD Instinct MI210 datasheet: 104 CUs, 1700 MHz, 22.6 FP32 vector / 45.3 FP32 matrix and
        # packed / 181 FP16 matrix TFLOP/s (181e12 / (104 x 1700e6) = 1024), HBM2e 1638.4 GB/s; CDNA2
        # whitepaper: 8 MB L2 per GCD, 32 channels x 128 B/clk = 4096 B/clk (6963 GB/s at 1700 MHz);
        # packed FP16 vector 256 per CU per clock; no TF32; no Infinity Cache. One GCD of an MI250
        # (MI250 datasheet: 208 CUs, 1700 MHz, HBM2e 3.2768 TB/s, 128 GB over 2 GCDs) has the same
        # figures, as fixture mi250_mlp_train's deviceProperties say (104 CUs, 64 GB per device).
        GpuArch("gfx90a", "CDNA2 (MI200)", 256, 256, 1024, False, 1700, 104, 1638.4, 8, 6963,
                "mi210", "MI210 datasheet; CDNA2 whitepaper"),
        # AMD Instinct MI300X datasheet: 304 CUs, 2100 MHz, 163.4 FP32 matrix / 1307.4 dense FP16
        # matrix TFLOP/s (1307.4e12 / (304 x 2100e6) = 2048), TF32 653.7 (half), HBM3 5.3 TB/s;
        # CDNA3 whitepaper: 4 MB L2 per XCD x 8 = 32 MB, 2 KB/clk per XCD (8 x 2048 x 2.1e9 = 34406
        # GB/s); the 256 MB Infinity Cache sits in front of HBM and is not modelled (DRAM bandwidth):
        # pricing every op whose bytes fit in it at the CDNA3 whitepaper's 17.2 TB/s took the MI300X
        # fixtures from +12.6% / -28.1% (normalization bench / SD3.5) to -66% / -33%: their operands are
        # not cache-resident at kernel start, or not at that rate.
        GpuArch("gfx942", "CDNA3 (MI300)", 256, 256, 2048, True, 2100, 304, 5300, 32, 34406,
                "mi300x", "MI300X datasheet; CDNA3 whitepaper"),
    )
}  # fmt: skip

# HIP reports gfx9 parts as compute capability 9.x, which collides with Hopper's 9.0: a 64-wide
# wavefront (deviceProperties warpSize) says AMD. HIP: gfx90a -> 9.0 (fixtures mi210_gpu_only,
# mi250_mlp_train), gfx942 -> 9.4 (fixtures mi300x_*). The MI100 (gfx908) also reports 9.0: its
# name keeps it out of the gfx90a row.
_AMD_CAPABILITY = {(9, 0): "gfx90a", (9, 4): "gfx942"}
_AMD_NAMED = {"mi100": "gfx908"}

# A name that says its memory: datasheet bandwidth in GB/s (first match wins, case-insensitive).
NAMED_DRAM_BW_GBS: tuple[tuple[str, float], ...] = (
    ("H200", 4800),  # H200 datasheet: HBM3e 4.8 TB/s
    ("H100 NVL", 3900),  # H100 datasheet (NVL): 3.9 TB/s
    ("H100 PCIe", 2000),  # H100 datasheet (PCIe): HBM2e 2 TB/s
    ("A100 80GB PCIe", 1935),  # A100 datasheet: 80 GB PCIe 1935 GB/s
    ("A100-SXM4-80GB", 2039),  # A100 datasheet: 80 GB SXM 2039 GB/s
    ("A100-PCIE-40GB", 1555),  # A100 datasheet: 40 GB 1555 GB/s
    ("Quadro GP100", 717),  # Quadro GP100 datasheet: HBM2 717 GB/s
    ("P100-PCIE-12GB", 549),  # Tesla P100 PCIe datasheet: 12 GB at 549 GB/s
    ("MI250X", 1638.4),  # MI250X datasheet: 3.2768 TB/s over 2 GCDs (one GCD per device)
    ("MI300A", 5300),  # MI300A datasheet: HBM3 5.3 TB/s
)

# Kernel-name marks of an architecture, for traces that do not name their GPU (newest found wins:
# a kernel built for sm_80 runs on sm_90, never the reverse). cuBLAS's volta_* kernels also run on
# Turing, so they only say "at least sm_70".
_KERNEL_NAME_MARKS: tuple[tuple[str, str], ...] = (
    (r"sm_?100|blackwell", "sm_100"),
    (r"sm_?90|hopper|wgmma", "sm_90"),
    (r"sm_?89|_ada_", "sm_89"),
    (r"sm_?86", "sm_86"),
    (r"sm_?80|cutlass_80|ampere_", "sm_80"),
    (r"sm_?75|cutlass_75|turing_", "sm_75"),
    (r"sm_?70|volta_", "sm_70"),
    # Tensile (rocBLAS/hipBLASLt) names carry the target as ISA942 / ISA90a: fixtures
    # mi300x_sd35_inference (ISA942, an MI300X) and mi210_gpu_only, mi250_mlp_train (ISA90a).
    (r"gfx942|_isa942_", "gfx942"),
    (r"gfx90a|_isa90a_", "gfx90a"),
)
_ARCH_ORDER = ("sm_70", "sm_75", "sm_80", "sm_86", "sm_89", "sm_90", "sm_100")


def _known() -> str:
    return ", ".join(ARCHS)


def _int_field(props: Mapping[str, Any], key: str, where: str, minimum: int = 0) -> int | None:
    """An integer deviceProperties field (None when absent); wrong types are one-line errors."""
    value = props.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ArchsimError(
            f"trace: deviceProperties{where}.{key}: expected an integer >= {minimum}, got {value!r}"
        )
    return value


def check_sm_count(props: Any, where: str) -> None:
    """A deviceProperties entry's numSms, checked under the raw file's name for it (ingest copies
    it to meta ``source.gpu_num_sms``, whose own check would name a field the user never wrote)."""
    if isinstance(props, Mapping):
        _int_field(props, "numSms", where, 1)


def check_device_properties(props: Mapping[str, Any], where: str = "[0]") -> dict[str, Any]:
    """The fields archsim reads from one ``deviceProperties`` entry, type-checked."""
    if not isinstance(props, Mapping):
        raise ArchsimError(f"trace: deviceProperties{where}: expected an object, got {props!r}")
    name = props.get("name")
    if name is not None and not isinstance(name, str):
        raise ArchsimError(f"trace: deviceProperties{where}.name: expected a string, got {name!r}")
    out: dict[str, Any] = {"name": name or ""}
    for key, minimum in (
        ("numSms", 1),
        ("computeMajor", 0),
        ("computeMinor", 0),
        ("warpSize", 1),
        ("totalGlobalMem", 0),
        ("maxThreadsPerMultiprocessor", 1),
        ("regsPerMultiprocessor", 1),
        ("regsPerBlock", 1),
        ("sharedMemPerMultiprocessor", 1),
        ("maxSharedMemoryPerMultiProcessor", 1),
    ):
        out[key] = _int_field(props, key, where, minimum)
    return out


def arch_for_properties(props: Mapping[str, Any], where: str = "[0]") -> GpuArch:
    """The architecture of a checked deviceProperties entry (compute capability, warp size)."""
    major, minor = props.get("computeMajor"), props.get("computeMinor")
    if major is None or minor is None:
        raise ArchsimError(
            f"trace: deviceProperties{where}.computeMajor/computeMinor: missing, so the GPU "
            f"{props.get('name')!r} has no architecture; pass its config with --source-hw"
        )
    amd = props.get("warpSize") == 64 or "amd" in str(props.get("name", "")).lower()
    key = (
        _AMD_CAPABILITY.get((major, minor), f"gfx9 {major}.{minor}")
        if amd
        else f"sm_{major}{minor}"
    )
    name = str(props.get("name", "")).lower()
    key = next((k for needle, k in _AMD_NAMED.items() if amd and needle in name), key)
    if key not in ARCHS:
        raise ArchsimError(
            f"trace: deviceProperties{where}.computeMajor/computeMinor {major}.{minor} "
            f"({props.get('name')!r}): architecture {key} is not in the table (known: {_known()}); "
            "pass its config with --source-hw"
        )
    return ARCHS[key]


def arch_from_kernel_names(names: Iterable[str]) -> GpuArch | None:
    """The newest architecture that kernel names mark (``sm80_``, ``cutlass_80``, ``gfx942``), or None."""
    found: set[str] = set()
    for name in set(names):
        lowered = str(name).lower()
        for pattern, key in _KERNEL_NAME_MARKS:
            if re.search(pattern, lowered):
                found.add(key)
    if not found:
        return None
    amd = sorted(k for k in found if k.startswith("gfx"))
    nvidia = [k for k in _ARCH_ORDER if k in found]
    if amd and nvidia:
        return None  # contradictory marks: let the user say
    return ARCHS[amd[-1] if amd else nvidia[-1]]


def named_dram_bw_gbs(gpu_name: str) -> float | None:
    """Datasheet DRAM bandwidth of a GPU whose name says its memory (NAMED_DRAM_BW_GBS), or None."""
    lowered = gpu_name.lower()
    return next((bw for needle, bw in NAMED_DRAM_BW_GBS if needle.lower() in lowered), None)


FP8_ARCHS = frozenset({"sm_89", "sm_90", "sm_100", "gfx942"})


def gpu_overrides(arch: GpuArch, props: Mapping[str, Any] | None, count: int) -> dict[str, Any]:
    """GPU-section fields of a config for ``arch`` with the trace's own figures (``props``: checked
    deviceProperties, or None when only kernel names said the architecture)."""
    props = props or {}
    name = props.get("name") or f"unnamed {arch.family} GPU"
    sms = props.get("numSms") or arch.ref_sms
    scale = sms / arch.ref_sms
    named = named_dram_bw_gbs(name)
    dram = named if named is not None else arch.ref_dram_bw_gbs * scale
    tensor = arch.tensor_flops_per_clk_per_sm
    if "geforce" in name.lower():
        tensor *= arch.geforce_tensor_factor
    out: dict[str, Any] = {
        "name": name,
        "count": max(int(count), 1),
        "sms": int(sms),
        "physical_sms": int(sms),  # the trace's card: none of its SMs disabled
        "clock_mhz": arch.clock_mhz,
        "fp32_flops_per_clk_per_sm": arch.fp32_flops_per_clk_per_sm,
        "fp16_flops_per_clk_per_sm": arch.fp16_flops_per_clk_per_sm,
        "tensor_flops_per_clk_per_sm": tensor,
        "tf32": arch.tf32,
        # FP8 matrix units: Ada, Hopper, Blackwell, CDNA3, at twice the dense FP16 tensor rate on
        # every datasheet of their presets (l4, rtx4090, dgx-h100, dgx-b200, mi300x: GeForce's
        # FP32-accumulate halving included, RTX 4090 330.3 vs 165.2 TFLOP/s)
        "fp8_flops_per_clk_per_sm": 2 * tensor if arch.key in FP8_ARCHS else 0.0,
        # BF16 math from Ampere (sm_80) on; every CDNA part has it (GpuConfig.bf16)
        "bf16": not (arch.key.startswith("sm_") and int(arch.key[3:]) < 80),
        "dram_bw_gbs": float(dram),
        "l2_size_mb": arch.ref_l2_size_mb * scale,
        "l2_bw_gbs": arch.ref_l2_bw_gbs * scale,
    }
    if props.get("maxThreadsPerMultiprocessor"):
        out["max_threads_per_sm"] = props["maxThreadsPerMultiprocessor"]
    if props.get("regsPerMultiprocessor"):
        out["registers_per_sm"] = props["regsPerMultiprocessor"]
    smem = props.get("sharedMemPerMultiprocessor") or props.get("maxSharedMemoryPerMultiProcessor")
    if smem:
        out["shared_mem_per_sm_kb"] = smem / 1024
    return out
