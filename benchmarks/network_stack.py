"""Kernel TCP stack cost on this machine (issue 14 item 2): round trip and per-message CPU.

A client and an echo server (two processes) exchange messages of 64 B .. 1 MiB over TCP (TCP_NODELAY),
first over loopback and then, when run as root, over a veth pair between two network namespaces this
script creates and always removes (addresses 10.213.7.1/2 exist only inside them). Each round trip
carries one message each way; the CPU time of the client's and the server's thread (``time.thread_time``)
over the loop, divided by the two messages, is the per-message stack CPU of both ends together; half
the round trip is the one-way latency. A least-squares line ``cost = fixed + per_byte * bytes`` over the
sizes gives the per-message fixed cost and the per-byte cost, printed beside the published figures
(kernel TCP ~5-20 us a message end to end; eRPC over DPDK ~1-3 us, Kalia et al. NSDI 2019; RDMA RC
``ib_send_lat`` ~0.8 us at 32 B). Loops are bounded (at most --iters round trips and 64 MiB a size).

Run: ``python benchmarks/network_stack.py [--iters 400] [--no-veth]``. With ``--wakeup [--runs 5]
[--iters 2000]`` it measures the receive wake-up instead (benchmarks/network_wakeup.py: a 64 B
ping-pong with blocking receivers against one with busy-polling receivers; docs/NETWORK.md "Receive
wake-up"). With ``--apex-table TRACE_DIR``
it measures nothing and prints docs/NETWORK.md's table instead: each message kind of an Ape-X capture's
``messages.csv`` on 40GbE under each stack (``archsim.perf.network.message_breakdown``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import socket
import subprocess
import sys
import time

import numpy as np

SIZES_B = [64, 256, 1024, 4096, 16384, 65536, 262144, 1048576]
NS_A, NS_B = "archsim-nsbench-a", "archsim-nsbench-b"
VETH_A, VETH_B = "asbench-va", "asbench-vb"
ADDR_A, ADDR_B = "10.213.7.1", "10.213.7.2"
PORT = 47613


def _recv_exact(sock: socket.socket, n: int, buf: bytearray) -> None:
    view = memoryview(buf)[:n]
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise ConnectionError("peer closed")
        got += k


def accept_one(host: str, port: int) -> tuple[socket.socket, socket.socket]:
    """(listening socket, the one connection): says "ready" on stdout once it listens."""
    lsock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    lsock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    lsock.bind((host, port))
    lsock.listen(1)
    print("ready", flush=True)
    conn, _ = lsock.accept()
    return lsock, conn


def serve(host: str, port: int) -> None:
    """Echo server: per size, a 4-byte size + 4-byte count header, then count echoes; replies its CPU."""
    lsock, conn = accept_one(host, port)
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(max(SIZES_B))
    hdr = bytearray(8)
    while True:
        try:
            _recv_exact(conn, 8, hdr)
        except ConnectionError:
            break
        size, count = int.from_bytes(hdr[:4], "little"), int.from_bytes(hdr[4:], "little")
        if size == 0:
            break
        t0 = time.thread_time()
        view = memoryview(buf)[:size]
        for _ in range(count):
            _recv_exact(conn, size, buf)
            conn.sendall(view)
        cpu_s = time.thread_time() - t0
        conn.sendall(json.dumps({"cpu_s": cpu_s}).encode().ljust(64))
    conn.close()
    lsock.close()


def client(host: str, port: int, iters: int) -> list[dict]:
    """Round trips per size against ``serve``: one-way latency and both ends' CPU per message."""
    for _ in range(100):
        try:
            sock = socket.create_connection((host, port), timeout=30)
            break
        except OSError:
            time.sleep(0.05)
    else:
        raise SystemExit(f"network_stack: cannot connect to {host}:{port}")
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = bytearray(max(SIZES_B))
    rows = []
    for size in SIZES_B:
        count = max(20, min(iters, (64 << 20) // size))
        payload = memoryview(bytes(size))
        sock.sendall(size.to_bytes(4, "little") + count.to_bytes(4, "little"))
        c0, w0 = time.thread_time(), time.perf_counter()
        for _ in range(count):
            sock.sendall(payload)
            _recv_exact(sock, size, buf)
        wall_s, cpu_s = time.perf_counter() - w0, time.thread_time() - c0
        reply = bytearray(64)
        _recv_exact(sock, 64, reply)
        server_cpu_s = json.loads(bytes(reply).decode().strip())["cpu_s"]
        rows.append(
            {
                "bytes": size,
                "round_trips": count,
                "one_way_us": wall_s / count / 2 * 1e6,
                "cpu_us_per_msg_both_ends": (cpu_s + server_cpu_s) / (2 * count) * 1e6,
            }
        )
    sock.sendall((0).to_bytes(8, "little"))
    sock.close()
    return rows


def fit(rows: list[dict], key: str) -> tuple[float, float]:
    """Least-squares line key = fixed_us + per_byte_ns * bytes / 1000; returns (fixed_us, per_byte_ns).

    Residuals are relative (weights 1/y), so the 64 B point counts as much as the 1 MiB one."""
    x = np.array([r["bytes"] for r in rows], dtype=float)
    y = np.array([r[key] for r in rows])
    slope, intercept = np.polyfit(x, y, 1, w=1 / y)
    return float(intercept), float(slope * 1e3)


def run_pair(
    server_prefix: list[str], client_prefix: list[str], host: str, iters: int
) -> list[dict]:
    me = [sys.executable, __file__]
    srv = subprocess.Popen(
        server_prefix + me + ["--serve", host], stdout=subprocess.PIPE, text=True
    )
    try:
        assert srv.stdout is not None and srv.stdout.readline().strip() == "ready"
        out = subprocess.run(
            client_prefix + me + ["--client", host, "--iters", str(iters)],
            capture_output=True, text=True, check=True, timeout=300,
        )  # fmt: skip
        return json.loads(out.stdout)
    finally:
        try:
            srv.wait(timeout=30)
        except subprocess.TimeoutExpired:
            srv.kill()
            srv.wait()


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True)


@contextlib.contextmanager
def veth_namespaces():
    """Two namespaces joined by a veth pair (ADDR_A in NS_A, ADDR_B in NS_B), removed on every exit."""
    try:
        _ip("netns", "add", NS_A)
        _ip("netns", "add", NS_B)
        _ip(
            "link",
            "add",
            VETH_A,
            "netns",
            NS_A,
            "type",
            "veth",
            "peer",
            "name",
            VETH_B,
            "netns",
            NS_B,
        )
        for ns, dev, addr in ((NS_A, VETH_A, ADDR_A), (NS_B, VETH_B, ADDR_B)):
            _ip("-n", ns, "addr", "add", f"{addr}/30", "dev", dev)
            _ip("-n", ns, "link", "set", dev, "up")
            _ip("-n", ns, "link", "set", "lo", "up")
        yield ["ip", "netns", "exec", NS_B], ["ip", "netns", "exec", NS_A], ADDR_B
    finally:
        for ns in (NS_A, NS_B):  # deleting a namespace deletes its end of the veth pair
            subprocess.run(["ip", "netns", "del", ns], capture_output=True)


def veth_rows(iters: int) -> list[dict]:
    """The same measurement between two namespaces joined by a veth pair."""
    with veth_namespaces() as (server_prefix, client_prefix, host):
        return run_pair(server_prefix, client_prefix, host, iters)


def report(name: str, rows: list[dict]) -> None:
    print(f"\n{name}: bytes  round_trips  one_way_us  cpu_us_per_msg(both ends)")
    for r in rows:
        print(
            f"  {r['bytes']:>9} {r['round_trips']:>6} {r['one_way_us']:>11.1f}"
            f" {r['cpu_us_per_msg_both_ends']:>11.1f}"
        )
    lat = fit(rows, "one_way_us")
    cpu = fit(rows, "cpu_us_per_msg_both_ends")
    print(f"  fit one-way latency : {lat[0]:.2f} us + {lat[1]:.4f} ns/B")
    print(f"  fit CPU both ends   : {cpu[0]:.2f} us + {cpu[1]:.4f} ns/B per message")
    print("  published: kernel TCP ~5-20 us/message end to end; eRPC/DPDK ~1-3 us (Kalia et al.,")
    print("  NSDI 2019); RDMA RC ib_send_lat ~0.8 us one way at 32 B, ~1.6 us at 1 KB (perftest)")


# The 40GbE network of docs/NETWORK.md's table: dgx1-v100's network section at 40GbE's 5 GB/s line rate
# with this machine's measured kernel TCP fixed cost (the loopback fit: 7.15-7.25 us, both ends).
APEX_TABLE_SET = ["network.nic_bw_gbs=5", "network.kernel_tcp_us_per_msg=7.2"]


def apex_table(trace_dir: str) -> None:
    """Markdown rows: one message of each kind (its median size) under each stack, and the savings."""
    import csv
    from pathlib import Path

    from archsim.hw import load_hw
    from archsim.perf.network import OBS_BYTES, message_breakdown, stack_cpu_seconds

    sizes: dict[str, list[int]] = {}
    with open(Path(trace_dir) / "messages.csv", newline="") as f:
        for row in csv.DictReader(f):
            sizes.setdefault(row["kind"], []).append(int(row["bytes"]))
    kinds = [("observation (one ALE frame stack)", OBS_BYTES)] + [
        (kind, int(np.median(b))) for kind, b in sizes.items() if kind != "hello"
    ]
    nets = {
        stack: load_hw("dgx1-v100", [*APEX_TABLE_SET, f"network.stack={stack}"]).network
        for stack in ("kernel_tcp", "kernel_bypass", "rdma")
    }
    print("| message | bytes | frames | wire us | switch+prop us | kernel TCP CPU us | "
          "kernel TCP stack shown us | of it wake-up us | kernel TCP us | kernel bypass us | RDMA us | "
          "bypass saves | RDMA saves |")  # fmt: skip
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for kind, n in kinds:
        t = {stack: message_breakdown(n, net) for stack, net in nets.items()}
        tcp = t["kernel_tcp"]
        tcp_us, byp_us, rdma_us = (t[s].total_s * 1e6 for s in nets)
        print(
            f"| {kind} | {n:,} | {tcp.frames:,} | {tcp.wire_s * 1e6:,.2f} |"
            f" {(tcp.switch_s + tcp.propagation_s) * 1e6:.2f} |"
            f" {stack_cpu_seconds(n, nets['kernel_tcp']) * 1e6:,.2f} |"
            f" {(tcp.stack_send_s + tcp.stack_recv_s + tcp.wakeup_s) * 1e6:,.2f} |"
            f" {tcp.wakeup_s * 1e6:.2f} | {tcp_us:,.2f} | {byp_us:,.2f} |"
            f" {rdma_us:,.2f} | {1 - byp_us / tcp_us:.0%} | {1 - rdma_us / tcp_us:.0%} |"
        )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--serve", metavar="HOST")
    ap.add_argument("--client", metavar="HOST")
    ap.add_argument("--iters", type=int, default=400, help="round trips per size at most")
    ap.add_argument("--no-veth", action="store_true", help="loopback only")
    ap.add_argument("--json", metavar="FILE", help="also write the rows as JSON")
    ap.add_argument(
        "--apex-table", metavar="TRACE_DIR", help="print docs/NETWORK.md's table, no runs"
    )
    ap.add_argument("--wakeup", action="store_true",
                    help="64 B ping-pong, blocking vs busy-polling recv, instead (network_wakeup.py)")  # fmt: skip
    ap.add_argument("--runs", type=int, default=5, help="--wakeup: (blocking, polling) pairs")
    args = ap.parse_args()
    if args.wakeup:
        from network_wakeup import measure_wakeup  # beside this script

        measure_wakeup(args.runs, args.iters, veth=not args.no_veth, json_path=args.json)
        return
    if args.apex_table:
        apex_table(args.apex_table)
        return
    if args.serve:
        serve(args.serve, PORT)
        return
    if args.client:
        print(json.dumps(client(args.client, PORT, args.iters)))
        return
    results = {"loopback": run_pair([], [], "127.0.0.1", args.iters)}
    if not args.no_veth:
        import os

        if os.geteuid() == 0:
            results["veth"] = veth_rows(args.iters)
        else:
            print("veth: skipped (needs root to create network namespaces)")
    for name, rows in results.items():
        report(name, rows)
    if "veth" in results:
        # veth runs the kernel's MTU-1,500 path (719 segments a MiB); loopback's 64 KiB MTU sends a
        # MiB in 17: the difference at 1 MiB over the 718 extra segments is the work per segment.
        big = [
            max(rows, key=lambda r: r["bytes"]) for rows in (results["veth"], results["loopback"])
        ]
        extra = math.ceil(big[0]["bytes"] / 1460) - math.ceil(big[0]["bytes"] / 65483)
        per_seg = (big[0]["cpu_us_per_msg_both_ends"] - big[1]["cpu_us_per_msg_both_ends"]) / extra
        print(f"\nper segment (veth - loopback CPU at {big[0]['bytes']:,} B, / {extra} segments):"
              f" {per_seg:.3f} us")  # fmt: skip
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
