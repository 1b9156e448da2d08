"""Reading a user's input file: bounded, so that an endless stream (``/dev/urandom``, a
FIFO nobody closes) or a huge file is a one-line error, not a hang (issue 39)."""
from __future__ import annotations

import stat
from pathlib import Path

FILE_LIMIT = 1 << 30          # a regular file: the network of 16,384 devices fits well inside
STREAM_LIMIT = 64 << 20       # a device or pipe, whose size is not known in advance


def read_text_file(p: str | Path, limit_bytes: int = FILE_LIMIT) -> str:
    """The file as UTF-8 text; ValueError with a one-line reason otherwise."""
    p = Path(p)
    try:
        regular = stat.S_ISREG(p.stat().st_mode)
        cap = limit_bytes if regular else min(limit_bytes, STREAM_LIMIT)
        if regular and p.stat().st_size > cap:
            raise ValueError(f"{p} is larger than {cap >> 20} MiB")
        with p.open("rb") as f:
            raw = f.read(cap + 1)
    except OSError as e:
        raise ValueError(f"cannot read {p}: {e.strerror or e}") from None
    if len(raw) > cap:
        raise ValueError(f"{p} is longer than {cap >> 20} MiB (an endless stream?)")
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text (byte {e.start})") from None
