"""A command's end as a ``stop()`` callable that also says when it is, so that a step
that cannot be interrupted (a per-instance precomputation of seconds at thousands of
GPUs) can decline to start when it would not finish in time."""
from __future__ import annotations

import time


class Until:
    """``stop()`` is true once ``time.perf_counter()`` passes ``until``."""

    def __init__(self, until: float) -> None:
        self.until = until

    def __call__(self) -> bool:
        return time.perf_counter() > self.until

    def left(self) -> float:
        """Seconds left (negative once past)."""
        return self.until - time.perf_counter()
