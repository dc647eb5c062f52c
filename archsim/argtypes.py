"""argparse ``type=`` converters shared by every command and workload CLI.

argparse turns an ``ArgumentTypeError`` into a one-line usage error with exit code 2, which is the
house rule for bad input.
"""

from __future__ import annotations

import argparse


def positive_int(text: str) -> int:
    """An integer >= 1 (counts: steps, actors, batch sizes)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text}")
    return value


def non_negative_int(text: str) -> int:
    """An integer >= 0 (offsets, optional counts)."""
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text}")
    return value


def positive_float(text: str) -> float:
    """A number > 0 (durations, ratios)."""
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"expected a number > 0, got {text}")
    return value


def hw_name(text: str) -> str:
    """A hardware preset name or YAML path: an empty one (``--source-hw ""``) was read as not
    given, so the default was used without a word."""
    if not text.strip():
        raise argparse.ArgumentTypeError(
            f"{text!r} is empty (expected a hardware preset name or a path to a .yaml file)"
        )
    return text
