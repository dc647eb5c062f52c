"""Bounded memory and time on big input: peak RSS and CPU time of ``archsim ingest``, ``trace info``,
``breakdown`` and ``predict --model-only`` on a real Kineto trace tiled to three sizes, beside stdlib
``json.load`` of the same file (the reference, measured in the same run), and of ``ingest`` on
hostile files (deep nesting, one 500 MB string, gzip bombs of a string, of whitespace and of one
repeated event), refused in one line or read in bounded memory.

The trace is a real fixture's events repeated (timestamps shifted by the trace's span, correlation,
External id and flow ids by their maximum, ProfilerStep# numbers by the steps' count), written as
.json and as .json.gz, in a temporary directory deleted afterwards. Each command runs in its own
process under ``/usr/bin/time`` (a small C program, so ``ru_maxrss`` is the command's own: Linux
carries a forking Python parent's resident set into its child's across exec). The slopes are
(peak RSS, CPU time) between the smallest and the largest size per event; linear when the
small-to-middle and middle-to-large slopes agree.

    python benchmarks/big_input.py [--copies 1,3,10] [--fixture a100_train_shapes.json.gz]
    python benchmarks/big_input.py --hostile-only [--bomb-gib 2]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT.parent / "shared" / "fixtures" / "kineto"
_STEP = re.compile(r"^ProfilerStep#(\d+)$")
_FLOW = ("s", "f", "t")
_ID_ARGS = ("correlation", "External id")
MIB = 2**20


def tile(source: Path, target: Path, copies: int) -> int:
    """``source``'s events ``copies`` times over into ``target`` (.json, or .json.gz by its name),
    no copy a duplicate of another; returns the number of events."""
    raw = source.read_bytes()
    doc = json.loads(gzip.decompress(raw) if raw[:2] == b"\x1f\x8b" else raw)
    events = doc["traceEvents"]
    times = [e["ts"] + e.get("dur", 0) for e in events if isinstance(e.get("ts"), int | float)]
    span = max(times) - min(times) + 1000.0
    ids = [(e.get("args") or {}).get(k) for e in events for k in _ID_ARGS]
    ids += [e.get("id") for e in events if e.get("ph") in _FLOW]
    id_step = max((v for v in ids if isinstance(v, int)), default=0) + 1
    steps = [int(m.group(1)) for e in events if (m := _STEP.match(str(e.get("name", ""))))]
    step_step = (max(steps) - min(steps) + 1) if steps else 0

    def shifted(event: dict, k: int) -> dict:
        if k == 0:
            return event
        copy = dict(event)
        if isinstance(copy.get("ts"), int | float):
            copy["ts"] = copy["ts"] + k * span
        if copy.get("ph") in _FLOW and isinstance(copy.get("id"), int):
            copy["id"] += k * id_step
        step = _STEP.match(str(copy.get("name", "")))
        if step:
            copy["name"] = f"ProfilerStep#{int(step.group(1)) + k * step_step}"
        args = copy.get("args")
        if isinstance(args, dict):
            args = dict(args)
            for key in _ID_ARGS:
                if isinstance(args.get(key), int) and args[key] > 0:
                    args[key] += k * id_step
            copy["args"] = args
        return copy

    gz = target.name.endswith(".gz")
    with gzip.open(target, "wt", compresslevel=1) if gz else open(target, "w") as out:
        head = {k: v for k, v in doc.items() if k != "traceEvents"}
        out.write(json.dumps(head)[:-1] + (", " if head else "") + '"traceEvents": [')
        for k in range(copies):
            for i, event in enumerate(events):
                out.write(("" if k == 0 and i == 0 else ",\n") + json.dumps(shifted(event, k)))
        out.write("]}")
    return copies * len(events)


_JSON_LOAD = (
    "import json, sys; doc = json.load(open(sys.argv[1], 'rb')); print(len(doc['traceEvents']))"
)


def measure(argv: list[str], limit_gib: float | None = None, env: dict | None = None) -> dict:
    """Run ``argv`` under /usr/bin/time: exit code, peak RSS (bytes), CPU seconds, wall seconds,
    and the first line of stderr; under an address-space limit when given (hostile input must not
    take the machine down if it is not refused)."""
    with tempfile.NamedTemporaryFile("r", suffix=".time") as stats:
        cmd = ["/usr/bin/time", "-o", stats.name, "-f", "%M %U %S %e", *argv]
        if limit_gib:
            cmd = ["bash", "-c", f'ulimit -v {int(limit_gib * 2**20)}; exec "$@"', "-", *cmd]
        done = subprocess.run(
            cmd, capture_output=True, text=True, cwd=ROOT, env={**os.environ, **(env or {})}
        )
        fields = stats.read().split()[-4:]
    kib, user, system, wall = (float(f) for f in fields)
    err = [line for line in done.stderr.splitlines() if line.strip()]
    return {
        "rc": done.returncode,
        "peak": kib * 1024,
        "cpu": user + system,
        "wall": wall,
        "err": err[0] if err else "",
        "err_lines": len(err),
    }


def _archsim(*args: str) -> list[str]:
    return [sys.executable, "-m", "archsim", *args]


def sizes(fixture: Path, copies: list[int], work: Path) -> None:
    rows = []
    for n in copies:
        path = work / f"big_x{n}.json"
        events = tile(fixture, path, n)
        gz = work / f"big_x{n}.json.gz"
        tile(fixture, gz, n)
        out = work / f"t{n}"
        r = {
            "events": events,
            "json_mb": path.stat().st_size / 1e6,
            "gz_mb": gz.stat().st_size / 1e6,
        }
        r["json.load"] = measure([sys.executable, "-c", _JSON_LOAD, str(path)])
        r["ingest .json"] = measure(_archsim("ingest", str(path), "--out", str(out)))
        r["ingest .json.gz"] = measure(_archsim("ingest", str(gz), "--out", str(work / f"g{n}")))
        r["trace info"] = measure(_archsim("trace", "info", str(out)))
        r["breakdown"] = measure(_archsim("breakdown", str(out), "--out", str(work / f"b{n}")))
        r["predict --model-only"] = measure(
            _archsim("predict", str(out), "--model-only", "--phase", "all")
        )
        for name in ("ingest .json", "trace info", "breakdown", "predict --model-only"):
            if r[name]["rc"] != 0:
                print(f"  {name} x{n} failed: {r[name]['err']}", file=sys.stderr)
        rows.append(r)
        path.unlink()  # keep the disk use to one size's JSON at a time
        shutil.rmtree(work / f"g{n}", ignore_errors=True)
        gz.unlink()
        print(f"  measured x{n}: {events:,} events, {r['json_mb']:.0f} MB JSON", file=sys.stderr)
    _print_sizes(fixture, rows)


COMMANDS = (
    "json.load",
    "ingest .json",
    "ingest .json.gz",
    "trace info",
    "breakdown",
    "predict --model-only",
)


def _cell(left: float, right: float, digits: int) -> str:
    text = f"{left:.0f} / {right:.{digits}f}"
    return f"{text:>18}"


def _slope(x: dict, y: dict, name: str, key: str) -> float:
    """Growth of ``key`` (peak bytes, CPU seconds) per event between two sizes."""
    return (y[name][key] - x[name][key]) / (y["events"] - x["events"])


def _print_sizes(fixture: Path, rows: list[dict]) -> None:
    print(f"trace: {fixture.name} tiled; peak RSS MB / CPU s per command")
    head = "".join(f"{'x' + str(round(r['events'] / rows[0]['events'])):>18}" for r in rows)
    print(f"{'':<22}{head}")
    print(f"{'events':<22}" + "".join(f"{r['events']:>18,}" for r in rows))
    print(f"{'JSON MB / gz MB':<22}" + "".join(_cell(r["json_mb"], r["gz_mb"], 1) for r in rows))
    for name in COMMANDS:
        cells = "".join(_cell(r[name]["peak"] / 1e6, r[name]["cpu"], 1) for r in rows)
        print(f"{name:<22}{cells}")
    if len(rows) < 3:
        return
    print("\nslopes per event (peak RSS bytes, CPU us), small->middle | middle->large:")
    a, b, c = rows[0], rows[len(rows) // 2], rows[-1]
    for name in COMMANDS:
        low_m, high_m = _slope(a, b, name, "peak"), _slope(b, c, name, "peak")
        low_t, high_t = _slope(a, b, name, "cpu") * 1e6, _slope(b, c, name, "cpu") * 1e6
        print(
            f"  {name:<22} RSS {low_m:7.0f} | {high_m:7.0f} B/event   "
            f"CPU {low_t:6.1f} | {high_t:6.1f} us/event"
        )


def hostile(work: Path, bomb_gib: float) -> None:
    """Files no trace is: each must be refused in one line, in bounded memory and time."""
    deep = work / "deep.json"
    deep.write_text('{"traceEvents": [' + "[" * 1_000_000 + "]" * 1_000_000 + "]}")
    chunk = "x" * MIB
    string = work / "string_500mb.json"
    with open(string, "w") as out:
        out.write('{"traceEvents": [{"ph": "X", "name": "')
        for _ in range(500):
            out.write(chunk)
        out.write('", "ts": 1, "dur": 1}]}')
    bomb = work / "bomb.json.gz"
    spaces = work / "spaces_bomb.json.gz"
    with (
        gzip.open(bomb, "wt", compresslevel=9) as out,
        gzip.open(spaces, "wt", compresslevel=9) as sp,
    ):
        out.write('{"traceEvents": [{"ph": "X", "name": "')
        sp.write('{"traceEvents": [')
        blank = " " * MIB
        for _ in range(int(bomb_gib * 1024)):
            out.write(chunk)
            sp.write(blank)
        out.write('"}]}')
        sp.write("]}")
    events = work / "events_bomb.json.gz"
    one = json.dumps(
        {"ph": "X", "cat": "cpu_op", "name": "a", "ts": 1, "dur": 1, "pid": 1, "tid": 1}
    )
    with gzip.open(events, "wt", compresslevel=9) as out:
        out.write('{"traceEvents": [' + (one + ",") * 3_000_000 + one + "]}")
    print(f"\nhostile input (ingest, under a 6 GiB address-space limit); {'':>2}peak MB / CPU s")
    for path, what in (
        (deep, "1,000,000 nested arrays"),
        (string, "one 500 MiB string in an event"),
        (bomb, f"gzip bomb: {bomb.stat().st_size / MIB:.1f} MiB -> a {bomb_gib:g} GiB string"),
        (spaces, f"gzip bomb: {spaces.stat().st_size / MIB:.1f} MiB -> {bomb_gib:g} GiB of spaces"),
        (events, f"gzip bomb: {events.stat().st_size / MIB:.1f} MiB -> 3 M events (default cap)"),
        (events, "the same, ARCHSIM_MAX_EVENTS=1000000"),
    ):
        env = {"ARCHSIM_MAX_EVENTS": "1000000"} if "ARCHSIM" in what else None
        r = measure(_archsim("ingest", str(path), "--out", str(work / "h")), limit_gib=6, env=env)
        shutil.rmtree(work / "h", ignore_errors=True)
        print(
            f"  {what:<48} rc {r['rc']} ({r['err_lines']} stderr line)  "
            f"{r['peak'] / 1e6:6.0f} MB {r['cpu']:6.1f} s  {r['err'][:110]}"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--copies", default="1,3,10", help="sizes, as copies of the fixture")
    parser.add_argument("--fixture", default="a100_train_shapes.json.gz", help="fixture to tile")
    parser.add_argument("--bomb-gib", type=float, default=2.0, help="gzip bombs' expanded size")
    parser.add_argument("--hostile-only", action="store_true", help="only the hostile files")
    parser.add_argument("--sizes-only", action="store_true", help="only the tiled sizes")
    args = parser.parse_args(argv)
    if not Path("/usr/bin/time").is_file():
        print("needs /usr/bin/time (Debian: apt-get install time)", file=sys.stderr)
        return 2
    fixture = FIXTURES / args.fixture
    with tempfile.TemporaryDirectory(prefix="archsim-big-") as tmp:
        if not args.hostile_only:
            if not fixture.is_file():
                print(f"fixture {fixture} is absent", file=sys.stderr)
                return 2
            sizes(fixture, [int(c) for c in args.copies.split(",")], Path(tmp))
        if not args.sizes_only:
            hostile(Path(tmp), args.bomb_gib)
    return 0


if __name__ == "__main__":
    sys.exit(main())
