"""Incumbent trajectories: the best objective value over a run's time (issue 41's
anytime protocol, as COCO/IOHprofiler record them).

A caller that wants the trajectory of a solve opens ``recording()`` around it (the
solve pipeline ``solvers.run`` and the benchmark harness's ``run_job`` do, from the
command's or the run's start, loading included); every incumbent that improves
(``base.Incumbent``, the memetic's best genome) calls ``note``; ``attach`` writes the
points to the result's ``stats["trajectory"]`` as ``[seconds, value]`` pairs, value
strictly decreasing. Outside ``recording()`` ``note`` does nothing, so a solver pays
one context-variable read per improvement and nothing else.

Granularity is the solver's: the exact solvers note each shape's plan (not every
solution inside one CP-SAT or MILP solve), the memetic its best after each generation
(or migration epoch on a pool), the baselines each plan they try that is better.
"""
from __future__ import annotations

import math
import time
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Iterator

MAX_POINTS = 400          # a trajectory's first and last points are kept when it is longer
_IMPROVE_RTOL = 1e-12     # an equal value (to rounding) is no improvement


class Trace:
    """The improving values of one run, with the seconds since its start."""

    def __init__(self, start: float | None = None) -> None:
        self.start = time.perf_counter() if start is None else start
        self.points: list[tuple[float, float]] = []

    def note(self, value: float) -> None:
        if not math.isfinite(value):
            return
        if self.points and value >= self.points[-1][1] - _IMPROVE_RTOL * abs(self.points[-1][1]):
            return
        self.points.append((time.perf_counter() - self.start, float(value)))

    def to_list(self, final: float | None = None) -> list[list[float]]:
        """The points as JSON pairs; ``final`` (the result's reference-evaluated value)
        closes the trajectory where the solver's last note was a batched estimate or
        the solver noted nothing (brute force)."""
        pts = list(self.points)
        if final is not None and math.isfinite(final) and \
                (not pts or final < pts[-1][1] - _IMPROVE_RTOL * abs(pts[-1][1])):
            pts.append((time.perf_counter() - self.start, float(final)))
        if len(pts) > MAX_POINTS:
            half = MAX_POINTS // 2
            pts = pts[:half] + pts[-half:]
        return [[round(t, 4), v] for t, v in pts]


_current: ContextVar[Trace | None] = ContextVar("geotrain_trace", default=None)


@contextmanager
def recording(start: float | None = None) -> Iterator[Trace]:
    """Record every improvement noted inside the block (``start``: a
    ``time.perf_counter()`` instant, default now)."""
    tr = Trace(start)
    token = _current.set(tr)
    try:
        yield tr
    finally:
        _current.reset(token)


def note(value: float) -> None:
    """A new incumbent's objective value (lower is better), if a run is recorded."""
    tr = _current.get()
    if tr is not None:
        tr.note(value)


def attach(tr: Trace, res: Any) -> None:
    """Write ``tr``'s trajectory into the result's stats (a result without a plan
    keeps what was noted: a run that found plans then lost them to a projection)."""
    res.stats["trajectory"] = tr.to_list(res.objective_value)
