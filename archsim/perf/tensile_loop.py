"""The K loop of a Tensile (hipBLASLt/rocBLAS) GEMM kernel, decoded from its name: LDS traffic per
step, the part of it in series with the MFMAs, and the operand tiles each step has in flight.

Tensile names a kernel by its solution parameters, each as the capitals of the parameter's name
and its value (ROCm/hipBLASLt, tensilelite/Tensile/SolutionStructs/Naming.py,
``getParameterNameAbbreviation``): ``MT<MT0>x<MT1>x<DepthU>`` (MacroTile, DepthU),
``MI<m>x<n>x..`` (MatrixInstruction), ``MIWT<t0>_<t1>`` (MIWaveTile: each wave computes t0 x t1
MFMA blocks, so a wave tile of m t0 x n t1 outputs), ``WG<a>_<b>_<LSU>`` (WorkGroup; "LocalSplitU
(which is the 3rd number in WorkGroup)": LSU waves split each DepthU step of K between them, and
"DepthU = LoopUnroll * LocalSplitU"), ``LDSB<0|1>`` (1LDSBuffer), ``CLR<0|1>``
(ClusterLocalRead), ``DTVA``/``DTVB`` (DirectToVgprA/B: the operand goes from global memory to
registers without LDS), ``PGR`` (PrefetchGlobalRead). Meanings from tensilelite/Tensile/Common/
ValidParameters.py. MT0 is the tile along A's free index, MT1 along B's. rocBLAS's (older) Tensile
names no MIWT but ``TT<t0>_<t1>`` (ThreadTile), which it sets from the 9-value MatrixInstruction as
"ThreadTile[0] = MIWaveTile[0]", "ThreadTile[1] = MIWaveTile[1] * MatrixInstN" (ROCm/Tensile,
Tensile/SolutionStructs.py, ``parameterWrapper``): a wave tile of m TT0 x TT1 outputs.

Per K step (DepthU deep) a workgroup, for each operand that goes through LDS:

- loads its A and B tiles, (MT0 + MT1) x DepthU elements, from global memory into registers and
  writes them to LDS (``l_w`` = those bytes);
- reads them back, each wave its own wave tile's rows and columns over its K share: waves_mn x
  (m t0 + n t1) x DepthU elements for waves_mn = MT0 MT1 / (m t0 n t1) wave tiles (``l_r``);
- runs MT0 x MT1 x DepthU x 2 FLOPs of MFMAs (``m`` cycles at the preset's matrix rate per CU).

LDS moves 128 B per clock per CU: "the LDS can load up to 128B per cycle (i.e, 32 banks x 4B / bank
/ cycle)" (AMD ROCm Compute Profiler / Omniperf documentation, "Profiling by example", LDS bank
conflicts example). MFMA and LDS are separate pipes, so with two LDS buffers (LDSB0) the next
tile's reads are prefetched during this tile's MFMAs and a step costs max(m, l_r + l_w). With ONE
LDS buffer (LDSB1) Tensile must "make sure all data are read from LDS to register before writing
data to LDS" (ValidParameters.py, ``1LDSBuffer``): the next tile is written over this one only
after its reads, and read only after that write, so no read of a tile can be issued during the
previous tile's MFMAs. With ClusterLocalRead ("each iteration dedicated vgprBuffer for localRead,
so we can schedule these localReads to the front of the loop") a step's reads then precede its
MFMAs, which hide the next tile's local writes (``LocalWritePerMfma`` interleaves them), so a
workgroup's step takes l_r + max(m, l_w). A CU holding r such workgroups overlaps one's reads with
another's MFMAs: per round of steps max(r m, r (l_r + l_w), l_r + max(m, l_w)). The compute term of
archsim.perf.terms (r m per round, at the achieved matrix fraction, which also sets the clock
that LDS runs at) is multiplied by that over r m (:func:`lds_serial_factor`, >= 1). The ratio is
in cycles of one clock, so the clock cancels.

Measured against fixture mi300x_sd35_inference (not used to set anything): one workgroup per CU,
LDSB1 and CLR1, the MT64x96x128 GEMMs of a [666, 2432] x [2432, 2432] mm take 1.35 us per K step
(25.7 us / 19 steps); m = 768 cycles, l_r = 448, so the factor is 1.58 and the compute term 13.5 ->
21.4 us. The large MT320x224x64 kernels (LDSB0, A direct to registers) keep factor 1. The other
orderings were computed too: max(m, l_r + l_w), the double-buffer rule, leaves these kernels where
they were (-37%); writes in series as well (l_r + l_w + m) would put the MT128x192x64 steps 29%
over their measured 1.83 us, where this ordering is 13% over (that family ends +21%).

In flight (:func:`tile_bytes_in_flight_per_thread`): each K step's global reads are the whole A and
B tiles, (MT0 + MT1) x DepthU elements per workgroup, issued a step ahead (PGR1/2 prefetch), so a
thread has that over the workgroup's threads in flight per round trip, not the flat 16 B of
archsim.perf.in_flight's default. The MT128x16x128 GEMVs of a [2, 2432] x [2432, 14592] mm (36 KB
per step per workgroup, 228 workgroups) are then bound by DRAM bandwidth, not by round trips.
AMD-AGI/TraceLens's MI300X eval trace gemm_01_compute_few_tiles (rocBLAS ``..._MT256x128x64_
MI16x16x16x1_..._GSU2_..._TT4_128_..._WG64_4_1_...``, 8 workgroups of a bf16 256 x 131072 x 512
mm) runs 1,082-1,086 us; with the flat 16 B per thread its Little's-law term was 2,670 us, with
the K step's tiles (384 x 64 x 2 B over 256 threads) 446 us.

Pure functions over an ops table and launch arrays; only CDNA generations, only traced kernels with
a Tensile name (``Cijk_...`` with MT, MI, MIWT and WG). Everything else: factor 1, no figure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.hw.schema import GpuConfig
from archsim.perf.blocks import element_bytes
from archsim.perf.columns import column, strings

# "the LDS can load up to 128B per cycle (i.e, 32 banks x 4B / bank / cycle)": AMD ROCm Compute
# Profiler (Omniperf) documentation, "Profiling by example", LDS examples (per CU)
LDS_BYTES_PER_CLK_PER_CU = 128.0
WAVE_SIZE = 64  # CDNA wavefront (AMD CDNA3 ISA; Tensile names it WS64)

_TENSILE = re.compile(r"^Cijk_")
_MT = re.compile(r"_MT(\d+)x(\d+)x(\d+)_")
_MI = re.compile(r"_MI(\d+)x(\d+)x\d+")
_MIWT = re.compile(r"_MIWT(\d+)_(\d+)_")
_TT = re.compile(r"_TT(\d+)_(\d+)_")
_WG = re.compile(r"_WG(\d+)_(\d+)_(\d+)")
_ONE_LDS_BUFFER = re.compile(r"_1?LDSB1_")
_CLUSTER_LOCAL_READ = re.compile(r"_CLR1_")
_DTVA = re.compile(r"_DTVA1_")
_DTVB = re.compile(r"_DTVB1_")


@dataclass(frozen=True)
class TensileLoop:
    """One Tensile kernel's K step, from its name (module docstring)."""

    mt0: int
    mt1: int
    depth_u: int
    wave_m: int  # outputs of one wave tile along MT0: MI m x MIWT t0
    wave_n: int
    local_split_u: int
    one_lds_buffer: bool
    cluster_local_read: bool
    direct_vgpr_a: bool
    direct_vgpr_b: bool

    @property
    def waves(self) -> int:
        """Waves per workgroup: wave tiles x LocalSplitU."""
        return (self.mt0 // self.wave_m) * (self.mt1 // self.wave_n) * self.local_split_u

    def lds_bytes(self, element_size: float) -> tuple[float, float]:
        """(read, write) LDS bytes of one K step of one workgroup."""
        a = 0 if self.direct_vgpr_a else 1
        b = 0 if self.direct_vgpr_b else 1
        write = (a * self.mt0 + b * self.mt1) * self.depth_u * element_size
        wave_tiles = (self.mt0 // self.wave_m) * (self.mt1 // self.wave_n)
        read = wave_tiles * (a * self.wave_m + b * self.wave_n) * self.depth_u * element_size
        return float(read), float(write)

    def step_flops(self) -> float:
        """MFMA FLOPs of one K step of one workgroup."""
        return 2.0 * self.mt0 * self.mt1 * self.depth_u


def parse_tensile(name: str) -> TensileLoop | None:
    """The K step a Tensile kernel name describes, or None (not Tensile, or a part is missing, or
    the wave tiles and LocalSplitU do not make a whole workgroup)."""
    if not _TENSILE.match(name):
        return None
    mt, mi, miwt, wg, tt = (p.search(name) for p in (_MT, _MI, _MIWT, _WG, _TT))
    if mt is None or mi is None or wg is None or (miwt is None and tt is None):
        return None
    mt0, mt1, depth = (int(g) for g in mt.groups())
    if miwt is not None:
        wave_m = int(mi.group(1)) * int(miwt.group(1))
        wave_n = int(mi.group(2)) * int(miwt.group(2))
    else:  # rocBLAS's Tensile names ThreadTile: TT0 = MIWaveTile0, TT1 = MIWaveTile1 x MI n
        wave_m = int(mi.group(1)) * int(tt.group(1))
        wave_n = int(tt.group(2))
    lsu = int(wg.group(3))
    if min(mt0, mt1, depth, wave_m, wave_n, lsu) <= 0 or mt0 % wave_m or mt1 % wave_n:
        return None
    loop = TensileLoop(mt0, mt1, depth, wave_m, wave_n, lsu,
                       bool(_ONE_LDS_BUFFER.search(name)), bool(_CLUSTER_LOCAL_READ.search(name)),
                       bool(_DTVA.search(name)), bool(_DTVB.search(name)))  # fmt: skip
    threads = int(wg.group(1)) * int(wg.group(2)) * lsu
    return loop if loop.waves * WAVE_SIZE == threads else None


def step_factor(
    mfma_cycles: np.ndarray,
    read_cycles: np.ndarray,
    write_cycles: np.ndarray,
    resident: np.ndarray,
    one_buffer_clustered: np.ndarray,
) -> np.ndarray:
    """Time of a round of K steps over r x its MFMA cycles (module docstring), >= 1."""
    r = np.maximum(np.asarray(resident, dtype=float), 1.0)
    m = np.maximum(np.asarray(mfma_cycles, dtype=float), 1e-30)
    lds = read_cycles + write_cycles
    serial = np.where(one_buffer_clustered, read_cycles + np.maximum(m, write_cycles), 0.0)
    return np.maximum.reduce([r * m, r * lds, serial]) / (r * m)


def _loops(names: np.ndarray, wanted: np.ndarray) -> dict[str, TensileLoop | None]:
    return {n: parse_tensile(n) for n in set(names[wanted])}


def lds_serial_factor(
    ops: pd.DataFrame,
    blocks: np.ndarray,
    resident_limit: np.ndarray,
    rate_per_sm: np.ndarray,
    traced: np.ndarray,
    gpu: GpuConfig,
    cdna: bool,
    idealize: frozenset[str] = frozenset(),
) -> np.ndarray:
    """Multiplier (>= 1) of the compute term of traced Tensile kernels on a CDNA GPU for their LDS
    traffic (module docstring); 1 for every other op. ``rate_per_sm``: each op's math FLOP/s per CU
    (archsim.perf.math_units). r: workgroups at once on the busiest CU, min(resident, ceil(B/N));
    under ``sm_utilization`` (one CU runs all B) min(resident, B)."""
    out = np.ones(len(ops))
    if not cdna:
        return out
    names = strings(ops, "name").to_numpy(dtype=object)
    wanted = np.asarray(traced, dtype=bool) & (np.asarray(blocks, dtype=float) > 0)
    if not wanted.any():
        return out
    loops = _loops(names, wanted)
    rows = np.array([i for i in np.flatnonzero(wanted) if loops[names[i]] is not None], dtype=int)
    if rows.size == 0:
        return out
    size = element_bytes(strings(ops, "dtype"))[rows]
    flops_per_clk = np.asarray(rate_per_sm, dtype=float)[rows] / (gpu.clock_mhz * 1e6)
    found = [loops[names[i]] for i in rows]
    lds = np.array([loop.lds_bytes(s) for loop, s in zip(found, size, strict=True)])
    mfma = np.array([loop.step_flops() for loop in found]) / np.maximum(flops_per_clk, 1e-30)
    clustered = np.array([loop.one_lds_buffer and loop.cluster_local_read for loop in found])
    b = np.asarray(blocks, dtype=float)[rows]
    per_sm = b if "sm_utilization" in idealize else np.ceil(b / gpu.sms)
    resident = np.minimum(np.maximum(np.asarray(resident_limit, dtype=float)[rows], 1.0), per_sm)
    out[rows] = step_factor(mfma, lds[:, 0] / LDS_BYTES_PER_CLK_PER_CU,
                            lds[:, 1] / LDS_BYTES_PER_CLK_PER_CU, resident, clustered)  # fmt: skip
    return out


def tile_bytes_in_flight_per_thread(
    ops: pd.DataFrame, threads: np.ndarray, traced: np.ndarray, cdna: bool
) -> np.ndarray:
    """Bytes per thread a traced Tensile kernel on a CDNA GPU has loading per round trip: one K
    step's A and B tiles, (MT0 + MT1) x DepthU elements, over the workgroup's threads (module
    docstring); NaN for every other op."""
    out = np.full(len(ops), np.nan)
    if not cdna:
        return out
    names = strings(ops, "name").to_numpy(dtype=object)
    wanted = np.asarray(traced, dtype=bool) & (np.nan_to_num(column(ops, "grid_x"), nan=0.0) > 0)
    if not wanted.any():
        return out
    loops = _loops(names, wanted)
    size = element_bytes(strings(ops, "dtype"))
    for i in np.flatnonzero(wanted):
        loop = loops[names[i]]
        if loop is not None:
            tile = (loop.mt0 + loop.mt1) * loop.depth_u * size[i]
            out[i] = tile / max(float(threads[i]), 1.0)
    return out


__all__ = [
    "LDS_BYTES_PER_CLK_PER_CU",
    "TensileLoop",
    "lds_serial_factor",
    "parse_tensile",
    "step_factor",
    "tile_bytes_in_flight_per_thread",
]
