"""User-facing errors.

Every problem caused by bad input (a file, a field, a flag) is raised as :class:`ArchsimError` with a
one-line message naming the file/field/event and what was expected. The CLI turns it into
``archsim: error: <message>`` on stderr and exit code 2, with no traceback. Anything else escaping is a
bug in archsim and keeps its traceback.
"""

from __future__ import annotations

import contextlib


class ArchsimError(Exception):
    """Bad input that the user can fix; the message is one line and says what was expected."""

    def __init__(self, message: str) -> None:
        one_line = " ".join(str(message).split())
        super().__init__(one_line)


def where(path: object, detail: str) -> str:
    """Format ``<path>: <detail>`` so every message names its file the same way."""
    return f"{path}: {detail}"


def name_trace_in_errors(path: object):
    """Context manager: an ArchsimError about "trace: ..." names the trace's path instead."""

    @contextlib.contextmanager
    def renamed():
        try:
            yield
        except ArchsimError as exc:
            message = str(exc)
            if message.startswith("trace:"):
                raise ArchsimError(f"{path}:{message[len('trace:') :]}") from None
            raise

    return renamed()
