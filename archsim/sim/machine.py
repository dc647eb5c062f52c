"""The engine's view of a HardwareConfig: CPU topology, thread speed and the power model's figures,
checked against the knobs (``--gpus``). Kept apart from the service times: it needs no trace."""

from __future__ import annotations

from archsim.errors import ArchsimError
from archsim.sim.config import SimConfig
from archsim.sim.metrics import PowerModel
from archsim.sim.system import Machine


def derive_machine(hw, config: SimConfig) -> Machine:
    """The CPU and power figures of ``hw`` (a HardwareConfig) that the engine uses."""
    if hw.gpu is not None and config.gpus > hw.gpu.count:
        raise ArchsimError(f"--gpus: {config.gpus} is more than the {hw.gpu.count} of {hw.name}")
    cpu = hw.cpu
    return Machine(
        hw_threads=cpu.hw_threads,
        cores=cpu.cores,
        sockets=cpu.sockets,
        cores_per_socket=cpu.cores_per_socket,
        thread_speed_rel=cpu.thread_speed_rel,
        smt_yield=cpu.smt_yield,
        power=PowerModel(
            gpus=config.gpus if hw.gpu is not None else 0,
            gpu_idle_w=hw.gpu.idle_power_w if hw.gpu is not None else 0.0,
            gpu_max_w=hw.gpu.max_power_w if hw.gpu is not None else 0.0,
            sockets=cpu.sockets,
            cpu_idle_w=cpu.idle_power_w,
            cpu_max_w=cpu.max_power_w,
            gpu_enabled_sms=hw.gpu.sms if hw.gpu is not None else 1,
            gpu_card_sms=hw.gpu.card_sms if hw.gpu is not None else 1,
            gpu_dram_bw_gbs=hw.gpu.card_dram_bw if hw.gpu is not None else 1.0,
            gpu_dram_pj_per_bit=(hw.gpu.dram_pj_per_bit or 0.0) if hw.gpu is not None else 0.0,
            gpu_clock_rel=hw.gpu.clock_mhz / hw.gpu.card_clock if hw.gpu is not None else 1.0,
            # the part's (a what-if with fewer cores or threads disables some of them)
            cores_per_socket=cpu.power_cores_per_socket,
            threads_per_core=cpu.power_threads_per_core,
            cpu_clock_rel=cpu.power_clock_rel,
            gpu_budget_w=hw.gpu.card_power_budget_w if hw.gpu is not None else None,
            cpu_budget_w=cpu.part_power_budget_w,
        ),
    )
