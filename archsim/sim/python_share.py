"""The Python part of each CPU burst of the learner process: the share of its CPU time that holds the
process's GIL (archsim.sim.gil), derived per phase from the trace.

CPython runs bytecode only while holding the GIL; a torch op releases it for its native work (the
generated Python bindings drop it around the op's dispatch: ``pybind11::gil_scoped_release`` in
torch/csrc/autograd/generated/python_torch_functions.cpp). So a phase's Python time is its CPU time
(wall time where the trace has no CPU time; archsim.sim.step_work) minus the time in its recorded
native ops, and its share is that over the phase's work, over the steps of the phase's role:

    share(phases) = 1 - sum(op durations in phases) / sum(phase work)

Both figures come from the same profiled steps, so the profiler's cost per op sits in both; the
difference also holds native work outside torch ops (numpy loops, socket copies), so the share is an
upper bound on the time the GIL is held. Phases without recorded ops (replay sampling, request
handling, parameter publication) count as all Python. Exceptions by construction:

- ``train_backward``: one Python call, ``loss.backward()``, into the autograd engine, which releases
  the GIL for its whole run (torch/csrc/autograd/python_engine.cpp, ``THPEngine_run_backward``): native.
- kernel launches on a GPU (``cudaLaunchKernel`` inside the op's native dispatch): native.

``releases`` counts the native ops per step of the phases: each one is a point where the thread drops
the GIL and another thread may take it (archsim.sim.gil slices a burst there).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from archsim.sim.step_work import phases_work_us

# Phases whose recorded time is one call into native code that releases the GIL (see above).
NATIVE_PHASES = ("train_backward",)


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
    server: BurstPython = BurstPython()  # request handling and replay insert
    publish: BurstPython = BurstPython()  # parameter publication

    def any(self) -> bool:
        """True when some burst holds the GIL for part of its work."""
        return any(
            part.share > 0
            for part in (
                self.replay_sample,
                self.train,
                self.update,
                self.inference,
                self.server,
                self.publish,
            )
        )


def burst_python(trace, role: str, phases: tuple[str, ...]) -> BurstPython:
    """The Python share of ``phases`` of ``role``'s steps in ``trace`` (see the module docstring).
    A trace with no such phase gives all Python: its work, if any, is not in native ops."""
    steps = trace.steps
    rows = steps[steps["role"] == role]
    present = [p for p in phases if f"{p}_us" in rows and rows[f"{p}_us"].notna().any()]
    if rows.empty or not present:
        return BurstPython(share=1.0, releases=0.0)
    python_phases = tuple(p for p in present if p not in NATIVE_PHASES)
    work_us = phases_work_us(rows, present)
    has = pd.Series(False, index=rows.index)
    for phase in present:
        has |= rows[f"{phase}_us"].notna()
    rows, work_us = rows[has], work_us[has]
    total_us = float(work_us.sum())
    if total_us <= 0 or not python_phases:
        return BurstPython(share=0.0 if not python_phases else 1.0, releases=0.0)
    ops = trace.ops
    ops = ops[
        (ops["kind"] == "cpu")
        & ops["phase"].isin(python_phases)
        & ops["step_id"].isin(rows["step_id"])
    ]
    native_us = float(ops["dur_us"].sum())
    # the native phases' whole work is native
    native_us += float(phases_work_us(rows, [p for p in present if p in NATIVE_PHASES]).sum())
    share = float(np.clip(1.0 - native_us / total_us, 0.0, 1.0))
    return BurstPython(share=share, releases=len(ops) / len(rows))


def derive_python_share(trace, inference_role: str = "inference") -> PythonShare:
    """Python shares of the learner process's bursts from ``trace`` (before the profiler's cost is
    taken out of its steps, so that op times and phase times are both profiled figures)."""
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
        train=burst_python(
            trace,
            "learner",
            ("train_forward", "train_backward", "optimizer_step", "priority_update", "target_sync"),
        ),
        update=burst_python(trace, "learner", ("optimizer_step", "priority_update")),
        inference=inference,
        # request reads, replay inserts and the recorded server time outside the policy's ops: no
        # native op is recorded there, so all of it counts as Python
        server=BurstPython(share=1.0, releases=0.0),
        publish=burst_python(trace, "learner", ("param_publish",)),
    )
