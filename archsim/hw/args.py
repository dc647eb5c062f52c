"""``--hw NAME`` and repeatable ``--set key=value`` for every command that takes a hardware config."""

from __future__ import annotations

import argparse

from archsim.hw.presets import load_hw
from archsim.hw.schema import HardwareConfig


def add_hw_arguments(
    parser: argparse.ArgumentParser, default: str | None = "dgx1-v100", required: bool | None = None
) -> None:
    """``required`` defaults to "no default given"; pass False for an optional --hw without default."""
    parser.add_argument(
        "--hw",
        default=default,
        required=(default is None) if required is None else required,
        metavar="NAME",
        help="hardware preset (archsim hw list), a YAML file, or 'local'"
        + (f" (default {default})" if default else ""),
    )
    add_set_argument(parser)


def add_set_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--set",
        dest="hw_set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="override a hardware field, e.g. --set gpu.sms=40 (repeatable)",
    )


def hw_from_args(args: argparse.Namespace) -> HardwareConfig:
    return load_hw(args.hw, getattr(args, "hw_set", ()) or ())
