"""Output files: checked before any work starts, written whole or not at all.

A long solve must never end in a traceback because ``--out`` points into a
folder that does not exist: every command checks its outputs first, and a
write that still fails is one :class:`OutputError` line (the CLI then prints
the result instead, so nothing is lost).
"""
from __future__ import annotations

import os
from pathlib import Path

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
