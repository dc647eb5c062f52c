"""The bytes ONE SM can keep loading from DRAM at once, where a published microbenchmark measures it.

The Little's-law term of :mod:`archsim.perf.terms` takes C = resident threads x bytes each has loading
(archsim.perf.in_flight). An SM's memory pipeline (its L1's outstanding-miss slots, its share of the
on-chip network) may hold fewer loads than its threads ask for; then a kernel with few blocks gets
less from DRAM than its threads' loads say. A cap per SM, C_sm bytes, bounds its loads' rate:

    load rate <= S x C_sm / L0,   S = SMs with a block = min(B, N)        (sm_cap_seconds)

so the term's time is at least R x L0 / (S x C_sm), R the bytes the kernel loads (stores are posted:
archsim.perf.in_flight). It is taken at the UNLOADED latency L0 (the preset's pointer chase): the
latency curves of archsim.perf.loaded_latency were derived from full-GPU stream tables without any
cap, so at high load they already carry what the cap would; the cap is the few-SM regime those
tables do not reach, where a kernel draws a small fraction of the bandwidth and L ~ L0. With all N
SMs busy it allows N x C_sm / L0 (1.3 TB/s on a V100), above the datasheet bandwidth, so it binds
only where few SMs load.

The figure, per generation (C_sm = B_sm x L, Little's law on the published per-SM bandwidth B_sm at
the same GPU's pointer chase L):

- Volta (V100): te42kyfo/gpu-benches README, ``cuda-stream`` on a Tesla V100-PCIe-16GB (1380 MHz):
  its ``sum<double, unroll>`` kernel (cuda-stream/main.cu: a grid-stride loop whose ``#pragma unroll``
  body issues ``unroll`` independent 8-B loads a thread before the sum uses them), one block of 128
  threads per SM, reads 3.0, 5.8, 10.1, 15.0 and 16.3 GB/s at unroll 1, 2, 4, 8 and 16: with 1, 2
  and 4 KB requested by the block the rate follows its loads (341 ns a round trip at unroll 1), with
  8 and 16 KB it stops near 16 GB/s (by Little's law 16 KB would draw ~48 GB/s at 341 ns). The same
  table at 2, 4, 8, 16 and 32 blocks (one per SM) gives 16.2, 16.2, 16.0, 15.7 and 15.0 GB/s per SM
  at unroll 16: a per-SM ceiling, not a whole-GPU one. C_sm = 16.3 GB/s x 317 ns (the V100 pointer
  chase, cuda-latency/v100.txt: 436 cycles at 1380 MHz) = 5,167 B. Measured with one 4-warp block
  per SM: whether more warps on one SM would draw more is not published; the cap is read per SM.
- Pascal (P100): no published figure; Volta's is taken, as archsim.perf.loaded_latency takes
  Volta's latency curve for Pascal (PASCAL_CURVE_FROM), lest the older part draw more from one SM
  than the newer one measured to: an assumption, not a measurement of the P100.
- Turing, Ampere, Ada, Hopper, Blackwell, CDNA2, CDNA3 and unknown GPUs: no cap. Searched and not
  found: a single-SM/CU DRAM bandwidth in gpu-benches (its newer ``cuda-stream``/``gpu-stream``
  tables for A100, H100, L40, MI210 and MI300X sweep occupancy with one load per thread, 0.5-16 KB
  a SM, and never hold many loads in one SM), Chips and Cheese's H100, MI300X and MI300A articles
  (as stored: no per-SM/CU figure found), AMD's CDNA3 ISA and ROCm Compute Profiler's vL1D pages (an
  outstanding-request stall is described, with no count). In particular the MI300X normalization
  bench's MIOpenBatchNormFwdTrainSpatialMeanVariance (16 workgroups, 32 KB loaded at once each)
  takes 3.7-4.0 us "as if a CU kept about 8 KB in flight" (archsim.perf.miopen_bn): no published
  CDNA3 figure says so, so it gets no cap here.
"""

from __future__ import annotations

import numpy as np

from archsim.hw.schema import GpuConfig

# Bytes one SM keeps loading from DRAM at once, by generation (module docstring: source per row).
VOLTA_SM_IN_FLIGHT_BYTES = (
    16.3e9 * 317e-9
)  # gpu-benches README cuda-stream V100: 16.3 GB/s x 317 ns
SM_IN_FLIGHT_BYTES: dict[str, float] = {
    "volta": VOLTA_SM_IN_FLIGHT_BYTES,
    "pascal": VOLTA_SM_IN_FLIGHT_BYTES,  # assumption: Volta's (module docstring)
}


def sm_in_flight_bytes(generation: str) -> float:
    """C_sm for ``generation`` (an archsim.perf.efficiency.generation key); inf where none is published."""
    return SM_IN_FLIGHT_BYTES.get(generation, np.inf)


def traced_loads(
    bytes_read: np.ndarray, bytes_written: np.ndarray, loaded: np.ndarray
) -> np.ndarray:
    """``loaded`` (archsim.perf.in_flight.loaded_bytes) where the trace splits the op's bytes into
    reads and writes, 0 where it does not. The cap is a floor on the time of the LOADS, so it takes
    a lower bound of them: where the work was inferred from the launch, loaded_bytes counts every
    byte as loaded (an upper bound), and a floor on it would price stores as loads."""
    read = np.nan_to_num(np.asarray(bytes_read, dtype=float), nan=0.0)
    written = np.nan_to_num(np.asarray(bytes_written, dtype=float), nan=0.0)
    return np.where((read + written) > 0, np.asarray(loaded, dtype=float), 0.0)


def sm_cap_seconds(
    loaded_bytes: np.ndarray,
    blocks: np.ndarray,
    gpu: GpuConfig,
    generation: str,
    idealize: frozenset[str] = frozenset(),
    per_sm_bytes: float | None = None,
) -> np.ndarray:
    """R x L0 / (min(B, N) x C_sm) per op: the least time its loads take through the SMs it runs on
    (module docstring); 0 without a cap, without loads, or under the ``dram_latency`` idealization.
    Under ``sm_utilization`` every SM counts (the op spread over all N). ``per_sm_bytes`` overrides
    the generation's C_sm (tests)."""
    loads = np.nan_to_num(np.asarray(loaded_bytes, dtype=float), nan=0.0)
    cap = sm_in_flight_bytes(generation) if per_sm_bytes is None else float(per_sm_bytes)
    if "dram_latency" in idealize or not np.isfinite(cap) or cap <= 0:
        return np.zeros_like(loads)
    n_sms = float(gpu.sms)
    busy = np.minimum(np.maximum(np.asarray(blocks, dtype=float), 1.0), n_sms)
    if "sm_utilization" in idealize:
        busy = np.full_like(busy, n_sms)
    rate_bps = busy * cap / (gpu.dram_latency_ns * 1e-9)
    return np.where(loads > 0, loads / rate_bps, 0.0)


__all__ = ["SM_IN_FLIGHT_BYTES", "sm_cap_seconds", "sm_in_flight_bytes", "traced_loads"]
