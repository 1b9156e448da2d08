"""Reading a user's input file: bounded, so that an endless stream (``/dev/urandom``, a
FIFO nobody closes) or a huge file is a one-line error, not a hang (issue 39)."""
from __future__ import annotations

import os
import select
import stat
import time
from pathlib import Path

FILE_LIMIT = 1 << 30          # a regular file: the network of 16,384 devices fits well inside
STREAM_LIMIT = 64 << 20       # a device or pipe, whose size is not known in advance


STREAM_IDLE_S = 20.0           # a stream that sends nothing for this long is an error, not a wait
# the command's deadline (time.perf_counter()), set by the CLI from a whole-command
# --time-limit: a silent stream is an error then, not STREAM_IDLE_S later
READ_DEADLINE: float | None = None


def read_text_file(p: str | Path, limit_bytes: int = FILE_LIMIT) -> str:
    """The file as UTF-8 text; ValueError with a one-line reason otherwise."""
    raw = read_bytes_file(p, limit_bytes)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"not UTF-8 text (byte {e.start})") from None


def read_bytes_file(p: str | Path, limit_bytes: int = FILE_LIMIT) -> bytes:
    """The file's bytes, at most ``limit_bytes`` (a stream: at most STREAM_LIMIT);
    ValueError with a one-line reason otherwise."""
    p = Path(p)
    try:
        regular = stat.S_ISREG(p.stat().st_mode)
        cap = limit_bytes if regular else min(limit_bytes, STREAM_LIMIT)
        if regular and p.stat().st_size > cap:
            raise ValueError(f"{p} is larger than {cap >> 20} MiB")
        if regular:
            with p.open("rb") as f:
                raw = f.read(cap + 1)
        else:
            raw = _read_stream(p, cap)
    except OSError as e:
        raise ValueError(f"cannot read {p}: {e.strerror or e}") from None
    if len(raw) > cap:
        raise ValueError(f"{p} is longer than {cap >> 20} MiB (an endless stream?)")
    return raw


def _read_stream(p: Path, cap: int) -> bytes:
    """Up to cap + 1 bytes of a pipe or device. Opened without blocking, so a FIFO
    that no one writes to reads as empty instead of waiting forever; a stream that
    stays silent for STREAM_IDLE_S is an error."""
    if not hasattr(select, "select") or os.name != "posix":      # pragma: no cover
        with p.open("rb") as f:
            return f.read(cap + 1)
    fd = os.open(p, os.O_RDONLY | os.O_NONBLOCK)
    try:
        chunks, n = [], 0
        while n <= cap:
            wait = STREAM_IDLE_S
            if READ_DEADLINE is not None:
                wait = max(0.0, min(wait, READ_DEADLINE - time.perf_counter()))
            ready, _, _ = select.select([fd], [], [], wait)
            if not ready:
                raise ValueError(f"{p}: nothing arrived for {wait:.3g} s (a pipe no one writes to?)")
            try:
                b = os.read(fd, min(1 << 20, cap + 1 - n))
            except BlockingIOError:
                continue
            if not b:
                break
            chunks.append(b)
            n += len(b)
        return b"".join(chunks)
    finally:
        os.close(fd)
