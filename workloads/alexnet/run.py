"""AlexNet inference loop: W warm-up passes, then N measured forward passes, each one
``archsim.step("inference", batch_size=B)`` around ``archsim.phase("inference_batch")``.

The phase is ``inference_batch`` (schema.INFERENCE_PHASES, the phase of an inference step) so the ops
fall in the ``inference`` phase group that ``archsim predict`` reads by default.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch

from workloads.alexnet.model import build_alexnet, random_images

DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "fp16": torch.float16}
INFERENCE_PHASE = "inference_batch"


def _markers():
    """archsim.phase / archsim.step: imported late so the model module stays importable alone."""
    import archsim.capture as capture_api

    return capture_api.phase, capture_api.step


def cpu_runs_dtype(dtype: torch.dtype) -> bool:
    """Whether this CPU build can run a conv2d in ``dtype`` (fp16 conv is missing on some builds)."""
    try:
        conv = torch.nn.Conv2d(3, 4, kernel_size=3).to(dtype)
        with torch.inference_mode():
            out = conv(torch.zeros(1, 3, 8, 8, dtype=dtype))
        return out.dtype == dtype
    except (RuntimeError, NotImplementedError):
        return False


def capture_dtype_for(target: torch.dtype, device: str = "cpu") -> torch.dtype:
    """The dtype to run in: the target when the device runs it, else fp32 (the trace's meta then
    carries the target dtype and `archsim predict` uses it)."""
    if device != "cpu" or target == torch.float32 or cpu_runs_dtype(target):
        return target
    return torch.float32


@dataclass(frozen=True)
class InferenceTiming:
    """Wall-clock figures of the measured passes on the capture machine (for the meta, not the model)."""

    batch_size: int
    measured_iters: int
    total_s: float

    @property
    def seconds_per_batch(self) -> float:
        return self.total_s / self.measured_iters

    @property
    def images_per_s(self) -> float:
        return self.batch_size / self.seconds_per_batch


def run_inference(
    batch_size: int,
    dtype: torch.dtype,
    warmup_iters: int,
    measured_iters: int,
    device: str = "cpu",
    seed: int = 0,
    profiler_step=None,
) -> InferenceTiming:
    """Run the forward passes; warm-up passes carry no step marker so ingest ignores them.

    ``profiler_step`` (optional callable) is called after each measured pass, e.g. ``prof.step``.
    """
    phase, step = _markers()
    model = build_alexnet(dtype, seed=seed).to(device)
    images = random_images(batch_size, dtype, seed=seed).to(device)
    synchronize = torch.cuda.synchronize if device.startswith("cuda") else (lambda: None)
    with torch.inference_mode():
        for _ in range(warmup_iters):
            model(images)
        synchronize()
        start = time.perf_counter()
        for _ in range(measured_iters):
            with step("inference", batch_size=batch_size), phase(INFERENCE_PHASE):
                model(images)
                synchronize()
            if profiler_step is not None:
                profiler_step()
        total_s = time.perf_counter() - start
    return InferenceTiming(batch_size, measured_iters, total_s)
