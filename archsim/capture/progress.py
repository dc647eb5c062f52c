"""Progress of a long capture on a terminal: a tqdm bar on stderr, nothing when stderr is not a tty
(CI logs, pipes), so scripted runs stay quiet and their error output stays one line."""

from __future__ import annotations

import sys
from typing import Any


def stderr_is_terminal() -> bool:
    """Whether the user's stderr is a terminal; inside a capture's noise filter (fd 2 a pipe), the
    stderr it filters into."""
    from archsim.capture.quiet import outer_stderr_tty

    outer = outer_stderr_tty()
    if outer is not None:
        return outer
    try:
        return sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


class Progress:
    """``update(n)`` advances by ``n`` (steps, seconds...); ``close()`` ends the bar. A no-op off a tty."""

    def __init__(
        self,
        total: float | None,
        desc: str,
        unit: str,
        enabled: bool | None = None,
        unit_scale: bool = False,
    ):
        """``unit_scale``: show counts with SI prefixes (bytes as kB, MB, GB)."""
        self._bar: Any = None
        if enabled if enabled is not None else stderr_is_terminal():
            from tqdm import tqdm

            self._bar = tqdm(
                total=total,
                desc=desc,
                unit=unit,
                leave=False,
                dynamic_ncols=True,
                unit_scale=unit_scale,
            )

    def update(self, n: float = 1) -> None:
        if self._bar is not None:
            self._bar.update(n)

    def set_to(self, value: float) -> None:
        """Move the bar to ``value`` (for time-based progress)."""
        if self._bar is not None:
            self._bar.update(value - self._bar.n)

    @property
    def done(self) -> float:
        """How far the bar has advanced (0 when disabled)."""
        return self._bar.n if self._bar is not None else 0.0

    def note(self, text: str) -> None:
        if self._bar is not None:
            self._bar.set_postfix_str(text, refresh=True)

    def close(self) -> None:
        if self._bar is not None:
            self._bar.close()
            self._bar = None
