"""What ``capture run``'s markers cost the program itself, measured on its own steps: bare stretches.

The synthetic calibration (archsim.capture.marker_cost) times the marker code around bodies that do
nothing. Around a real loop the same code costs more: the program's own work runs slower between
markers (caches and branch predictors shared with archsim's Python, the profiler's tick between
steps). On a class-based CartPole DQN the markers cost the loop 62-113 us per env step in
alternating in-process runs where the calibration accounts for 35-44; driving the calibration's
very marker paths around a real CartPole actor step measured 124 us per actor + learner iteration
where around no-op bodies it measured 68 (2026-11-25, this VM).

So once every profiler window is recorded (nothing is profiled any more), ``capture run`` alternates
the program's loop between marked stretches of STRETCH_ENV_STEPS env steps and bare ones of as many,
where every patched call goes straight to the original (AutoMarker's depth is held at BARE_DEPTH:
each wrapper takes the call for a nested one) and only the outermost env steps are counted. Each
stretch's process CPU per env step (the marked ones' less the capture's ticks) is kept; the median
of the paired differences is the markers' cost per env step in this program, as it ran.
archsim.capture.run_script scales the calibration's per-role figures to it (``in_program_cost``).

A bare stretch holds no steps; its env steps count as the marked ones do (an actor step and its
env's transitions each; ALE frames), its updates from its optimizer steps (``close``). A program
that steps its env or its update through ``--phase-fn`` functions never runs bare (those calls
would go uncounted). A bare stretch still runs the wrappers' pass-through checks (an attribute test
a call, the optimizer hooks): that small cost is counted as the program's, so the figure errs low.
"""

from __future__ import annotations

import statistics
import threading
from collections.abc import Callable
from typing import Any

from archsim.capture import cpu_clock, markers

# AutoMarker._depth while a stretch runs bare: far above any real nesting of marked calls.
BARE_DEPTH = 1 << 30
# Env steps a stretch: 64 CartPole DQN env steps are ~20 ms of CPU, far above the clock's
# resolution, and short enough that a few thousand steps after the last window give tens of pairs.
STRETCH_ENV_STEPS = 64
# Pairs needed before the in-program figure replaces the synthetic one (a design choice: the
# median of fewer is one stretch's noise).
MIN_PAIRS = 3


class BareStretches:
    """Alternates marked and bare stretches of an AutoMarker's loop once ``when()`` says so."""

    def __init__(self, when: Callable[[], bool], env_steps: int = STRETCH_ENV_STEPS) -> None:
        self._when = when
        self.stretch_env_steps = env_steps
        self._phase: str | None = None  # None (not started), "marked" or "bare"
        self._count = 0  # env steps of the current stretch
        self._start_ns = 0
        self._tick_ns = 0  # the marker's tick CPU when the marked stretch began
        self._steps = (0, 0)  # the marker's (actor, learner) steps when the marked stretch began
        self._optimizer_steps = 0  # the program's optimizer steps in the bare stretch
        self._hook: Any = None  # the global optimizer hook counting them
        self._thread = 0  # the marked thread
        self.marked_us: list[float] = []  # CPU us per env step of each whole marked stretch
        self.bare_us: list[float] = []  # ... of each whole bare stretch
        self.marked_steps: list[tuple[int, int]] = []  # (actor, learner) steps of each marked one
        self.bare_env_steps = 0

    @property
    def bare(self) -> bool:
        return self._phase == "bare"

    def after_env_step(self, marker: Any) -> None:
        """An outermost marked env step of ``marker`` (an AutoMarker) has ended."""
        if self._phase is None:
            if self._when() and _countable(marker):
                self._start_marked(marker)
            return
        self._count += 1
        if self._count < self.stretch_env_steps:
            return
        spent_ns = cpu_clock.now_ns() - self._start_ns - (marker.tick_cpu_ns - self._tick_ns)
        self.marked_us.append(spent_ns / self.stretch_env_steps / 1000.0)
        counts = marker.counts
        marker.finish()  # the open steps end here (and count); none spans the bare stretch
        self.marked_steps.append(
            (counts.actor_steps - self._steps[0], counts.learner_steps - self._steps[1])
        )
        markers.break_gaps()  # no gap spans the bare stretch
        from torch.optim import optimizer as torch_optimizer

        self._optimizer_steps = 0
        self._hook = torch_optimizer.register_optimizer_step_post_hook(self._optimizer_step)
        marker._depth += BARE_DEPTH
        self._thread = marker._thread
        self._phase, self._count = "bare", 0
        self._start_ns = cpu_clock.now_ns()

    def _optimizer_step(self, optimizer: Any, args: Any, kwargs: Any) -> None:
        if threading.get_ident() == self._thread:
            self._optimizer_steps += 1

    def bare_env_step(
        self, marker: Any, original: Callable[..., Any], args: Any, kwargs: Any
    ) -> Any:
        """An env step while the stretch runs bare: the original call, counted if outermost."""
        if marker._depth != BARE_DEPTH:  # a wrapper's inner env
            return original(*args, **kwargs)
        marker._depth += 1
        try:
            result = original(*args, **kwargs)
        finally:
            marker._depth -= 1
        # counted as the marked loop counts it: one actor step, its env's transitions
        marker._note_env(args[0])
        counts, batch = marker.counts, marker.env_batch or 1
        counts.env_steps += 1
        counts.actor_steps += 1
        counts.transitions += batch
        counts.transitions_training += batch
        self._count += 1
        if self._count >= self.stretch_env_steps:
            self.bare_us.append(
                (cpu_clock.now_ns() - self._start_ns) / self.stretch_env_steps / 1000.0
            )
            self.bare_env_steps += self.stretch_env_steps
            self.close(marker)
            self._start_marked(marker)
        return result

    def close(self, marker: Any) -> None:
        """End a bare stretch (whole, or cut by the program's end): the marker marks again, and
        the stretch's updates count, from its optimizer steps at the marked run's learner steps
        and samples per optimizer step (1 and the batch for a DQN; SAC's three optimizers step
        once each an update)."""
        if self._phase != "bare":
            return
        marker._depth -= BARE_DEPTH
        self._hook.remove()
        self._phase = None
        counts = marker.counts
        if counts.optimizer_steps and counts.learner_steps:
            updates = round(self._optimizer_steps * counts.learner_steps / counts.optimizer_steps)
            samples = round(updates * counts.samples / counts.learner_steps)
            counts.learner_steps += updates
            counts.samples += samples
            counts.samples_training += samples  # after the last window: the steady state
        counts.optimizer_steps += self._optimizer_steps

    def _start_marked(self, marker: Any) -> None:
        self._phase, self._count = "marked", 0
        self._tick_ns = marker.tick_cpu_ns
        self._steps = (marker.counts.actor_steps, marker.counts.learner_steps)
        self._start_ns = cpu_clock.now_ns()


def _countable(marker: Any) -> bool:
    """Whether a bare stretch's steps can be counted: env steps and updates by library calls, not
    by functions named with ``--phase-fn`` (their calls run unmarked, so uncounted, when bare)."""
    return not any(
        spec.phase in ("env_step", "optimizer_step") for spec in marker._phase_fns
    ) and bool(marker.counts.optimizer_steps)


def in_program_cost(
    stretches: BareStretches, calibrated: dict[str, dict[str, float]]
) -> dict[str, Any] | None:
    """The markers' cost per env step measured on the program's stretches, and the calibration's
    per-role figures scaled to it: ``{"us_per_env_step", "pairs", "spread_us", "scale",
    "marker_cpu_us"}``; None with fewer than MIN_PAIRS pairs or no calibration to scale."""
    pairs = min(len(stretches.marked_us), len(stretches.bare_us))
    if pairs < MIN_PAIRS or not calibrated:
        return None
    diffs = [
        m - b for m, b in zip(stretches.marked_us[:pairs], stretches.bare_us[:pairs], strict=True)
    ]
    measured = max(0.0, statistics.median(diffs))
    env_steps = pairs * stretches.stretch_env_steps
    steps = {
        "actor": sum(a for a, _ in stretches.marked_steps[:pairs]),
        "learner": sum(n for _, n in stretches.marked_steps[:pairs]),
    }
    # the calibration's figures per env step over the very marked stretches measured, inside the
    # steps and between them
    inside, between = (
        sum(calibrated.get(role, {}).get(key, 0.0) * steps[role] / env_steps for role in steps)
        for key in ("step_us", "gap_us")
    )
    if not inside > 0:
        return None
    # The gap between two steps holds no program work, only the markers' bookkeeping, which the
    # calibration times as such: kept. What the program's own work lost to the markers is inside
    # its steps: the step figures take the rest of the measured cost.
    scale = max(0.0, measured - between) / inside
    return {
        "us_per_env_step": round(measured, 3),
        "synthetic_us_per_env_step": round(inside + between, 3),
        "marked_us_per_env_step": round(statistics.median(stretches.marked_us[:pairs]), 3),
        "bare_us_per_env_step": round(statistics.median(stretches.bare_us[:pairs]), 3),
        "pairs": pairs,
        "spread_us": [round(min(diffs), 3), round(max(diffs), 3)],
        "bare_env_steps": stretches.bare_env_steps,
        "step_scale": round(scale, 4),
        "marker_cpu_us": {
            role: {
                key: round(value * scale, 3) if key == "step_us" else value
                for key, value in figures.items()
            }
            for role, figures in calibrated.items()
        },
    }


def store_in_program_cost(capture_meta: dict[str, Any], stretches: BareStretches) -> None:
    """Put the in-program figure into ``meta.capture``: ``marker_cpu_us`` becomes the calibration
    scaled to it (what archsim.sim.marker_cost takes out), the calibration itself is kept as
    ``marker_cpu_us_synthetic`` and the measurement as ``marker_cost_in_program``. Unchanged
    without enough pairs (a run that ends at its last window, ``--stop-when-recorded``)."""
    cost = in_program_cost(stretches, capture_meta.get("marker_cpu_us") or {})
    if cost is None:
        return
    capture_meta["marker_cpu_us_synthetic"] = capture_meta["marker_cpu_us"]
    capture_meta["marker_cpu_us"] = cost.pop("marker_cpu_us")
    capture_meta["marker_cost_in_program"] = cost
