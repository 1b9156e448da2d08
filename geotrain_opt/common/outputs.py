"""Output files: checked before any work starts, written whole or not at all.

A long solve must never end in a traceback because ``--out`` points into a
folder that does not exist: every command checks its outputs first, and a
write that still fails is one :class:`OutputError` line (the CLI then prints
the result instead, so nothing is lost).
"""
from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Iterator

from geotrain_opt.errors import GeoTrainError


class OutputError(GeoTrainError):
    """An output file that cannot be written."""


def _name_max(p: Path) -> int:
    """The longest file name the folder of ``p`` takes (255 where it cannot be asked)."""
    try:
        return os.pathconf(p.parent if str(p.parent) else ".", "PC_NAME_MAX")
    except (OSError, ValueError, AttributeError):
        return 255


def check_writable(path: str | Path | None, flag: str) -> None:
    """Fail now, with the flag's name, if ``path`` could not be written later."""
    if path is None:
        return
    p = Path(path)
    if str(path).strip() == "":
        raise OutputError(f"{flag}: empty path")
    # the temporary file of write_text adds 5 characters; beyond NAME_MAX the OS refuses
    if len(os.fsencode(p.name)) + 5 > _name_max(p):
        raise OutputError(f"{flag}: file name longer than {_name_max(p) - 5} bytes")
    if p.is_dir():
        raise OutputError(f"{flag}: {path} is a folder, not a file")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{flag}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OutputError(f"{flag}: {path} is not writable")


def write_text(path: str | Path, text: str, flag: str = "--out") -> None:
    """Write atomically (temporary file, then rename), so an interrupted write
    never leaves half a file; the temporary file is removed on failure."""
    p = Path(path)
    check_writable(p, flag)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        tmp.write_text(text)
        tmp.replace(p)
    except OSError as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        raise OutputError(f"{flag}: cannot write {path}: {e.strerror or e}") from None


def write_or_print(text: str, path: str | Path | None, note: str = "") -> None:
    """``text`` to ``path`` (atomically, and a line on standard error saying so) or,
    without a path, to standard output."""
    import sys
    if path:
        write_text(path, text)
        print(f"wrote {path}" + (f" ({note})" if note else ""), file=sys.stderr)
    else:
        sys.stdout.write(text)


@contextlib.contextmanager
def exclusive(path: str | Path, flag: str) -> Iterator[None]:
    """Hold an exclusive lock on the file ``path`` (created if missing) for the block:
    a second writer gets a one-line error at once, never interleaved lines. The lock
    is the operating system's (flock), so it goes with the process, even a killed one;
    where there is none (Windows) the block runs unlocked."""
    try:
        import fcntl
    except ImportError:             # pragma: no cover - not on POSIX
        yield
        return
    try:
        f = open(path, "a")
    except OSError as e:
        raise OutputError(f"{flag}: cannot open {path}: {e.strerror or e}") from None
    with f:
        try:
            fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise OutputError(f"{flag}: {path} is in use by another run (wait for it, or choose another file)") from None
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)
