"""Time one hand-off of control between two threads of one CPython process (the GIL hand-off cost
that archsim.sim.gil charges): two threads take turns through a pair of ``threading.Event`` s, so each
turn wakes the other thread from a blocked wait and passes it the GIL. Prints the median per hand-off
over several rounds. Run: ``python benchmarks/gil_handoff.py``. On a loaded machine the figure holds
the run-queue wait too (an upper bound on the hand-off itself)."""

from __future__ import annotations

import statistics
import sys
import threading
import time

TURNS = 20_000
ROUNDS = 7


def one_round(turns: int) -> float:
    """Seconds per hand-off over ``turns`` hand-offs."""
    ping, pong = threading.Event(), threading.Event()

    def other() -> None:
        for _ in range(turns // 2):
            ping.wait()
            ping.clear()
            pong.set()

    thread = threading.Thread(target=other)
    thread.start()
    start = time.perf_counter()
    for _ in range(turns // 2):
        ping.set()
        pong.wait()
        pong.clear()
    elapsed = time.perf_counter() - start
    thread.join()
    return elapsed / turns


def main() -> None:
    per_handoff = [one_round(TURNS) for _ in range(ROUNDS)]
    print(
        f"python {sys.version.split()[0]}: median {statistics.median(per_handoff) * 1e6:.1f} us "
        f"per hand-off (min {min(per_handoff) * 1e6:.1f}, max {max(per_handoff) * 1e6:.1f}; "
        f"{ROUNDS} rounds of {TURNS})"
    )


if __name__ == "__main__":
    main()
