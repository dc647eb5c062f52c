"""Linux network namespaces for an Ape-X run: every process on its own "node", nodes joined by veth
pairs to a bridge in a switch namespace, so messages cross real interfaces (and, with tc netem, a
shaped link). Everything created is named after this process's pid and removed on every exit path of
the ``with`` block; a failed setup removes what it made before raising.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import subprocess
from collections.abc import Iterator

from archsim.errors import ArchsimError

SUBNET = "10.201.0"  # private (RFC 1918) and only inside the namespaces made here
CLONE_NEWNET = 0x40000000  # <sched.h>
BRIDGE = "br0"
NETNS_DIR = "/var/run/netns"


def prefix(pid: int | None = None) -> str:
    """Names of one run's namespaces and veths: ``ax<pid>``."""
    return f"ax{os.getpid() if pid is None else pid}"


def check_available() -> None:
    """One-line ArchsimError when namespaces cannot be made here (not root, no ``ip``)."""
    if os.geteuid() != 0:
        raise ArchsimError("--netns: creating network namespaces needs root (run without --netns)")
    for tool in ("ip",):
        if shutil.which(tool) is None:
            raise ArchsimError(f"--netns: the '{tool}' command (iproute2) is not installed")


def _ip(*args: str) -> None:
    done = subprocess.run(["ip", *args], capture_output=True, text=True)
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        raise ArchsimError(
            f"--netns: 'ip {' '.join(args)}' failed: {message[-1] if message else done.returncode}"
        )


# tc tbf's bucket: 64 KiB, the largest segment a veth passes with segmentation offload (GSO/TSO),
# so that no packet is larger than the bucket (tc-tbf(8): burst must hold the largest packet);
# 50 ms of queue before tbf drops (tc-tbf(8) "latency").
TBF_BURST = "64kb"
TBF_LATENCY = "50ms"


def _tc(flag: str, namespace: str, *args: str) -> None:
    if shutil.which("tc") is None:
        raise ArchsimError(f"{flag}: the 'tc' command (iproute2) is not installed")
    done = subprocess.run(
        ["ip", "netns", "exec", namespace, "tc", *args], capture_output=True, text=True
    )
    if done.returncode != 0:
        message = (done.stderr or done.stdout).strip().splitlines()
        reason = message[-1] if message else f"exit code {done.returncode}"
        raise ArchsimError(f"{flag}: 'tc {' '.join(args)}' failed ({reason})")


class Topology:
    """Namespaces ``<prefix>-sw`` (bridge) and ``<prefix>-<node>`` per node; node k is at
    ``10.201.0.<k+1>`` on its ``eth0``."""

    def __init__(self, nodes: list[str], delay_ms: float = 0.0, rate_mbit: float = 0.0):
        self.nodes = list(nodes)
        self.delay_ms, self.rate_mbit = delay_ms, rate_mbit
        self.prefix = prefix()
        self.switch = f"{self.prefix}-sw"
        self.created: list[str] = []

    def namespace(self, node: str) -> str:
        return f"{self.prefix}-{node}"

    def address(self, node: str) -> str:
        return f"{SUBNET}.{self.nodes.index(node) + 1}"

    def __enter__(self) -> Topology:
        check_available()
        try:
            self._build()
        except BaseException:
            self.remove()
            raise
        return self

    def _build(self) -> None:
        self._add_namespace(self.switch)
        _ip("-n", self.switch, "link", "add", BRIDGE, "type", "bridge")
        _ip("-n", self.switch, "link", "set", BRIDGE, "up")
        for k, node in enumerate(self.nodes):
            ns = self.namespace(node)
            self._add_namespace(ns)
            node_end, switch_end = f"{self.prefix}n{k}", f"{self.prefix}s{k}"
            _ip("link", "add", node_end, "type", "veth", "peer", "name", switch_end)
            _ip("link", "set", switch_end, "netns", self.switch)  # into the switch first: if the
            _ip("link", "set", node_end, "netns", ns)  # next step fails, removing ns removes both
            _ip("-n", ns, "link", "set", node_end, "name", "eth0")
            _ip("-n", ns, "addr", "add", f"{self.address(node)}/24", "dev", "eth0")
            _ip("-n", ns, "link", "set", "eth0", "up")
            _ip("-n", self.switch, "link", "set", switch_end, "master", BRIDGE)
            _ip("-n", self.switch, "link", "set", switch_end, "up")
            self._shape(ns)

    def _shape(self, ns: str) -> None:
        """Delay with netem (rate inside netem too when both are asked), rate alone with tbf."""
        if self.delay_ms:
            rate = ["rate", f"{self.rate_mbit}mbit"] if self.rate_mbit else []
            _tc(
                "--link-delay-ms",
                ns,
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "netem",
                "delay",
                f"{self.delay_ms}ms",
                *rate,
            )
        elif self.rate_mbit:
            _tc(
                "--link-rate-mbit",
                ns,
                "qdisc",
                "add",
                "dev",
                "eth0",
                "root",
                "tbf",
                "rate",
                f"{self.rate_mbit}mbit",
                "burst",
                TBF_BURST,
                "latency",
                TBF_LATENCY,
            )

    def _add_namespace(self, name: str) -> None:
        _ip("netns", "add", name)
        self.created.append(name)
        _ip("-n", name, "link", "set", "lo", "up")

    def remove(self) -> None:
        """Delete every namespace made (their veths and the bridge go with them); a veth left in
        the root namespace by a half-done step is deleted too."""
        for k in range(len(self.nodes)):
            with contextlib.suppress(ArchsimError):
                if os.path.exists(f"/sys/class/net/{self.prefix}n{k}"):
                    _ip("link", "del", f"{self.prefix}n{k}")
        for name in reversed(self.created):
            with contextlib.suppress(ArchsimError):
                _ip("netns", "del", name)
        self.created.clear()

    def __exit__(self, *exc: object) -> None:
        self.remove()


@contextlib.contextmanager
def topology(nodes: list[str], delay_ms: float = 0.0, rate_mbit: float = 0.0) -> Iterator[Topology]:
    with Topology(nodes, delay_ms, rate_mbit) as topo:
        yield topo


def enter(namespace: str) -> None:
    """Move the calling process (single-threaded, before it opens sockets) into ``namespace``."""
    libc = ctypes.CDLL(None, use_errno=True)
    fd = os.open(os.path.join(NETNS_DIR, namespace), os.O_RDONLY)
    try:
        if libc.setns(fd, CLONE_NEWNET) != 0:
            err = ctypes.get_errno()
            raise OSError(err, f"setns into {namespace}: {os.strerror(err)}")
    finally:
        os.close(fd)


def leftovers(pid: int | None = None) -> list[str]:
    """Namespaces and root-namespace links of run ``pid`` still present (tests check for none)."""
    name = prefix(pid)
    found = []
    if os.path.isdir(NETNS_DIR):
        found += [n for n in os.listdir(NETNS_DIR) if n.startswith(name + "-")]
    found += [
        n
        for n in os.listdir("/sys/class/net")
        if n[len(name) : len(name) + 1] in ("n", "s")
        and n.startswith(name)
        and n[len(name) + 1 :].isdigit()
    ]
    return found
