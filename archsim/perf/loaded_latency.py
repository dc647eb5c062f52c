"""DRAM latency under load: a latency-vs-bandwidth curve per architecture from published stream tables.

A preset's ``dram_latency_ns`` is an UNLOADED pointer chase (one warp, one load at a time). Loads that
many threads keep in flight queue in the memory system, and the more bandwidth they draw the longer
each takes. The Little's-law term of :mod:`archsim.perf.terms` (bandwidth = bytes in flight /
latency) therefore takes its operating point where the kernel's own load sets it:

    bw = min(W, C / L(bw)),   L(bw) = L0 x m(bw / W)                              (loaded_bandwidth)

with C the kernel's bytes in flight, L0 the preset's pointer chase, W the preset's datasheet DRAM
bandwidth and m(u) >= 1 the architecture's measured latency multiplier at utilization u (a fraction of
the datasheet bandwidth, on the measured GPU as on the preset). bw x m(bw / W) grows strictly with bw,
so the fixed point is unique; it is solved in closed form on m's segment where it lies. A kernel with little in flight stays near
u = 0, m = 1 (the unloaded latency); one that draws most of the bandwidth sees the loaded one. The
bandwidth term D / (W e_dram) of archsim.perf.terms still bounds every kernel at the achievable rate.

Where m(u) comes from. te42kyfo/gpu-benches (github; the newer tables as carried by its fork
xxrjun/gpu-benches), ``gpu-stream``/``cuda-stream``: the ``read_kernel`` has every thread load ONE
8-B double and exit (``double temp = B[tidx]``), over a 1-2 GB buffer, with 1 or 2 resident blocks per
SM of 16-1024 threads; each row is the bandwidth at one occupancy. A resident thread slot cycles
through (block start, one load, exit), so by Little's law each row i has the cycle time

    cycle_i = resident threads_i x 8 B / bandwidth_i

At the lightest loads that cycle is the pointer chase plus a block turnover (start, index arithmetic,
exit: 165-280 ns on these GPUs; the one-load kernel's own cost, absent from kernels whose threads
loop). The turnover is the median cycle of the rows under LIGHT_LOAD of the datasheet bandwidth less
the same GPU's pointer chase (gpu-benches ``gpu-latency``/``cuda-latency``), taken off every row:

    m_i = (cycle_i - turnover) / L_chase,   u_i = bandwidth_i / the GPU's datasheet bandwidth

Rows after the read bandwidth peaks are dropped (more in flight, no more bandwidth: past saturation),
as are rows whose bandwidth does not exceed every row before; m is made non-decreasing (running
maximum) and starts at (0, 1); beyond the last row it stays at its last value, and the cap W and the
bandwidth term carry saturation. u is a fraction of the datasheet, not of the model's achieved
fraction, so that the model places a kernel where the measurement did: on the V100, 655 KB in flight
drew 746 GB/s (row 1,024 threads per SM), which under 0.83 x 900 GB/s (archsim.perf.efficiency, Jia et
al.) would be past saturation. Cross-check of a constant turnover: the README of te42kyfo/gpu-benches
shows an older ``cuda-stream`` on a V100-PCIe with a grid-stride ``sum1`` kernel (one load in flight per
thread, no turnover): 1 block of 128 threads at 3.0 GB/s is 341 ns per load (pointer chase 316 ns), 640
blocks at 833.5 GB/s 786 ns; it lies 30-110 ns below the read-kernel curve under u = 0.85.

Generations without a table of their own take the nearest published generation's curve (CURVE_FROM,
curve_generation): queueing under load is no property of one architecture (every DRAM system's
latency rises with its utilization, Little's law; the tables measure the shape), and a flat curve
would price an older part's loaded DRAM below a newer one's. Maxwell and Pascal take Volta's, the
oldest table (no GM20x/GP100 stream table published); Turing Volta's, whose SM it derives from;
Blackwell Hopper's; an AMD GPU of no recognized CDNA generation CDNA2's (as archsim.perf.efficiency
does); any other generation the nearest in GENERATION_ORDER, the older on a tie, and a GPU of no
recognized generation ("default") the newest NVIDIA table, Hopper's (generation() names every NVIDIA
generation from Maxwell to Blackwell, so an unnamed part is most likely a newer one). m(u) is read at
the same fraction u of each part's own datasheet bandwidth. An assumption, not a measurement of those
parts. The dependent round trips priced elsewhere keep L0: the row passes of
archsim.perf.passes are latency plus transfer (Hockney), whose transfer term already prices the queue
behind each burst (for the H100 softmax, 2.7 us per wave against 2.5 us for a closed loop at the
curve's latency); the few-block chains of archsim.perf.memory_parallelism draw almost no bandwidth
(u ~ 0); the pipeline fill's two round trips (archsim.perf.pipeline_fill) are the kernel's first and
last, when the queue is empty or draining.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

# gpu-stream's read kernel: one double per thread
STREAM_BYTES_PER_THREAD = 8.0
# rows under this fraction of the datasheet bandwidth set the block turnover (module docstring)
LIGHT_LOAD = 0.10


@dataclass(frozen=True)
class StreamTable:
    """One GPU's gpu-stream ``read`` column: resident threads per SM and GB/s per row, the same GPU's
    pointer chase and its datasheet DRAM bandwidth."""

    gpu: str
    sms: int
    threads_per_sm: tuple[int, ...]
    read_gbs: tuple[float, ...]
    chase_ns: float
    datasheet_gbs: float
    source: str


@dataclass(frozen=True)
class LatencyCurve:
    """Latency multiplier m(u) >= 1 at DRAM utilization u (piecewise linear, flat beyond the ends)."""

    utilization: tuple[float, ...]
    multiplier: tuple[float, ...]
    source: str


# Resident threads per SM of the rows of the newer gpu-stream (xxrjun/gpu-benches gpu-stream/main.cu:
# blocks of 16-112 threads one per SM, then 64-1024 threads two per SM, 160 one per SM).
_ROWS = (16, 32, 48, 64, 80, 96, 112, 128, 160, 192, *range(256, 2049, 64))
# The A100-40GB table's rows (an older gpu-stream: its first column is the resident threads per SM,
# its threads column 108 x that)
_ROWS_A100_40 = (16, 32, 48, 64, 96, 128, 160, 192, 224, 256, *range(320, 2049, 64))
# te42kyfo/gpu-benches cuda-stream/main.cu: blocks of 32-1024 threads, two per SM (a shared-memory
# spoiler; the benchmark prints a warning otherwise, and none is printed)
_ROWS_TWO_BLOCKS = tuple(range(64, 2049, 64))

# fmt: off
TABLES: dict[str, StreamTable] = {
    # H100 PCIe (114 SMs, HBM2e; NVIDIA H100 datasheet: 2 TB/s): te42kyfo/gpu-benches
    # cuda-stream/h100_pcie.txt; pointer chase on the same card, gpu-latency/h100_pcie.txt: 658.4
    # cycles at 1755 MHz = 375 ns for the largest footprints. (GH200's gpu-stream/gh200.txt, the same
    # die at 132 SMs, gives the same multipliers within 0.05 up to half its init bandwidth but stops
    # at 70% of it, and which GH200 memory it ran on, HBM3 4 TB/s or HBM3e 4.9, is not stated.)
    "hopper": StreamTable(
        "H100 PCIe", 114, _ROWS_TWO_BLOCKS,
        (96, 189, 277, 368, 449, 533, 612, 702, 764, 841, 908, 985, 1045, 1116, 1179, 1261, 1300,
        1362, 1416, 1473, 1527, 1578, 1624, 1680, 1714, 1759, 1795, 1837, 1871, 1897, 1919, 1942),
        375.0, 2000.0, "te42kyfo/gpu-benches cuda-stream/h100_pcie.txt, gpu-latency/h100_pcie.txt",
    ),
    # A100-SXM4-40GB (108 SMs, HBM2; A100 datasheet 1555 GB/s): xxrjun/gpu-benches
    # gpu-stream/a100_40.txt; pointer chase te42kyfo/gpu-benches cuda-latency/a100_40.txt, 408 ns
    # (hwconfigs/dgx-a100.yaml).
    "ampere": StreamTable(
        "A100-SXM4-40GB", 108, _ROWS_A100_40,
        (20, 41, 61, 82, 119, 162, 193, 235, 264, 310, 377, 449, 514, 592, 645, 713, 769, 838, 887,
        946, 989, 1064, 1079, 1138, 1175, 1224, 1251, 1316, 1335, 1372, 1379, 1403, 1419, 1440,
        1453, 1473, 1483, 1500),
        408.0, 1555.0, "xxrjun/gpu-benches gpu-stream/a100_40.txt; cuda-latency/a100_40.txt",
    ),
    # V100 (80 SMs, HBM2; V100 datasheet 900 GB/s, PCIe and SXM2): xxrjun/gpu-benches
    # gpu-stream/v100.txt; pointer chase 317 ns (hwconfigs/dgx1-v100.yaml, cuda-latency/v100.txt).
    "volta": StreamTable(
        "V100", 80, _ROWS,
        (19, 36, 54, 70, 87, 103, 119, 139, 165, 200, 263, 322, 376, 432, 491, 539, 557, 608, 647,
        686, 708, 728, 746, 749, 752, 755, 773, 787, 804, 813, 824, 829, 838, 842, 850, 854, 859,
        863, 867),
        317.0, 900.0, "xxrjun/gpu-benches gpu-stream/v100.txt; cuda-latency/v100.txt",
    ),
    # L40 (AD102, 142 SMs, GDDR6, 1536 threads per SM; L40 datasheet 864 GB/s): xxrjun/gpu-benches
    # gpu-stream/l40.txt; pointer chase gpu-latency/l40.txt 254 ns (hwconfigs/l4.yaml).
    "ada": StreamTable(
        "L40", 142, _ROWS[:31],
        (41, 83, 121, 163, 199, 240, 274, 321, 386, 470, 617, 740, 824, 844, *(845,) * 17),
        254.0, 864.0, "xxrjun/gpu-benches gpu-stream/l40.txt, gpu-latency/l40.txt",
    ),
    # MI210 (104 CUs, HBM2e; AMD datasheet 1638.4 GB/s): xxrjun/gpu-benches gpu-stream/mi210.txt;
    # pointer chase gpu-latency/mi210.txt 390 ns (hwconfigs/mi210.yaml).
    "cdna2": StreamTable(
        "MI210", 104, _ROWS,
        (24, 48, 70, 92, 115, 137, 161, 185, 223, 277, 345, 445, 518, 593, 662, 742, 819, 866, 912,
        1005, 1075, 1120, 1159, 1203, 1281, 1325, 1373, 1392, 1396, 1397, 1362, 1383, 1372, 1372,
        1373, 1365, 1377, 1380, 1370),
        390.0, 1638.4, "xxrjun/gpu-benches gpu-stream/mi210.txt, gpu-latency/mi210.txt",
    ),
    # MI300X (304 CUs, HBM3; AMD datasheet 5.3 TB/s): xxrjun/gpu-benches gpu-stream/mi300x.txt;
    # pointer chase past the Infinity Cache gpu-latency/mi300x.txt 434 ns (hwconfigs/mi300x.yaml).
    "cdna3": StreamTable(
        "MI300X", 304, _ROWS,
        (75, 148, 208, 282, 338, 408, 474, 554, 655, 808, 1049, 1291, 1494, 1719, 1959, 2153, 2343,
        2510, 2657, 2791, 2907, 3043, 3098, 3272, 3320, 3406, 3479, 3540, 3622, 3670, 3756, 3775,
        3875, 3864, 3932, 3935, 4052, 4001, 4199),
        434.0, 5300.0, "xxrjun/gpu-benches gpu-stream/mi300x.txt, gpu-latency/mi300x.txt",
    ),
}
# fmt: on


def curve_from_table(table: StreamTable) -> LatencyCurve:
    """The latency multiplier curve of one stream table (module docstring)."""
    threads = np.asarray(table.threads_per_sm, dtype=float) * table.sms
    gbs = np.asarray(table.read_gbs, dtype=float)
    peak = int(np.argmax(gbs))  # first row at the peak: later rows are past saturation
    threads, gbs = threads[: peak + 1], gbs[: peak + 1]
    cycle_ns = threads * STREAM_BYTES_PER_THREAD / gbs  # bytes / (GB/s) = ns
    u = gbs / table.datasheet_gbs
    light = cycle_ns[u < LIGHT_LOAD]
    turnover_ns = float(np.median(light if light.size else cycle_ns[:1])) - table.chase_ns
    m = np.maximum.accumulate(np.maximum((cycle_ns - turnover_ns) / table.chase_ns, 1.0))
    rising = gbs > np.concatenate(([-np.inf], np.maximum.accumulate(gbs)[:-1]))
    return LatencyCurve(
        (0.0, *u[rising].tolist()), (1.0, *m[rising].tolist()), f"{table.gpu}: {table.source}"
    )


# The generations of archsim.perf.efficiency.GENERATION_PATTERNS by vendor, oldest first.
GENERATION_ORDER: tuple[tuple[str, ...], ...] = (
    ("maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell"),
    ("cdna", "cdna2", "cdna3"),
)
# Generation without a table -> the generation whose table it takes (module docstring).
CURVE_FROM: dict[str, str] = {
    # No GM20x stream table or pointer chase published; jetson-tx1.yaml already takes the V100's
    # 317-ns chase. Pascal's successor has no table, so the oldest one, Volta's.
    "maxwell": "volta",
    # P100 (GP100): no gpu-stream table or loaded-latency figure; hwconfigs/dgx1-p100.yaml takes the
    # V100's pointer chase. Both 4-stack HBM2 parts (P100 whitepaper 732 GB/s, V100 900 GB/s).
    "pascal": "volta",
    # Turing (TU10x, sm_75): no table; its SM derives from Volta's (Turing whitepaper), and it sits
    # between Volta and Ampere in the order, so the older on the tie.
    "turing": "volta",
    # Blackwell (B200): no table; Hopper's is the previous generation's (both HBM3/HBM3e parts).
    "blackwell": "hopper",
    # An AMD GPU of no recognized CDNA generation: the CDNA2 row, as archsim.perf.efficiency does.
    "cdna": "cdna2",
    # A GPU of no recognized generation: the newest NVIDIA table (module docstring).
    "default": "hopper",
}


def curve_generation(generation: str) -> str:
    """The generation whose stream table prices ``generation``'s loaded DRAM latency: its own, the
    one CURVE_FROM names, or else the nearest in GENERATION_ORDER with a table (older on a tie),
    Hopper's for a generation in no order."""
    if generation in TABLES:
        return generation
    if generation in CURVE_FROM:
        return CURVE_FROM[generation]
    for order in GENERATION_ORDER:
        if generation in order:
            here = order.index(generation)
            tabled = [i for i, g in enumerate(order) if g in TABLES]
            if tabled:
                return order[min(tabled, key=lambda i: (abs(i - here), i))]
    return CURVE_FROM["default"]


CURVES: dict[str, LatencyCurve] = {gen: curve_from_table(t) for gen, t in TABLES.items()}
for _gen in (*CURVE_FROM, *(g for order in GENERATION_ORDER for g in order)):
    CURVES.setdefault(_gen, CURVES[curve_generation(_gen)])


def latency_curve(generation: str) -> LatencyCurve:
    """The generation's curve: its own stream table's or the one curve_generation names."""
    return CURVES.get(generation) or CURVES[curve_generation(generation)]


def latency_multiplier(curve: LatencyCurve | None, utilization: np.ndarray) -> np.ndarray:
    """m(u) >= 1 (1 everywhere without a curve), non-decreasing in u."""
    u = np.asarray(utilization, dtype=float)
    if curve is None:
        return np.ones_like(u)
    return np.interp(u, curve.utilization, curve.multiplier)


@dataclass(frozen=True)
class DramLoad:
    """What the Little's-law term needs to place a kernel on its GPU's curve: the curve (None: flat)
    and the bandwidth at which u = 1 (the preset's datasheet DRAM bandwidth, bytes/s)."""

    curve: LatencyCurve | None
    saturating_bps: float


def dram_load(dram_bw_gbs: float, generation: str, idealize: frozenset[str]) -> DramLoad:
    """The GPU's DramLoad: its generation's curve at W_sat = the datasheet bandwidth (no curve, so
    m = 1, under the ``dram_bw`` idealization, where bandwidth is unlimited)."""
    if "dram_bw" in idealize:
        return DramLoad(None, np.inf)
    return DramLoad(latency_curve(generation), dram_bw_gbs * 1e9)


@lru_cache(maxsize=64)
def _segments(curve: LatencyCurve) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(u, u m(u), slope, offset) of each knot's segment: fixed per curve (a frozen value, so the
    cache is keyed on its knots), not re-derived on each of the model's ~60 calls per table."""
    u = np.asarray(curve.utilization, dtype=float)
    m = np.asarray(curve.multiplier, dtype=float)
    slopes = np.append(np.diff(m) / np.diff(u), 0.0)
    offsets = m - slopes * u
    arrays = (u, u * m, slopes, offsets)
    for array in arrays:
        array.flags.writeable = False
    return arrays


def loaded_bandwidth(
    in_flight_bytes: np.ndarray,
    unloaded_s: float,
    saturating_bps: float,
    cap_bps: float,
    curve: LatencyCurve | None,
) -> np.ndarray:
    """The fixed point bw = min(cap, C / (L0 m(bw / W_sat))) in bytes per second, per op.

    ``in_flight_bytes`` C >= 0; ``unloaded_s`` L0 > 0; ``saturating_bps`` W_sat (inf: m = 1);
    ``cap_bps`` the cap (inf allowed). bw x m(bw / W_sat) is strictly increasing and piecewise quadratic
    (m is piecewise linear), so the fixed point is solved in closed form on its segment."""
    demand = np.maximum(np.asarray(in_flight_bytes, dtype=float), 0.0) / unloaded_s  # C / L0
    upper = np.minimum(cap_bps, demand)
    if curve is None or not np.isfinite(saturating_bps):
        return upper
    # x m(x) = t with x = bw / W_sat, t = C / (L0 W_sat): on the knots' segment k where t lies, m is
    # m_k + s (x - u_k), so s x^2 + c x - t = 0 with c = m_k - s u_k; past the last knot m is flat.
    u, knots, slopes, offsets = _segments(curve)
    with np.errstate(invalid="ignore"):
        target = demand / saturating_bps
    k = np.clip(np.searchsorted(knots, target, side="right") - 1, 0, len(u) - 1)
    s, c = slopes[k], offsets[k]
    with np.errstate(divide="ignore", invalid="ignore"):
        root = np.sqrt(c * c + 4.0 * s * target)
        # the cancellation-free form of the positive root for either sign of c (s = 0: x = t / c)
        x = np.where(c >= 0.0, 2.0 * target / (c + root), (root - c) / (2.0 * s))
    x = np.where(target > 0.0, x, 0.0)
    x = np.where(np.isinf(target), np.inf, x)  # unbounded demand: the cap decides
    return np.where(np.isfinite(upper), np.minimum(upper, x * saturating_bps), upper)


__all__ = [
    "CURVES",
    "CURVE_FROM",
    "DramLoad",
    "GENERATION_ORDER",
    "LIGHT_LOAD",
    "LatencyCurve",
    "STREAM_BYTES_PER_THREAD",
    "StreamTable",
    "TABLES",
    "curve_from_table",
    "curve_generation",
    "dram_load",
    "latency_curve",
    "latency_multiplier",
    "loaded_bandwidth",
]
