"""Issue 14 item 5: the real Ape-X runtime's replay latencies and frames/s against predictions made
from ONE baseline capture (docs/VALIDATION.md "Distributed replay (Ape-X)").

``--capture ROOT`` first captures the configurations of CONFIGS (``archsim capture apex``, one after
the other) into ROOT/NAME, sampling the machine's busy CPU and the capture's process tree's CPU every
0.25 s into ROOT/NAME/load.json. Then, for each capture directory given, it prints the measured
figures (archsim.validate.apex.measure_capture; per CPU-second where load.json has samples) beside
two predictions from the baseline:

- closed form: the baseline's per-byte serialize/decode and per-transition replay work plus
  ``archsim.perf.network.message_breakdown`` over this machine's path (``--hw local`` with the
  loopback or veth knobs below), no queueing;
- simulator (``--sim``): ``archsim simulate BASELINE --hw local`` with the configuration's actors,
  ``--replay-placement`` and the same network knobs (needs a simulator with issue 14 item 3).

Run: ``python benchmarks/apex_validation.py --capture runs/apexval3`` (6 captures of 8 s, ~8 min on
a busy 2-core box), then ``python benchmarks/apex_validation.py --baseline runs/apexval/base
runs/apexval3/* --sim [--json FILE]``; ``--from-json FILE`` reuses an earlier run's simulator column;
``--per-message DIR...`` prints each capture's median transfer time per message kind against
``message_breakdown``; ``--cpu-budget --baseline B DIR... [--from-json FILE]`` splits each
capture's timed-window CPU per env step by what its trace recorded (archsim.validate.apex_cpu).
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path

from archsim.validate.apex import (
    FRAMESKIP,
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
METRICS = (
    "replay_access_latency_us",
    "priority_sampling_latency_us",
    "frames_per_s",
    "frames_per_cpu_s",
)
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
SAMPLE_S = 0.25  # CPU sampling period during a capture: 1/16 of the 4 s timed half


def _tree_cpu_s(proc) -> float:
    """CPU seconds (user + system) of ``proc`` and every live descendant (psutil)."""
    import psutil

    total = 0.0
    for p in [proc, *proc.children(recursive=True)]:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.Error:  # exited between the listing and the read
            pass
    return total


def capture_all(root: Path, seconds: float, names: list[str]) -> None:
    """Capture each configuration into ROOT/NAME, with the CPUs other processes kept busy meanwhile
    (archsim.validate.load) in ROOT/NAME/load.json, and every SAMPLE_S the machine's busy CPU
    seconds and the capture's process tree's CPU seconds (``cpu_samples``: [time_ns, busy_s,
    tree_cpu_s]) so that the CPU the run spent over any window can be read afterwards."""
    import subprocess
    import time

    import psutil

    from archsim.validate.load import load_between, snapshot

    for name in names:
        out = root / name
        cmd = ["archsim", "capture", "apex", "--seconds", str(seconds), "--out", str(out)]
        cmd += ["--force", *CONFIGS[name]]
        print("$", " ".join(cmd), flush=True)
        start = snapshot()
        child = subprocess.Popen(cmd)
        proc, samples = psutil.Process(child.pid), []
        while child.poll() is None:
            try:
                tree = _tree_cpu_s(proc)
            except psutil.Error:
                break
            samples.append([time.time_ns(), snapshot().busy_s, tree])
            time.sleep(SAMPLE_S)
        if child.wait() != 0:
            raise SystemExit(f"{' '.join(cmd)}: exit {child.returncode}")
        end = snapshot()
        load = load_between(start, end)
        figures = {
            "command": " ".join(cmd),
            "other_busy_cpus": load.other_busy_cpus,
            "loadavg_1min": load.loadavg_1min,
            "capture_wall_s": end.wall_s - start.wall_s,
            "capture_cpu_s": end.own_cpu_s - start.own_cpu_s,
            "cpu_samples": samples,
        }
        (out / LOAD_FILE).write_text(json.dumps(figures, indent=1))
        print(f"  others kept {load.other_busy_cpus:.2f} CPUs busy", flush=True)


def load_figures(capture: Path) -> dict:
    try:
        return json.loads((capture / LOAD_FILE).read_text())
    except (OSError, ValueError):
        return {}


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

    key = f"{m.actors}-{m.placement}-{'veth' if m.netns else 'loopback'}-{m.send_every}"
    if key in _SIMULATED:
        return _SIMULATED[key]
    knobs = ["--hw", "local", "--inference", "local", "--actors", str(m.actors)]
    knobs += ["--replay-placement", m.placement, "--sim-seconds", str(seconds)]
    metrics = _simulate(base_dir, Path("runs/apexval-sim") / key, knobs, network_set(m))
    got = {k: float(metrics.get(k, math.nan)) for k in METRICS}
    # per CPU-second of the simulated processes: frames/s over the busy hardware threads plus the
    # replay's thread, which the simulator keeps off them (docs/NETWORK.md, "Not modelled")
    busy_cpus = float(metrics["cpu_util"]) * int(metrics["hw_threads"])
    busy_cpus += float(metrics.get("replay_server_util") or 0.0)
    got["frames_per_cpu_s"] = got["frames_per_s"] / busy_cpus if busy_cpus > 0 else math.nan
    if m.placement == "learner":
        got["replay_access_latency_us"] = got["priority_sampling_latency_us"] = math.nan
    _SIMULATED[key] = got
    return got


_SIMULATED: dict[str, dict[str, float]] = {}  # one simulation per configuration and run


def _cell(value: float, measured: float | None = None) -> str:
    if not math.isfinite(value):
        return "n/a"
    text = f"{value:,.0f}"
    if measured is not None:
        err = signed_error(value, measured)
        text += "" if math.isnan(err) else f" ({err:+.0%})"
    return text


def print_table(rows: list[dict]) -> None:
    """One markdown row per capture: measured, closed form and simulator (signed error)."""
    print(
        "| capture | actors | placement | send every | path | others' busy CPUs |"
        " replay access us: measured | closed form | simulator |"
        " prioritized sample us: measured | closed form | simulator |"
        " frames/s: measured | simulator | frames/CPU-s: measured | simulator |"
    )
    print("|---|---:|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for row in rows:
        m, cf, sim = row["measured"], row["closed_form"], row.get("simulator", {})
        cells = [m["name"], str(m["actors"]), m["placement"], str(m["send_every"])]
        others = m["window_other_busy_cpus"]
        if math.isnan(others):
            others = m["other_busy_cpus"]
        cells += ["veth" if m["netns"] else "loopback", "not recorded"]
        cells[-1] = "not recorded" if math.isnan(others) else f"{others:.2f}"
        for metric in METRICS[:2]:
            cells += [_cell(m[metric]), _cell(cf[metric], m[metric])]
            cells.append(_cell(sim.get(metric, math.nan), m[metric]))
        cells += [
            _cell(m["frames_per_s"]),
            _cell(sim.get("frames_per_s", math.nan), m["frames_per_s"]),
            _cell(m["frames_per_cpu_s"]),
            _cell(sim.get("frames_per_cpu_s", math.nan), m["frames_per_cpu_s"]),
        ]
        print("| " + " | ".join(cells) + " |")
    print()


def per_message(captures: list[Path]) -> None:
    """Median transfer time per message kind against ``message_breakdown`` on the capture's path."""
    from archsim.hw import load_hw
    from archsim.perf.network import message_breakdown
    from archsim.validate.apex import load_messages, transfer_medians

    print("| capture | path | message | count | bytes | transfer p50 us | model us |")
    print("|---|---|---|---:|---:|---:|---:|")
    for d in captures:
        m = measure_capture(d)
        network = load_hw("local", network_set(m)).network
        for kind, row in transfer_medians(load_messages(d)).iterrows():
            model_us = message_breakdown(row["bytes"], network).total_s * 1e6
            print(
                f"| {d} | {'veth' if m.netns else 'loopback'} | {kind} | {int(row['count'])} |"
                f" {row['bytes']:,.0f} | {row['transfer_us']:,.0f} | {model_us:,.1f} |"
            )


def cpu_budgets(baseline: Path, captures: list[Path], from_json: Path | None) -> None:
    """Where each capture's timed-window CPU went per env step (archsim.validate.apex_cpu), beside
    the baseline's actor work and, with ``from_json``, the simulator's CPU per env step."""
    from archsim.validate.apex_cpu import baseline_actor_us, cpu_budget

    sim_us = {}
    if from_json:
        for old in json.loads(from_json.read_text()):
            fpc = (old.get("simulator") or {}).get("frames_per_cpu_s", math.nan)
            sim_us[old.get("path")] = FRAMESKIP * 1e6 / fpc if fpc and fpc > 0 else math.nan
    base_phases, base_unphased = baseline_actor_us(baseline)
    print(
        f"baseline {baseline}: actor phases {base_phases:,.0f} us, unphased {base_unphased:,.0f} us"
    )
    cols = ["measured", "actor_phases", "actor_unphased", "learner", "replay", "param_serve"]
    cols += ["unaccounted"]
    # the simulator's CPU per env step with the actors' phases at this run's own CPU instead of
    # the baseline's: how much of the gap the actors' slower phases under load account for
    print("| capture | window s | " + " | ".join(cols) + " | simulator | with run's actor phases |")
    print("|---|" + "---:|" * (len(cols) + 3))
    for d in captures:
        samples = load_figures(d).get("cpu_samples")
        if not samples:
            continue
        b = cpu_budget(d, samples).as_dict()
        cells = [f"{b[c + '_us']:,.0f}" for c in cols]
        sim = sim_us.get(str(d), math.nan)
        loaded = sim + b["actor_phases_us"] - base_phases
        sims = [f"{v:,.0f} ({v / b['measured_us'] - 1:+.0%})" for v in (sim, loaded)]
        print(f"| {d} | {b['window_s']:.2f} | " + " | ".join(cells + sims) + " |")


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
    ap.add_argument(
        "--per-message",
        action="store_true",
        help="only: each capture's median transfer time per message kind against perf.network",
    )
    ap.add_argument(
        "--from-json", type=Path, help="the simulator column of an earlier --sim --json run"
    )
    ap.add_argument(
        "--cpu-budget",
        action="store_true",
        help="only: each capture's CPU per env step split by what its trace recorded",
    )
    args = ap.parse_args()
    if args.cpu_budget:
        cpu_budgets(args.baseline, args.captures, args.from_json)
        return
    if args.per_message:
        per_message(args.captures)
        return
    if args.capture:
        capture_all(args.capture, args.seconds, args.configs.split(","))
        if args.baseline is None:
            return
    if args.baseline is None:
        ap.error("--baseline DIR is needed for the table")
    saved = {}
    if args.from_json:
        for old in json.loads(args.from_json.read_text()):
            key = old.get("path") or old["measured"]["name"]
            saved[key] = old.get("simulator", {})
    rows = []
    for d in [args.baseline] + [c for c in args.captures if c.resolve() != args.baseline.resolve()]:
        load = load_figures(d)
        m = measure_capture(d, cpu_samples=load.get("cpu_samples"))
        row = {
            "measured": m.as_dict(),
            "closed_form": closed_form(args.baseline, m, args.batch_size),
        }
        row["measured"]["other_busy_cpus"] = float(load.get("other_busy_cpus", math.nan))
        if args.sim:
            row["simulator"] = simulated(args.baseline, m, args.sim_seconds)
        elif args.from_json:
            row["simulator"] = saved.get(str(d)) or saved.get(
                "baseline" if d is args.baseline else str(d), {}
            )
        row["baseline"] = d is args.baseline
        row["path"] = str(d)
        row["measured"]["name"] = "baseline" if row["baseline"] else str(d)
        rows.append(row)
    print_table(rows)
    errors: dict[str, dict[str, list[float]]] = {}
    for row in rows:
        for metric in METRICS:
            for source in ("closed_form", "simulator"):
                err = signed_error(
                    row.get(source, {}).get(metric, math.nan), row["measured"][metric]
                )
                if not row["baseline"] and not math.isnan(err):
                    errors.setdefault(source, {}).setdefault(metric, []).append(err)
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
