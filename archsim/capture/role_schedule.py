"""The profiler schedule of ``archsim capture run``: the user's windows, plus one at a missing role.

A fixed schedule (8 recorded steps in every 70 by default) samples a DQN-like loop well: it trains
every few env steps, so any window holds both actor and learner steps. An on-policy loop does not:
PPO or A2C collects a rollout of hundreds or thousands of env steps, then trains a burst of
minibatch updates, and fixed windows can fall in rollouts only (a CartPole PPO with 256-step rollouts
and 8 updates each recorded 64 actor steps and no learner step) or in one burst only; ``simulate``
needs both. So while the windows recorded so far lack one role, a step of that role which starts
while the user's schedule is not recording opens an extra window of ``active`` steps at once, at
most ``repeat`` of them (8 when ``repeat`` is 0). It has no warm-up: a warm-up would use up the
missing role's steps when a burst has few (an A2C trains once per rollout). Its first step costs
more than the rest, as the first step of any window does: a CartPole PPO capture with
OMP_NUM_THREADS=1 on the 2-core development box (2026-11-25, two runs) recorded 2.5 and 2.7 ms of CPU
for the extra window's first learner step against 1.3-2.4 ms for the next seven, and 0.52 and 0.72 ms
for the first acting step of a warmed-up window against about 0.33 ms for the next. The marker says which role the step about to start has
(archsim.capture.auto_markers.AutoMarker.next_role) just before it ticks the profiler.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from archsim.capture.session import CaptureSchedule

# Extra windows when the user's schedule repeats until the end (repeat=0): as many as the default's.
EXTRA_WINDOWS_UNBOUNDED = CaptureSchedule.repeat


class RoleSchedule:
    """A ``torch.profiler`` schedule callable: ``schedule``'s actions, with extra windows opened at a
    step whose role no recorded window has yet. ``next_role()`` is the role of the step about to
    start ("actor", "learner") or None."""

    def __init__(self, schedule: Any, next_role: Callable[[], str | None]) -> None:
        import torch

        self._actions = torch.profiler.ProfilerAction
        self._base = torch.profiler.schedule(
            skip_first=schedule.skip_first,
            wait=schedule.wait,
            warmup=schedule.warmup,
            active=schedule.active,
            repeat=schedule.repeat,
        )
        self._active = schedule.active
        self._base_steps = (  # profiler steps until the user's last window has ended (0: never)
            schedule.skip_first
            + schedule.repeat * (schedule.wait + schedule.warmup + schedule.active)
            if schedule.repeat
            else 0
        )
        self._step = -1  # the profiler step last asked about
        self._next_role = next_role
        self._extra_left = schedule.repeat or EXTRA_WINDOWS_UNBOUNDED
        self._extra_last = -1  # profiler step that ends the open extra window
        self.recorded: set[str] = set()  # roles of the steps recorded so far
        self.extra_windows = 0

    def __call__(self, step: int) -> Any:
        self._step = step
        actions = self._actions
        action = self._base(step)
        role = self._next_role()
        if step <= self._extra_last:  # inside an extra window: record on, whatever the base says
            action = actions.RECORD_AND_SAVE if step == self._extra_last else actions.RECORD
        elif (
            action == actions.NONE
            and role is not None
            and self.recorded  # a window has recorded the other role: this one is missing
            and role not in self.recorded
            and self._extra_left > 0
        ):
            self._extra_left -= 1
            self.extra_windows += 1
            self._extra_last = step + self._active - 1
            action = actions.RECORD_AND_SAVE if self._active == 1 else actions.RECORD
        if role is not None and action in (actions.RECORD, actions.RECORD_AND_SAVE):
            self.recorded.add(role)
        return action

    def finished(self) -> bool:
        """Every window has been recorded and saved, and none can open any more: the user's last
        has ended (``repeat`` > 0), no extra window is open, and none is left to open for a missing
        role. Once the profiler has stepped past a window's last step, it has exported it."""
        missing_role = len(self.recorded) < 2 and self._extra_left > 0
        return (
            0 < self._base_steps <= self._step
            and self._step > self._extra_last
            and not missing_role
        )

    def note_extra_windows(self) -> None:
        """One note line on stderr when extra windows were opened."""
        from archsim.capture.child_capture import note

        if self.extra_windows:
            note(
                "the schedule's windows held only actor or only learner steps; "
                f"{self.extra_windows} extra window(s) of {self._active} steps opened at the first "
                "steps of the missing role (archsim.capture.role_schedule)"
            )
