"""Read a JSON file that must hold one object, with the house's one-line error naming the file."""

from __future__ import annotations

import json
from pathlib import Path

from archsim.errors import ArchsimError


def read_json_object(path: Path) -> dict:
    """The JSON object in ``path``; an unreadable, non-JSON or non-object file is one ArchsimError."""
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ArchsimError(f"{path}: not a readable JSON file ({exc})") from None
    except RecursionError:  # [[[[... past the recursion limit: no file of ours is that deep
        raise ArchsimError(f"{path}: not a readable JSON file (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ArchsimError(f"{path}: expected a JSON object")
    return data
