"""The Python part of each CPU burst of the learner process: the share of its CPU time that holds the
process's GIL (archsim.sim.gil), derived per phase from the trace.

CPython runs bytecode only while holding the GIL; a torch op releases it for its native work (the
generated Python bindings drop it around the op's dispatch: ``pybind11::gil_scoped_release`` in
torch/csrc/autograd/generated/python_torch_functions.cpp). So a phase's Python time is its time
minus the time in its recorded native ops, and its share, over the steps of the phase's role, is

    share(phases) = 1 - sum(op durations in phases) / sum(phase durations)

Both are wall-clock durations of the same profiled steps (an op's duration is wall time, so it is
set against the phase's wall time, not its CPU time: on a loaded capture machine both hold the same
descheduling); the simulator applies the share to the phase's CPU work. The profiler's cost per op
sits in both; the difference also holds native work outside torch ops (numpy loops, socket
copies), so the share is an upper bound on the time the GIL is held. Phases without recorded ops (replay sampling) count as all
Python. Exceptions by construction:

- ``train_backward``: one Python call, ``loss.backward()``, into the autograd engine, which releases
  the GIL for its whole run (torch/csrc/autograd/python_engine.cpp, ``THPEngine_run_backward``): native.
- kernel launches on a GPU (``cudaLaunchKernel`` inside the op's native dispatch): native.
- the inference server's CPU (archsim.sim.actor_work, archsim.sim.inference_work): the replay
  insert and the time a SEED capture recorded outside the policy's ops are Python; the network
  model's per-message stack cost is a socket call, made without the GIL: ``server_per_obs`` and
  ``server_per_batch`` are those Python parts over the server's CPU per observation and per batch.
- parameter publication (a socket send and a copy of the parameters): native.

``releases`` counts the native ops per step of the phases: each one is a point where the thread drops
the GIL and another thread may take it (archsim.sim.gil slices a burst there).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.sim.step_work import phase_work_us

# Phases whose recorded time is one call into native code that releases the GIL (see above).
NATIVE_PHASES = ("train_backward",)
# Learner phases whose Python grows with the batch: the bundled runtimes' priority update walks the
# sum tree once per item in a Python loop (workloads/r2d2/replay.py, SumTree.update). The other
# phases make the same module calls and op calls at every batch size; only their native ops grow.
GROWING_PYTHON_PHASES = ("priority_update",)
TRAIN_PHASES = (
    "train_forward",
    "train_backward",
    "optimizer_step",
    "priority_update",
    "target_sync",
)
UPDATE_PHASES = ("optimizer_step", "priority_update")  # the locked part of a step
FREE_PHASES = tuple(p for p in TRAIN_PHASES if p not in UPDATE_PHASES)


@dataclass(frozen=True)
class BurstPython:
    """Share of a burst's CPU work that holds the GIL, and the GIL releases per burst."""

    share: float = 0.0  # 0: all native (never takes the GIL); 1: all Python
    releases: float = 0.0  # native ops per burst: where the holder drops the GIL


@dataclass(frozen=True)
class PythonShare:
    """The Python part of every learner-process burst. The default (all native) holds no GIL."""

    replay_sample: BurstPython = BurstPython()
    train: BurstPython = BurstPython()  # a learner step on the CPU (no GPU)
    update: BurstPython = BurstPython()  # its locked part (optimizer step, priority update)
    inference: BurstPython = BurstPython()  # an inference batch's forward pass on the CPU
    # shares of the server's CPU per observation and per batch (request handling, replay insert)
    server_per_obs: float = 0.0
    server_per_batch: float = 0.0
    # Python seconds of one inference batch on the CPU (capture-thread seconds), the same at every
    # batch size (inference_burst); None: ``inference.share`` of the batch's work at every size
    inference_python_s: float | None = None
    # Python seconds per recorded learner step in GROWING_PYTHON_PHASES (whole step, its unlocked
    # part, its locked part; learner_growing_s): they alone grow with the batch
    learner_growing_s: tuple[float, float, float] = (0.0, 0.0, 0.0)
    # Python seconds of a CPU learner step at the run's batch (whole, unlocked, locked part;
    # with_learner_python_s); None: the shares at every batch
    learner_python_s: tuple[float, float, float] | None = None

    def inference_burst(self, work_s: float) -> BurstPython:
        """The Python part of a CPU inference batch whose work is ``work_s``. The interpreter runs
        the same module code and op calls at every batch size (the same ``releases``); only the
        native ops grow with the rows. So the batch's Python seconds are those measured at the
        recorded size, not its share: a share held constant made a 64-observation batch hold the
        GIL 16x as long as the recorded 4 (8.0 ms of 20.5), and more CPU cores, which fill larger
        batches, lowered the learner's updates (local, R2D2, 64 time-shared actors, 6 -> 8 cores:
        12.2 -> 11.4 updates/s). The probe agrees: the forward at 1 observation already costs 2.97
        ms of the 10.3 at 32 (meta inference_probe), a fixed part above the 2.0 ms of Python
        the recorded 4-observation batches hold (median, traces/r2d2-seed-2x2-cpu)."""
        if self.inference_python_s is None or work_s <= 0:
            return self.inference
        share = min(1.0, self.inference_python_s / work_s)
        return BurstPython(share=share, releases=self.inference.releases)

    def learner_bursts(
        self, step_s: float, locked_s: float
    ) -> tuple[BurstPython, BurstPython, BurstPython]:
        """The Python parts of a CPU learner step of ``step_s`` whose locked part is ``locked_s``
        (whole step, unlocked part, locked part): their Python seconds at the run's batch, not a
        share of their work. A share held constant made a step at 16x the recorded batch hold the
        GIL 16x as long, though its forward, optimizer and target sync make the same calls."""
        if self.learner_python_s is None:
            return self.train, self.train, self.update
        whole, free, held = self.learner_python_s
        return (
            _held(self.train, whole, step_s),
            _held(self.train, free, step_s - locked_s),
            _held(self.update, held, locked_s),
        )

    def any(self) -> bool:
        """True when some burst holds the GIL for part of its work."""
        parts = (self.replay_sample, self.train, self.update, self.inference)
        return any(part.share > 0 for part in parts) or (
            self.server_per_obs > 0 or self.server_per_batch > 0
        )

    def server_burst(
        self, per_batch_s: float, per_obs_s: float, n_obs: int, requests: int
    ) -> BurstPython:
        """The Python part of one server burst, ``per_batch_s + per_obs_s * n_obs`` of CPU for a
        batch of ``requests`` requests: each request is read with a socket call, which drops the
        GIL, so the burst releases it once per request."""
        cpu_s = per_batch_s + per_obs_s * n_obs
        if cpu_s <= 0:
            return BurstPython()
        python_s = self.server_per_batch * per_batch_s + self.server_per_obs * per_obs_s * n_obs
        return BurstPython(share=python_s / cpu_s, releases=float(requests))


def burst_python(trace, role: str, phases: tuple[str, ...]) -> BurstPython:
    """The Python share of ``phases`` of ``role``'s steps in ``trace`` (see the module docstring).
    A trace with no such phase gives all Python: its work, if any, is not in native ops."""
    steps = trace.steps
    rows = steps[steps["role"] == role]
    present = [p for p in phases if f"{p}_us" in rows and rows[f"{p}_us"].notna().any()]
    if rows.empty or not present:
        return BurstPython(share=1.0, releases=0.0)
    python_phases = tuple(p for p in present if p not in NATIVE_PHASES)
    has = pd.Series(False, index=rows.index)
    for phase in present:
        has |= rows[f"{phase}_us"].notna()
    rows = rows[has]
    wall_us = sum(float(rows[f"{phase}_us"].fillna(0.0).sum()) for phase in present)
    if wall_us <= 0 or not python_phases:
        return BurstPython(share=0.0 if not python_phases else 1.0, releases=0.0)
    ops = trace.ops
    ops = ops[
        (ops["kind"] == "cpu")
        & ops["phase"].isin(python_phases)
        & ops["step_id"].isin(rows["step_id"])
    ]
    # the native phases' whole time is native
    native_us = float(ops["dur_us"].sum()) + sum(
        float(rows[f"{phase}_us"].fillna(0.0).sum()) for phase in present if phase in NATIVE_PHASES
    )
    total_us = wall_us
    share = float(np.clip(1.0 - native_us / total_us, 0.0, 1.0))
    return BurstPython(share=share, releases=len(ops) / len(rows))


def python_work_us(trace, role: str, phases: tuple[str, ...]) -> float:
    """Recorded Python time of ``phases`` of ``role``'s steps: their CPU time where recorded (a
    wall time holds waits: the bundled R2D2's priority update ran 4.8 ms of wall, mostly waiting
    for the params lock, in 0.4 ms of CPU), else their wall time, minus their CPU ops' (each phase
    at least 0; the native phases none)."""
    steps = trace.steps
    rows = steps[steps["role"] == role]
    ops = trace.ops
    ops = ops[(ops["kind"] == "cpu") & ops["step_id"].isin(rows["step_id"])]
    total = 0.0
    for phase in phases:
        if phase in NATIVE_PHASES or f"{phase}_us" not in rows:
            continue
        work = float(phase_work_us(rows, phase).fillna(0.0).sum())
        total += max(0.0, work - float(ops.loc[ops["phase"] == phase, "dur_us"].sum()))
    return total


def learner_growing_s(trace) -> tuple[float, float, float]:
    """Python seconds per learner step in GROWING_PYTHON_PHASES (whole step, unlocked, locked)."""
    steps = trace.steps
    rows = steps[steps["role"] == "learner"]
    present = [p for p in GROWING_PYTHON_PHASES if f"{p}_us" in rows]
    if rows.empty or not present:
        return (0.0, 0.0, 0.0)
    counted = int(rows[[f"{p}_us" for p in present]].notna().any(axis=1).sum())
    out = []
    for phases in (TRAIN_PHASES, FREE_PHASES, UPDATE_PHASES):
        grows = tuple(p for p in phases if p in present)
        out.append(python_work_us(trace, "learner", grows) * 1e-6 / counted if counted else 0.0)
    return (out[0], out[1], out[2])


def derive_python_share(trace, inference_role: str = "inference") -> PythonShare:
    """Python shares of the learner process's bursts from ``trace`` (before the profiler's cost is
    taken out of its steps, so that op times and phase times are both profiled figures); the
    server's shares come from :func:`with_server`."""
    steps = trace.steps
    has_inference = bool((steps["role"] == inference_role).any()) and (
        "inference_batch_us" in steps and steps["inference_batch_us"].notna().any()
    )
    inference = (
        burst_python(trace, inference_role, ("inference_batch",))
        if has_inference
        else burst_python(trace, "actor", ("act",))
    )
    return PythonShare(
        replay_sample=burst_python(trace, "learner", ("replay_sample",)),
        train=burst_python(trace, "learner", TRAIN_PHASES),
        update=burst_python(trace, "learner", UPDATE_PHASES),
        inference=inference,
        learner_growing_s=learner_growing_s(trace),
    )


def with_learner_python_s(
    python: PythonShare, step_s: float, locked_s: float, scale: float
) -> PythonShare:
    """``python`` with the Python seconds of a CPU learner step at ``scale`` x the trace's batch,
    from its recorded step's work ``step_s`` and locked part ``locked_s``: each part's share of its
    recorded work, of which the growing phases' Python (learner_growing_s, at most the part) times
    ``scale``."""
    parts = (
        python.train.share * step_s,
        python.train.share * (step_s - locked_s),
        python.update.share * locked_s,
    )
    seconds = []
    for part, grows in zip(parts, python.learner_growing_s, strict=True):
        grows = min(grows, part)
        seconds.append(part - grows + grows * scale)
    return dataclasses.replace(python, learner_python_s=(seconds[0], seconds[1], seconds[2]))


def with_server(
    python: PythonShare,
    per_obs_cpu_s: float,
    per_obs_python_s: float,
    per_batch_cpu_s: float = 0.0,
    per_batch_python_s: float = 0.0,
) -> PythonShare:
    """``python`` with the server's shares: its Python seconds over its CPU seconds, per
    observation and per batch (archsim.sim.actor_work, archsim.sim.inference_work)."""
    return dataclasses.replace(
        python,
        server_per_obs=_ratio(per_obs_python_s, per_obs_cpu_s),
        server_per_batch=_ratio(per_batch_python_s, per_batch_cpu_s),
    )


def _held(part: BurstPython, python_s: float, work_s: float) -> BurstPython:
    """``part`` holding the GIL for ``python_s`` of a burst of ``work_s`` (all of a shorter one)."""
    if work_s <= 0:
        return part
    return BurstPython(share=min(1.0, python_s / work_s), releases=part.releases)


def _ratio(part: float, whole: float) -> float:
    return float(np.clip(part / whole, 0.0, 1.0)) if whole > 0 else 0.0
