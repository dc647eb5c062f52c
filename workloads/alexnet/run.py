"""AlexNet inference loop: W warm-up passes, then N measured forward passes, each one
``archsim.step("inference", batch_size=B)`` around ``archsim.phase("inference_batch")``.

The phase is ``inference_batch`` (schema.INFERENCE_PHASES, the phase of an inference step) so the ops
fall in the ``inference`` phase group that ``archsim predict`` reads by default.
"""

from __future__ import annotations

import shutil
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from workloads.alexnet.model import IMAGE_SIZE, build_alexnet, random_images

DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16}
INFERENCE_PHASE = "inference_batch"
WORKLOAD_NAME = "alexnet"
CAPTURE_DTYPE_CHOICES = ("auto", "target", "fp32")
# /proc/cpuinfo flags of native FP16 arithmetic: x86 AVX512-FP16 (Sapphire Rapids) and AMX-FP16
# (Granite Rapids) per Intel's ISA extensions reference; Arm "asimdhp" (Armv8.2-A half-precision SIMD).
NATIVE_FP16_CPU_FLAGS = frozenset({"avx512_fp16", "amx_fp16", "asimdhp"})
CPUINFO = Path("/proc/cpuinfo")


def _markers():
    """archsim.phase / archsim.step: imported late so the model module stays importable alone."""
    import archsim

    return archsim.phase, archsim.step


def cpu_flags(cpuinfo_text: str | None = None) -> frozenset[str]:
    """The CPU feature flags of this machine (x86 ``flags``, Arm ``Features``) from /proc/cpuinfo."""
    if cpuinfo_text is None:
        cpuinfo_text = CPUINFO.read_text() if CPUINFO.exists() else ""
    flags: set[str] = set()
    for line in cpuinfo_text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() in ("flags", "Features"):
            flags.update(value.split())
    return frozenset(flags)


def cpu_runs_dtype(dtype: torch.dtype) -> bool:
    """Whether this CPU build can run a conv2d in ``dtype`` (fp16 conv is missing on some builds)."""
    try:
        conv = torch.nn.Conv2d(3, 4, kernel_size=3).to(dtype)
        with torch.inference_mode():
            out = conv(torch.zeros(1, 3, 8, 8, dtype=dtype))
        return out.dtype == dtype
    except (RuntimeError, NotImplementedError):
        return False


def capture_dtype_for(
    target: torch.dtype,
    device: str = "cpu",
    mode: str = "auto",
    flags: frozenset[str] | None = None,
) -> tuple[torch.dtype, str]:
    """The dtype to run the capture in, and why. The trace's meta always carries the target dtype
    (``target_dtype``), which `archsim predict` uses, so an fp32 capture loses nothing it needs.

    ``mode``: ``target`` runs the target dtype when the device can run it at all; ``fp32`` always
    runs fp32; ``auto`` (default) is ``target`` on a GPU, and on a CPU runs fp16 only when the CPU
    has native FP16 arithmetic. Without it torch emulates fp16 through conversions: on this project's
    dev machine (AMD EPYC, AVX-512 but no AVX512-FP16) a batch-32 AlexNet forward took 13.5 s in fp16
    against 0.33 s in fp32, and the CPU timings are not what a GPU prediction uses.
    """
    if mode not in CAPTURE_DTYPE_CHOICES:
        raise ValueError(f"capture dtype mode {mode!r}: expected one of {CAPTURE_DTYPE_CHOICES}")
    if target == torch.float32:
        return target, "target is float32"
    if mode == "fp32":
        return torch.float32, "fp32 capture requested"
    if device != "cpu":
        return target, f"{device} runs {target}"
    if not cpu_runs_dtype(target):
        return torch.float32, f"this CPU's torch cannot run conv2d in {target}"
    if mode == "auto":
        native = NATIVE_FP16_CPU_FLAGS & (cpu_flags() if flags is None else flags)
        if not native:
            return torch.float32, "this CPU has no native FP16 arithmetic (fp16 is emulated)"
    return target, f"this CPU runs conv2d in {target}"


@dataclass(frozen=True)
class InferenceTiming:
    """Wall-clock time of each forward pass on the capture machine (meta only; predict ignores it)."""

    batch_size: int
    pass_seconds: tuple[float, ...]

    @property
    def median_seconds_per_batch(self) -> float:
        return statistics.median(self.pass_seconds)


def run_inference(
    batch_size: int,
    dtype: torch.dtype,
    passes: int,
    device: str = "cpu",
    seed: int = 0,
    after_pass: Callable[[], None] | None = None,
    progress: bool = False,
) -> InferenceTiming:
    """Run ``passes`` forward passes, each an ``inference`` step around the ``inference_batch`` phase.

    ``after_pass`` (e.g. the capture handle's ``step``) runs after every pass: the profiler schedule
    decides which passes are warm-up (run, not recorded) and which are recorded.
    """
    phase, step = _markers()
    model = build_alexnet(dtype, seed=seed).to(device)
    images = random_images(batch_size, dtype, seed=seed).to(device)
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    from tqdm import tqdm

    seconds = []
    bar = tqdm(range(passes), desc="alexnet passes", unit="pass", disable=not progress)
    with torch.inference_mode():
        for _ in bar:
            start = time.perf_counter()
            with step("inference", batch_size=batch_size), phase(INFERENCE_PHASE):
                model(images)
                synchronize()
            seconds.append(time.perf_counter() - start)
            if after_pass is not None:
                after_pass()
    return InferenceTiming(batch_size, tuple(seconds))


def default_schedule():
    """Warm up 3 passes (cuDNN/oneDNN pick algorithms, caches fill), then record 10 (one window)."""
    from archsim.capture.session import CaptureSchedule

    return CaptureSchedule(skip_first=0, wait=0, warmup=3, active=10, repeat=1)


def passes_for(schedule) -> int:
    """Forward passes that cover the schedule's windows (``repeat`` 0 = one window)."""
    cycle = schedule.wait + schedule.warmup + schedule.active
    return schedule.skip_first + max(schedule.repeat, 1) * cycle


def capture_alexnet(
    out_dir: Path | str,
    batch_size: int,
    dtype: str = "fp32",
    schedule=None,
    device: str = "cpu",
    capture_dtype: str = "auto",
    force: bool = False,
    seed: int = 0,
    progress: bool = False,
):
    """Capture AlexNet inference into a trace at ``out_dir``; returns the saved Trace.

    The trace meta gets ``target_dtype`` (the dtype asked for), whatever dtype the capture ran in.
    It is staged in a temporary sibling and saved atomically: an error leaves nothing at ``out_dir``.
    """
    import archsim
    from archsim.atomic import check_output_dir
    from archsim.errors import ArchsimError
    from archsim.trace.format import load, save

    if dtype not in DTYPES:
        raise ArchsimError(f"--dtype {dtype}: expected one of {', '.join(DTYPES)}")
    if batch_size < 1:
        raise ArchsimError(f"--batch {batch_size}: expected an integer >= 1")
    schedule = schedule or default_schedule()
    out_dir = Path(out_dir)
    check_output_dir(out_dir, force)
    target = DTYPES[dtype]
    run_dtype, reason = capture_dtype_for(target, device, capture_dtype)
    settings = {
        "batch_size": batch_size,
        "dtype": dtype,
        "capture_dtype": str(run_dtype).removeprefix("torch."),
        "capture_dtype_reason": reason,
        "image_size": IMAGE_SIZE,
        "passes": passes_for(schedule),
        "seed": seed,
    }
    out_dir.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{out_dir.name}.capture-", dir=out_dir.parent))
    try:
        with archsim.capture(
            staging / "trace",
            {"name": WORKLOAD_NAME, "settings": settings},
            schedule=schedule,
            device=device,
        ) as cap:
            timing = run_inference(
                batch_size,
                run_dtype,
                passes_for(schedule),
                device,
                seed,
                after_pass=cap.step,
                progress=progress,
            )
        trace = load(staging / "trace")
        trace.meta["target_dtype"] = str(target).removeprefix("torch.")
        settings = trace.meta["workload"]["settings"]
        settings["capture_median_seconds_per_batch"] = round(timing.median_seconds_per_batch, 6)
        save(trace, out_dir, force=force)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return trace
