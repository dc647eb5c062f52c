"""CPU/GPU ratio (Inci et al. 2020): CPU hardware threads per GPU SM. Published values mix
definitions (REFERENCE.md "Systems and the CPU/GPU ratio": the DGX-1 figure is physical cores over all
SMs, the DGX-A100 figure hardware threads over all SMs), so report both, for the whole box and for
the GPUs actually in use (the paper's runs often use one GPU of the box)."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from archsim.errors import ArchsimError


@dataclass(frozen=True)
class CpuGpuRatio:
    hw: str
    cpu_threads: int
    cpu_cores: int
    gpus_in_box: int
    gpus_in_use: int
    sms_per_gpu: int
    threads_per_sm_box: float
    cores_per_sm_box: float
    threads_per_sm_in_use: float
    cores_per_sm_in_use: float

    def as_dict(self) -> dict:
        return asdict(self)


def cpu_gpu_ratio(hw, gpus_in_use: int = 1) -> CpuGpuRatio:
    """The four ratios of ``hw`` (a HardwareConfig) with ``gpus_in_use`` of its GPUs in use."""
    if hw.gpu is None:
        raise ArchsimError(f"hardware config {hw.name}: has no GPU, so no CPU/GPU ratio")
    if not 1 <= gpus_in_use <= hw.gpu.count:
        raise ArchsimError(
            f"--gpus: expected 1..{hw.gpu.count} GPUs of {hw.name}, got {gpus_in_use}"
        )
    threads, cores, sms = hw.cpu.hw_threads, hw.cpu.cores, hw.gpu.sms
    box_sms = sms * hw.gpu.count
    used_sms = sms * gpus_in_use
    return CpuGpuRatio(
        hw=hw.name,
        cpu_threads=threads,
        cpu_cores=cores,
        gpus_in_box=hw.gpu.count,
        gpus_in_use=gpus_in_use,
        sms_per_gpu=sms,
        threads_per_sm_box=threads / box_sms,
        cores_per_sm_box=cores / box_sms,
        threads_per_sm_in_use=threads / used_sms,
        cores_per_sm_in_use=cores / used_sms,
    )


def format_ratio(r: CpuGpuRatio) -> str:
    box = f"whole box ({r.gpus_in_box} GPU{'s' if r.gpus_in_box > 1 else ''}, "
    box += f"{r.gpus_in_box * r.sms_per_gpu} SMs)"
    used = f"GPUs in use ({r.gpus_in_use}, {r.gpus_in_use * r.sms_per_gpu} SMs)"
    width = max(len(box), len(used))
    return "\n".join(
        [
            f"{r.hw}: {r.cpu_cores} cores / {r.cpu_threads} hardware threads; "
            f"{r.gpus_in_box} GPUs x {r.sms_per_gpu} SMs",
            f"{'CPU/GPU ratio':<{width}}  {'threads/SM':>10}  {'cores/SM':>10}",
            f"{box:<{width}}  {r.threads_per_sm_box:>10.4g}  {r.cores_per_sm_box:>10.4g}",
            f"{used:<{width}}  {r.threads_per_sm_in_use:>10.4g}  {r.cores_per_sm_in_use:>10.4g}",
        ]
    )
