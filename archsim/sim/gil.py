"""The GIL of one simulated Python process: its threads take turns for the Python part of their CPU
bursts (docs/SIMULATOR.md "CPU: SMT, placement, GIL").

The learner process holds the training loop and the inference server threads (SEED RL, the bundled
R2D2 runtime); they share one GIL. Every actor is a process of its own with one thread, so its GIL
never has a second taker and is not simulated.

A burst of ``work_s`` whose Python share is ``share`` (archsim.sim.python_share) runs as ``k``
slices; each takes the GIL, runs ``share * work_s / k`` of Python on the thread's CPU, drops the GIL
and runs its ``(1 - share) * work_s / k`` of native work without it, so the thread's native work
overlaps other threads' Python. ``k`` is the burst's native ops plus one (a torch op drops the GIL),
at least enough that no slice holds the GIL longer than CPython's switch interval (a thread that
holds it that long while another waits is made to drop it), and at most MAX_SLICES.

A thread that finds the GIL held waits; when it gets it from another thread it pays the hand-off,
the wake-up of a thread blocked on the GIL's condition variable, before it runs (the GIL is
held, unused, meanwhile). Taking a free GIL costs nothing here. A software thread runs one burst at
a time: bursts handed to the same thread (inference batches queued for one server thread) take
their turns first, so only the burst that thread is running asks for the GIL.
"""

from __future__ import annotations

import math

import simpy

from archsim.sim.python_share import BurstPython

# CPython's default switch interval: sys.getswitchinterval() = 0.005 s (Python docs, "sys" module;
# the interval after which a thread waiting for the GIL asks the holder to drop it).
SWITCH_INTERVAL_S = 5e-3
# One GIL hand-off between two threads of one process: 10 us, the fastest round of
# benchmarks/gil_handoff.py (Python 3.11.7, two threads passing control through threading.Event,
# 7 rounds of 20,000 hand-offs) in each of 5 runs on the 2-core development VM: 9.6-10.4 us. The
# medians (10.5-31.1 us) hold the run queue of that VM, loaded by other work (load average ~7);
# the simulator models a machine whose run queue it simulates itself. A hand-off is a thread
# wake-up through the GIL's condition variable.
HANDOFF_S = 10e-6
# Numerical resolution, not a model figure: beyond this many slices a burst's waits change by less
# than 1/MAX_SLICES of its Python time, and the event count per burst stays bounded.
MAX_SLICES = 64


def slices(python_s: float, releases: float) -> int:
    """Slices of a burst with ``python_s`` of Python and ``releases`` native ops (module docstring)."""
    by_ops = int(round(releases)) + 1
    by_interval = math.ceil(python_s / SWITCH_INTERVAL_S) if python_s > 0 else 1
    return max(1, min(MAX_SLICES, max(by_ops, by_interval)))


class Gil:
    """One process's GIL: a capacity-1 lock over slices of its threads' bursts."""

    def __init__(self, env: simpy.Environment, threads, handoff_s: float = HANDOFF_S) -> None:
        self.env = env
        self.threads = threads  # the CPU executor: execute(thread, work_s, label)
        self.lock = simpy.Resource(env, capacity=1)
        self.handoff_s = handoff_s
        self.holder: int | None = None  # the thread that held the GIL last
        self.turns: dict[int, simpy.Resource] = {}  # per software thread: one burst at a time
        self.handoffs = 0
        self.wait_s = 0.0  # time threads spent waiting for the GIL (hand-offs included)

    def run(self, thread: int, work_s: float, python: BurstPython, label: str = ""):
        """Run a burst of ``work_s`` on ``thread`` (a simpy generator), its Python part under the GIL."""
        turns = self.turns.get(thread)
        if turns is None:
            turns = self.turns[thread] = simpy.Resource(self.env, capacity=1)
        with turns.request() as running:
            yield running
            yield from self._slices(thread, work_s, python, label)

    def _slices(self, thread: int, work_s: float, python: BurstPython, label: str):
        python_s = work_s * python.share
        if python_s <= 0:
            yield from self.threads.execute(thread, work_s, label)
            return
        k = slices(python_s, python.releases)
        python_slice = python_s / k
        native_slice = (work_s - python_s) / k
        env = self.env
        for _ in range(k):
            asked = env.now
            with self.lock.request() as turn:
                free = turn.triggered  # granted on the spot: nobody held it
                yield turn
                if not free and self.holder != thread:
                    # another thread held it: its hand-off wakes this one
                    self.handoffs += 1
                    yield env.timeout(self.handoff_s)
                self.wait_s += env.now - asked
                self.holder = thread
                yield from self.threads.execute(thread, python_slice, label)
            if native_slice > 0:
                yield from self.threads.execute(thread, native_slice, label)


def run_burst(system, thread: int, work_s: float, python: BurstPython, label: str = ""):
    """``system.threads.execute`` for a learner-process thread: under the process's GIL if it has one."""
    gil = system.gil
    if gil is None:
        return system.threads.execute(thread, work_s, label)
    return gil.run(thread, work_s, python, label)
