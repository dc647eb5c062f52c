"""Phase and step markers for the R2D2 workload.

Uses archsim.phase / archsim.step (the capture API) when present; the fallback below implements the
same agreed contract (interfaces.md: ``record_function("archsim::<name>")`` and
``record_function("archsim::<role>_step#k=v,...")``) so the workload also runs from a checkout where
the capture package is not installed.
"""

from __future__ import annotations

try:  # the capture helper's API, when it is present
    from archsim import phase, step  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - depends on the checkout
    from torch.profiler import record_function

    def phase(name: str) -> record_function:
        return record_function(f"archsim::{name}")

    def step(role: str, **attrs: int) -> record_function:
        suffix = ",".join(f"{k}={int(v)}" for k, v in attrs.items())
        return record_function(f"archsim::{role}_step" + (f"#{suffix}" if suffix else ""))


__all__ = ["phase", "step"]
