"""Write outputs so that nothing half-written is ever left behind, and a replaced output is never lost.

Outputs are built in a temporary sibling (same filesystem, so the final rename is atomic) and only
renamed into place when complete. On any error the temporary is removed.

Replacing an existing output directory (``--force``) swaps the new one in so that a kill at any
instant leaves a complete output: on Linux one ``renameat2(RENAME_EXCHANGE)`` exchanges the two
directories atomically (the old one is then removed from the temporary's name); elsewhere, or on a
filesystem without it, the old directory is first renamed to a fixed backup name ``.NAME.archsim-old``,
the new one renamed in, and the backup removed. A kill between those two renames leaves no ``NAME``
but a complete backup, which the next write to (or check of) the same output puts back
(``recover_output_dir``).

Output paths are checked before any work (``check_output_path``): a path that exists as a file, lies
under a file, has a name longer than the filesystem allows, or whose parent cannot be written is a
one-line ArchsimError, not a traceback after minutes of work.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

from archsim.errors import ArchsimError

# Longest suffix the temporaries add to an output's name: ".NAME.tmp-PID-" + mkdtemp's 8 random
# characters (a Linux PID has at most 7 digits; 10 allowed), or ".NAME.archsim-old": a name that
# fits alone may not fit with them.
TEMP_NAME_OVERHEAD_BYTES = len(".") + len(".tmp-") + 10 + len("-") + 8
# Room kept in an output directory's path for the names of the files written in it
# ("/.sweep.parquet.tmp-XXXXXXXX", chart names): a path that fits alone may not fit with them.
INNER_NAME_ROOM_BYTES = 64
# POSIX limits when the filesystem does not say (Linux: NAME_MAX 255 bytes, PATH_MAX 4096 bytes).
DEFAULT_NAME_MAX_BYTES = 255
DEFAULT_PATH_MAX_BYTES = 4096
# Set (to anything but "" or "0") to use the two-rename swap even where renameat2 exists: that is
# the path other operating systems take, and the tests exercise it here.
NO_EXCHANGE_ENV = "ARCHSIM_NO_RENAME_EXCHANGE"


def _default_mode(base: int) -> int:
    """``base`` less the process umask: the mode a plain mkdir/open would have given."""
    umask = os.umask(0)
    os.umask(umask)
    return base & ~umask


def backup_path(out: Path) -> Path:
    """Where the two-rename swap keeps the old output while the new one is renamed in."""
    out = Path(out)
    return out.parent / f".{out.name}.archsim-old"


def _temp_prefix(out: Path) -> str:
    """Name prefix of ``out``'s temporary siblings made by this process (its PID in the name, so
    that a later run can tell a killed run's leftovers from a live run's work)."""
    return f".{out.name}.tmp-{os.getpid()}-"


def _process_gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except (PermissionError, OSError):
        return False  # exists (another user's), or cannot tell: keep its files
    return False


def remove_stale_temporaries(out: Path) -> None:
    """Remove temporary siblings of ``out`` left by runs that were killed (their PID is gone)."""
    out = Path(out)
    prefix = f".{out.name}.tmp-"
    try:
        siblings = list(out.parent.iterdir()) if out.parent.is_dir() else []
    except OSError:
        return
    for path in siblings:
        pid_text = path.name[len(prefix) :].partition("-")[0]
        ours = path.name.startswith(prefix) and pid_text.isdigit() and path.is_dir()
        if ours and _process_gone(int(pid_text)):
            shutil.rmtree(path, ignore_errors=True)


def recover_output_dir(out: Path) -> None:
    """Finish a swap that a kill interrupted: put the backup back when ``out`` is missing (the old
    output, complete), or remove it when ``out`` is there (the new output, complete). Temporaries
    of killed runs are removed too."""
    out = Path(out)
    remove_stale_temporaries(out)
    backup = backup_path(out)
    if not backup.is_dir():
        return
    try:
        if out.exists():
            shutil.rmtree(backup)
        else:
            os.rename(backup, out)
    except OSError as exc:
        raise ArchsimError(
            f"{out}: cannot recover the earlier output from {backup.name} ({exc.strerror})"
        ) from None


def _name_max(directory: Path) -> tuple[int, int]:
    """(longest file name, longest path) in bytes on ``directory``'s filesystem."""
    try:
        name_max = os.pathconf(directory, "PC_NAME_MAX")
        path_max = os.pathconf(directory, "PC_PATH_MAX")
    except (OSError, ValueError, AttributeError):  # not every OS names these
        return DEFAULT_NAME_MAX_BYTES, DEFAULT_PATH_MAX_BYTES
    return name_max or DEFAULT_NAME_MAX_BYTES, path_max or DEFAULT_PATH_MAX_BYTES


def _exists(path: Path) -> bool:
    """``path.exists()`` that is False, not an OSError, for a name too long to look up."""
    try:
        return path.exists()
    except OSError:
        return False


def check_output_path(out: Path, kind: str = "directory", sibling_temp: bool = True) -> None:
    """Refuse an output path that could not be written, before any work is done.

    ``kind`` is "directory" or "file" (what ``out`` will be); ``sibling_temp``: ``out`` is written
    as a temporary sibling and renamed (atomic_output_dir/file), whose longer name must fit too.
    Refused: ``out`` exists as the other kind; a missing folder on the way is a file; a name or the
    whole path is longer than the filesystem allows; the deepest existing folder is not writable.
    """
    out = Path(out)
    absolute = Path(os.path.abspath(out))
    existing = absolute
    while not _exists(existing) and existing != existing.parent:
        existing = existing.parent
    if existing == absolute and kind == "directory" and not out.is_dir():
        raise ArchsimError(f"{out}: output path exists and is not a directory")
    if existing == absolute and kind == "file" and out.is_dir():
        raise ArchsimError(f"{out}: is a directory (expected a file path to write)")
    if existing == absolute:
        existing = absolute.parent
    if not existing.is_dir():
        raise ArchsimError(
            f"{out}: cannot create the output {kind} here: {existing} is a file, not a directory"
        )
    name_max, path_max = _name_max(existing)
    to_create = absolute.relative_to(existing).parts
    overhead = TEMP_NAME_OVERHEAD_BYTES if sibling_temp else 0
    for i, part in enumerate(to_create):
        size = len(os.fsencode(part))
        if size + (overhead if i == len(to_create) - 1 else 0) > name_max:
            raise ArchsimError(
                f"{part[:40]}...: output name too long ({size} bytes; this filesystem allows "
                f"{name_max - overhead} for an output name)"
            )
    room = overhead + (INNER_NAME_ROOM_BYTES if kind == "directory" else 0)
    if len(os.fsencode(str(absolute))) + room >= path_max:
        raise ArchsimError(
            f"{str(out)[:40]}...: output path too long ({len(os.fsencode(str(absolute)))} bytes; "
            f"this system allows {path_max - room - 1} for an output {kind})"
        )
    # Written in place (a sweep's directory): the directory itself must take new files.
    writes_in = absolute if not sibling_temp and kind == "directory" and out.is_dir() else existing
    if not os.access(writes_in, os.W_OK | os.X_OK):
        raise ArchsimError(f"{out}: cannot write in {writes_in} (permission denied)")


def check_output_dir(out: Path, force: bool) -> None:
    """Refuse an unwritable output path, and a non-empty output directory unless ``force``."""
    out = Path(out)
    check_output_path(out, "directory")
    recover_output_dir(out)
    if out.is_dir() and any(out.iterdir()) and not force:
        raise ArchsimError(f"{out}: output directory is not empty (use --force to replace it)")


def _exchange_available() -> bool:
    return sys.platform.startswith("linux") and os.environ.get(NO_EXCHANGE_ENV, "") in ("", "0")


def _rename_exchange(a: Path, b: Path) -> bool:
    """Atomically exchange the paths ``a`` and ``b`` (Linux renameat2 RENAME_EXCHANGE); False
    where the C library or the filesystem does not offer it, so the caller falls back."""
    if not _exchange_available():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        renameat2 = libc.renameat2
    except (OSError, AttributeError):  # glibc < 2.28, musl without it
        return False
    at_fdcwd, rename_exchange = -100, 2  # <fcntl.h> AT_FDCWD, <linux/fs.h> RENAME_EXCHANGE
    renameat2.argtypes = [
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_int,
        ctypes.c_char_p,
        ctypes.c_uint,
    ]
    if renameat2(at_fdcwd, os.fsencode(a), at_fdcwd, os.fsencode(b), rename_exchange) == 0:
        return True
    code = ctypes.get_errno()
    if code in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP, errno.ENOTSUP):
        return False  # this filesystem or kernel cannot exchange: use the two renames
    raise OSError(code, os.strerror(code), str(b))


def replace_dir(new: Path, out: Path) -> None:
    """Put the complete directory ``new`` at ``out``; a kill at any instant leaves ``out``'s old or
    new content complete (or, on the two-rename fallback, the old one complete at its backup name,
    which ``recover_output_dir`` puts back)."""
    new, out = Path(new), Path(out)
    if not out.exists():
        os.rename(new, out)
        return
    backup = backup_path(out)
    if _rename_exchange(new, out):
        # ``new`` now names the old output: give it the backup name so that a kill while it is
        # being removed leaves something recover_output_dir knows to finish removing.
        os.rename(new, backup)
    else:
        os.rename(out, backup)
        try:
            os.rename(new, out)
        except OSError:
            os.rename(backup, out)  # the old output back in place before the error is reported
            raise
    shutil.rmtree(backup)


# Errors only a write gives: the output, not an input, is at fault. A full disk was "archsim:
# error: No space left on device" naming no file, or naming the input being copied (ingest).
_WRITE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def _name_full_output(exc: BaseException, out: Path) -> None:
    """Raise a one-line ArchsimError naming ``out`` for a write error; else return."""
    if isinstance(exc, OSError) and exc.errno in _WRITE_ERRNOS:
        raise ArchsimError(
            f"{out}: cannot write the output ({exc.strerror}); the old output, if any, is kept"
        ) from None


@contextlib.contextmanager
def atomic_output_dir(out: Path, force: bool = False) -> Iterator[Path]:
    """Yield a temporary directory that replaces ``out`` only if the block finishes without error."""
    out = Path(out)
    check_output_dir(out, force)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=_temp_prefix(out), dir=out.parent))
    except OSError as exc:
        raise ArchsimError(
            f"{out}: cannot create the output directory here ({exc.strerror})"
        ) from None
    tmp.chmod(_default_mode(0o777))  # mkdtemp makes 0700; the result should look like `mkdir`'s
    try:
        yield tmp
    except BaseException as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        _name_full_output(exc, out)
        if isinstance(exc, ArchsimError) and str(exc).startswith(f"{tmp}{os.sep}"):
            # a file inside the output, named by where it will be (the temporary is gone)
            raise ArchsimError(f"{out}{str(exc)[len(str(tmp)) :]}") from None
        raise
    try:
        replace_dir(tmp, out)
    except OSError as exc:
        shutil.rmtree(tmp, ignore_errors=True)
        raise ArchsimError(f"{out}: cannot put the new output in place ({exc.strerror})") from None


@contextlib.contextmanager
def atomic_output_file(path: Path, mode: str = "w") -> Iterator[object]:
    """Open a temporary sibling of ``path`` for writing; rename it over ``path`` on success."""
    path = Path(path)
    check_output_path(path, "file")
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
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        _name_full_output(exc, path)
        raise
    os.replace(tmp, path)
