"""Objectives of formulations/model.md §4 as sort keys shared by every solver."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from geotrain_opt.problem.instance import Objective
from geotrain_opt.problem.tolerances import TIE_RTOL, TINY



@dataclass(frozen=True)
class Metric:
    """One metric of a plan (formulations/model.md §4, §9)."""

    name: str       # as users name it: --objectives time,energy
    field: str      # the attribute of an evaluation (reference or batched)
    limit: str      # the ε-limit of the objective that caps it
    symbol: str     # in formulas and messages
    unit: str


# The one table of metrics: fronts pair them, ε-limits cap them, evaluators check them
METRICS = (Metric("time", "time_s", "max_time_s", "T", "s"), Metric("energy", "energy_j", "max_energy_j", "E", "J"),
           Metric("cost", "cost_usd", "max_cost_usd", "C", "USD"), Metric("carbon", "carbon_g", "max_carbon_g", "Q", "g"))
METRIC = {m.name: m.field for m in METRICS}
LIMIT = {m.name: m.limit for m in METRICS}
DEFAULT_FRONT = ("time", "energy")


def limits(obj: Objective) -> list[tuple[Metric, float]]:
    """The ε-limits the objective sets, in table order: (metric, cap)."""
    return [(m, getattr(obj, m.limit)) for m in METRICS if getattr(obj, m.limit) is not None]


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
    if a[0] < b[0] * (1 - TIE_RTOL) - TINY:
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
