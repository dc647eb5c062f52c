"""Attribute patches that can all be undone: what ``capture run`` changes in the running process."""

from __future__ import annotations

import contextlib
from typing import Any


class Patches:
    """setattr with undo: restores every attribute (or its absence) in reverse order."""

    def __init__(self) -> None:
        self._undo: list[tuple[Any, str, bool, Any]] = []
        self._done: set[tuple[int, str]] = set()

    def set(self, owner: Any, name: str, value: Any) -> None:
        key = (id(owner), name)
        if key in self._done:
            return
        self._done.add(key)
        had = name in vars(owner)
        self._undo.append((owner, name, had, vars(owner).get(name)))
        setattr(owner, name, value)

    def undo(self) -> None:
        for owner, name, had, old in reversed(self._undo):
            if had:
                setattr(owner, name, old)
            else:
                with contextlib.suppress(AttributeError):
                    delattr(owner, name)
        self._undo.clear()
        self._done.clear()
