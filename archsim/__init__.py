"""archsim: trace-driven architecture simulator for deep RL training on CPU-GPU systems."""

from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.1.0"

# Capture API, loaded on first use so that `import archsim` and the CLI never import torch.
# archsim.capture is the (callable) capture sub-package; phase/step are the marker context managers.
_LAZY = {"capture": None, "phase": "archsim.capture.markers", "step": "archsim.capture.markers"}


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'archsim' has no attribute {name!r}")
    if name == "capture":
        return importlib.import_module("archsim.capture")
    return getattr(importlib.import_module(_LAZY[name]), name)
