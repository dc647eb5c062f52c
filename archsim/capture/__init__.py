"""Capture API: profile a PyTorch RL loop into an archsim trace.

    with archsim.capture("out/my-run", {"name": "my-dqn", "settings": {...}}) as cap:
        for t in range(steps):
            with archsim.step("actor", actor=0):
                with archsim.phase("env_step"): ...
                with archsim.phase("act"): ...
            cap.step()

This package is itself callable (``archsim.capture(...)`` is :func:`archsim.capture.session.capture`):
``archsim.capture`` is both the sub-package and the function the brief names, and Python binds the
sub-package to that attribute as soon as any of its modules is imported. torch is imported lazily, so
``import archsim`` and the CLI stay fast.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

_EXPORTS = {
    "capture": "archsim.capture.session",
    "CaptureSchedule": "archsim.capture.session",
    "CaptureHandle": "archsim.capture.session",
    "DEFAULT_SCHEDULE": "archsim.capture.session",
    "phase": "archsim.capture.markers",
    "step": "archsim.capture.markers",
}

__all__ = list(_EXPORTS)


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module 'archsim.capture' has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from archsim.capture.session import capture

        return capture(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
