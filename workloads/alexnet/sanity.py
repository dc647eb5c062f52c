"""Print archsim's AlexNet inference predictions next to public and measured figures.

    python -m workloads.alexnet.sanity [--traces DIR]

Captures AlexNet on this CPU (batch 1, 32, 128; fp32 and an fp16 target) unless DIR already holds the
traces, predicts each on every GPU preset, and prints the table plus the reference figures below.
A report, not a test: the figures come from other software stacks (TensorRT, Caffe) and GPUs.

Reference figures (AlexNet inference, images/s):
- A100 (PG509-200), PyTorch + cuDNN, fp32 (TF32 convs), batch 128: the fixture
  a100_alexnet_forward.json.gz (HolisticTraceAnalysis test data); the second, steady forward pass
  has 39 kernels summing to 5.36 ms of GPU time -> 128 / 5.36e-3 = 23.9K images/s (GPU-bound).
  Batch 128 is read from its launch grids: the ReLU after conv1 has 48,400 blocks of 512 elements,
  and 48,400 x 512 / (64 x 55 x 55) = 128 images.
- Jetson TX1, Caffe + cuDNN 4, fp16, batch 128: 258 images/s (NVIDIA whitepaper "GPU-Based Deep
  Learning Inference: A Performance and Power Analysis", Nov 2015; devblogs.nvidia.com
  "inference-next-step-gpu-accelerated-deep-learning").
- Tesla P40, TensorRT 2, fp32, batch 128: 5,198 images/s (Dell EMC HPC blog "Deep Learning
  Inference on P40 GPUs", Mar 2017). No public V100 AlexNet inference figure was found; P40's FP32
  peak is 11.8 TFLOP/s against V100's 15.7 (REFERENCE.md), so a V100 at the same efficiency would
  reach about 5,198 x 15.7 / 11.8 = 6.9K images/s in fp32.
"""

from __future__ import annotations

import argparse
import gzip
import json
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[2].parent / "shared" / "fixtures" / "kineto"
A100_FIXTURE = FIXTURES / "a100_alexnet_forward.json.gz"
PRESETS = ("dgx-h100", "dgx-a100", "dgx1-v100", "jetson-tx1")
CASES = (("b1-fp32", 1, "fp32"), ("b32-fp32", 32, "fp32"), ("b32-fp16", 32, "fp16"))
CASES += (("b128-fp32", 128, "fp32"), ("b128-fp16", 128, "fp16"))
REFERENCE_IMAGES_PER_S = {  # (preset, case) -> (figure, source); see the module docstring
    ("jetson-tx1", "b128-fp16"): (258.0, "NVIDIA TX1 whitepaper 2015, Caffe+cuDNN4"),
    ("dgx1-v100", "b128-fp32"): (6.9e3, "P40 TensorRT 5,198/s x 15.7/11.8 FP32 peak"),
}


def a100_fixture_forward_seconds(path: Path = A100_FIXTURE) -> float | None:
    """GPU time of the fixture's last (steady) forward pass: kernels inside its annotation."""
    if not path.exists():
        return None
    events = json.loads(gzip.decompress(path.read_bytes()))["traceEvents"]
    passes = [e for e in events if "|measure|forward" in e.get("name", "")]
    last = max(passes, key=lambda e: e["ts"])
    end = last["ts"] + last["dur"]
    kernels = [e for e in events if e.get("cat") == "kernel" and last["ts"] <= e["ts"] <= end]
    return sum(e["dur"] for e in kernels) * 1e-6


def ensure_traces(root: Path) -> dict[str, Path]:
    """Capture every case that is not in ``root`` yet (batch 128 takes ~5 s per pass on 2 cores)."""
    from archsim.capture.session import CaptureSchedule
    from workloads.alexnet.run import capture_alexnet

    schedule = CaptureSchedule(skip_first=0, wait=0, warmup=1, active=2, repeat=1)
    paths = {}
    for name, batch, dtype in CASES:
        paths[name] = root / f"alexnet-{name}"
        if not (paths[name] / "meta.yaml").exists():
            capture_alexnet(paths[name], batch, dtype, schedule=schedule, force=True)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--traces", type=Path, default=Path("/tmp/archsim-alexnet-sanity"))
    args = parser.parse_args()

    from archsim.analysis.predict import predict_inference
    from archsim.hw import load_hw
    from archsim.trace import load

    paths = ensure_traces(args.traces)
    print(f"{'case':<10} {'preset':<11} {'ms/batch':>9} {'images/s':>10} {'bound':<6}  reference")
    for name, _, _ in CASES:
        trace = load(paths[name])
        for preset in PRESETS:
            r = predict_inference(trace, load_hw(preset), hw_name=preset)
            bound = "launch" if r["launch_bound"] else "gpu"
            ref = REFERENCE_IMAGES_PER_S.get((preset, name))
            ref_text = f"{ref[0]:,.0f}/s ({ref[1]})" if ref else ""
            print(
                f"{name:<10} {preset:<11} {r['seconds_per_batch'] * 1e3:>9.3f} "
                f"{r['images_per_s']:>10,.0f} {bound:<6}  {ref_text}"
            )
    measured = a100_fixture_forward_seconds()
    if measured is not None:
        print(
            f"A100 fixture, batch 128 fp32 (TF32 convs), measured: {measured * 1e3:.2f} ms "
            f"GPU time per forward = {128 / measured:,.0f} images/s"
        )


if __name__ == "__main__":
    main()
