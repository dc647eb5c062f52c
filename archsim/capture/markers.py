"""Phase and step markers that any PyTorch RL loop can place; ingest turns them into steps and phases.

``phase("act")`` and ``step("actor", actor=0)`` wrap ``torch.profiler.record_function`` with the names
agreed in the interfaces brief (``archsim::<phase>``, ``archsim::<role>_step#k=v,...``). When no
profiler is recording they return a shared no-op context, so they can stay in production loops.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable

import torch
from torch.autograd.profiler import record_function

from archsim.errors import ArchsimError
from archsim.trace.schema import PHASES, STEP_ROLES

PREFIX = "archsim::"
_NOOP = contextlib.nullcontext()
_profiler_enabled = torch._C._autograd._profiler_enabled


def _check(name: str, allowed: Iterable[str], what: str) -> None:
    if name not in allowed:
        raise ArchsimError(f"unknown {what} {name!r} (expected one of: {', '.join(allowed)})")


def phase(name: str) -> contextlib.AbstractContextManager:
    """Mark a phase of an actor/learner step (one of archsim.trace.schema.PHASES)."""
    _check(name, PHASES, "phase")
    if not _profiler_enabled():
        return _NOOP
    return record_function(PREFIX + name)


def step_label(role: str, **attrs: int) -> str:
    """``archsim::<role>_step#k=v,...`` with integer attributes (actor index, batch size)."""
    _check(role, STEP_ROLES, "step role")
    for key, value in attrs.items():
        if isinstance(value, bool) or not isinstance(value, int):
            raise ArchsimError(f"step attribute {key}={value!r}: expected an integer")
    label = f"{PREFIX}{role}_step"
    if attrs:
        label += "#" + ",".join(f"{k}={v}" for k, v in attrs.items())
    return label


def step(role: str, **attrs: int) -> contextlib.AbstractContextManager:
    """Mark one actor, learner or inference step; phases inside it become its columns in steps."""
    label = step_label(role, **attrs)
    if not _profiler_enabled():
        return _NOOP
    return record_function(label)
