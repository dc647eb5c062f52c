"""Attribute patches that can all be undone: what ``capture run`` changes in the running process."""

from __future__ import annotations

import contextlib
import types
from typing import Any

# Modules whose classes cloudpickle pickles by value, their dict included (a program's own classes,
# sent to spawned workers: gymnasium's AsyncVectorEnv and SB3's SubprocVecEnv pickle env factories).
BY_VALUE_MODULES = frozenset({"__main__", "__mp_main__"})


def subclasses(cls: type) -> list[type]:
    """Every subclass of ``cls`` defined so far, at any depth (``cls`` itself not included)."""
    found: dict[type, None] = {}
    todo = list(cls.__subclasses__())
    while todo:
        sub = todo.pop()
        if sub not in found:
            found[sub] = None
            todo.extend(sub.__subclasses__())
    return list(found)


def _unpatched(original: Any) -> Any:
    return original


class _Patched:
    """A patched method of a class that may be pickled by value: it binds and calls as the patch,
    and pickles as the original (a patch's closure holds the marker and its open profiler
    records, which cannot be pickled; the worker patches its own copy of the class)."""

    __slots__ = ("function", "original")

    def __init__(self, function: types.FunctionType, original: types.FunctionType) -> None:
        self.function, self.original = function, original

    def __get__(self, obj: Any, owner: Any = None) -> Any:
        return self.function.__get__(obj, owner)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.function(*args, **kwargs)

    def __reduce__(self) -> tuple[Any, tuple[Any]]:
        return (_unpatched, (self.original,))


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
        old = vars(owner).get(name)
        self._undo.append((owner, name, had, old))
        by_value = isinstance(owner, type) and owner.__module__ in BY_VALUE_MODULES
        functions = isinstance(value, types.FunctionType) and isinstance(old, types.FunctionType)
        if had and by_value and functions:
            value = _Patched(value, old)
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
