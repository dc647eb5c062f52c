"""The ``archsim`` command line: a thin layer over the Python API.

Each module in ``archsim/commands/`` defines ``register(subparsers)`` which adds one sub-command and
sets ``func`` (a callable taking the parsed ``argparse.Namespace`` and returning an exit code). Commands
import heavy libraries (torch, simpy, matplotlib) inside their handlers so ``archsim --help`` stays fast.
"""

from __future__ import annotations

import argparse
import importlib
import os
import pkgutil
import re
import sys
from collections.abc import Sequence

import archsim.commands
from archsim import __version__
from archsim.errors import ArchsimError

EXIT_USAGE = 2


# argparse takes "-4" as a value but "-4,8" (a knob list) as an unknown option; comma lists of
# negative numbers are values too, so the knob parser can say what is wrong with them.
_NEGATIVE_VALUE = re.compile(r"^-\d+$|^-\d*\.\d+$|^-\d[\d.,]*$")
# An error line echoes what it refuses; a 100,000-character value would make a 100 kB "line".
MAX_ERROR_CHARS = 1000


def short_line(text: str) -> str:
    """``text`` cut in the middle to MAX_ERROR_CHARS, keeping its start (what was refused) and its
    end (what was expected)."""
    if len(text) <= MAX_ERROR_CHARS:
        return text
    return f"{text[:600]} ...({len(text):,} characters)... {text[-300:]}"


class OneLineParser(argparse.ArgumentParser):
    """argparse with archsim's error style: usage errors are one line, ``archsim: error: ...``,
    naming the sub-command and the argument, and exit 2 (argparse prints the whole usage block first).
    Sub-command parsers inherit the class (``add_subparsers`` uses ``type(self)``)."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = _NEGATIVE_VALUE

    def error(self, message: str) -> None:  # type: ignore[override]
        command = self.prog.removeprefix("archsim").strip()
        where = f"{command}: " if command else ""
        if message.endswith("expected one argument"):
            message += " (give a value; write one that starts with '-' as --flag=VALUE)"
        one_line = " ".join(f"archsim: error: {where}{message} (see {self.prog} --help)".split())
        self.exit(EXIT_USAGE, short_line(one_line) + "\n")


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="archsim",
        description="Trace-driven architecture simulator for deep RL training on CPU-GPU systems.",
    )
    parser.add_argument("--version", action="version", version=f"archsim {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    subparsers.required = True
    for module_info in sorted(
        pkgutil.iter_modules(archsim.commands.__path__), key=lambda m: m.name
    ):
        if module_info.name.startswith("_"):
            continue
        module = importlib.import_module(f"archsim.commands.{module_info.name}")
        module.register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except ArchsimError as exc:
        print(short_line(f"archsim: error: {exc}"), file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("archsim: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # `archsim ... | head` closed stdout early: not an error of ours; silence the flush at exit
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except RecursionError:  # an input nested deeper than any reader here checks (every file
        # reader names its file; this is the last resort, not a traceback)
        print(
            "archsim: error: an input is nested too deeply to read (RecursionError)",
            file=sys.stderr,
        )
        return EXIT_USAGE
    except OSError as exc:  # a path the system refuses that no check named (name too long: a
        # trace, --hw or --source-hw of 100,000 characters was an OSError traceback)
        name = f"{exc.filename}: " if exc.filename else ""
        line = " ".join(f"archsim: error: {name}{exc.strerror or exc}".split())  # a path's newline
        print(short_line(line), file=sys.stderr)
        return EXIT_USAGE


def run() -> None:
    sys.exit(main())
