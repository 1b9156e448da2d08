"""Quality indicators of a (T, E) front, by moocore (the C library behind pymoo's
and the EAF's indicators): hypervolume, IGD+ and the multiplicative ε to a
reference front. All minimise both objectives."""
from __future__ import annotations

from typing import Sequence

import numpy as np

Point = tuple[float, float]


def _arr(points: Sequence[Point]) -> np.ndarray:
    a = np.asarray(points, dtype=float).reshape(-1, 2)
    if not np.isfinite(a).all():
        raise ValueError("indicator: points must be finite")
    return a


def reference_point(*fronts: Sequence[Point], margin: float = 1.1) -> Point:
    """The nadir of all the fronts, times ``margin``: every point counts in the hypervolume."""
    pts = np.vstack([_arr(f) for f in fronts if len(f)])
    return float(pts[:, 0].max() * margin), float(pts[:, 1].max() * margin)


def hypervolume(points: Sequence[Point], ref: Point) -> float:
    """Area dominated by ``points`` inside the box up to ``ref``."""
    import moocore
    a = _arr(points)
    a = a[(a[:, 0] < ref[0]) & (a[:, 1] < ref[1])]
    return float(moocore.hypervolume(a, ref=list(ref))) if len(a) else 0.0


def igd_plus(points: Sequence[Point], reference: Sequence[Point]) -> float:
    """Mean distance from each reference point to the region the front dominates (0: as good)."""
    import moocore
    return float(moocore.igd_plus(_arr(points), ref=_arr(reference)))


def epsilon(points: Sequence[Point], reference: Sequence[Point]) -> float:
    """Smallest factor by which the front must be scaled down to weakly dominate the
    reference (1: it does already; 1.02: within 2% in both objectives)."""
    import moocore
    return float(moocore.epsilon_mult(_arr(points), ref=_arr(reference)))


def summary(points: Sequence[Point], reference: Sequence[Point] | None = None) -> dict[str, float]:
    """Hypervolume (and, with a reference front, IGD+ and ε) under a shared reference point."""
    ref = reference_point(points, *([reference] if reference else []))
    out = {"hypervolume": hypervolume(points, ref), "hypervolume_ref_t": ref[0], "hypervolume_ref_e": ref[1]}
    if reference:
        out.update(reference_hypervolume=hypervolume(reference, ref), igd_plus=igd_plus(points, reference),
                   epsilon=epsilon(points, reference))
    return out
