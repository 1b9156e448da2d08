"""Output files: checked before any work starts, written whole or not at all.

A long solve must never end in a traceback because ``--out`` points into a
folder that does not exist: every command checks its outputs first, and a
write that still fails is one :class:`OutputError` line (the CLI then prints
the result instead, so nothing is lost).
"""
from __future__ import annotations

import contextlib
import errno
import os
import stat
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


def _kind(p: Path) -> str:
    """What is at ``p`` now, links followed: missing, file, folder, stream (a
    character device such as /dev/null, or a FIFO: written in place), broken-link
    or other (a block device or socket: never written)."""
    try:
        mode = os.stat(p).st_mode
    except FileNotFoundError:
        return "broken-link" if os.path.islink(p) else "missing"
    except OSError:
        return "missing"
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "folder"
    return "stream" if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) else "other"


def check_writable(path: str | Path | None, flag: str, regular: bool = False) -> None:
    """Fail now, with the flag's name, if ``path`` could not be written later
    (``regular``: a file that is read back as well, so no stream either)."""
    if path is None:
        return
    s = str(path)
    if s.strip() == "":
        raise OutputError(f"{flag}: empty path")
    if s.endswith(("/", os.sep)):
        raise OutputError(f"{flag}: {s} names a folder (it ends in '/'), not a file")
    p = Path(path)
    kind = _kind(p)
    if kind == "folder":
        raise OutputError(f"{flag}: {path} is a folder, not a file")
    if kind == "broken-link":
        raise OutputError(f"{flag}: {path} is a link to nothing")
    if kind == "other":
        raise OutputError(f"{flag}: {path} is a device or socket, not a file")
    if kind == "stream":            # /dev/null, /dev/stdout, a FIFO: written in place, never replaced
        if regular:
            raise OutputError(f"{flag}: {path} is a device or pipe; this file is read back, give a regular file")
        if not os.access(p, os.W_OK):
            raise OutputError(f"{flag}: {path} is not writable")
        return
    p = _landing(p)
    # the temporary file of write_text adds 5 characters; beyond NAME_MAX the OS refuses
    if len(os.fsencode(p.name)) + 5 > _name_max(p):
        raise OutputError(f"{flag}: file name longer than {_name_max(p) - 5} bytes")
    parent = p.parent if str(p.parent) else Path(".")
    if not parent.is_dir():
        raise OutputError(f"{flag}: folder {parent} does not exist")
    if not os.access(parent, os.W_OK) or (p.exists() and not os.access(p, os.W_OK)):
        raise OutputError(f"{flag}: {path} is not writable")


def _landing(p: Path) -> Path:
    """The regular file a write of ``p`` replaces: a link's target (the link stays)."""
    return Path(os.path.realpath(p)) if os.path.islink(p) else p


def _write_stream(p: Path, data: bytes, flag: str) -> None:
    """Write into a character device or FIFO as it is. A FIFO is opened without
    blocking, so one that nobody reads is an error now, not a hang."""
    try:
        fd = os.open(p, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        why = "nothing reads this FIFO" if e.errno == errno.ENXIO else (e.strerror or str(e))
        raise OutputError(f"{flag}: cannot write {p}: {why}") from None
    try:
        os.set_blocking(fd, True)
        with os.fdopen(fd, "wb") as f:
            f.write(data)
    except OSError as e:
        raise OutputError(f"{flag}: cannot write {p}: {e.strerror or e}") from None


def write_bytes(path: str | Path, data: bytes, flag: str = "--out") -> None:
    """Write atomically (temporary file, then rename), so an interrupted write
    never leaves half a file; the temporary file is removed on failure. Only a
    regular file (or a link's regular target) is ever replaced; a stream such as
    /dev/null is written in place."""
    check_writable(path, flag)
    p = Path(path)
    if _kind(p) == "stream":
        _write_stream(p, data, flag)
        return
    p = _landing(p)
    tmp = p.with_name(f".{p.name}.tmp")
    try:
        tmp.write_bytes(data)
        if _kind(p) not in ("file", "missing"):      # became something else meanwhile: leave it
            raise OutputError(f"{flag}: {path} is no longer a regular file")
        tmp.replace(p)
    except (OSError, OutputError) as e:
        try:
            tmp.unlink()
        except OSError:
            pass
        if isinstance(e, OutputError):
            raise
        raise OutputError(f"{flag}: cannot write {path}: {e.strerror or e}") from None


def write_text(path: str | Path, text: str, flag: str = "--out") -> None:
    """:func:`write_bytes` of ``text`` as UTF-8."""
    write_bytes(path, text.encode("utf-8"), flag)


def figure_stem(out: str | Path) -> str:
    """``--out fig`` and ``--out fig.png`` both mean fig.png + fig.svg."""
    s = str(out)
    return s[:-4] if s.lower().endswith((".png", ".svg")) else s


def check_figure(out: str | Path | None, flag: str = "--out") -> None:
    """A figure's ``--out fig`` (or fig.png) writes fig.png and fig.svg: check the
    name given (not empty, not a folder) and both files."""
    if out is None:
        return
    s = str(out)
    if s.strip() == "" or s.endswith(("/", os.sep)) or _kind(Path(s)) == "folder":
        check_writable(out, flag)               # says which
    stem = figure_stem(s)
    if Path(stem).name in ("", ".", ".."):
        raise OutputError(f"{flag}: {s} has no file name")
    for ext in (".png", ".svg"):
        check_writable(stem + ext, flag)


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
