"""Issue 14 item 5: the real Ape-X runtime's replay latencies and frames/s against predictions made
from ONE baseline capture (docs/VALIDATION.md "Distributed replay (Ape-X)").

Measures nothing itself: give it capture directories made with ``archsim capture apex`` (the
commands are in docs/VALIDATION.md). For each it prints the measured figures
(archsim.validate.apex.measure_capture) beside two predictions from the baseline:

- closed form: the baseline's per-byte serialize/decode and per-transition replay work plus
  ``archsim.perf.network.message_breakdown`` over this machine's path (``--hw local`` with the
  loopback or veth knobs below), no queueing;
- simulator (``--sim``): ``archsim simulate BASELINE --hw local`` with the configuration's actors,
  ``--replay-placement`` and the same network knobs (needs a simulator with issue 14 item 3).

Run: ``python benchmarks/apex_validation.py --baseline runs/apexval/base runs/apexval/* [--sim]
[--json FILE]``.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from archsim.validate.apex import (
    ApexMeasurement,
    baseline_costs,
    measure_capture,
    predict,
    signed_error,
)

# This machine's paths, as network-section overrides of `--hw local`. Loopback: no NIC and no
# switch; the kernel's copy is the stack's per-byte work (kernel_tcp_ns_per_byte, measured by
# benchmarks/network_stack.py), so the wire term is made negligible (1,000 GB/s), and lo's MTU is
# 65,535 B (Linux sets 65,536; IPv4 caps a datagram at 65,535). veth (--netns): the same with a 1,500 B MTU (per-segment work); the
# bridge between namespaces is kernel work already inside the veth CPU figure, not a switch hop.
LOOPBACK_SET = [
    "network.nic_bw_gbs=1000",
    "network.mtu_bytes=65535",
    "network.switch_hops=0",
    "network.link_length_m=0",
]
VETH_SET = [*LOOPBACK_SET[:1], "network.mtu_bytes=1500", *LOOPBACK_SET[2:]]
METRICS = ("replay_access_latency_us", "priority_sampling_latency_us", "frames_per_s")
# The configurations of docs/VALIDATION.md (runs of 8 s: the first 4 s profiled, the rest timed).
CONFIGS = {
    "base": ["--actors", "2", "--send-every", "16"],
    "a4": ["--actors", "4", "--send-every", "16"],
    "learner": ["--actors", "2", "--send-every", "16", "--replay-placement", "learner"],
    "se64": ["--actors", "2", "--send-every", "64"],
    "netns": ["--actors", "2", "--send-every", "16", "--netns"],
    "a4-learner-netns": ["--actors", "4", "--send-every", "16", "--replay-placement", "learner", "--netns"],
}  # fmt: skip
LOAD_FILE = "load.json"


def capture_all(root: Path, seconds: float, names: list[str]) -> None:
    """Capture each configuration into ROOT/NAME, with the CPUs other processes kept busy meanwhile
    (archsim.validate.load) in ROOT/NAME/load.json."""
    import subprocess

    from archsim.validate.load import load_between, snapshot

    for name in names:
        out = root / name
        cmd = ["archsim", "capture", "apex", "--seconds", str(seconds), "--out", str(out)]
        cmd += ["--force", *CONFIGS[name]]
        print("$", " ".join(cmd), flush=True)
        start = snapshot()
        subprocess.run(cmd, check=True)
        end = snapshot()
        load = load_between(start, end)
        figures = {
            "command": " ".join(cmd),
            "other_busy_cpus": load.other_busy_cpus,
            "loadavg_1min": load.loadavg_1min,
            "capture_wall_s": end.wall_s - start.wall_s,
            "capture_cpu_s": end.own_cpu_s - start.own_cpu_s,
        }
        (out / LOAD_FILE).write_text(json.dumps(figures, indent=1))
        print(f"  others kept {load.other_busy_cpus:.2f} CPUs busy", flush=True)


def other_busy_cpus(capture: Path) -> float:
    try:
        return float(json.loads((capture / LOAD_FILE).read_text())["other_busy_cpus"])
    except (OSError, ValueError, KeyError):
        return math.nan


def network_set(m: ApexMeasurement) -> list[str]:
    return VETH_SET if m.netns else LOOPBACK_SET


def closed_form(base_dir: Path, m: ApexMeasurement, batch_size: int) -> dict[str, float]:
    from archsim.hw import load_hw

    network = load_hw("local", network_set(m)).network
    return predict(
        baseline_costs(base_dir),
        network,
        placement=m.placement,
        send_every=m.send_every,
        batch_size=batch_size,
        inserts=m.inserts,
        samples=m.samples,
    )


def simulated(base_dir: Path, m: ApexMeasurement, seconds: float) -> dict[str, float]:
    """``archsim simulate BASELINE --hw local`` with this configuration's knobs: its actors and
    replay placement, local inference (Ape-X's actors act on their own copy), one node (the box),
    this path's network knobs. With the replay in the learner on one node the simulator has no
    network (its latencies are 0, "not modelled"): those are reported as missing."""
    from archsim.report.network_charts import _simulate

    knobs = ["--hw", "local", "--inference", "local", "--actors", str(m.actors)]
    knobs += ["--replay-placement", m.placement, "--sim-seconds", str(seconds)]
    metrics = _simulate(base_dir, Path("runs/apexval-sim") / m.name, knobs, network_set(m))
    got = {k: float(metrics.get(k, math.nan)) for k in METRICS}
    if m.placement == "learner":
        got["replay_access_latency_us"] = got["priority_sampling_latency_us"] = math.nan
    return got


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("captures", nargs="*", type=Path)
    ap.add_argument("--baseline", type=Path)
    ap.add_argument("--capture", type=Path, metavar="ROOT", help="capture the configurations first")
    ap.add_argument("--configs", default=",".join(CONFIGS), help="with --capture: which")
    ap.add_argument("--seconds", type=float, default=8.0, help="with --capture: run length")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--sim", action="store_true", help="also predict with archsim simulate")
    ap.add_argument("--sim-seconds", type=float, default=5.0)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.capture:
        capture_all(args.capture, args.seconds, args.configs.split(","))
        if args.baseline is None:
            return
    if args.baseline is None:
        ap.error("--baseline DIR is needed for the table")
    rows = []
    for d in [args.baseline] + [c for c in args.captures if c.resolve() != args.baseline.resolve()]:
        m = measure_capture(d)
        row = {
            "measured": m.as_dict(),
            "closed_form": closed_form(args.baseline, m, args.batch_size),
        }
        row["measured"]["other_busy_cpus"] = other_busy_cpus(d)
        if args.sim:
            row["simulator"] = simulated(args.baseline, m, args.sim_seconds)
        rows.append(row)
    print("| config | actors | placement | send every | path | others' busy CPUs | metric | measured | closed form | err | simulator | err |")  # fmt: skip
    print("|---|---:|---|---:|---|---:|---|---:|---:|---:|---:|---:|")
    errors: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        m = row["measured"]
        for metric in METRICS:
            cells = []
            for source in ("closed_form", "simulator"):
                value = row.get(source, {}).get(metric, math.nan)
                err = signed_error(value, m[metric])
                if m["name"] != args.baseline.name and not math.isnan(err):
                    errors.setdefault(source, {}).setdefault(metric, []).append(err)
                cells += [
                    "" if math.isnan(value) else f"{value:,.0f}",
                    "" if math.isnan(err) else f"{err:+.1%}",
                ]
            print(
                f"| {m['name']} | {m['actors']} | {m['placement']} | {m['send_every']} |"
                f" {'veth' if m['netns'] else 'loopback'} | {m['other_busy_cpus']:.2f} |"
                f" {metric} | {m[metric]:,.0f} | " + " | ".join(cells) + " |"
            )
    print()
    for source, by_metric in errors.items():
        for metric, errs in by_metric.items():
            mae = sum(abs(e) for e in errs) / len(errs)
            worst = max(errs, key=abs)
            print(f"{source} {metric}: MAE {mae:.1%} over {len(errs)} (worst {worst:+.1%})")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1, default=float))
    sys.stdout.flush()


if __name__ == "__main__":
    main()
