"""Run a captured program in this process as ``python`` would (``archsim capture run``).

The program gets its own ``sys.argv``, its folder first on ``sys.path`` and ``__main__`` (runpy);
after it, archsim's ``sys.argv``, ``sys.path`` and working directory are restored (a program that
changes directory must not move a relative ``--out``). Its exit status is checked: ``sys.exit(0)``
or falling off the end is success, anything else one line and nothing saved. :class:`ProgramStopped`
(archsim ending an unbounded loop once its windows are recorded) is success too.

``os._exit`` ends a process at once, skipping Python's exit (RL programs call it to leave threads
or pools that would not join): in the program's own thread it ended archsim too, with status 0,
nothing saved, no message and the output's temporary folder left behind. While the program runs,
``os._exit`` in this process's main thread raises :class:`ProgramOsExit` instead and the program
ends there with that status; any other thread, and any process forked from this one (which
inherits the patch: multiprocessing's fork children end with ``os._exit``), gets the real one.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from archsim.errors import ArchsimError


class ProgramStopped(BaseException):
    """Raised in the program's thread at a step boundary to end it early (``capture run
    --stop-when-recorded``): not an Exception, so the program's ``except Exception`` and
    ``except KeyboardInterrupt`` let it through while its ``finally`` blocks still run."""


def _except_line(frame: Any) -> bool:
    """Whether the frame is at an ``except`` clause (Python traces the clause's line as it tests
    the exception)."""
    import linecache

    text = linecache.getline(frame.f_code.co_filename, frame.f_lineno).lstrip()
    return text.startswith("except") and text[6:7] in (" ", ":", "*", "(")


def stop_at_next_line(program: Any) -> None:
    """Raise :class:`ProgramStopped` again at the ``except`` clause of the program's own code (its
    files: the script's folder, or the current directory for ``-m``; not archsim, not installed
    packages) that catches the one about to be raised. For a program that caught the stop
    (``except BaseException: continue``, a bare ``except: pass``) and went on: raised in the
    clause, the new one is outside that ``try``. Python's trace hook, armed on the frames on the
    stack and new ones; it unsets itself as it raises, so an outer handler that catches it too is
    armed again at the program's next step. A handler in a library's code is not reached. It
    replaces a tracer already set (a debugger's, coverage's) from then on."""
    folder = program.script.resolve().parent if program.script is not None else Path.cwd()
    root = os.path.join(os.path.realpath(folder), "")
    own = os.path.join(os.path.realpath(Path(__file__).parents[1]), "")  # archsim's package

    known: dict[str, bool] = {}

    def programs(code: Any) -> bool:
        name = code.co_filename  # as the program was run: maybe relative, through links
        if name not in known:
            real = os.path.realpath(name)
            known[name] = (
                not name.startswith("<")  # <frozen posixpath>, <string>: no file
                and real.startswith(root)
                and not real.startswith(own)
                and "site-packages" not in real
                and "dist-packages" not in real
            )
        return known[name]

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if not programs(frame.f_code):
            return None
        # at the handler's own ``except`` line, not on the way up (a ``with``'s exit, a ``finally``):
        # Python unsets a trace function that raises, so it has one chance per step
        if event == "line" and _except_line(frame):
            sys.settrace(None)
            raise ProgramStopped()
        return tracer

    frame = sys._getframe(1)
    while frame is not None:
        if programs(frame.f_code):
            frame.f_trace = tracer
        frame = frame.f_back
    sys.settrace(tracer)


class ProgramOsExit(BaseException):
    """The program called ``os._exit(status)`` in its main thread."""

    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


@dataclasses.dataclass
class _SysState:
    argv: list[str]
    path: list[str]
    cwd: str


@contextlib.contextmanager
def _os_exit_raises() -> Iterator[None]:
    real_exit = os._exit
    pid, thread = os.getpid(), threading.get_ident()

    def os_exit(status: int) -> None:
        if os.getpid() == pid and threading.get_ident() == thread:
            raise ProgramOsExit(int(status))
        real_exit(status)

    os._exit = os_exit  # type: ignore[assignment]
    try:
        yield
    finally:
        os._exit = real_exit


def run_program(program: Any) -> bool:
    """Run ``program`` (archsim.capture.run_script.Program); True when it ended with ``os._exit(0)``
    (the caller should end the same way once the trace is saved: threads the program left running
    would keep Python's exit waiting). One-line ArchsimError for a failing status or exception."""
    import runpy
    import traceback

    saved = _SysState(list(sys.argv), list(sys.path), os.getcwd())
    try:
        with _os_exit_raises():
            if program.script is not None:
                sys.argv = [str(program.script), *program.args]
                sys.path.insert(0, str(program.script.resolve().parent))
                runpy.run_path(str(program.script), run_name="__main__")
            else:
                sys.argv = [str(program.module), *program.args]
                sys.path.insert(0, os.getcwd())
                runpy.run_module(str(program.module), run_name="__main__", alter_sys=True)
    except ProgramStopped:
        return False  # archsim ended it (its windows are all recorded): a success
    except ProgramOsExit as exc:
        if exc.status != 0:
            raise ArchsimError(
                f"capture run: {program.name} ended with os._exit({exc.status}); nothing was saved"
            ) from None
        return True
    except SystemExit as exc:
        if exc.code not in (None, 0):
            # sys.exit("message") exits with status 1 after printing the message, as python does
            status = exc.code if isinstance(exc.code, int) else f"1: {exc.code}"
            raise ArchsimError(
                f"capture run: {program.name} exited with status {status}; nothing was saved"
            ) from None
    except (ArchsimError, KeyboardInterrupt):
        raise
    except Exception as exc:
        traceback.print_exc()
        raise ArchsimError(
            f"capture run: {program.name} raised {type(exc).__name__} (traceback above); "
            "nothing was saved"
        ) from None
    finally:
        if getattr(sys.gettrace(), "__qualname__", "").startswith("stop_at_next_line"):
            sys.settrace(None)  # armed but never raised (the program ended on its own)
        sys.argv, sys.path[:] = saved.argv, saved.path
        os.chdir(saved.cwd)
    return False
