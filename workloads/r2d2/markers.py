"""Phase and step markers for the R2D2 workload, with the names agreed in interfaces.md
(``record_function("archsim::<phase>")``, ``record_function("archsim::<role>_step#k=v,...")``).

Why not ``archsim.phase``/``archsim.step`` directly: those skip the annotation when
``torch._C._autograd._profiler_enabled()`` is False, and that check is per thread. The SEED learner
trains on its own thread (profiled with ``profile_all_threads``), where it reads False, so its
markers would vanish. ``record_function`` itself is recorded from every thread.
"""

from __future__ import annotations

from torch.profiler import record_function

from archsim.trace.schema import PHASES, STEP_ROLES

PREFIX = "archsim::"


def phase(name: str) -> record_function:
    if name not in PHASES:
        raise ValueError(f"unknown phase {name!r}")
    return record_function(PREFIX + name)


def step(role: str, **attrs: int) -> record_function:
    if role not in STEP_ROLES:
        raise ValueError(f"unknown step role {role!r}")
    label = f"{PREFIX}{role}_step"
    if attrs:
        label += "#" + ",".join(f"{k}={int(v)}" for k, v in attrs.items())
    return record_function(label)
