"""Ingest speed and peak memory against stdlib ``json.load`` (issue 13 item 6).

Default: a real fixture tiled to about ``--mb`` MB of JSON (its events repeated with timestamps,
correlation and external ids shifted so that no copy is a duplicate), written to a temporary
directory (deleted afterwards). Each measurement runs in a fresh interpreter that reports its own
wall time and peak resident memory (``VmHWM`` of ``/proc/self/status``: the high-water mark of the
interpreter's own address space; ``ru_maxrss`` would also carry the forking parent's, which Linux keeps
across exec):

* ``json.load``: stdlib parse of the whole file (the reference);
* ``archsim ingest``: ``ingest()`` plus ``save()`` (tables and the raw copy), as the CLI does.

It prints both side by side and the ratios. Goals: ingest time <= 1.5x json.load, peak memory <
2x the JSON size (the tiled file is above archsim.trace.ingest_cache's size limit, so it is parsed).
``--fixtures`` instead prints one line per real fixture (ingest only), with ``again s``: the same
file ingested a second time in the same process (a copy of the first result, after hashing the file).

    python benchmarks/ingest_speed.py [--mb 300] [--fixture a100_train_shapes.json.gz]
    python benchmarks/ingest_speed.py --fixtures [FILE ...]
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from pathlib import Path

from big_input import tile as tile_copies  # run as a script: benchmarks/ is on sys.path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "kineto"

_CHILD = r"""
import json, sys, time, tempfile
from pathlib import Path
mode, path = sys.argv[1], sys.argv[2]
start = time.perf_counter()
if mode == "json":
    with open(path, "rb") as handle:
        doc = json.load(handle)
    n = len(doc["traceEvents"])
else:
    from archsim.errors import ArchsimError
    from archsim.trace import save
    from archsim.trace.ingest import ingest
    try:
        trace = ingest(path)
    except ArchsimError as refused:  # a trace ingest refuses in one line (e.g. no kernels)
        print(json.dumps({"refused": str(refused)}))
        sys.exit(0)
    with tempfile.TemporaryDirectory() as out:
        save(trace, Path(out) / "t")
    n = len(trace.ops)
seconds = time.perf_counter() - start
status = Path("/proc/self/status").read_text().splitlines()
peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024  # kB
again = time.perf_counter()
if mode == "ingest":  # the same file again in this process (archsim.trace.ingest_cache)
    ingest(path)
again = time.perf_counter() - again
print(json.dumps({"s": seconds, "peak": peak, "n": n, "again_s": again}))
"""


def _child(mode: str, path: Path) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", _CHILD, mode, str(path)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def tile(source: Path, target: Path, mb: float) -> int:
    """Write ``source``'s events repeated to about ``mb`` MB of JSON (big_input.tile shifts each copy's
    times, ids and step numbers); returns the JSON size."""
    raw = source.read_bytes()
    events = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)["traceEvents"]
    copies = max(1, round(mb * 1e6 / len(json.dumps(events))))
    tile_copies(source, target, copies)
    return target.stat().st_size


def compare(fixture: Path, mb: float) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{fixture.name.split('.json')[0]}_x{mb:g}MB.json"
        size = tile(fixture, path, mb)
        ref = _child("json", path)
        ours = _child("ingest", path)
    mb_ = 1e6
    print(f"trace: {fixture.name} tiled to {size / mb_:.1f} MB of JSON")
    print(f"{'':<18}{'time s':>10}{'peak RSS MB':>14}{'peak / JSON':>13}")
    for label, r in (("json.load", ref), ("archsim ingest", ours)):
        print(f"{label:<18}{r['s']:>10.2f}{r['peak'] / mb_:>14.1f}{r['peak'] / size:>13.2f}")
    print(
        f"ratio ingest / json.load: time {ours['s'] / ref['s']:.2f}x (goal <= 1.5x), "
        f"peak RSS {ours['peak'] / ref['peak']:.2f}x; ingest peak {ours['peak'] / size:.2f}x "
        f"the JSON size (goal < 2x); {ours['n']:,} ops"
    )


def per_fixture(files: list[Path]) -> None:
    print(
        f"{'trace':<38}{'gz MB':>7}{'JSON MB':>9}{'ops':>8}{'s':>8}{'peak MB':>9}{'x JSON':>8}"
        f"{'again s':>9}"
    )
    for path in files:
        raw = path.read_bytes()
        json_bytes = len(gzip.decompress(raw)) if raw[:2] == b"\x1f\x8b" else len(raw)
        r = _child("ingest", path)
        if "refused" in r:
            print(
                f"{path.name:<38}{len(raw) / 1e6:>7.2f}{json_bytes / 1e6:>9.2f}  refused: {r['refused']}"
            )
            continue
        print(
            f"{path.name:<38}{len(raw) / 1e6:>7.2f}{json_bytes / 1e6:>9.2f}{r['n']:>8}"
            f"{r['s']:>8.2f}{r['peak'] / 1e6:>9.1f}{r['peak'] / json_bytes:>8.2f}"
            f"{r['again_s']:>9.3f}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="*", type=Path, help="traces for --fixtures")
    parser.add_argument("--mb", type=float, default=300.0, help="tiled JSON size (MB)")
    parser.add_argument("--fixture", default="a100_train_shapes.json.gz", help="fixture to tile")
    parser.add_argument("--fixtures", action="store_true", help="one line per real fixture")
    args = parser.parse_args(argv)
    if args.fixtures:
        files = args.files or sorted(FIXTURES.glob("*.json*"))
        if not files:
            print(f"no traces given and {FIXTURES} has none", file=sys.stderr)
            return 2
        per_fixture(files)
        return 0
    fixture = FIXTURES / args.fixture
    if not fixture.is_file():
        print(f"fixture {fixture} is absent", file=sys.stderr)
        return 2
    compare(fixture, args.mb)
    return 0


if __name__ == "__main__":
    sys.exit(main())
