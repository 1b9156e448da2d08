"""Objectives of formulations/model.md §4 as sort keys shared by every solver."""
from __future__ import annotations

import numpy as np

from geotrain_opt.problem.instance import Objective

# The metrics a front may pair (formulations/model.md §4, §9): the evaluation's
# attribute of each, and the ε-limit that caps it.
METRIC = {"time": "time_s", "energy": "energy_j", "cost": "cost_usd", "carbon": "carbon_g"}
LIMIT = {"time": "max_time_s", "energy": "max_energy_j", "cost": "max_cost_usd", "carbon": "max_carbon_g"}
DEFAULT_FRONT = ("time", "energy")

# Lexicographic tie-breaks compare primary values within this relative tolerance,
# so that float noise between two methods does not decide a tie.
TIE_RTOL = 1e-9


def primary(obj: Objective, T, E, C=None, Q=None):
    """The scalar that is minimised first (works on floats and numpy arrays);
    ``C`` dollars and ``Q`` grams per iteration (§9) for the cost and carbon kinds."""
    if obj.kind == "time":
        return T
    if obj.kind == "energy":
        return E
    if obj.kind in ("cost", "carbon"):
        v = C if obj.kind == "cost" else Q
        if v is None:
            raise ValueError(f"objective {obj.kind}: the instance does not price it (formulations/model.md §9)")
        return v
    return obj.lam * np.asarray(T) / obj.time_ref_s + (1.0 - obj.lam) * np.asarray(E) / obj.energy_ref_j


def secondary(obj: Objective, T, E, C=None, Q=None):
    """The tie-breaker: E for time, T for every other kind."""
    return E if obj.kind == "time" else T


def key(obj: Objective, T: float, E: float, C: float | None = None, Q: float | None = None) -> tuple[float, float]:
    return float(primary(obj, T, E, C, Q)), float(secondary(obj, T, E, C, Q))


def of(obj: Objective, r) -> tuple:
    """(primary, secondary) of an evaluation or a batch result (floats or arrays)."""
    args = (r.time_s, r.energy_j, r.cost_usd, r.carbon_g)
    return primary(obj, *args), secondary(obj, *args)


def better(obj: Objective, a: tuple[float, float], b: tuple[float, float] | None) -> bool:
    """True when key ``a`` beats key ``b`` (None = no incumbent)."""
    if b is None:
        return True
    if a[0] < b[0] * (1 - TIE_RTOL) - 1e-300:
        return True
    if a[0] <= b[0] * (1 + TIE_RTOL):
        return a[1] < b[1] * (1 - TIE_RTOL)
    return False


def dominates(a: tuple[float, float], b: tuple[float, float]) -> bool:
    """Pareto dominance on (T, E)."""
    return a[0] <= b[0] and a[1] <= b[1] and (a[0] < b[0] or a[1] < b[1])


def pareto_filter(points: list[tuple[float, float]]) -> list[int]:
    """Indices of the non-dominated points, sorted by T."""
    order = sorted(range(len(points)), key=lambda i: (points[i][0], points[i][1]))
    front: list[int] = []
    best_e = float("inf")
    for i in order:
        if points[i][1] < best_e * (1 - TIE_RTOL):
            front.append(i)
            best_e = points[i][1]
    return front
