"""Write outputs so that nothing half-written is ever left behind.

Outputs are built in a temporary sibling (same filesystem, so the final rename is atomic) and only
renamed into place when complete. On any error the temporary is removed.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

from archsim.errors import ArchsimError


def _default_mode(base: int) -> int:
    """``base`` less the process umask: the mode a plain mkdir/open would have given."""
    umask = os.umask(0)
    os.umask(umask)
    return base & ~umask


def check_output_dir(out: Path, force: bool) -> None:
    """Refuse a non-empty output directory unless ``force`` (an existing file is always refused)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ArchsimError(f"{out}: output path exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ArchsimError(f"{out}: output directory is not empty (use --force to replace it)")


@contextlib.contextmanager
def atomic_output_dir(out: Path, force: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``out`` only if the block finishes without error."""
    out = Path(out)
    check_output_dir(out, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.tmp-", dir=out.parent))
    except OSError as exc:
        raise ArchsimError(
            f"{out}: cannot create the output directory here ({exc.strerror})"
        ) from None
    tmp.chmod(_default_mode(0o777))  # mkdtemp makes 0700; the result should look like `mkdir`'s
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if out.exists():
        shutil.rmtree(out)
    os.replace(tmp, out)


@contextlib.contextmanager
def atomic_output_file(path: Path, mode: str = "w") -> Iterator[object]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success."""
    path = Path(path)
    if path.is_dir():
        raise ArchsimError(f"{path}: is a directory (expected a file path to write)")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.tmp-", dir=path.parent)
    except OSError as exc:
        raise ArchsimError(f"{path}: cannot write output here ({exc.strerror})") from None
    os.close(fd)
    tmp = Path(tmp_name)
    tmp.chmod(_default_mode(0o666))  # mkstemp makes 0600; the result should look like `open`'s
    try:
        with open(tmp, mode) as handle:
            yield handle
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    os.replace(tmp, path)
