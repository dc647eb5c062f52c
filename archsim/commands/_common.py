"""Argument helpers shared by several sub-commands."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from archsim.errors import ArchsimError


def add_out_argument(parser: argparse.ArgumentParser, required: bool = True) -> None:
    parser.add_argument("--out", type=Path, required=required, help="output directory")
    parser.add_argument(
        "--force", action="store_true", help="replace the output directory if it is not empty"
    )


def refuse_output_over_inputs(out: Path | None, *inputs: Path | None) -> None:
    """Refuse an output path that is an input, or a folder holding one: the output replaces what
    is there (``--force``, or a file written over), so the input would be lost once read. Inputs
    that are not paths on disk (a preset name given as ``--hw``) are skipped."""
    if out is None:
        return
    target = Path(os.path.realpath(out))
    for given in inputs:
        if given is None or not os.path.exists(given):
            continue
        source = Path(os.path.realpath(given))
        overwrites = source in target.parents and target.is_file()  # a file of an input folder
        if source == target or target in source.parents or overwrites:
            what = "is" if source == target else "is a file of" if overwrites else "holds"
            raise ArchsimError(
                f"{out}: the output {what} the input {given}, which writing it would replace; "
                "choose another output path"
            )
