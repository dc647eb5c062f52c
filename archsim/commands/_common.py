"""Argument helpers shared by several sub-commands."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_out_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--out", type=Path, required=required, help="output directory")
    parser.add_argument(
        "--force", action="store_true", help="replace the output directory if it is not empty"
    )
