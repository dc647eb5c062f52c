"""Read a JSON file that must hold one object, with the house's one-line error naming the file."""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from archsim.errors import ArchsimError

# The objects read here are archsim's own small files: metrics.json (about 2.4 kB for a DQN
# simulation), sweep.json (under 300 B), summary.json. 16 MiB is thousands of times those, and
# refusing past it keeps a hand-made or damaged file from growing memory without bound (read_text
# of a 600 MB metrics.json took 1.3 GB peak RSS before json.loads refused it).
MAX_JSON_BYTES = 16 * 2**20


def _refuse_constant(name: str) -> float:
    # archsim writes strict JSON (null for a number that is not finite); a hand-edited NaN or
    # Infinity would reach tables and `compare --json` output, which must stay strict JSON.
    raise ValueError(f"{name} is not JSON (write null for a number that is not finite)")


def _finite_float(text: str) -> float:
    value = float(text)
    if value != value or value in (float("inf"), float("-inf")):  # 1e400 parses as inf
        raise ValueError(f"{text[:40]} is not a finite number (write null for one that is not)")
    return value


def read_json_text(path: Path) -> str:
    """The UTF-8 text of one of archsim's own JSON files, read no further than MAX_JSON_BYTES: an
    OSError for a directory, FIFO (open() would block) or device (/dev/zero never ends), a
    ValueError past the cap."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise OSError(errno.EINVAL, "not a regular file", str(path))
    with open(path, "rb") as handle:
        data = handle.read(MAX_JSON_BYTES + 1)
    if len(data) > MAX_JSON_BYTES:
        raise ValueError(f"over {MAX_JSON_BYTES >> 20} MiB, far more than archsim writes")
    return data.decode("utf-8")


def read_json_object(path: Path) -> dict:
    """The JSON object in ``path``; an unreadable, non-JSON or non-object file is one ArchsimError."""
    try:
        data = json.loads(
            read_json_text(path), parse_constant=_refuse_constant, parse_float=_finite_float
        )
    except (OSError, ValueError, UnicodeDecodeError) as exc:
        raise ArchsimError(f"{path}: not a readable JSON file ({exc})") from None
    except RecursionError:  # [[[[... past the recursion limit: no file of ours is that deep
        raise ArchsimError(f"{path}: not a readable JSON file (nested too deeply)") from None
    if not isinstance(data, dict):
        raise ArchsimError(f"{path}: expected a JSON object")
    return data
