"""Refuse a captured program's own torch.profiler (``archsim capture run``).

Kineto runs one profiler per process. A program that starts its own (``with torch.profiler.profile(...)``
around its loop, a ``prof.start()``, the legacy ``torch.autograd.profiler.profile``) while archsim's
is running takes it over: on a CartPole DQN whose loop sat in a scheduled ``torch.profiler.profile``,
archsim's 8-step window came back with 3 actor and 2 learner steps, 110 ops and no FLOPs (its shapes
were lost), with only a C++ warning on stderr. So the start of any other profiler in the process ends
the capture with one line naming where the program started it; ``record_function`` ranges (labels
inside a profile) are left alone, and a legacy profile made with ``enabled=False`` starts nothing.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

from archsim.errors import ArchsimError


def _program_line() -> str:
    """``file:line`` of the innermost caller outside torch and archsim (the program's own call)."""
    import torch

    skip = tuple(
        os.path.join(os.path.dirname(os.path.realpath(m.__file__ or "")), "")
        for m in (torch, sys.modules["archsim"])
    )
    frame = sys._getframe(2)
    while frame is not None:
        name = frame.f_code.co_filename
        if not os.path.realpath(name).startswith(skip) and not name.startswith("<"):
            return f"{os.path.basename(name)}:{frame.f_lineno}"
        frame = frame.f_back
    return "an unknown line"


def _refused(what: str) -> ArchsimError:
    return ArchsimError(
        f"capture run: the program starts its own {what} ({_program_line()}), but torch runs one "
        "profiler per process and archsim's is recording: run the program without its profiler "
        "(record_function labels may stay)"
    )


def patch_own_profilers(patches: Any) -> None:
    """Make ``torch.profiler.profile.start`` (its ``__enter__`` calls it) and the legacy
    ``torch.autograd.profiler.profile.__enter__`` refuse in one line; archsim's own profiler has
    started before these patches and steps through its schedule, never through them."""
    import torch.autograd.profiler as legacy
    import torch.profiler.profiler as kineto

    def kineto_start(original: Callable[..., Any]) -> Callable[..., Any]:
        def start(self: Any) -> None:
            raise _refused("torch.profiler.profile")

        start.__wrapped__ = original  # type: ignore[attr-defined]
        return start

    def legacy_enter(original: Callable[..., Any]) -> Callable[..., Any]:
        def enter(self: Any) -> Any:
            if not getattr(self, "enabled", True):
                return original(self)  # a disabled profile starts nothing
            raise _refused("torch.autograd.profiler.profile")

        enter.__wrapped__ = original  # type: ignore[attr-defined]
        return enter

    for cls in (kineto._KinetoProfile, kineto.profile):
        patches.set(cls, "start", kineto_start(cls.start))
    patches.set(legacy.profile, "__enter__", legacy_enter(legacy.profile.__enter__))
