"""Pydantic models of a hardware config (docs/REFERENCE.md for the figures; the field names are an
interface that configs and `--set` keys depend on). Units live in the field names. ``extra="forbid"``
makes unknown keys errors, and the numeric constraints make impossible values (negative bandwidth,
zero SMs) errors at load time.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field


class _Strict(BaseModel):
    # allow_inf_nan=False: an infinite bandwidth or clock is as impossible as a negative one.
    model_config = ConfigDict(extra="forbid", validate_assignment=True, allow_inf_nan=False)


class CpuConfig(_Strict):
    model: str
    sockets: int = Field(ge=1)
    cores_per_socket: int = Field(ge=1)
    threads_per_core: int = Field(ge=1)
    # Cores and threads of the physical part, which ``--set cpu.cores_per_socket`` /
    # ``cpu.threads_per_core`` leave alone (as ``gpu.physical_sms``): the power model spreads the
    # socket's TDP over the part's cores, so a busy core draws the same with fewer enabled
    # (archsim.perf.power). None = the enabled figure.
    physical_cores_per_socket: int | None = Field(default=None, ge=1)
    physical_threads_per_core: int | None = Field(default=None, ge=1)
    # base_clock_mhz is descriptive (the all-core base clock; thread speeds are single-core turbo
    # figures): ``--set cpu.base_clock_mhz`` is refused (archsim.hw.presets.load_hw). A what-if
    # boost clock scales the part's thread speeds by boost / the part's boost (load_hw).
    base_clock_mhz: float = Field(gt=0)
    boost_clock_mhz: float = Field(gt=0)
    physical_boost_clock_mhz: float | None = Field(default=None, gt=0)  # None = boost_clock_mhz
    # Per-thread speed relative to the capture machine (1.0 = same speed).
    thread_speed_rel: float = Field(gt=0)
    # The part's thread speed, which ``--set cpu.thread_speed_rel`` leaves alone (as
    # ``gpu.card_clock_mhz``): a core's dynamic power scales by thread speed / the part's
    # (archsim.perf.power.cpu_per_core_w). None = ``thread_speed_rel``.
    physical_thread_speed_rel: float | None = Field(default=None, gt=0)
    # Speed of each thread when both hardware threads of a core are busy, relative to running alone.
    # At least 0.5: a core with two busy threads does at least what one thread does alone (SMT adds
    # +10-30% throughput on servers: Marr et al., Intel Technology Journal 6(1), 2002).
    smt_yield: float = Field(ge=0.5, le=1)
    # Per kind of work (archsim.perf.cpu_speed): the emulator (integer C++), the Python interpreter,
    # numpy/torch CPU kernels (SIMD). None = thread_speed_rel.
    emulator_speed_rel: float | None = Field(default=None, gt=0)
    interpreter_speed_rel: float | None = Field(default=None, gt=0)
    simd_speed_rel: float | None = Field(default=None, gt=0)
    idle_power_w: float = Field(ge=0)  # per socket
    max_power_w: float = Field(gt=0)  # per socket (TDP)
    # The part's idle and TDP, which ``--set cpu.idle_power_w`` / ``cpu.max_power_w`` leave alone
    # (as ``physical_cores_per_socket``): a busy core draws a share of the part's TDP less its idle
    # whatever limit a what-if sets (a lower one holds the socket there by its clock,
    # archsim.sim.power_cap). None = the figures above.
    physical_idle_power_w: float | None = Field(default=None, ge=0)
    physical_max_power_w: float | None = Field(default=None, gt=0)

    @property
    def part_power_budget_w(self) -> float:
        """The part's TDP less its idle, per socket: what its busy cores' power is a share of."""
        idle = self.physical_idle_power_w
        tdp = self.physical_max_power_w
        return (tdp if tdp is not None else self.max_power_w) - (
            idle if idle is not None else self.idle_power_w
        )

    @property
    def power_clock_rel(self) -> float:
        """Thread speed over the part's: the clock ratio a core's dynamic power scales by."""
        return self.thread_speed_rel / (self.physical_thread_speed_rel or self.thread_speed_rel)

    @property
    def power_cores_per_socket(self) -> int:
        """Cores the part's TDP is spread over: the part's. A what-if with more is a larger part of
        the same cores, each drawing what one of the part's draws (its TDP grows with them,
        archsim.hw.presets._with_larger_part_limits)."""
        return self.physical_cores_per_socket or self.cores_per_socket

    @property
    def power_threads_per_core(self) -> int:
        """Threads per core of that split: the part's (a what-if with more: as cores)."""
        return self.physical_threads_per_core or self.threads_per_core

    @property
    def full_load_clock_rel(self) -> float:
        """Clock, over the part's, at which every core with every thread busy draws the TDP: 1 on
        the part and on a larger what-if part of it, below 1 under a lower what-if limit (the
        least archsim.sim.power_cap lowers the clock to)."""
        from archsim.perf.power import full_load_cores

        grown = full_load_cores(self.cores_per_socket, self.threads_per_core) / full_load_cores(
            self.power_cores_per_socket, self.power_threads_per_core
        )
        full_w = self.part_power_budget_w * grown
        return (self.max_power_w - self.idle_power_w) / full_w if full_w > 0 else 1.0

    @property
    def cores(self) -> int:
        return self.sockets * self.cores_per_socket

    @property
    def hw_threads(self) -> int:
        return self.cores * self.threads_per_core


class GpuConfig(_Strict):
    name: str
    count: int = Field(ge=1)
    sms: int = Field(ge=1)
    # SMs of the physical card, which ``--sms`` / ``--set gpu.sms`` leave alone: SMs beyond ``sms``
    # are disabled and draw only idle power (archsim.perf.power). None = ``sms``.
    physical_sms: int | None = Field(default=None, ge=1)
    clock_mhz: float = Field(gt=0)
    # Clock of the physical card, which ``--set gpu.clock_mhz`` leaves alone (as ``physical_sms``):
    # its SMs' dynamic power at full load was read at this clock (archsim.perf.power scales it by
    # clock / card clock). None = ``clock_mhz``.
    card_clock_mhz: float | None = Field(default=None, gt=0)
    fp32_flops_per_clk_per_sm: float = Field(gt=0)
    fp16_flops_per_clk_per_sm: float = Field(gt=0)
    tensor_flops_per_clk_per_sm: float = Field(ge=0)  # 0 = no tensor cores
    # Tensor cores take TF32 (Ampere and later) at half the FP16 tensor rate; PyTorch runs fp32
    # convolutions in TF32 by default (torch.backends.cudnn.allow_tf32 = True).
    tf32: bool = False
    # Dense FP8 (e4m3/e5m2) matrix rate with FP32 accumulate, FLOP per SM per clock; 0 = no FP8
    # matrix units (before Ada/Hopper, CDNA2 and older). Applies only where the part has tensor
    # cores, and never below their FP16 rate (archsim.perf.fp8): a what-if that raises the FP16
    # tensor rate past it raises FP8 with it.
    fp8_flops_per_clk_per_sm: float = Field(default=0.0, ge=0)
    # Native bfloat16 math (BF16 instructions and tensor-core format): NVIDIA from Ampere on (A100
    # whitepaper; PyTorch's torch.cuda.is_bf16_supported(including_emulation=False) is compute
    # capability >= 8.0), every CDNA GPU (bf16 MFMA: CDNA2 whitepaper). False (Maxwell to Turing):
    # PyTorch still runs bf16 there, in FP32 math (archsim.perf.bf16).
    bf16: bool = True
    dram_bw_gbs: float = Field(gt=0)
    # DRAM bandwidth of the physical card, which ``--set gpu.dram_bw_gbs`` leaves alone: the power
    # model splits the card's TDP into SM and DRAM budgets at it, so a what-if bandwidth does not
    # change what a busy SM draws (archsim.perf.power). None = ``dram_bw_gbs``.
    card_dram_bw_gbs: float | None = Field(default=None, gt=0)
    # DRAM energy per bit moved (memory technology: HBM2, GDDR6, ...), for the power model's DRAM
    # term. None = no DRAM term (the SMs then take the whole dynamic budget).
    dram_pj_per_bit: float | None = Field(default=None, ge=0)
    dram_latency_ns: float = Field(gt=0)
    # DRAM latency of the card whose ``kernel_min_us`` was measured, which ``--set
    # gpu.dram_latency_ns`` leaves alone (as ``physical_sms``): the fixed cost a CDNA3 kernel carries
    # in series (archsim.perf.dispatch_overhead) is that floor less the CARD's round trips, so a
    # what-if latency does not re-derive it. None = ``dram_latency_ns``.
    card_dram_latency_ns: float | None = Field(default=None, gt=0)
    # Load-to-use latency of an L2 hit (a pointer chase within L2), for the model's dependent on-chip
    # round trips (archsim.perf.passes.l2_hit_seconds). None = Volta's 193 cycles at clock_mhz.
    l2_latency_ns: float | None = Field(default=None, gt=0)
    l2_size_mb: float = Field(gt=0)
    l2_bw_gbs: float = Field(gt=0)
    max_threads_per_sm: int = Field(ge=1)
    max_blocks_per_sm: int = Field(ge=1)
    registers_per_sm: int = Field(ge=1)
    shared_mem_per_sm_kb: float = Field(gt=0)
    launch_latency_us: float = Field(ge=0)  # GPU side: launch to start
    # Shortest time any kernel (or device-side copy/memset) runs, however little work it has: block
    # dispatch, first memory round trips and teardown. 0 = no floor.
    kernel_min_us: float = Field(default=0.0, ge=0)
    launch_overhead_us: float = Field(ge=0)  # CPU time per launch on the launching thread
    idle_power_w: float = Field(ge=0)  # per GPU
    max_power_w: float = Field(gt=0)  # per GPU
    # The card's idle and TDP, which ``--set gpu.idle_power_w`` / ``gpu.max_power_w`` leave alone
    # (as ``card_clock_mhz``): a busy SM draws a share of the card's TDP less its idle whatever
    # power limit a what-if sets (nvidia-smi -pl lowers the limit, not what an SM draws at a
    # clock; a lower one holds the card there by its clock, archsim.sim.power_cap). None = above.
    card_idle_power_w: float | None = Field(default=None, ge=0)
    card_max_power_w: float | None = Field(default=None, gt=0)

    @property
    def card_power_budget_w(self) -> float:
        """The card's TDP less its idle: what its busy SMs' and DRAM's power is a share of."""
        idle = self.card_idle_power_w
        tdp = self.card_max_power_w
        return (tdp if tdp is not None else self.max_power_w) - (
            idle if idle is not None else self.idle_power_w
        )

    @property
    def card_sms(self) -> int:
        """SMs of the physical card: the power model's denominator. A what-if ``sms`` above it is
        a larger card of the same SMs, each drawing what the card's SMs draw (sm_share_of_card;
        its TDP grows with them, archsim.hw.presets._with_larger_part_limits)."""
        return self.physical_sms or self.sms

    @property
    def card_clock(self) -> float:
        """Clock of the physical card, MHz (``clock_mhz`` unless a what-if changed that)."""
        return self.card_clock_mhz or self.clock_mhz

    @property
    def card_dram_bw(self) -> float:
        """DRAM bandwidth of the physical card, GB/s (``dram_bw_gbs`` unless a what-if changed it)."""
        return self.card_dram_bw_gbs or self.dram_bw_gbs

    @property
    def card_latency_ns(self) -> float:
        """DRAM latency of the card its ``kernel_min_us`` was measured on (``dram_latency_ns``
        unless a what-if changed that)."""
        return self.card_dram_latency_ns or self.dram_latency_ns

    @property
    def fp32_peak_flops(self) -> float:
        """FP32 FLOP/s of one GPU."""
        return self.sms * self.fp32_flops_per_clk_per_sm * self.clock_mhz * 1e6

    @property
    def fp16_peak_flops(self) -> float:
        return self.sms * self.fp16_flops_per_clk_per_sm * self.clock_mhz * 1e6

    @property
    def tensor_peak_flops(self) -> float:
        return self.sms * self.tensor_flops_per_clk_per_sm * self.clock_mhz * 1e6

    @property
    def fp8_matrix_flops_per_clk_per_sm(self) -> float:
        """FP8 matrix FLOP per SM per clock: the FP8 rate where the part has one (never below its
        FP16 tensor rate), else the FP16 tensor rate (an FP8 GEMM ported there runs in FP16)."""
        if self.tensor_flops_per_clk_per_sm <= 0:
            return 0.0
        return max(self.fp8_flops_per_clk_per_sm, self.tensor_flops_per_clk_per_sm)


class HostLinkConfig(_Strict):
    kind: str
    bw_gbs: float = Field(gt=0)  # pinned (page-locked) host memory
    latency_us: float = Field(ge=0)
    # Copies from/to pageable host memory go through the driver's pinned staging buffer and are
    # slower; None = same as bw_gbs.
    pageable_bw_gbs: float | None = Field(default=None, gt=0)


class NetworkConfig(_Strict):
    """Node-to-node network (archsim/perf/network.py, docs/NETWORK.md). ``nic_bw_gbs`` is the line
    rate (40GbE = 5 GB/s); ``*_us_per_msg`` are both ends' stack costs of one message together;
    ``latency_us`` is the older lumped NIC + switch figure used by ``message_seconds``."""

    nic_bw_gbs: float = Field(gt=0)
    latency_us: float = Field(ge=0)
    stack: Literal["kernel_tcp", "kernel_bypass", "rdma"]
    kernel_tcp_us_per_msg: float = Field(ge=0)
    kernel_bypass_us_per_msg: float = Field(ge=0)
    # measured: benchmarks/network_stack.py on the development machine (2-core AMD EPYC VM, Linux
    # loopback, both ends' thread CPU, line fit over 64 B .. 1 MiB, 3 runs): 7.15-7.25 us a message
    # + 0.102-0.106 ns per byte of copy work; the per-message figure stays per preset.
    kernel_tcp_ns_per_byte: float = Field(default=0.105, ge=0)
    # measured: benchmarks/network_stack.py on the development machine: CPU of a 1 MiB message over
    # a veth pair (MTU 1,500) less over loopback (64 KiB MTU), over the 702 extra segments: 0.34-0.42
    # us a segment in 3 runs.
    kernel_tcp_us_per_segment: float = Field(default=0.38, ge=0)
    # Of the receiver's half of kernel_tcp_us_per_msg, the latency of waking a thread blocked in recv
    # (archsim.perf.network wakeup_seconds; 0 under bypass and RDMA, which poll). measured: python
    # benchmarks/network_stack.py --wakeup --runs 5 --iters 2000, three times, on the development
    # machine (2-core AMD EPYC VM, load ~8 from other jobs): per run, the 64 B ping-pong's median
    # one-way (RTT/2) with blocking recv less with a busy-polling recv; the quietest runs (the poller
    # held its core the whole run) 2.79-3.06 us, median of the first 30 runs (loopback and veth) 2.83,
    # runs 1.0-3.3 (bimodal: on a busier machine the Python poller is slower; docs/NETWORK.md).
    kernel_tcp_wakeup_us: float = Field(default=2.8, ge=0)
    # RDMA RC send, perftest ib_send_lat: ~0.8 us one way at 32 B (NIC and both hosts' work).
    rdma_us_per_msg: float = Field(default=0.8, ge=0)
    # IEEE 802.3 standard payload 1,500 B; at least IPv4's minimum 68 B (RFC 791), which also
    # leaves room for the 40 B of IPv4 + TCP headers.
    mtu_bytes: int = Field(default=1500, ge=68)
    # Hops between two nodes: one top-of-rack switch (assumed: a one-rack cluster). Port-to-port
    # latency: a programmable switch forwards in ~0.3-1 us
    # (docs/REFERENCE.md "Network"); 0.5 us assumed inside that range.
    switch_hops: int = Field(default=1, ge=0)
    switch_latency_ns: float = Field(default=500.0, ge=0)
    switch_mode: Literal["cut_through", "store_and_forward"] = "store_and_forward"
    # Cable per link: 3 m, a rack's direct-attach cable (assumed); signals travel at ~2e8 m/s
    # (velocity factor ~0.67 in fibre and twinax), 5 ns/m.
    link_length_m: float = Field(default=3.0, ge=0)
    # In-network replay (issue 14 item 3, archsim/sim/network_links.py). Unset (default): a software
    # replay server in the network path (Furukawa and Matsutani, PDP 2022: a DPDK-based server
    # between actor and learner nodes) doing the trace's recorded replay work. A figure: a hardware
    # replay (switch pipeline / FPGA) with this service time per request and no host stack.
    # Capacity in transitions, unset = unbounded until a published figure is found.
    in_network_service_us: float | None = Field(default=None, ge=0)
    in_network_capacity_transitions: int | None = Field(default=None, ge=1)


class MemoryConfig(_Strict):
    host_dram_bw_gbs: float = Field(gt=0)
    # SoC: CPU and GPU share this DRAM (archsim.perf.shared_memory); host-device copies are DRAM
    # copies, or none with zero_copy (mapped pinned memory the GPU reads in place).
    shared_with_gpu: bool = False
    zero_copy: bool = False


class HardwareConfig(_Strict):
    name: str
    description: str = ""
    cpu: CpuConfig
    gpu: GpuConfig | None
    host_link: HostLinkConfig
    network: NetworkConfig
    memory: MemoryConfig
