"""Registry of the bundled workloads that ``archsim capture NAME`` can run.

Each entry names a module that defines ``SUMMARY``, ``add_arguments(parser)`` and ``run_capture(args)
-> int``. The module must not import torch at import time (the CLI builds its parser from it); a new
workload (AlexNet, R2D2) is one line here plus its own module.
"""

from __future__ import annotations

import argparse
import importlib
from types import ModuleType

from archsim.errors import ArchsimError

WORKLOADS: dict[str, str] = {
    "dqn": "workloads.dqn.cli",
    "r2d2": "workloads.r2d2.cli",
    "apex": "workloads.apex.cli",
    "alexnet": "workloads.alexnet.cli",
    "run": "archsim.capture.run_script",  # any program: archsim capture run -- SCRIPT.py ARGS
}


def known_names() -> list[str]:
    return sorted(WORKLOADS)


def workload_module(name: str) -> ModuleType:
    """The module of workload ``name``; an unknown name is a one-line ArchsimError listing the known."""
    if name not in WORKLOADS:
        raise ArchsimError(
            f"unknown workload {name!r} (known workloads: {', '.join(known_names())})"
        )
    return importlib.import_module(WORKLOADS[name])


def add_schedule_arguments(parser: argparse.ArgumentParser) -> None:
    """Profiler-schedule options shared by every workload (defaults: the workload's own schedule)."""
    group = parser.add_argument_group("profiler schedule (in agent steps)")
    for name, text in (
        ("skip-first", "steps before the first cycle (default: the workload skips its warm-up)"),
        ("wait", "idle steps at the start of each cycle"),
        ("warmup", "profiled but discarded steps before each window"),
        ("active", "recorded steps per window"),
        ("repeat", "number of windows (0 = until the run ends)"),
    ):
        group.add_argument(f"--{name}", type=int, default=None, metavar="N", help=text)


def schedule_from_args(args: argparse.Namespace, default: object) -> object:
    """``default`` (a CaptureSchedule) with any schedule option given on the command line replaced."""
    import dataclasses

    changes = {
        field: getattr(args, field)
        for field in ("skip_first", "wait", "warmup", "active", "repeat")
        if getattr(args, field, None) is not None
    }
    return dataclasses.replace(default, **changes)
