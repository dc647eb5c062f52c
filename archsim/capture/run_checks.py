"""``capture run``'s one-line refusals of a run whose counts or recorded windows ``simulate``
cannot use (archsim.capture.run_script): training only in worker processes or on another thread,
no optimizer step, no actor step, too few steps for the schedule, windows without both roles."""

from __future__ import annotations

from typing import Any

from archsim.errors import ArchsimError


def check_counts(
    program: Any, counts: Any, schedule: Any, worker_counts: dict[str, int] | None = None
) -> None:
    worker_counts = worker_counts or {}
    worker_env_steps = worker_counts.get("env_steps", 0)
    if worker_counts.get("learner_steps", 0):
        # A3C-style; with the program's process as one more worker too: the merged trace had only
        # its own learner counted and paced, the workers' updates (twice as many with 2) left out
        too, own = (" too", counts.learner_steps) if counts.learner_steps else ("", "none")
        raise ArchsimError(
            f"capture run: {program.name} trained in its worker processes{too} "
            f"({worker_counts['learner_steps']} training passes there, {own} in its own "
            "process), and capture run records a learner in the program's own process only "
            "(A3C-style workers are not supported)"
        )
    if counts.learner_steps == 0 and counts.other_thread_optimizer_steps:
        raise ArchsimError(
            f"capture run: {program.name} made {counts.other_thread_optimizer_steps} optimizer "
            "steps, all on another thread than the one that runs the program, and capture run "
            "marks that thread only: train in it (actors may run in worker processes)"
        )
    if counts.learner_steps == 0:
        raise ArchsimError(
            f"capture run: {program.name} made no optimizer step (torch.optim.Optimizer.step), so it "
            "has no learner step to record; run it long enough to train"
        )
    if counts.env_steps == 0 and counts.actor_steps == 0 and counts.other_env_threads:
        raise ArchsimError(
            f"capture run: {program.name} stepped its environments on {counts.other_env_threads} "
            "other thread(s) only (actor threads), and capture run marks the thread that runs the "
            "program only: step them in it, or in worker processes (multiprocessing), which are "
            "captured per process"
        )
    if counts.env_steps == 0 and counts.actor_steps == 0 and not worker_env_steps:
        raise ArchsimError(
            f"capture run: {program.name} stepped no gymnasium environment and ran no acting forward "
            "pass, so it has no actor step; mark its env step with --phase-fn MODULE:QUALNAME=env_step"
        )
    first = schedule.first_recorded_step()
    if counts.ticks <= first:  # its first recorded step (the profiler's first + 1) never began
        raise ArchsimError(
            f"capture run: {program.name} ran {counts.ticks} steps after its first learner step but "
            f"the schedule records from step {first + 1} on; run it longer or lower --wait/--warmup"
        )


def actor_steps_run(trace: Any, counts: Any) -> int:
    """Actor steps of the whole run: the program's process's and its env-stepping workers'."""
    settings = (trace.meta.get("workload") or {}).get("settings") or {}
    return counts.actor_steps + int((settings.get("worker_counts") or {}).get("actor_steps", 0))


def check_recorded(trace: Any, counts: Any, schedule: Any) -> None:
    """One-line error unless the recorded windows hold actor and learner steps."""
    roles = trace.steps["role"].astype(str).value_counts() if len(trace.steps) else {}
    actor, learner = int(roles.get("actor", 0)), int(roles.get("learner", 0))
    if actor == 0 or learner == 0:
        raise ArchsimError(
            f"capture run: the recorded windows hold {actor} actor and {learner} learner steps "
            f"(of {actor_steps_run(trace, counts)} and {counts.learner_steps} run); simulate needs both: "
            "record more steps per window (--active) or run the program longer"
        )
