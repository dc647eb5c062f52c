"""Ingest speed and peak memory on the real Kineto fixtures.

Prints, per fixture: compressed and JSON sizes, best-of-N wall time of ``ingest()``, throughput
(MB of JSON per second) and the peak resident memory added by ingesting (measured in a fresh
process per fixture: ru_maxrss after ingest minus the resident size before it), as a multiple of
both the .json.gz and the JSON size. Goals (issue 2): the ~1 MB fixtures in under 2 s each, memory
under 20x the JSON size.

    python benchmarks/ingest_speed.py [--repeat 3] [FILE ...]
"""

from __future__ import annotations

import argparse
import gzip
import multiprocessing as mp
import resource
import sys
import time
from pathlib import Path

FIXTURES = Path(__file__).resolve().parents[1].parent / "shared" / "fixtures" / "kineto"


def _measure(path: str, repeat: int, queue: mp.Queue) -> None:
    import psutil

    from archsim.trace.ingest import ingest

    rss_before = psutil.Process().memory_info().rss
    best = float("inf")
    n_ops = 0
    for _ in range(repeat):
        start = time.perf_counter()
        trace = ingest(path)
        best = min(best, time.perf_counter() - start)
        n_ops = len(trace.ops)
        del trace
    peak_kb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # kilobytes on Linux
    queue.put((best, n_ops, max(peak_kb * 1024 - rss_before, 0)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="traces (default: the fixtures)")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs per file (best is kept)")
    args = parser.parse_args(argv)
    files = args.files or sorted(FIXTURES.glob("*.json*"))
    if not files:
        print(f"no traces given and {FIXTURES} has none", file=sys.stderr)
        return 2
    ctx = mp.get_context("spawn")  # a fresh interpreter per file so peak memory is its own
    header = (
        f"{'trace':<38}{'gz MB':>7}{'JSON MB':>9}{'ops':>7}{'best s':>8}{'JSON MB/s':>11}"
        f"{'peak MB':>9}{'x gz':>7}{'x JSON':>8}"
    )
    print(header)
    for path in files:
        raw = path.read_bytes()
        json_bytes = len(gzip.decompress(raw)) if raw[:2] == b"\x1f\x8b" else len(raw)
        queue: mp.Queue = ctx.Queue()
        child = ctx.Process(target=_measure, args=(str(path), args.repeat, queue))
        child.start()
        best, n_ops, peak = queue.get()
        child.join()
        mb = 1e6
        print(
            f"{path.name:<38}{len(raw) / mb:>7.2f}{json_bytes / mb:>9.2f}{n_ops:>7}{best:>8.2f}"
            f"{json_bytes / mb / best:>11.1f}{peak / mb:>9.1f}{peak / len(raw):>7.1f}"
            f"{peak / json_bytes:>8.2f}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
