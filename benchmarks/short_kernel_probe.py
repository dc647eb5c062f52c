"""A probe for what archsim cannot price yet: short kernels on AMD Instinct GPUs (issue 12).

docs/ACCURACY.md misses its goals on two AMD fixtures made of kernels of a few microseconds
(an MI300X normalization benchmark, an MI250 MLP), and no published measurement says what such a
kernel costs on CDNA2/CDNA3 or why (see "What limits accuracy" there). This script is the
measurement that would settle it: run it on the GPU and send the table and the trace it writes.

It profiles one element-wise kernel (``out = a + b`` in fp32, 1 to 1,024 workgroups of 1,024
elements) with torch.profiler, 50 launches per cell, after host gaps of 0 (back to back), 20 us,
100 us, 1 ms and 10 ms (synchronize, then spin), and prints each cell's median duration and its
10th-90th percentile range. The exported trace (Kineto JSON, gzipped) is a fixture archsim reads.
Each configuration isolates one mechanism the model assumes away:

1. default (SPX on MI300X): the baseline the fixtures see;
2. MI300X in CPX (``amd-smi set --compute-partition CPX``, one XCD a device): SPX minus CPX at
   equal workgroups is the multi-XCD fixed cost (the model predicts none);
3. ``AMD_OPT_FLUSH=0`` (system-scope release on every dispatch, an L2 write-back): its cost;
4. clocks pinned (``amd-smi set --perf-determinism MHZ``): how much of an idle-gap effect is
   clock management (the model has no gap term: it predicts flat gap columns);
5. MI250 only, ``HIP_FORCE_DEV_KERNARG=1`` against ``0``: kernel arguments in device or host memory.

On a machine without a GPU, ``--device cpu`` times the same adds on the CPU (``aten::add`` CPU
time), which checks the script itself, not a GPU.

    python benchmarks/short_kernel_probe.py [--device cuda|cpu] [--reps 50] [--out FILE.json.gz]
"""

from __future__ import annotations

import argparse
import gzip
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

# PyTorch's vectorized elementwise kernel: 256 threads x 4 elements
ELEMENTS_PER_WORKGROUP = 256 * 4
WORKGROUPS = (1, 2, 8, 16, 38, 64, 304, 1024)  # 38 = one MI300X XCD's CUs, 304 = all eight XCDs'
GAPS_US = (0, 20, 100, 1_000, 10_000)
LABEL = "short_kernel_probe"


def spin_us(us: float) -> None:
    """Host busy-wait: time.sleep overshoots by tens of microseconds."""
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def _label(workgroups: int, gap_us: int) -> str:
    return f"{LABEL} workgroups={workgroups} gap_us={gap_us}"


def _parse_label(name: str) -> tuple[int, int] | None:
    if not name.startswith(LABEL + " "):
        return None
    fields = dict(part.split("=", 1) for part in name.split()[1:])
    return int(fields["workgroups"]), int(fields["gap_us"])


def profile_adds(device: str, reps: int, workgroups: tuple[int, ...], gaps_us: tuple[int, ...]):
    """Profile ``reps`` adds per (workgroups, gap) cell, each inside a record_function label."""
    import torch
    from torch.profiler import ProfilerActivity, profile, record_function

    on_gpu = device != "cpu"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    buffers = {
        w: [torch.rand(w * ELEMENTS_PER_WORKGROUP, device=device) for _ in range(3)]
        for w in workgroups
    }
    for a, b, out in buffers.values():  # first launches (code objects loaded) stay out of the table
        torch.add(a, b, out=out)
    sync()
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])
    with profile(activities=activities) as prof:
        for gap in gaps_us:
            for w, (a, b, out) in buffers.items():
                for _ in range(reps):
                    if gap:
                        sync()
                        spin_us(gap)
                    with record_function(_label(w, gap)):
                        torch.add(a, b, out=out)
        sync()
    return prof


def durations_us(prof, on_gpu: bool) -> dict[tuple[int, int], list[float]]:
    """Each labelled add's duration: its kernels' device time on a GPU, its CPU time otherwise."""
    cells: dict[tuple[int, int], list[float]] = {}
    for event in prof.events():
        key = _parse_label(event.name)
        if key is None:
            continue
        adds = [child for child in event.cpu_children if child.name == "aten::add"]
        if not adds:
            continue
        us = adds[0].device_time_total if on_gpu else adds[0].cpu_time_total
        cells.setdefault(key, []).append(float(us))
    return cells


def table(cells: dict[tuple[int, int], list[float]], workgroups, gaps_us) -> str:
    """Median (10th-90th percentile) in microseconds, a row per workgroup count, a column per gap."""
    lines = [f"{'workgroups':>10} " + " ".join(f"{f'gap {g} us':>22}" for g in gaps_us)]
    for w in workgroups:
        row = []
        for g in gaps_us:
            d = sorted(cells.get((w, g), []))
            if not d:
                row.append(f"{'-':>22}")
                continue
            p10, p90 = d[len(d) // 10], d[(9 * len(d)) // 10]
            row.append(f"{statistics.median(d):7.2f} ({p10:5.2f}-{p90:5.2f})")
        lines.append(f"{w:>10} " + " ".join(row))
    return "\n".join(lines)


def export_gzipped(prof, out: Path) -> None:
    """Write the Kineto trace gzipped; an older file at ``out`` is kept until the new one is whole."""
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent) as tmp:
        raw = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(raw))
        packed = Path(tmp) / "trace.json.gz"
        with raw.open("rb") as src, gzip.open(packed, "wb") as dst:
            shutil.copyfileobj(src, dst)
        os.replace(packed, out)


def _int_list(text: str) -> tuple[int, ...]:
    try:
        values = tuple(int(v) for v in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers, got {text!r}"
        ) from None
    if not values or min(values) < 0:
        raise argparse.ArgumentTypeError(f"expected non-negative integers, got {text!r}")
    return values


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--device", default=None, help="cuda (also ROCm) or cpu; default: cuda if present"
    )
    parser.add_argument("--reps", type=int, default=50, help="launches per cell (default 50)")
    parser.add_argument("--workgroups", type=_int_list, default=WORKGROUPS)
    parser.add_argument("--gaps-us", type=_int_list, default=GAPS_US)
    parser.add_argument("--out", type=Path, default=Path("runs/short_kernel_probe.json.gz"))
    args = parser.parse_args(argv)
    if args.reps < 1:
        parser.error(f"--reps: expected at least 1, got {args.reps}")
    import torch

    device = args.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if device != "cpu" and not torch.cuda.is_available():
        print(
            f"short_kernel_probe: --device {device}: torch sees no GPU; use --device cpu",
            file=sys.stderr,
        )
        return 2
    if 0 in args.workgroups:
        parser.error("--workgroups: expected counts of at least 1")
    prof = profile_adds(device, args.reps, args.workgroups, args.gaps_us)
    name = torch.cuda.get_device_name() if device != "cpu" else "CPU (aten::add CPU time)"
    print(f"{name}: median (10th-90th percentile) duration in us, {args.reps} launches a cell")
    print(table(durations_us(prof, device != "cpu"), args.workgroups, args.gaps_us))
    export_gzipped(prof, args.out)
    print(f"trace: {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
