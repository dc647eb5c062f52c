"""Ranges of every numeric hardware field (presets, YAML files, ``--set``, ``--sms``), checked when a
config is loaded (archsim.hw.presets.validate_hw), before any work.

The schema (archsim.hw.schema) says what is impossible (a negative bandwidth, zero SMs); these ranges
say what is beyond any real machine by a wide margin, so an absurd what-if is one line instead of a
run that needs 12 GB (``--set cpu.sockets=1000000000000``) or numbers that overflow to inf. Each
upper bound is the largest shipping part (named, with its public datasheet) times a headroom for
what-ifs; the lower bounds keep divisions finite. docs/LIMITS.md has the table.
"""

from __future__ import annotations

from archsim.errors import ArchsimError
from archsim.sim.limits import Range, format_number

# field path -> range. Every int/float field of archsim.hw.schema must be here
# (tests/test_limits.py checks), so a new field cannot come without a documented range.
HW_RANGES: dict[str, Range] = {
    # HPE Superdome Flex: up to 32 Xeon sockets in one system image (HPE QuickSpecs).
    "cpu.sockets": Range(1, 32, "HPE Superdome Flex, 32 sockets in one system"),
    # AMD EPYC 9965: 192 cores per socket (AMD, 2024), the most of any shipping server CPU; 512
    # leaves 2.7x for what-ifs. 32 x 512 x 8 threads ran in 0.89 GB (archsim.sim.limits).
    "cpu.cores_per_socket": Range(1, 512, "2.7x the 192 cores of AMD EPYC 9965"),
    # IBM POWER9/POWER10 run 8 hardware threads per core (SMT8), the most of any server CPU.
    "cpu.threads_per_core": Range(1, 8, "IBM POWER10 SMT8"),
    "cpu.physical_cores_per_socket": Range(1, 512, "2.7x the 192 cores of AMD EPYC 9965"),
    "cpu.physical_threads_per_core": Range(1, 8, "IBM POWER10 SMT8"),
    # Fastest shipping boost clock 6.2 GHz (Intel Core i9-14900KS); 10 GHz is past any CPU or GPU.
    "cpu.base_clock_mhz": Range(1, 10_000, "past the 6.2 GHz of any shipping CPU"),
    "cpu.boost_clock_mhz": Range(1, 10_000, "past the 6.2 GHz of any shipping CPU"),
    "cpu.physical_boost_clock_mhz": Range(1, 10_000, "past the 6.2 GHz of any shipping CPU"),
    # Per-thread speed relative to the capture machine: single-thread speed of server CPUs from
    # 2010 to today differs by well under 10x; 1/1000..100 keeps event rates finite.
    "cpu.thread_speed_rel": Range(0.001, 100, "single-thread speeds differ by under 10x"),
    "cpu.physical_thread_speed_rel": Range(0.001, 100, "single-thread speeds differ by under 10x"),
    "cpu.emulator_speed_rel": Range(0.001, 100, "single-thread speeds differ by under 10x"),
    "cpu.interpreter_speed_rel": Range(0.001, 100, "single-thread speeds differ by under 10x"),
    "cpu.simd_speed_rel": Range(0.001, 100, "single-thread speeds differ by under 10x"),
    "cpu.smt_yield": Range(0, 1, "a busy sibling never speeds a thread up", low_open=True),
    # Highest server CPU TDP 500 W (AMD EPYC 9965); 2 kW per socket cannot be cooled in a socket.
    "cpu.idle_power_w": Range(0, 2000, "4x the 500 W TDP of the hottest server CPU"),
    "cpu.max_power_w": Range(1, 2000, "4x the 500 W TDP of the hottest server CPU"),
    "cpu.physical_idle_power_w": Range(0, 2000, "4x the 500 W TDP of the hottest server CPU"),
    "cpu.physical_max_power_w": Range(1, 2000, "4x the 500 W TDP of the hottest server CPU"),
    # NVIDIA GB200 NVL72: 72 GPUs in one NVLink domain, the largest single system sold.
    "gpu.count": Range(1, 72, "GB200 NVL72"),
    # AMD Instinct MI300X has 304 CUs, NVIDIA's largest die 148 SMs (B200): 1,024 is 3.4x.
    "gpu.sms": Range(1, 1024, "3.4x the 304 CUs of AMD MI300X"),
    "gpu.physical_sms": Range(1, 1024, "3.4x the 304 CUs of AMD MI300X"),
    # GPU boost clocks are under 3 GHz (RTX 4090: 2.52 GHz).
    "gpu.clock_mhz": Range(1, 10_000, "past any shipping GPU clock (under 3 GHz)"),
    "gpu.card_clock_mhz": Range(1, 10_000, "past any shipping GPU clock (under 3 GHz)"),
    # Ampere/Hopper SMs: 128 FP32 lanes x 2 (FMA) = 256 FLOP/clk; H100 dense FP16 tensor:
    # 989 TFLOPS / (132 SMs x 1.83 GHz) = 4,096 FLOP/clk (NVIDIA H100 datasheet).
    "gpu.fp32_flops_per_clk_per_sm": Range(1, 4096, "16x an Ampere/Hopper SM's 256"),
    "gpu.fp16_flops_per_clk_per_sm": Range(1, 8192, "16x an Ampere/Hopper SM's 512"),
    "gpu.tensor_flops_per_clk_per_sm": Range(0, 65_536, "16x an H100 SM's 4,096 (FP16 dense)"),
    # B200 dense FP8 4.5 PFLOP/s (HGX B200 datasheet, 72 sparse / 8 / 2) / (148 SMs x 1.979 GHz)
    # = 15,364 FLOP/clk; 131,072 is 8.5x that.
    "gpu.fp8_flops_per_clk_per_sm": Range(0, 131_072, "8.5x a B200 SM's 15,364 (FP8 dense)"),
    # B200: 8 TB/s of HBM3e (NVIDIA DGX B200 datasheet).
    "gpu.dram_bw_gbs": Range(0.001, 100_000, "12.5x the 8 TB/s of B200 HBM3e"),
    "gpu.card_dram_bw_gbs": Range(0.001, 100_000, "12.5x the 8 TB/s of B200 HBM3e"),
    # HBM2 ~3.9 pJ/bit, GDDR5 ~14 pJ/bit (O'Connor et al., "Fine-Grained DRAM", MICRO 2017).
    "gpu.dram_pj_per_bit": Range(0, 100, "7x GDDR5's 14 pJ/bit"),
    # GPU DRAM latency is hundreds of cycles, well under a microsecond (Jia et al., "Dissecting
    # the NVIDIA Volta GPU Architecture via Microbenchmarking", 2018).
    "gpu.dram_latency_ns": Range(1, 100_000, "over 100x a GPU's sub-microsecond DRAM latency"),
    "gpu.card_dram_latency_ns": Range(1, 100_000, "over 100x a GPU's sub-microsecond DRAM latency"),
    "gpu.l2_latency_ns": Range(1, 100_000, "over 100x a GPU's sub-microsecond DRAM latency"),
    # Largest last-level cache on a GPU: MI300X's 256 MB Infinity Cache.
    "gpu.l2_size_mb": Range(0.001, 4096, "16x MI300X's 256 MB Infinity Cache"),
    "gpu.l2_bw_gbs": Range(0.001, 1_000_000, "over 100x any measured L2 bandwidth"),
    # 2,048 resident threads and 32 blocks per SM since Volta; 65,536 registers per SM since
    # Kepler; 228 KB shared memory per SM on H100 (CUDA C Programming Guide, compute capabilities).
    "gpu.max_threads_per_sm": Range(1, 4096, "2x the 2,048 of every SM since Volta"),
    "gpu.max_blocks_per_sm": Range(1, 1024, "32x the 32 of every SM since Volta"),
    "gpu.registers_per_sm": Range(1, 2**20, "16x the 65,536 of every SM since Kepler"),
    "gpu.shared_mem_per_sm_kb": Range(0.001, 100_000, "over 400x H100's 228 KB"),
    # Launch costs are microseconds (the presets in hwconfigs/: 0.75-1 us on the GPU, 3-5 us of
    # CPU per launch); a second is beyond any driver.
    "gpu.launch_latency_us": Range(0, 1e6, "launches take microseconds"),
    "gpu.kernel_min_us": Range(0, 1e6, "kernels' floors are microseconds"),
    "gpu.launch_overhead_us": Range(0, 1e6, "launches take microseconds"),
    # Highest GPU TDP 1,000 W (B200, DGX B200 datasheet); GB200's superchip 2,700 W for two.
    "gpu.idle_power_w": Range(0, 5000, "5x the 1,000 W of B200"),
    "gpu.max_power_w": Range(1, 5000, "5x the 1,000 W of B200"),
    "gpu.card_idle_power_w": Range(0, 5000, "5x the 1,000 W of B200"),
    "gpu.card_max_power_w": Range(1, 5000, "5x the 1,000 W of B200"),
    # NVLink-C2C: 900 GB/s CPU-GPU (NVIDIA Grace Hopper datasheet).
    "host_link.bw_gbs": Range(0.001, 10_000, "11x NVLink-C2C's 900 GB/s"),
    "host_link.pageable_bw_gbs": Range(0.001, 10_000, "11x NVLink-C2C's 900 GB/s"),
    "host_link.latency_us": Range(0, 1e6, "link latencies are microseconds"),
    # 800 Gb/s Ethernet/InfiniBand XDR ports are 100 GB/s. Latencies and per-message costs are
    # microseconds (the presets: ~1 us NIC latency, 2-10 us per message); a second is none.
    "network.nic_bw_gbs": Range(0.001, 10_000, "100x an 800 Gb/s port"),
    "network.latency_us": Range(0, 1e6, "network latencies are microseconds"),
    "network.kernel_tcp_us_per_msg": Range(0, 1e6, "per-message costs are microseconds"),
    "network.kernel_bypass_us_per_msg": Range(0, 1e6, "per-message costs are microseconds"),
    "network.rdma_us_per_msg": Range(0, 1e6, "per-message costs are microseconds"),
    "network.kernel_tcp_us_per_segment": Range(0, 1e6, "per-segment costs are microseconds"),
    "network.kernel_tcp_wakeup_us": Range(0, 1e6, "wake-up latencies are microseconds"),
    # A byte costs well under a nanosecond of copying (memcpy runs at GB/s); a microsecond is none.
    "network.kernel_tcp_ns_per_byte": Range(0, 1000, "per-byte costs are nanoseconds"),
    # Jumbo frames stop at ~9,216 B; IPv4 datagrams at 65,535 B.
    "network.mtu_bytes": Range(68, 65535, "the largest IPv4 datagram"),
    "network.switch_hops": Range(0, 64, "datacenter paths cross a handful of switches"),
    "network.switch_latency_ns": Range(0, 1e6, "switches forward in nanoseconds to microseconds"),
    "network.link_length_m": Range(0, 1e7, "10,000 km of cable"),
    "network.in_network_service_us": Range(0, 1e6, "in-network service is microseconds"),
    # A switch holds tens of MB of SRAM; 1e9 transitions of 28 KB observations would be 28 TB.
    "network.in_network_capacity_transitions": Range(1, 1e9, "28 TB of ALE transitions"),
    # 12 channels of DDR5-6400 per socket = 614 GB/s; x 32 sockets = 19.7 TB/s.
    "memory.host_dram_bw_gbs": Range(0.001, 100_000, "5x 32 sockets of 12-channel DDR5-6400"),
}


def check_hw_ranges(hw, source: str) -> None:
    """Raise an ArchsimError naming ``source`` and the key when a numeric field of ``hw`` (a
    HardwareConfig) is outside its range."""
    data = hw.model_dump()
    for key, limits in HW_RANGES.items():
        section, _, field = key.partition(".")
        value = (data.get(section) or {}).get(field)
        if value is None or isinstance(value, bool):
            continue
        number = value  # ints compare exactly (a float of 2**64 - 1 rounds up)
        if not limits.holds(number):
            raise ArchsimError(
                f"{source}: key {key} = {format_number(value)} is outside the supported range "
                f"{limits.text()} ({limits.why}; docs/LIMITS.md)"
            )


def check_hw_power(hw, source: str) -> None:
    """Raise an ArchsimError naming ``source`` and the key when a CPU socket's or the GPU's idle
    power is above its TDP: power stays within [idle, TDP], so such a part has no power it could
    draw (a socket idling at 500 W under a 225 W TDP drew 500 W, above its TDP; a GPU's error named
    its DRAM bandwidth instead)."""
    for section in ("cpu", "gpu"):
        part = getattr(hw, section)
        if part is not None and part.idle_power_w > part.max_power_w:
            raise ArchsimError(
                f"{source}: key {section}.idle_power_w = {format_number(part.idle_power_w)} W is "
                f"above {section}.max_power_w = {format_number(part.max_power_w)} W (a part idles "
                "below its TDP; docs/LIMITS.md)"
            )
