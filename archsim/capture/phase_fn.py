"""``--phase-fn MODULE:QUALNAME=PHASE`` of ``archsim capture run`` (torch-free, for the CLI parser)."""

from __future__ import annotations

import dataclasses
import importlib
import sys
from typing import Any

from archsim.errors import ArchsimError
from archsim.trace.schema import PHASES


@dataclasses.dataclass(frozen=True)
class PhaseFn:
    """``--phase-fn MODULE:QUALNAME=PHASE``: calls of that function are the phase ``PHASE``."""

    module: str
    qualname: str
    phase: str

    @classmethod
    def parse(cls, text: str) -> PhaseFn:
        target, eq, phase = text.partition("=")
        module, colon, qualname = target.partition(":")
        names = qualname.split(".")
        if not (eq and colon and module and all(n.isidentifier() for n in names)):
            raise ArchsimError(
                f"--phase-fn {text!r}: expected MODULE:QUALNAME=PHASE, e.g. "
                "__main__:ReplayBuffer.sample=replay_sample"
            )
        if phase not in PHASES:
            raise ArchsimError(
                f"--phase-fn {text!r}: unknown phase {phase!r} (expected one of: {', '.join(PHASES)})"
            )
        return cls(module, qualname, phase)

    def __str__(self) -> str:
        return f"{self.module}:{self.qualname}={self.phase}"

    def resolve(self) -> tuple[Any, str]:
        """(object that holds the function, its attribute name): imports MODULE unless loaded."""
        module = sys.modules.get(self.module)
        if module is None:
            try:
                module = importlib.import_module(self.module)
            except ImportError as exc:
                raise ArchsimError(
                    f"--phase-fn {self}: cannot import {self.module!r} ({exc})"
                ) from None
        owner: Any = module
        *parents, name = self.qualname.split(".")
        for part in parents:
            owner = getattr(owner, part, None)
            if owner is None:
                break
        if owner is None or not hasattr(owner, name):
            raise ArchsimError(f"--phase-fn {self}: {self.module!r} has no {self.qualname!r}")
        return owner, name
